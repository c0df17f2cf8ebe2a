"""Reading pins out of requirements.txt, environment.yml and conda-lock.yml (v1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from resolver.core.errors import UserError
from resolver.readers import lockfile
from resolver.readers.pins import (
    FORMAT_CONDA_LOCK,
    FORMAT_ENVIRONMENT,
    FORMAT_REQUIREMENTS,
    variant_of_conda_build,
)

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
    lock = lockfile.read(path)
    assert lock.format == FORMAT_REQUIREMENTS
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
    lock = lockfile.read(path)
    assert [p.name for p in lock.pins] == ["triton", "torch"]
    torch = lock.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.11.0", "cu130")


def test_requirements_follow_pips_rules_for_comments_and_continuations(tmp_path: Path) -> None:
    """pip's order: a comment line ending in a backslash continues nothing; an inline comment
    ending in one does (and takes the next line with it, as pip does)."""
    text = r"""# the pins below \
torch==2.8.0+cu126
   # an indented comment \
torchvision==0.23.0
numpy==2.1.0 # inline \
swallowed==1.0
triton==3.4.\
0
"""
    lock = lockfile.read(write(tmp_path, "requirements.txt", text))
    assert [p.name for p in lock.pins] == ["torch", "torchvision", "numpy", "triton"]
    triton = lock.get("triton")
    assert triton is not None and triton.version == "3.4.0"
    assert triton.line.startswith("requirements.txt:7:")


def test_requirements_expand_environment_variables_as_pip_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_VARIANT", "cu128")
    monkeypatch.setenv("lower_case", "x")
    monkeypatch.delenv("UNSET_MIRROR", raising=False)
    text = (
        "--index-url https://download.pytorch.org/whl/${TORCH_VARIANT}\n"
        "--extra-index-url https://${UNSET_MIRROR}/simple\n"
        "torch==2.8.0+${TORCH_VARIANT}\n"
    )
    lock = lockfile.read(write(tmp_path, "requirements.txt", text))
    assert lock.index_urls == (
        "https://download.pytorch.org/whl/cu128",
        "https://${UNSET_MIRROR}/simple",  # an unset variable stays as written
    )
    torch = lock.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.8.0", "cu128")
    lower = write(tmp_path, "lower.txt", "torchaudio==2.8.0+${lower_case}\n")
    with pytest.raises(UserError, match="not a requirement"):  # only ${UPPER_CASE} expands
        lockfile.read(lower)


def test_requirements_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no such file \(expected a lock file\)"):
        lockfile.read(tmp_path / "missing.txt")
    bad = write(tmp_path, "bad.txt", "torch==2.8.0\n!!! not a requirement\n")
    with pytest.raises(UserError, match=r"bad\.txt:2: not a requirement"):
        lockfile.read(bad)
    loop = write(tmp_path, "loop.txt", "-r loop.txt\n")
    with pytest.raises(UserError, match=r"loop\.txt:1: loop\.txt: includes itself"):
        lockfile.read(loop)


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
    lock = lockfile.read(path)
    assert lock.format == FORMAT_ENVIRONMENT
    torch = lock.get("torch")  # conda's pytorch is the torch distribution
    assert torch is not None
    assert (torch.version, torch.variant, torch.manager, torch.spec) == (
        "2.5.1",
        "cu124",
        "conda",
        "==2.5.1",  # as in conda: a version given with its build is exact
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
    lock = lockfile.read(path)
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
    lock = lockfile.read(path, platform="linux-x86_64")
    assert lock.format == FORMAT_CONDA_LOCK
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
    mac = lockfile.read(path, platform="macos-arm64")
    torch = mac.get("torch")
    assert torch is not None and torch.variant == "cpu"
    with pytest.raises(UserError, match="nothing locked for win-64"):
        lockfile.read(path, platform="windows-x86_64")


def test_bad_yaml_and_unknown_documents(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="invalid YAML"):
        lockfile.read(write(tmp_path, "a.yml", "dependencies: [pytorch\n"))
    with pytest.raises(UserError, match="not a lock file"):
        lockfile.read(write(tmp_path, "b.yml", "name: x\n"))
    with pytest.raises(UserError, match="version 7"):
        lockfile.read(write(tmp_path, "pixi.yml", "version: 7\npackage: []\n"))


def test_the_mismatch_fixture() -> None:
    lock = lockfile.read(FIXTURES / "lock_torch215_cu132.txt", platform="linux-x86_64")
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
    assert variant_of_conda_build(build) == variant


CONDA_SPECS = [
    "python=3.11",
    "python 3.12",
    "pytorch=2.5.1=cuda124*",
    "pytorch::pytorch=2.5.1=py3.11_cuda12.4_cudnn9.1.0_0",
    "pytorch 2.5.1 cuda124_py312_h0",
    "conda-forge::pytorch==2.5.1",
    "pytorch-cuda=12.4",
    "cuda-version 12.9.*",
    "numpy>=1.26",
    "torchvision>=0.20,<0.21",
    "numpy",
]


@pytest.mark.parametrize("spec", CONDA_SPECS)
def test_conda_specs_read_alike_with_and_without_rattler(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base install's small parser gives the pins py-rattler's MatchSpec gives."""
    pytest.importorskip("rattler", reason="the conda extra is not installed")
    from resolver.readers import conda

    with_rattler = conda.conda_spec_pin(spec, "environment.yml")
    monkeypatch.setitem(sys.modules, "rattler", None)  # as in a base install
    assert conda.conda_spec_pin(spec, "environment.yml") == with_rattler


def test_a_bad_conda_spec_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "environment.yml", "dependencies:\n  - 'pytorch[version=>2'\n")
    with pytest.raises(UserError, match="not a conda package spec"):
        lockfile.read(path)
