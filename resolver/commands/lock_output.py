"""What `gpuresolve lock` says: about the output folder (each file written, unchanged, removed,
or its `--check` status) and about one machine's lock (its builds, or why nothing was written),
on the terminal and as `--json`; with the exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from resolver.catalog import Catalog
from resolver.commands.emit import emit_json
from resolver.commands.ui import echo
from resolver.flows.lock import Single
from resolver.flows.output import Checked, FileStatus, OutputFolder
from resolver.present import render
from resolver.writers import lockfiles

if TYPE_CHECKING:
    from resolver.core.documents.decision import (
        CheckedFileJson,
        CheckFoundJson,
        FileJson,
        LockCheckSingleDoc,
        LockSingleDoc,
    )

__all__ = [
    "FolderRun",
    "say_checked",
    "say_single",
    "say_unmet",
    "say_written",
    "write_or_check",
]


@dataclass(frozen=True)
class FolderChecked:
    """What `--check` found, as its `--json` documents carry it."""

    files: list[CheckedFileJson]
    outcome: str  # drift | stale | database-newer | current
    found: CheckFoundJson


@dataclass(frozen=True)
class FolderRun:
    """The folder written (each file's status) or checked (``checked``), and whether all is
    well."""

    ok: bool
    written: list[FileJson]
    checked: FolderChecked | None = None


def write_or_check(
    folder: OutputFolder,
    files: dict[str, str],
    check: bool,
    what: str,
    database: str | None,
    as_json: bool = False,
) -> FolderRun:
    """Write the files (saying which changed), or with --check compare them and say why."""
    if check:
        found = folder.check(files, database, what)
        say_checked(found, folder.directory, len(files), as_json)
        code = 0 if found.ok else 1
        said: CheckFoundJson = {
            "changes": found.changes,
            "messages": list(found.messages),
            "exit": code,
        }
        checked = FolderChecked([f.check_json() for f in found.files], found.outcome, said)
        return FolderRun(found.ok, [], checked)
    written = folder.write(files)
    say_written(written, as_json)
    return FolderRun(True, [f.to_json() for f in written])


def say_checked(found: Checked, directory: Path, count: int, as_json: bool) -> None:
    if found.diff and not as_json:
        echo(found.diff, nl=False)
    for line in found.messages:
        echo(f"gpuresolve: {line}", err=True)
    if found.ok and not as_json:
        echo(f"all current: {count} file(s) in {directory}")


def say_written(files: Sequence[FileStatus], as_json: bool) -> None:
    for f in files if not as_json else ():
        echo(f"{'wrote' if f.status == 'written' else f.status} {f.path}")


def say_unmet(
    catalog: Catalog, single: Single, options: lockfiles.LockOptions, as_json: bool
) -> NoReturn:
    """Nothing written: the decision that selected nothing; exit 1."""
    unmet = single.unmet
    assert unmet is not None
    if as_json:
        doc: LockSingleDoc = {
            "ok": False,
            "files": [],
            "decision": render.decision_json(catalog, unmet, options.pytorch_index),
        }
        emit_json(doc)
        sys.exit(1)
    if unmet is single.lock_input.conda_decision:
        echo("conda-forge has no build that runs on this target (nothing written)")
    else:
        echo("nothing written:")
    echo(render.decision_text(catalog, unmet, options.pytorch_index))
    sys.exit(1)


def say_single(
    catalog: Catalog,
    single: Single,
    options: lockfiles.LockOptions,
    run: FolderRun,
    check: bool,
    as_json: bool,
) -> NoReturn:
    """One machine's lock written or checked: the builds, or the `--json` document; exits."""
    ok, checked = run.ok, run.checked
    lock_input, index = single.lock_input, options.pytorch_index
    sel = lock_input.decision.selection
    if as_json and checked is not None:  # what changed, not the decision with every reject
        build = render.candidate_json(catalog, sel, index) if sel else None
        check_doc: LockCheckSingleDoc = {
            "ok": ok,
            "check": checked.outcome,
            "files": checked.files,
            **checked.found,
            "build": build,
        }
        emit_json(check_doc)
        sys.exit(0 if ok else 1)
    if as_json:
        conda = lock_input.conda_decision
        doc: LockSingleDoc = {
            "ok": ok,
            "check": None,
            "files": run.written,
            "decision": render.decision_json(catalog, lock_input.decision, index),
            "conda_decision": (
                render.decision_json(catalog, conda, index) if conda is not None else None
            ),
        }
        emit_json(doc)
        sys.exit(0 if ok else 1)
    if check:
        sys.exit(0 if ok else 1)
    if sel is not None and options.needs_wheels:
        echo(f"build: {render.describe_build(sel)}")
    conda_sel = lock_input.conda_decision.selection if lock_input.conda_decision else None
    if conda_sel is not None:
        echo(f"conda-forge build: {render.describe_build(conda_sel)}")
    sys.exit(0)
