"""The wheel tags a target installs, most specific first (to pick one wheel per package)."""

from __future__ import annotations

from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms

from resolver.core.errors import UserError
from resolver.solve import Target
from resolver.solve.conda import DEFAULT_GLIBC, DEFAULT_MACOS


def target_tags(target: Target, glibc: str | None = None) -> list[Tag]:
    """Every tag a CPython ``target.python`` on the target's platform accepts, best first."""
    py = target.python.rstrip("t")
    major, minor = (int(x) for x in py.split(".")[:2])
    abi = f"cp{major}{minor}" + ("t" if target.python.endswith("t") else "")
    if target.platform == "macos-arm64":
        mac = tuple(int(x) for x in DEFAULT_MACOS.split(".")[:2])
        platforms = list(mac_platforms((mac[0], mac[1]), "arm64"))
    else:
        platforms = pip_platforms(target, glibc)
        if target.platform.startswith("linux"):
            arch = target.platform.split("-", 1)[1]
            platforms += [f"manylinux2010_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    return [
        *cpython_tags((major, minor), abis=[abi, "abi3", "none"], platforms=platforms),
        *compatible_tags((major, minor), f"cp{major}{minor}", platforms),
    ]


def pip_platforms(target: Target, glibc: str | None = None) -> list[str]:
    """pip ``--platform`` tags a wheel for the target may carry, most specific first."""
    plat = target.platform
    if plat.startswith("linux"):
        arch = plat.split("-", 1)[1]
        major, _, minor = (glibc or DEFAULT_GLIBC).partition(".")
        if major != "2" or not minor.isdigit():
            raise UserError(f"glibc {glibc!r}: expected a version like 2.28")
        tags = [f"manylinux_2_{m}_{arch}" for m in range(int(minor), 16, -1)]
        return [*tags, f"manylinux2014_{arch}"]  # pip adds manylinux2010 / manylinux1 itself
    if plat.startswith("windows"):
        return ["win_amd64"]
    if plat.startswith("macos"):
        return [f"macosx_{DEFAULT_MACOS.split('.')[0]}_0_arm64"]  # pip adds the older macOS
    raise UserError(f"no pip platform tags for {plat}")


def uv_platform(target: Target, glibc: str | None = None) -> str:
    """uv's ``--python-platform`` for the target: the marker environment and wheel tags in one."""
    plat = target.platform
    if plat.startswith("linux"):
        arch = plat.split("-", 1)[1]
        major, _, minor = (glibc or DEFAULT_GLIBC).partition(".")
        if major != "2" or not minor.isdigit():
            raise UserError(f"glibc {glibc!r}: expected a version like 2.28")
        # uv names manylinux_2_17 ... manylinux_2_40; an older or newer glibc takes the bound.
        return f"{arch}-manylinux_2_{min(max(int(minor), 17), 40)}"
    if plat == "windows-x86_64":
        return "x86_64-pc-windows-msvc"
    if plat == "macos-arm64":
        return "aarch64-apple-darwin"
    raise UserError(f"no uv platform for {plat}")
