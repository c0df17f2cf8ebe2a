"""virtual-packages.yml: the target's ``__cuda``, ``__glibc``, ``__archspec`` for conda-lock.

conda-lock reads it with ``--virtual-package-spec`` (and picks up ``./virtual-packages.yml`` by
itself), so a lock made on a laptop resolves as it would on the target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from resolver.catalog import Catalog
from resolver.core.platforms import DEFAULT_GLIBC, DEFAULT_MACOS
from resolver.solve import Decision, Target
from resolver.writers.formats.header import header_lines


def explain(target: Target, packages: Mapping[str, str], glibc: str | None) -> list[str]:
    """One comment per fact that is assumed or derived rather than read off the target."""
    notes: list[str] = []
    cuda = packages.get("__cuda")
    if cuda and target.driver:
        notes.append(f"__cuda {cuda}: the highest CUDA driver {target.driver} supports")
    elif cuda:
        notes.append(f"__cuda {cuda}: no driver given, the CUDA of the build chosen")
    elif target.platform.os != "macos":
        notes.append("no __cuda: the target has no NVIDIA GPU")
    if "__glibc" in packages and glibc is None:
        notes.append(f"__glibc {DEFAULT_GLIBC}: assumed (conda-lock's default), --glibc sets it")
    if "__osx" in packages:
        notes.append(f"__osx {DEFAULT_MACOS}: assumed")
    return notes


def render_virtual_packages(
    catalog: Catalog,
    decision: Decision,
    platforms: Sequence[tuple[str, Mapping[str, str], Sequence[str]]],
) -> str:
    """The spec file: ``platforms`` is (conda subdir, virtual packages, notes) per platform."""
    extra = ["conda's virtual packages of the target: conda-lock --virtual-package-spec"]
    for _, _, notes in platforms:
        extra.extend(notes)
    lines = header_lines(catalog, decision, extra)
    lines.append("subdirs:")
    for sub, packages, _ in platforms:
        lines.append(f"  {sub}:")
        lines.append("    packages:")
        lines.extend(f'      {name}: "{value}"' for name, value in packages.items())
    return "\n".join(lines) + "\n"
