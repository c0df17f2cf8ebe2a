"""`gpuresolve lock`'s inputs: what the files record, and `--check` re-resolving from them.

A lock records the request and options as the user gave them (so the same words re-resolve the
same way) and the target as it was resolved (so `--check` needs neither this machine's Python,
glibc nor detection). On `--check`, an option given on the command line (or through its
environment variable) overrides its recorded value, and the command says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import click

from resolver.commands.common import RequestOptions, TargetOptions
from resolver.commands.ui import echo, quiet
from resolver.core.errors import escaped
from resolver.core.platforms import PythonVersion
from resolver.host.pipconfig import PipIndex
from resolver.solve import Target
from resolver.writers.recorded import FILE_KEYS, FileOptions, LockInputs, LockRequest, flag

TARGET_FLAGS = ("driver", "gpus", "no_gpu", "platform", "host_file")


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user set the option (on the command line or through its variable)."""
    source = ctx.get_parameter_source(name)
    kinds = click.core.ParameterSource
    return source in (kinds.COMMANDLINE, kinds.ENVIRONMENT)


def as_given(request: RequestOptions, files: FileOptions) -> LockInputs:
    """This run's request and file options as a lock records them."""
    return LockInputs(LockRequest(**request._asdict()), files)


@dataclass(frozen=True)
class Effective:
    """What this run locks with: the recorded inputs with the command line's overrides."""

    target: Target | None  # None: resolve from the options (no record, or target flags given)
    glibc: str | None
    request: RequestOptions
    files: FileOptions
    overrides: tuple[str, ...]  # the flags that replaced recorded values
    python: PythonVersion | None = None  # the recorded target's Python
    recorded_target: Target | None = None
    target_flags: tuple[str, ...] = ()  # target options given (they override when they differ)


def apply_record(
    ctx: click.Context,
    record: LockInputs,
    target: TargetOptions,
    request: RequestOptions,
    files: FileOptions,
    glibc: str | None,
) -> Effective:
    """The recorded inputs, each replaced by its option when the user gave that option."""
    overrides: list[str] = []

    def merged(part: str, mine: Any, theirs: Any) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in mine._fields if part == "request" else FILE_KEYS:
            known = theirs is not None and record.knows(part, name)
            value = getattr(theirs, name) if known else None
            if given(ctx, name):
                ours = getattr(mine, name)
                same = (
                    sorted(ours) == sorted(value) if name == "formats" and value else ours == value
                )
                if not known or not same:
                    overrides.append(flag(name))
            elif known:
                values[name] = value
        return values

    request = request._replace(**merged("request", request, record.request))
    files = replace(files, **merged("files", files, record.files))
    rec_target = record.target
    assert rec_target is not None  # flows.output reads only records with a target
    if not given(ctx, "glibc"):
        glibc = record.glibc
    elif glibc != record.glibc:
        overrides.append("--glibc")
    effective: Target | None = rec_target
    target_flags: tuple[str, ...] = ()
    if any(given(ctx, name) for name in TARGET_FLAGS):
        target_flags = tuple(flag(n) for n in TARGET_FLAGS if given(ctx, n))
        effective = None
    if given(ctx, "python"):
        target_flags += ("--python",)
    return Effective(
        effective,
        glibc,
        request,
        files,
        tuple(dict.fromkeys(overrides)),
        rec_target.python,
        rec_target,
        target_flags,
    )


def same_target(a: Target, b: Target) -> bool:
    """Whether two targets lock alike (their labels aside)."""
    return replace(a, name=None) == replace(b, name=None)


def say_index(found: PipIndex, *, verbose: bool, used: bool) -> None:
    """stderr: with -v, the index and its source, and what of the environment uv gets; where
    the lock uses the default index, a note that pip's extra indexes and find-links are not."""
    from resolver.io.childenv import described
    from resolver.io.credentials import shown

    if verbose:
        where = (
            f"{shown(found.url)} (from {escaped(found.source)})"
            if found.url
            else "the installer's own default index (none is set by --default-index, "
            "GPURESOLVE_DEFAULT_INDEX or pip's configuration)"
        )
        echo(f"gpuresolve: packages outside the PyTorch index: {where}", err=True)
        echo(f"gpuresolve: {described()}", err=True)
    if found.ignored and (used or verbose) and not quiet():
        echo(
            f"gpuresolve: note: pip's {' and '.join(found.ignored)} are not carried into a lock "
            "(a lock names every index it uses)",
            err=True,
        )
