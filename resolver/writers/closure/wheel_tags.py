"""The wheel tags a target installs, most specific first (to pick one wheel per package)."""

from __future__ import annotations

from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms

from resolver.conda import DEFAULT_MACOS
from resolver.solve import Target
from resolver.writers.closure.pip_resolve import pip_platforms


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
