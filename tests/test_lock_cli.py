"""`gpuresolve lock` end to end (in-process) on the synthetic database."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli, write_db
from conda_channel import forge_packages, make_channel
from lock_support import lock_raw
from pytorch_index import tree_snapshot

from resolver.writers.closure import conda_solve

GTX = ["--driver", "560.35.03", "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--python", "3.11"]


@pytest.fixture(autouse=True)
def lock_db(tmp_path: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = write_db(tmp_path / "db", lock_raw(synth_raw))
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(directory))
    monkeypatch.delenv("GPURESOLVE_CONDA_CHANNEL", raising=False)
    return directory


run = run_cli


def test_lock_writes_reruns_identically_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["lock", *GTX, "--with", "torchvision", "--format", "requirements", "--format", "conda"]
    code, stdout, _ = run(capsys, *args, "-o", str(out))
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "environment.yml",
        "requirements.txt",
        "virtual-packages.yml",
    ]
    assert f"wrote {out / 'requirements.txt'}" in stdout
    assert "build: torch 2.8.0 + CUDA 12.6" in stdout
    req = (out / "requirements.txt").read_text()
    assert "torch==2.8.0+cu126\ntorchvision==0.23.0+cu126\n" in req
    first = tree_snapshot(out)

    code, stdout, _ = run(capsys, *args, "-o", str(out))
    assert code == 0 and f"unchanged {out / 'environment.yml'}" in stdout
    assert tree_snapshot(out) == first  # byte-identical

    code, stdout, _ = run(capsys, *args, "-o", str(out), "--check")
    assert code == 0 and stdout.startswith("all current")

    # One byte of drift: --check says so with a diff, and writes nothing.
    path = out / "virtual-packages.yml"
    path.write_bytes(path.read_bytes().replace(b'__glibc: "2.28"', b'__glibc: "2.29"'))
    drifted = tree_snapshot(out)
    code, stdout, stderr = run(capsys, *args, "-o", str(out), "--check")
    assert code == 1
    assert "--- a/virtual-packages.yml" in stdout and '+      __glibc: "2.28"' in stdout
    assert "1 file(s) differ" in stderr and "virtual-packages.yml" in stderr
    assert tree_snapshot(out) == drifted

    # A new target is drift too; writing repairs it.
    code, _, _ = run(capsys, *args[:-4], "--format", "conda", "-o", str(out), "--check")
    assert code == 1
    code, _, _ = run(capsys, *args, "-o", str(out))
    assert tree_snapshot(out) == first


def test_no_build_fits_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run(capsys, "lock", *GTX, "--cuda", "13.0", "-o", str(out))
    assert code == 1
    assert "nothing written" in stdout and "no compatible build" in stdout
    assert not out.exists()


def test_no_conda_forge_build_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["lock", "--gpu", "Jetson AGX Orin", "--driver", "580.65.06", "--python", "3.11"]
    code, stdout, _ = run(capsys, *args, "--format", "conda", "--conda-source", "conda-forge")
    assert code == 1 and "conda-forge has no build" in stdout
    assert not out.exists()


def test_cpu_and_macos_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "lock", "--no-gpu", "--python", "3.11", "-o", str(tmp_path / "cpu"))
    assert code == 0
    assert "torch==2.12.0+cpu" in (tmp_path / "cpu" / "requirements.txt").read_text()
    mac = tmp_path / "mac"
    code, _, _ = run(
        capsys,
        "lock",
        "--platform",
        "macos-arm64",
        "--python",
        "3.11",
        "--format",
        "requirements",
        "--format",
        "conda",
        "--conda-source",
        "conda-forge",
        "-o",
        str(mac),
    )
    assert code == 0
    assert "torch==2.8.0\n" in (mac / "requirements.txt").read_text()
    env = yaml.safe_load((mac / "environment.yml").read_text())
    assert env["platforms"] == ["osx-arm64"]
    assert env["dependencies"] == ["python=3.11", "pytorch=2.12.0=cpu*"]
    vp = yaml.safe_load((mac / "virtual-packages.yml").read_text())
    assert "__cuda" not in vp["subdirs"]["osx-arm64"]["packages"]


def test_glibc_option_reaches_virtual_packages_and_selection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["lock", "--gpu", "8.6", "--driver", "580.65.06", "--python", "3.11"]
    args += ["--format", "conda", "--conda-source", "conda-forge", "--glibc", "2.17"]
    code, _, _ = run(capsys, *args, "-o", str(tmp_path))
    assert code == 0
    vp = yaml.safe_load((tmp_path / "virtual-packages.yml").read_text())
    assert vp["subdirs"]["linux-64"]["packages"]["__glibc"] == "2.17"
    env = yaml.safe_load((tmp_path / "environment.yml").read_text())
    assert "pytorch=2.12.0=cuda129*" in env["dependencies"]  # the CUDA 13 build needs 2.28


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--glibc", "2.x"], "--glibc '2.x'"),
        (["--hashes", "--format", "conda"], "--hashes pins requirements.txt"),
        (["--platform", "linux-riscv64"], "--platform 'linux-riscv64'"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, stderr = run(
        capsys, "lock", "--no-gpu", "--python", "3.11", *args, "-o", str(tmp_path)
    )
    assert code == 2
    assert message in stderr and len(stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [tmp_path / "db"]


def test_missing_solver_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conda_solve, "rattler_available", lambda: False)
    out = tmp_path / "out"
    code, _, stderr = run(
        capsys, "lock", "--no-gpu", "--python", "3.11", "--format", "conda-lock", "-o", str(out)
    )
    assert code == 2
    assert stderr.strip() == (
        "gpuresolve: error: conda-lock.yml needs a conda solver: "
        "pip install 'gpuresolve[conda]' (py-rattler); or leave out --format conda-lock"
    )
    assert not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("rattler") is None, reason="py-rattler not installed")
def test_conda_formats_with_a_channel_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = make_channel(tmp_path / "channel", forge_packages(pythons=("3.11",)))
    monkeypatch.setenv("GPURESOLVE_CONDA_CHANNEL", channel)  # the setting, not the option
    out = tmp_path / "out"
    args = ["lock", "--gpu", "8.6", "--driver", "575.51.03", "--python", "3.11"]
    args += ["--format", "requirements", "--format", "conda-lock"]
    args += ["--conda-source", "conda-forge", "-o", str(out)]
    code, stdout, _ = run(capsys, *args)
    assert code == 0, stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "conda-lock.yml",
        "environment.yml",
        "requirements.txt",
        "virtual-packages.yml",
    ]
    assert "conda-forge build: torch 2.12.0 + CUDA 12.9 (cu129)" in stdout
    lock = yaml.safe_load((out / "conda-lock.yml").read_text())
    assert lock["metadata"]["channels"][0]["url"] == channel
    urls = [p["url"] for p in lock["package"]]
    assert any(u.endswith("pytorch-2.12.0-cuda129_generic_py311_h0_202.tar.bz2") for u in urls)
    code, stdout, _ = run(capsys, *args, "--check")
    assert code == 0, stdout


@pytest.mark.slow  # runs the interpreter twice
def test_lock_python_takes_an_environments_folder_as_verify_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One --python grammar: `lock --python ./venv` locks for the venv's interpreter."""
    import sys

    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python3").symlink_to(sys.executable)
    described = ["--platform", "linux-x86_64", "--driver", "560.35.03", "--gpu", "8.9"]
    texts = []
    for python, out in ((env, "a"), (env / "bin" / "python3", "b")):
        argv = ["lock", *described, "--python", str(python), "-o", str(tmp_path / out)]
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, err
        texts.append((tmp_path / out / "requirements.txt").read_text())
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert texts[0] == texts[1] and f'"python":"{here}' in texts[0]
    code, _, err = run_cli(capsys, "lock", *described, "--python", str(tmp_path))
    assert code == 2 and "no Python interpreter in that directory" in err
