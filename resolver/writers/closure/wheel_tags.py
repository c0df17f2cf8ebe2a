"""The wheel tags a target installs, most specific first (to pick one wheel per package)."""

from __future__ import annotations

from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms

from resolver.core.platforms import DEFAULT_MACOS, MACOS, pip_platforms
from resolver.solve import Target


def target_tags(target: Target, glibc: str | None = None) -> list[Tag]:
    """Every tag a CPython ``target.python`` on the target's platform accepts, best first."""
    py = target.python
    major, minor, abi = py.major, py.minor, py.abi
    if target.platform.name == MACOS:
        mac = tuple(int(x) for x in DEFAULT_MACOS.split(".")[:2])
        platforms = list(mac_platforms((mac[0], mac[1]), "arm64"))
    else:
        platforms = pip_platforms(target.platform, glibc)
        if target.platform.os == "linux":
            arch = target.platform.arch
            platforms += [f"manylinux2010_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    return [
        *cpython_tags((major, minor), abis=[abi, "abi3", "none"], platforms=platforms),
        *compatible_tags((major, minor), f"cp{major}{minor}", platforms),
    ]
