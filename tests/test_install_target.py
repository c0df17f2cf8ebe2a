"""`install --lock` holds the lock's recorded target against the environment: another platform or
Python is exit 2 naming both, another GPU or driver a warning, `--ignore-target` says it skips."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import run_cli

import resolver.host as host_mod
from resolver.core.hostprofile import STATE_OK, GpuInfo, HostProfile
from resolver.host import platform as host_platform

HERE = host_platform.probe().platform
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
OTHER_PY = "3.12" if PY != "3.12" else "3.11"
OTHER_PLATFORM = "linux-aarch64" if HERE != "linux-aarch64" else "linux-x86_64"


def _lock(capsys: pytest.CaptureFixture[str], out: Path, *argv: str) -> Path:
    code, _, err = run_cli(capsys, "lock", *argv, "-o", str(out))
    assert code == 0, err
    return out / "requirements.txt"


def _install(capsys: pytest.CaptureFixture[str], lock: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(
        capsys, "install", "--lock", str(lock), "--python", sys.executable, "--dry-run", *extra
    )


def _host(driver: str | None, ccs: list[str]) -> HostProfile:
    gpus = [GpuInfo(index=i, name=None, cc=cc) for i, cc in enumerate(ccs)]
    return HostProfile(HERE, PY, driver=driver, state=STATE_OK if gpus else "no-driver", gpus=gpus)


@pytest.mark.parametrize(
    ("python", "platform"), [(OTHER_PY, HERE), (PY, OTHER_PLATFORM)], ids=["python", "platform"]
)
def test_another_platform_or_python_is_exit_2_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python: str, platform: str
) -> None:
    lock = _lock(capsys, tmp_path, "--no-gpu", "--python", python, "--platform", platform)
    code, out, err = _install(capsys, lock)
    assert code == 2, out + err
    assert f"locked for {platform}, Python {python}" in err
    assert f"this environment is {HERE}, Python {PY}" in err
    assert "--ignore-target" in err and len(err.strip().splitlines()) == 1

    code, out, err = _install(capsys, lock, "--ignore-target")
    assert code == 0, err
    assert f"--ignore-target: the lock's recorded target ({platform}, Python {python}" in out
    assert "pip install" in out or "uv pip install" in out


def test_gpu_or_driver_mismatch_only_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["--python", PY, "--platform", HERE, "--gpu", "8.9", "--driver", "570.124.06"]
    lock = _lock(capsys, tmp_path, *argv)
    monkeypatch.setattr(host_mod, "detect", lambda **kw: _host(None, []))
    code, _, err = _install(capsys, lock)
    assert code == 0, err  # an image built on a CPU host
    assert "locked for" in err and "driver 570.124.06, GPUs 8.9" in err
    assert "this host has no usable NVIDIA GPU" in err

    monkeypatch.setattr(host_mod, "detect", lambda **kw: _host("560.35.03", ["9.0", "9.0"]))
    code, _, err = _install(capsys, lock)
    assert code == 0, err
    assert "this host's driver is older: 560.35.03" in err
    assert "this host's GPUs are 9.0 x2" in err

    monkeypatch.setattr(host_mod, "detect", lambda **kw: _host("580.65.06", ["8.9", "8.9"]))
    code, _, err = _install(capsys, lock)
    assert code == 0 and "warning" not in err  # a newer driver, GPUs the lock was made for

    monkeypatch.setattr(host_mod, "detect", lambda **kw: _host("570.124.06", ["8.9"]))
    code, _, err = _install(capsys, lock)
    assert code == 0 and "warning" not in err  # the machine it was locked for


def test_a_lock_without_a_recorded_target_installs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("torch==2.8.0+cpu\n", encoding="utf-8")
    code, _, err = _install(capsys, lock)
    assert code == 0, err
    code, _, err = run_cli(capsys, "install", "--ignore-target", "--python", sys.executable)
    assert code == 2 and "--ignore-target goes with --lock" in err
