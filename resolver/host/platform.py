"""Platform probe: OS + CPU, Python ABI and glibc, the non-GPU half of a wheel's tags."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_X86 = {"x86_64", "amd64", "x64"}
_ARM = {"aarch64", "arm64", "armv8l"}


def platform_name(system: str, machine: str) -> str:
    """("Linux", "x86_64") -> "linux-x86_64"; ("Darwin", "arm64") -> "macos-arm64".

    Arm is "aarch64" on Linux (manylinux's name) and "arm64" on macOS and Windows (theirs).
    """
    sys_name = {"darwin": "macos", "win32": "windows", "cygwin": "windows"}.get(
        system.lower(), system.lower()
    )
    m = machine.lower()
    if m in _X86:
        arch = "x86_64"
    elif m in _ARM:
        arch = "aarch64" if sys_name == "linux" else "arm64"
    else:
        arch = m
    return f"{sys_name}-{arch}"


def python_tag(major: int, minor: int, gil_disabled: bool = False) -> str:
    """ "3.13", or "3.13t" for a free-threaded build (its wheels are cp313t, a separate ABI)."""
    return f"{major}.{minor}{'t' if gil_disabled else ''}"


def parse_glibc(text: str | None) -> str | None:
    """os.confstr("CS_GNU_LIBC_VERSION") gives "glibc 2.39" -> "2.39"; musl gives nothing."""
    if not text:
        return None
    name, _, version = text.strip().partition(" ")
    return version if name == "glibc" and version else None


@dataclass(frozen=True)
class PlatformInfo:
    system: str  # "linux" | "windows" | "darwin" (lower-cased platform.system())
    platform: str
    python: str
    python_full: str
    glibc: str | None


def probe() -> PlatformInfo:
    """This interpreter's platform, Python and glibc."""
    import platform as _platform
    import sysconfig

    system = _platform.system().lower()
    glibc: str | None = None
    if system == "linux":
        try:
            glibc = parse_glibc(os.confstr("CS_GNU_LIBC_VERSION"))
        except (ValueError, OSError):
            glibc = None
        if glibc is None:
            lib, version = _platform.libc_ver()
            glibc = version if lib == "glibc" and version else None
    v = sys.version_info
    return PlatformInfo(
        system=system,
        platform=platform_name(system, _platform.machine()),
        python=python_tag(v.major, v.minor, bool(sysconfig.get_config_var("Py_GIL_DISABLED"))),
        python_full=f"{v.major}.{v.minor}.{v.micro}",
        glibc=glibc,
    )
