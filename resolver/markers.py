"""PEP 508 markers judged for a target platform and Python, never for this machine.

Lock writers (pip's report), `db update` (a wheel's pins) and the like read Requires-Dist for
another machine: they share this one environment table and this one filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from packaging.requirements import InvalidRequirement, Requirement

# platform -> (platform_system, sys_platform, os_name, platform_machine)
_PLATFORM_VALUES = {
    "linux-x86_64": ("Linux", "linux", "posix", "x86_64"),
    "linux-aarch64": ("Linux", "linux", "posix", "aarch64"),
    "windows-x86_64": ("Windows", "win32", "nt", "AMD64"),
    "macos-arm64": ("Darwin", "darwin", "posix", "arm64"),
}


def marker_env(platform: str, python: str) -> dict[str, str]:
    """Marker values of a CPython ``python`` ("3.12", "3.13t") on ``platform``."""
    py = python.rstrip("t")
    system, sys_platform, os_name, machine = _PLATFORM_VALUES[platform]
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{py}.0",
        "os_name": os_name,
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": f"{py}.0",
        "python_version": py,
        "sys_platform": sys_platform,
        "extra": "",
    }


def applicable(requires_dist: Iterable[str], env: Mapping[str, str]) -> Iterator[Requirement]:
    """The requirements whose markers hold in ``env``; unparsable lines are skipped."""
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(dict(env)):
            yield req
