"""The lock formats, listed once (``FORMATS``, in ``--format``'s order and the files' order).

Everything that names formats reads this tuple when it runs: --format's choices (commands),
the recorded formats' check (writers/recorded.py), what renders (lockfiles.render_files), how a
team writes them (flows/team.py), the files a folder owns and a file's format in ``--json``
(flows/output.py). A format is a ``LockFormatUnit`` (writers/formats/unit.py) in its module.
"""

from __future__ import annotations

from collections.abc import Iterable

from resolver.writers.formats import (
    conda_lock,
    dockerfile,
    environment,
    pylock,
    requirements,
    uvproject,
)
from resolver.writers.formats.unit import LockFormatUnit

__all__ = ["ALL", "FORMATS", "choices", "expand", "file_names", "get", "names", "owner"]

FORMATS: tuple[LockFormatUnit, ...] = (
    requirements.FORMAT,
    environment.FORMAT,
    conda_lock.FORMAT,
    pylock.FORMAT,
    uvproject.FORMAT,
    dockerfile.FORMAT,
)
ALL = "all"  # --format all: every format


def names() -> tuple[str, ...]:
    """Every format's word, in order."""
    return tuple(str(f.name) for f in FORMATS)


def choices() -> tuple[str, ...]:
    """--format's choices: every format, and ``all``."""
    return (*names(), ALL)


def help_text() -> str:
    """--format's help: each format and what it writes."""
    each = "; ".join(f"{f.name}: {f.summary}" for f in FORMATS)
    return f"{each}; repeat, or all (every one; the Dockerfile for Linux targets)."


def get(name: str) -> LockFormatUnit:
    return next(f for f in FORMATS if f.name == name)


def expand(formats: Iterable[str]) -> tuple[LockFormatUnit, ...]:
    """The formats asked for with those whose files they use, in order ("all": every one);
    ValueError naming an unknown one."""
    wanted = set(formats)
    if ALL in wanted:
        wanted = (wanted - {ALL}) | set(names())
    unknown = wanted - set(names())
    if unknown:
        raise ValueError(f"unknown format(s) {', '.join(sorted(unknown))}")
    for f in FORMATS[::-1]:  # a format uses those listed before it
        if f.name in wanted:
            wanted.update(f.uses)
    return tuple(f for f in FORMATS if f.name in wanted)


def file_names(formats: Iterable[str] = (ALL,)) -> tuple[str, ...]:
    """The files the formats write, in a stable order (by default every format's)."""
    return tuple(name for f in expand(formats) for name in f.files)


def owner(file_name: str) -> str | None:
    """The format that writes a file (by its base name); None for a file no format writes."""
    return next((str(f.name) for f in FORMATS if file_name in f.files), None)


def in_place() -> frozenset[str]:
    """Files edited in place (the user's own): never removed; their record a table of its own."""
    return frozenset(n for f in FORMATS if f.in_place for n in f.files)
