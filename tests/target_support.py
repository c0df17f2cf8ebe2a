"""Targets written as the tests think of them: ``written("linux-x86_64", "3.12", "580.65.06")``.

A `Target` holds typed values (`Platform`, `PythonVersion`, `Driver`) that the edges parse once;
the tests describe machines in text, so this is their edge.
"""

from __future__ import annotations

from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import Driver
from resolver.solve import Target, TargetGpu


def written(
    platform: str,
    python: str,
    driver: str | None = None,
    driver_os: str = "linux",
    gpus: tuple[TargetGpu, ...] = (),
    nvidia: bool = False,
    name: str | None = None,
    unknown_gpus: tuple[str, ...] = (),
) -> Target:
    """The `Target` of a machine given in text (the fields of `Target`, in its order)."""
    return Target(
        Platform.parse(platform),
        PythonVersion.parse(python),
        None if driver is None else Driver.parse(driver),
        driver_os,
        gpus,
        nvidia,
        name,
        unknown_gpus,
    )
