"""Reading pins out of requirements.txt, environment.yml and conda-lock.yml (v1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver import lockpins
from resolver.core.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures" / "verify"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_requirements_pins_index_hashes_and_markers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "requirements.txt",
        "# written by gpuresolve lock\n"
        "--index-url https://download.pytorch.org/whl/cu126\n"
        "--extra-index-url https://mirror.example/simple\n"
        "torch==2.14.1+cu126 \\\n"
        "    --hash=sha256:aaaa \\\n"
        "    --hash=sha256:bbbb\n"
        "torchvision==0.29.1  # the paired release\n"
        'nvidia-cudnn-cu12==9.10.2.21 ; platform_system == "Linux"\n'
        "numpy>=1.26\n",
    )
    lock = lockpins.read(path)
    assert lock.format == lockpins.FORMAT_REQUIREMENTS
    assert lock.index_urls == (
        "https://download.pytorch.org/whl/cu126",
        "https://mirror.example/simple",
    )
    torch = lock.get("torch")
    assert torch is not None
    assert (torch.version, torch.variant, torch.hashes) == (
        "2.14.1",
        "cu126",
        ("sha256:aaaa", "sha256:bbbb"),
    )
    assert torch.text == "torch==2.14.1+cu126"
    # No local tag: the PyTorch index it comes from names the build.
    tv = lock.get("torchvision")
    assert tv is not None and (tv.version, tv.variant) == ("0.29.1", "cu126")
    cudnn = lock.get("nvidia_cudnn_cu12")
    assert cudnn is not None and cudnn.marker == 'platform_system == "Linux"'
    assert cudnn.variant is None  # not a torch-family package: no build to compare
    numpy = lock.get("numpy")
    assert numpy is not None and (numpy.version, numpy.spec) == (None, ">=1.26")


def test_requirements_includes_and_wheel_urls(tmp_path: Path) -> None:
    write(tmp_path, "base.txt", "triton==3.6.0\n")
    path = write(
        tmp_path,
        "requirements.txt",
        "-r base.txt\n"
        "torch @ https://download.pytorch.org/whl/cu130/"
        "torch-2.11.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=00ff\n",
    )
    lock = lockpins.read(path)
    assert [p.name for p in lock.pins] == ["triton", "torch"]
    torch = lock.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.11.0", "cu130")


def test_requirements_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no such file \(expected a lock file\)"):
        lockpins.read(tmp_path / "missing.txt")
    bad = write(tmp_path, "bad.txt", "torch==2.8.0\n!!! not a requirement\n")
    with pytest.raises(UserError, match=r"bad\.txt:2: not a requirement"):
        lockpins.read(bad)
    loop = write(tmp_path, "loop.txt", "-r loop.txt\n")
    with pytest.raises(UserError, match="nested too deep"):
        lockpins.read(loop)


def test_environment_yml_pip_section_and_conda_pins(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "environment.yml",
        "name: train\n"
        "channels: [pytorch, nvidia, conda-forge]\n"
        "dependencies:\n"
        "  - python=3.11\n"
        "  - pytorch::pytorch=2.5.1=py3.11_cuda12.4_cudnn9.1.0_0\n"
        "  - pytorch-cuda=12.4\n"
        "  - numpy\n"
        "  - pip\n"
        "  - pip:\n"
        "      - --extra-index-url https://download.pytorch.org/whl/cu124\n"
        "      - torchvision==0.20.1+cu124\n",
    )
    lock = lockpins.read(path)
    assert lock.format == lockpins.FORMAT_ENVIRONMENT
    torch = lock.get("torch")  # conda's pytorch is the torch distribution
    assert torch is not None
    assert (torch.version, torch.variant, torch.manager, torch.spec) == (
        "2.5.1",
        "cu124",
        "conda",
        "2.5.1.*",
    )
    assert lock.get("pytorch-cuda") is None  # no Python distribution to compare
    assert lock.get("numpy") is None  # any version
    tv = lock.get("torchvision")
    assert tv is not None and (tv.version, tv.variant, tv.manager) == ("0.20.1", "cu124", "pip")
    assert lock.index_urls == ("https://download.pytorch.org/whl/cu124",)


def test_environment_yml_build_globs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "environment.yml",
        "dependencies:\n  - pytorch=2.5.1=cuda124*\n  - torchaudio==2.5.1\n",
    )
    lock = lockpins.read(path)
    torch = lock.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.5.1", "cu124")
    ta = lock.get("torchaudio")
    assert ta is not None and (ta.version, ta.spec, ta.variant) == ("2.5.1", "==2.5.1", None)


CONDA_LOCK = """\
version: 1
metadata:
  content_hash: {linux-64: abc, osx-arm64: def}
  channels: [{url: conda-forge, used_env_vars: []}]
  platforms: [linux-64, osx-arm64]
  sources: [environment.yml]
