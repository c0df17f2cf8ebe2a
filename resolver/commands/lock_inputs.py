"""`gpuresolve lock`'s inputs: what the files record, and `--check` re-resolving from them.

A lock records the request and options as the user gave them (so the same words re-resolve the
same way) and the target as it was resolved (so `--check` needs neither this machine's Python,
glibc nor detection). On `--check`, an option given on the command line (or through its
environment variable) overrides its recorded value, and the command says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import click

from resolver.commands.common import RequestOptions, TargetOptions
from resolver.commands.ui import echo, quiet
from resolver.core.errors import UserError, escaped, unsafe_char
from resolver.core.platforms import PythonVersion
from resolver.host.pipconfig import PipIndex
from resolver.solve import Target
from resolver.writers import recorded

# lock's own options a lock records (click parameter name -> record key)
LOCK_OPTIONS = (
    "formats",
    "hashes",
    "top_level",
    "conda_source",
    "channel",
    "env_name",
    "default_index",
)
TARGET_FLAGS = ("driver", "gpus", "no_gpu", "platform", "host_file")
MAX_READ = 4 * 1024 * 1024


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user set the option (on the command line or through its variable)."""
    source = ctx.get_parameter_source(name)
    kinds = click.core.ParameterSource
    return source in (kinds.COMMANDLINE, kinds.ENVIRONMENT)


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list, frozenset, set)):
        items = [_plain(v) for v in value]
        return sorted(items) if isinstance(value, (frozenset, set)) else items
    return value


def request_record(request: RequestOptions, built: object) -> dict[str, Any]:
    """The request as given; ``evidence`` (the documented-only default when absent) included."""
    out = {name: _plain(getattr(request, name)) for name in request._fields}
    out.setdefault("evidence", getattr(request, "evidence", getattr(built, "evidence", None)))
    if out["evidence"] is None:
        out["evidence"] = "documented"
    return out


def inputs_record(
    request: RequestOptions, built: object, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``request`` and ``files`` parts of a single lock's inputs line."""
    return {
        "request": request_record(request, built),
        "files": {k: _plain(options[k]) for k in LOCK_OPTIONS},
    }


@dataclass(frozen=True)
class Effective:
    """What this run locks with: the recorded inputs with the command line's overrides."""

    target: Target | None  # None: resolve from the options (no record, or target flags given)
    glibc: str | None
    request: RequestOptions
    lock_options: dict[str, Any]
    overrides: tuple[str, ...]  # the flags that replaced recorded values
    python: PythonVersion | None = None  # the recorded target's Python
    recorded_target: Target | None = None
    target_flags: tuple[str, ...] = ()  # target options given (they override when they differ)


def _flag(name: str) -> str:
    return {
        "with_": "--with",
        "torch_spec": "--torch",
        "env_name": "--name",
        "formats": "--format",
        "gpus": "--gpu",
        "host_file": "--host",
    }.get(name, "--" + name.replace("_", "-"))


def apply_record(
    ctx: click.Context,
    where: str,
    record: Mapping[str, Any],
    target: TargetOptions,
    request: RequestOptions,
    lock_options: dict[str, Any],
    glibc: str | None,
) -> Effective:
    """The recorded inputs, each replaced by its option when the user gave that option."""
    overrides: list[str] = []
    rec_request = record.get("request") if isinstance(record.get("request"), dict) else {}
    values: dict[str, Any] = {}
    for name in request._fields:
        known = isinstance(rec_request, dict) and name in rec_request
        value = _tuple(rec_request[name]) if known and isinstance(rec_request, dict) else None
        if given(ctx, name):
            if not known or value != getattr(request, name):
                overrides.append(_flag(name))
        elif known:
            values[name] = as_option(ctx, where, name, value)
    try:
        request = request._replace(**values)
    except (TypeError, ValueError):
        raise UserError(
            f"{where}: the recorded request is damaged; rerun `gpuresolve lock`"
        ) from None
    rec_files = record.get("files") if isinstance(record.get("files"), dict) else {}
    options = dict(lock_options)
    if isinstance(rec_files, dict) and "top_level" not in rec_files and "hashes" in rec_files:
        # recorded before full locks were the default: no hashes meant top-level pins
        rec_files = {**rec_files, "top_level": rec_files["hashes"] is False}
    for key in LOCK_OPTIONS:
        known = isinstance(rec_files, dict) and key in rec_files
        value = _tuple(rec_files[key]) if known and isinstance(rec_files, dict) else None
        if given(ctx, key):
            mine = options[key]
            same = sorted(mine) == sorted(value) if key == "formats" and value else mine == value
            if not known or not same:
                overrides.append(_flag(key))
        elif known:
            options[key] = as_option(ctx, where, key, value)
    rec_target, rec_glibc = recorded.target_from_record(record["target"], where)
    if not given(ctx, "glibc"):
        glibc = rec_glibc
    elif glibc != rec_glibc:
        overrides.append("--glibc")
    effective: Target | None = rec_target
    target_flags: tuple[str, ...] = ()
    if any(given(ctx, name) for name in TARGET_FLAGS):
        target_flags = tuple(_flag(n) for n in TARGET_FLAGS if given(ctx, n))
        effective = None
    if given(ctx, "python"):
        target_flags += ("--python",)
    return Effective(
        effective,
        glibc,
        request,
        options,
        tuple(dict.fromkeys(overrides)),
        rec_target.python,
        rec_target,
        target_flags,
    )


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def as_option(ctx: click.Context, where: str, name: str, value: Any) -> Any:
    """A recorded value validated exactly as its command-line option would be (type, choices,
    callbacks such as the URL check), with no control or bidi character; one line when not.

    A record is input like any other: an edited requirements.txt whose record carries an
    ``--extra-index-url`` line in ``pytorch_index`` must not re-derive as "current"."""
    param = next((p for p in ctx.command.params if p.name == name), None)
    if param is None or value is None:
        return value
    if isinstance(value, bool) and getattr(param, "is_flag", False):
        strings: list[Any] = []
    elif param.multiple and isinstance(value, tuple):
        strings = list(value)
    else:
        strings = [value]
    if not all(isinstance(v, str) for v in strings) or any(
        unsafe_char(v) is not None for v in strings
    ):
        raise UserError(
            f"{where}: the recorded {_flag(name)} is not one the option takes; rerun "
            "`gpuresolve lock` (or restore the file from version control)"
        )
    try:
        return param.process_value(ctx, value)
    except (click.ClickException, UserError, ValueError, TypeError) as exc:
        detail = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        raise UserError(
            f"{where}: the recorded {_flag(name)} is not valid ({' '.join(detail.split())[:160]});"
            " rerun `gpuresolve lock` (or restore the file from version control)"
        ) from None


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
