"""Platform and WSL probes: pure functions on recorded strings, and the real interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from resolver.host import platform as host_platform
from resolver.host import wsl

FIX = Path(__file__).parent / "fixtures" / "host"


@pytest.mark.parametrize(
    ("text", "version"),
    [("glibc 2.39", "2.39"), ("glibc 2.17\n", "2.17"), ("", None), (None, None)],
)
def test_parse_glibc(text: str | None, version: str | None) -> None:
    assert host_platform.parse_glibc(text) == version


def test_probe_this_interpreter() -> None:
    info = host_platform.probe()
    v = sys.version_info
    assert info.python_full == f"{v.major}.{v.minor}.{v.micro}"
    assert info.python.startswith(f"{v.major}.{v.minor}")
    if sys.platform.startswith("linux"):
        assert info.system == "linux" and info.platform.startswith("linux-")


# --- WSL ------------------------------------------------------------------------------------------


def test_wsl_versions() -> None:
    wsl2 = (FIX / "transcribed/wsl2_osrelease.out").read_text()
    wsl1 = (FIX / "transcribed/wsl1_osrelease.out").read_text()
    h100 = (FIX / "h100_driver580/proc_osrelease.out").read_text()
    h100_version = (FIX / "h100_driver580/proc_kernel_version.out").read_text()
    assert wsl.wsl_version(None, wsl2) == 2
    assert wsl.wsl_version(None, wsl1) == 1
    assert wsl.wsl_version(h100_version, h100) is None
    assert wsl.wsl_version("Linux version 6.6.1-microsoft-custom", None, lib_dir=True) == 2


def test_wsl_probe_fake_root(tmp_path: Path) -> None:
    assert wsl.probe(tmp_path) == wsl.WslInfo(None, None, None)
    osrelease = tmp_path / "proc/sys/kernel/osrelease"
    osrelease.parent.mkdir(parents=True)
    osrelease.write_text((FIX / "transcribed/wsl2_osrelease.out").read_text())
    (tmp_path / wsl.LIB_DIR).mkdir(parents=True)
    (tmp_path / wsl.SMI).write_text("")
    (tmp_path / wsl.NVML_LIB).write_text("")
    info = wsl.probe(tmp_path)
    assert info == wsl.WslInfo(2, str(tmp_path / wsl.SMI), str(tmp_path / wsl.NVML_LIB))
