"""What `gpuresolve lock` says: about the output folder (each file written, unchanged, removed,
or its `--check` status) and about one machine's lock (its builds, or why nothing was written),
on the terminal and as `--json`; with the exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from resolver import render
from resolver.catalog import Catalog
from resolver.commands.common import emit_json
from resolver.flows.lock import Single
from resolver.flows.output import Checked, FileStatus, OutputFolder
from resolver.writers import lockfiles

__all__ = ["say_checked", "say_single", "say_unmet", "say_written", "write_or_check"]


def write_or_check(
    folder: OutputFolder,
    files: dict[str, str],
    check: bool,
    what: str,
    database: str | None,
    as_json: bool = False,
) -> tuple[list[dict[str, Any]], bool, str | None, dict[str, Any]]:
    """Write the files (saying which changed), or with --check compare them and say why.

    Returns each file's status as --json shows it (written/unchanged, or with --check its check
    status and changes), whether all is well, --check's outcome (drift | stale | database-newer
    | current) and what --check found for --json (changes, messages, exit).
    """
    if check:
        found = folder.check(files, database, what)
        say_checked(found, folder.directory, len(files), as_json)
        messages, code = list(found.messages), 0 if found.ok else 1
        extra = {"changes": found.changes, "messages": messages, "exit": code}
        return [f.to_json() for f in found.files], found.ok, found.outcome, extra
    written = folder.write(files)
    say_written(written, as_json)
    return [f.to_json() for f in written], True, None, {}


def say_checked(found: Checked, directory: Path, count: int, as_json: bool) -> None:
    if found.diff and not as_json:
        sys.stdout.write(found.diff)
    for line in found.messages:
        click.echo(f"gpuresolve: {line}", err=True)
    if found.ok and not as_json:
        click.echo(f"all current: {count} file(s) in {directory}")


def say_written(files: Sequence[FileStatus], as_json: bool) -> None:
    for f in files if not as_json else ():
        click.echo(f"{'wrote' if f.status == 'written' else f.status} {f.path}")


def say_unmet(
    catalog: Catalog, single: Single, options: lockfiles.LockOptions, as_json: bool
) -> NoReturn:
    """Nothing written: the decision that selected nothing; exit 1."""
    unmet = single.unmet
    assert unmet is not None
    if as_json:
        decision = render.decision_json(catalog, unmet, options.pytorch_index)
        emit_json({"ok": False, "files": [], "decision": decision})
        sys.exit(1)
    if unmet is single.lock_input.conda_decision:
        click.echo("conda-forge has no build that runs on this target (nothing written)")
    else:
        click.echo("nothing written:")
    click.echo(render.decision_text(catalog, unmet, options.pytorch_index))
    sys.exit(1)


def say_single(
    catalog: Catalog,
    single: Single,
    options: lockfiles.LockOptions,
    statuses: tuple[list[dict[str, Any]], bool, str | None, dict[str, Any]],
    check: bool,
    as_json: bool,
) -> NoReturn:
    """One machine's lock written or checked: the builds, or the `--json` document; exits."""
    files, ok, outcome, found = statuses
    lock_input, index = single.lock_input, options.pytorch_index
    sel = lock_input.decision.selection
    if as_json and check:  # what changed, not the whole decision with every rejected build
        build = render.candidate_json(catalog, sel, index) if sel else None
        emit_json({"ok": ok, "check": outcome, "files": files, **found, "build": build})
        sys.exit(0 if ok else 1)
    if as_json:
        conda = lock_input.conda_decision
        emit_json(
            {
                "ok": ok,
                "check": outcome,
                "files": files,
                "decision": render.decision_json(catalog, lock_input.decision, index),
                "conda_decision": (
                    render.decision_json(catalog, conda, index) if conda is not None else None
                ),
            }
        )
        sys.exit(0 if ok else 1)
    if check:
        sys.exit(0 if ok else 1)
    if sel is not None and options.needs_wheels:
        click.echo(f"build: {render.describe_build(sel)}")
    conda_sel = lock_input.conda_decision.selection if lock_input.conda_decision else None
    if conda_sel is not None:
        click.echo(f"conda-forge build: {render.describe_build(conda_sel)}")
    sys.exit(0)
