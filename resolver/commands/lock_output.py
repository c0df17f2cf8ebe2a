"""What `gpuresolve lock` says about the output folder: each file written, unchanged, removed,
or its `--check` status, on the terminal and as `--json` statuses."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from resolver.flows.output import Checked, FileStatus, OutputFolder

__all__ = ["say_checked", "say_written", "write_or_check"]


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
