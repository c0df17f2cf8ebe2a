"""The platforms gpuresolve covers and the Python versions it targets: every spelling in one place.

A ``Platform`` ("linux-x86_64") yields what each consumer calls it: PEP 508 marker values, the
wheel platform tags that map to it, conda's subdir and archspec, Docker's and Kubernetes' names.
A ``PythonVersion`` ("3.12", free-threaded "3.13t") yields its ABI tag and marker values. No
other module spells a platform or parses a "t" suffix.

No ``from __future__ import annotations`` here: typing.NamedTuple (``PythonVersion``) compiles
each string annotation into a ForwardRef on every start; evaluated ones cost nothing.
"""

import re
from dataclasses import dataclass
from typing import NamedTuple

from resolver.core.errors import UserError


@dataclass(frozen=True, eq=False)
class Platform:
    """One platform gpuresolve covers; ``str()`` is its name, what files and outputs spell, and
    order is the name's. There is one value per platform (``BY_NAME``, ``Platform.parse``), so
    equality and hash are identity's: a fleet's memo hashes its targets ~250,000 times."""

    name: str  # gpuresolve's name: "linux-x86_64"
    platform_system: str  # PEP 508 marker values ...
    sys_platform: str
    os_name: str
    platform_machine: str
    conda_subdir: str  # "linux-64"
    conda_archspec: str  # conda's __archspec virtual package: "1 x86_64"
    docker: str | None  # an image's platform: "linux/amd64" (None: no Linux container)
    kubernetes: tuple[str, str] | None  # node labels kubernetes.io/os, kubernetes.io/arch

    @classmethod
    def parse(cls, name: str, what: str = "platform") -> "Platform":
        """The covered platform ``name`` names ("linux-x86_64"); a UserError otherwise."""
        found = BY_NAME.get(name.strip().lower()) if isinstance(name, str) else None
        if found is None:
            shown = name[:40] if isinstance(name, str) else type(name).__name__
            raise UserError(f"{what} {shown!r}: one of {', '.join(PLATFORMS)}")
        return found

    def __str__(self) -> str:
        return self.name

    def __lt__(self, other: "Platform") -> bool:
        return self.name < other.name

    @property
    def os(self) -> str:
        """ "linux", "windows" or "macos": the name's first part."""
        return self.name.split("-", 1)[0]

    @property
    def arch(self) -> str:
        """ "x86_64", "aarch64" or "arm64": the name's second part."""
        return self.name.split("-", 1)[1]

    @property
    def marker(self) -> str:
        """The PEP 508 marker that holds on this platform (pylock ``environments``)."""
        return (
            f"sys_platform == '{self.sys_platform}' and "
            f"platform_machine == '{self.platform_machine}'"
        )


_ALL = (
    Platform(
        "linux-x86_64", "Linux", "linux", "posix", "x86_64", "linux-64", "1 x86_64",
        "linux/amd64", ("linux", "amd64"),
    ),
    Platform(
        "linux-aarch64", "Linux", "linux", "posix", "aarch64", "linux-aarch64", "1 aarch64",
        "linux/arm64", ("linux", "arm64"),
    ),
    Platform(
        "windows-x86_64", "Windows", "win32", "nt", "AMD64", "win-64", "1 x86_64",
        None, ("windows", "amd64"),
    ),
    Platform(
        "macos-arm64", "Darwin", "darwin", "posix", "arm64", "osx-arm64", "1 arm64",
        None, None,
    ),
)  # fmt: skip
BY_NAME: dict[str, Platform] = {p.name: p for p in _ALL}
PLATFORMS: tuple[str, ...] = tuple(BY_NAME)  # the names, in the database's order
CONDA_SUBDIRS: dict[str, str] = {p.name: p.conda_subdir for p in _ALL}  # "linux-64"
DEFAULT_PLATFORM = "linux-x86_64"
# What a target's system is taken to be when it does not tell: conda-lock's own defaults for
# glibc and the Linux kernel, and a macOS new enough for every conda-forge build.
DEFAULT_GLIBC = "2.28"
DEFAULT_LINUX = "5.10"
DEFAULT_MACOS = "14.0"
MACOS = "macos-arm64"  # the one macOS platform: CPU builds only, no NVIDIA CUDA

_X86 = {"x86_64", "amd64", "x64"}
_ARM = {"aarch64", "arm64", "armv8l"}


def platform_name(system: str, machine: str) -> str:
    """("Linux", "x86_64") -> "linux-x86_64"; ("Darwin", "arm64") -> "macos-arm64".

    Arm is "aarch64" on Linux (manylinux's name) and "arm64" on macOS and Windows (theirs).
    The name may be one gpuresolve does not cover ("freebsd-x86_64"): see ``PLATFORMS``.
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


def covered(system: str, machine: str) -> str | None:
    """``platform_name`` where gpuresolve covers it, else None."""
    name = platform_name(system, machine)
    return name if name in BY_NAME else None


def by_kubernetes(os: str, arch: str) -> Platform | None:
    """A node's kubernetes.io/os and kubernetes.io/arch labels -> its platform (or None)."""
    return next((p for p in _ALL if p.kubernetes == (os, arch)), None)