package:
- name: cuda-version
  version: '12.9'
  manager: conda
  platform: linux-64
  dependencies: {}
  url: https://conda.example/noarch/cuda-version-12.9-h0_3.tar.bz2
  hash: {md5: faf7, sha256: 3100}
  category: main
  optional: false
- name: pytorch
  version: 2.9.1
  manager: conda
  platform: linux-64
  dependencies: {cuda-version: '>=12.0,<13'}
  url: https://conda.example/linux-64/pytorch-2.9.1-cuda129_generic_py311_h0_202.tar.bz2
  hash: {md5: 3096, sha256: 705a}
  category: main
  optional: false
- name: pytorch
  version: 2.9.1
  manager: conda
  platform: osx-arm64
  dependencies: {}
  url: https://conda.example/osx-arm64/pytorch-2.9.1-cpu_generic_py311_h1_0.conda
  hash: {md5: '1111', sha256: '2222'}
  category: main
  optional: false
- name: torchvision
  version: 0.24.1+cu129
  manager: pip
  platform: linux-64
  dependencies: {}
  url: https://download.pytorch.org/whl/cu129/torchvision-0.24.1%2Bcu129-cp311-cp311-manylinux_2_28_x86_64.whl
  hash: {sha256: 9999}
  category: main
  optional: false
"""


def test_conda_lock_selects_the_platform(tmp_path: Path) -> None:
    path = write(tmp_path, "conda-lock.yml", CONDA_LOCK)
    lock = lockpins.read(path, platform="linux-x86_64")
    assert lock.format == lockpins.FORMAT_CONDA_LOCK
    assert lock.platforms == ("linux-64", "osx-arm64")
    assert [p.name for p in lock.pins] == ["torch", "torchvision"]
    torch = lock.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.9.1", "cu129")
    tv = lock.get("torchvision")
    assert tv is not None
    assert (tv.version, tv.variant, tv.manager, tv.hashes) == (
        "0.24.1",
        "cu129",
        "pip",
        ("sha256:9999",),
    )
    mac = lockpins.read(path, platform="macos-arm64")
    torch = mac.get("torch")
    assert torch is not None and torch.variant == "cpu"
    with pytest.raises(UserError, match="nothing locked for win-64"):
        lockpins.read(path, platform="windows-x86_64")


def test_bad_yaml_and_unknown_documents(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="invalid YAML"):
        lockpins.read(write(tmp_path, "a.yml", "dependencies: [pytorch\n"))
    with pytest.raises(UserError, match="not a lock file"):
        lockpins.read(write(tmp_path, "b.yml", "name: x\n"))
    with pytest.raises(UserError, match="version 7"):
        lockpins.read(write(tmp_path, "pixi.yml", "version: 7\npackage: []\n"))


def test_the_mismatch_fixture() -> None:
    lock = lockpins.read(FIXTURES / "lock_torch215_cu132.txt", platform="linux-x86_64")
    assert [p.text for p in lock.pins] == ["torch==2.15.0+cu132", "torchvision==0.29.2+cu132"]


@pytest.mark.parametrize(
    ("build", "variant"),
    [
        ("cuda126_mkl_py312_h0_300", "cu126"),
        ("py3.11_cuda12.4_cudnn9.1.0_0", "cu124"),
        ("cuda124*", "cu124"),
        ("*cuda*", "cuda"),
        ("cpu_generic_py311_h1_0", "cpu"),
        ("py3.11_cpu_0", "cpu"),
        ("h0_0", None),
        (None, None),
    ],
)
def test_conda_build_variants(build: str | None, variant: str | None) -> None:
    assert lockpins.variant_of_conda_build(build) == variant
