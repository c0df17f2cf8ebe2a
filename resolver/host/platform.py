"""Platform probe: OS + CPU, Python ABI and glibc, the non-GPU half of a wheel's tags."""

import os
import sys
from typing import NamedTuple

from resolver.core.platforms import PythonVersion, platform_name


def parse_glibc(text: str | None) -> str | None:
    """os.confstr("CS_GNU_LIBC_VERSION") gives "glibc 2.39" -> "2.39"; musl gives nothing."""
    if not text:
        return None
    name, _, version = text.strip().partition(" ")
    return version if name == "glibc" and version else None


class PlatformInfo(NamedTuple):
    system: str  # "linux" | "windows" | "darwin" (lower-cased platform.system())
    platform: str
    python: str
    python_full: str
    glibc: str | None


def probe() -> PlatformInfo:
    """This interpreter's platform, Python and glibc."""
    import platform as _platform

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
    free_threaded = False
    if v >= (3, 13):  # only 3.13 and later can be built without the GIL
        import sysconfig  # its build data costs start-up: read only where it can answer

        free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return PlatformInfo(
        system=system,
        platform=platform_name(system, _platform.machine()),
        python=str(PythonVersion(v.major, v.minor, free_threaded)),
        python_full=f"{v.major}.{v.minor}.{v.micro}",
        glibc=glibc,
    )