def of_wheel_tag(tag: str) -> str | None:
    """A wheel platform tag -> platform name; None for a platform gpuresolve does not cover.

    glibc Linux only (``manylinux*``, ``linux_*``): a musllinux wheel does not run on the glibc
    systems the database describes, and torch ships none. A macOS ``universal2`` wheel carries
    arm64 code, so it counts for macos-arm64.
    """
    if tag.startswith(("manylinux", "linux_")):
        if tag.endswith("_x86_64"):
            return "linux-x86_64"
        if tag.endswith("_aarch64"):
            return "linux-aarch64"
        return None
    if tag == "win_amd64":
        return "windows-x86_64"
    if tag.startswith("macosx_") and tag.endswith(("_arm64", "_universal2")):
        return MACOS
    return None


def _glibc_minor(glibc: str | None) -> int:
    major, _, minor = (glibc or DEFAULT_GLIBC).partition(".")
    if major != "2" or not (minor.isascii() and minor.isdigit()):
        raise UserError(f"glibc {glibc!r}: expected a version like 2.28")
    return int(minor)


def pip_platforms(platform: Platform, glibc: str | None = None) -> list[str]:
    """pip ``--platform`` tags a wheel for the platform may carry, most specific first."""
    if platform.os == "linux":
        arch = platform.arch
        tags = [f"manylinux_2_{m}_{arch}" for m in range(_glibc_minor(glibc), 16, -1)]
        return [*tags, f"manylinux2014_{arch}"]  # pip adds manylinux2010 / manylinux1 itself
    if platform.os == "windows":
        return ["win_amd64"]
    if platform.os == "macos":
        return [f"macosx_{DEFAULT_MACOS.split('.')[0]}_0_arm64"]  # pip adds the older macOS
    raise UserError(f"no pip platform tags for {platform}")


def uv_platform(platform: Platform, glibc: str | None = None) -> str:
    """uv's ``--python-platform``: the marker environment and wheel tags in one."""
    if platform.os == "linux":
        # uv names manylinux_2_17 ... manylinux_2_40; an older or newer glibc takes the bound.
        return f"{platform.arch}-manylinux_2_{min(max(_glibc_minor(glibc), 17), 40)}"
    if platform.name == "windows-x86_64":
        return "x86_64-pc-windows-msvc"
    if platform.name == MACOS:
        return "aarch64-apple-darwin"
    raise UserError(f"no uv platform for {platform}")


# A target's Python as users and files write it: "3.12", "3.13t" (free-threaded).
PYTHON_RE = re.compile(r"^3\.[0-9]{1,2}t?$")
_PYTHON_FULL_RE = re.compile(r"^3\.[0-9]{1,2}\.[0-9]+$")


def python_option(value: str) -> str | None:
    """A --python version as gpuresolve spells it: "3.12", "3.13t" ("3.12.4" keeps the minor);
    None where ``value`` is no version (an interpreter path, which the host reads, or nonsense)."""
    v = value.strip()
    if PYTHON_RE.match(v):
        return v
    if _PYTHON_FULL_RE.match(v):
        return ".".join(v.split(".")[:2])
    return None


class PythonVersion(NamedTuple):
    """A CPython minor version; ``free_threaded`` is the separate "t" ABI (PEP 703). A tuple:
    ordered by version, hashed in C (a fleet's memo hashes its targets ~250,000 times)."""

    major: int
    minor: int
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> "PythonVersion":
        """ "3.12" or "3.13t" (a patch level is ignored: "3.12.4"); ValueError otherwise."""
        free = text.endswith("t")
        parts = (text[:-1] if free else text).split(".")
        if len(parts) < 2 or not all(p.isascii() and p.isdigit() for p in parts[:2]):
            raise ValueError(f"not a Python version: {text!r}")
        return cls(int(parts[0]), int(parts[1]), free)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def plain(self) -> str:
        """The marker ``python_version``: "3.13" for "3.13t" too."""
        return f"{self.major}.{self.minor}"

    @property
    def interpreter(self) -> str:
        """The wheel interpreter tag: "cp313"."""
        return f"cp{self.major}{self.minor}"

    @property
    def abi(self) -> str:
        """The wheel ABI tag: "cp313", or "cp313t" for the free-threaded build."""
        return self.interpreter + ("t" if self.free_threaded else "")


def plain_python(text: str) -> str:
    """ "3.13t" -> "3.13": the version markers and installers see (the ABI aside)."""
    return PythonVersion.parse(text).plain


def is_free_threaded(text: str) -> bool:
    return PythonVersion.parse(text).free_threaded


def marker_env(platform: Platform | str, python: PythonVersion | str) -> dict[str, str]:
    """Marker values of a CPython ``python`` ("3.12", "3.13t") on ``platform`` (typed values,
    or the database's names)."""
    p = platform if isinstance(platform, Platform) else BY_NAME[platform]
    py = python.plain if isinstance(python, PythonVersion) else plain_python(python)
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{py}.0",
        "os_name": p.os_name,
        "platform_machine": p.platform_machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": p.platform_system,
        "platform_version": "",
        "python_full_version": f"{py}.0",
        "python_version": py,
        "sys_platform": p.sys_platform,
        "extra": "",
    }
