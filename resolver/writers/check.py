"""`gpuresolve lock --check`: compare what would be written with what is there, and say why.

Three outcomes, so CI fails only for a reason a person must act on:
- **drift**: a file was edited (its recorded digest no longer matches) or is missing: exit 1;
- **stale**: the files are as gpuresolve wrote them, but their inputs now resolve to other pins
  (a newer torch, another closure): exit 1, rerun `gpuresolve lock`;
- **database newer only**: the pins are the same and only comments differ (the database's date,
  its wording): exit 0 with a note. The database date never fails an identical pin set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from packaging.version import InvalidVersion, Version

from resolver.writers import recorded
from resolver.writers.outputs import diff_files, read_current

FileStatus = Literal["current", "missing", "drift", "stale", "comments"]
CURRENT: Final = "current"
MISSING: Final = "missing"
DRIFT: Final = "drift"
STALE: Final = "stale"
COMMENTS: Final = "comments"


@dataclass(frozen=True)
class FileCheck:
    name: str
    status: FileStatus
    old_build: str | None = None  # the "build:" line on disk, and the one now
    new_build: str | None = None
    old_database: str | None = None
    unrecorded: bool = False  # no inputs line at all (an older gpuresolve, or not ours)


@dataclass(frozen=True)
class CheckResult:
    files: tuple[FileCheck, ...]
    diff: str  # from what is on disk to what would be written (drifted and stale files)

    @property
    def outcome(self) -> str:
        """drift | stale | database-newer | current (the worst file decides)."""
        statuses = {f.status for f in self.files}
        if statuses & {DRIFT, MISSING}:
            return "drift"
        if STALE in statuses:
            return "stale"
        if COMMENTS in statuses:
            return "database-newer"
        return "current"

    @property
    def ok(self) -> bool:
        return self.outcome in ("current", "database-newer")


def _build_line(text: str) -> str | None:
    for line in text.splitlines()[:40]:
        if line.startswith("# build: "):
            return line.removeprefix("# build: ").strip()
    return None


def compare(directory: Path, files: Mapping[str, str]) -> CheckResult:
    """Each file's status against ``files`` (what `gpuresolve lock` would write now)."""
    checks: list[FileCheck] = []
    shown: dict[str, str] = {}
    for name, text in files.items():
        old = read_current(directory, name)
        if old is None:
            checks.append(FileCheck(name, MISSING))
            shown[name] = text
            continue
        if old == text:
            checks.append(FileCheck(name, CURRENT))
            continue
        record = recorded.read(name, old) or {}
        database = record.get("database")
        old_db = str(database) if database else None
        if not recorded.intact(name, old):
            checks.append(FileCheck(name, DRIFT, old_database=old_db, unrecorded=not record))
            shown[name] = text
        elif recorded.payload(old) == recorded.payload(text):
            checks.append(FileCheck(name, COMMENTS, old_database=old_db))
        else:
            checks.append(
                FileCheck(name, STALE, _build_line(old), _build_line(text), old_database=old_db)
            )
            shown[name] = text
    return CheckResult(tuple(checks), diff_files(directory, shown))


def _torch(build: str | None) -> Version | None:
    """The torch version of a "build:" line ("torch 2.8.0 + CUDA 12.6 (...)")."""
    if not build or not build.startswith("torch "):
        return None
    try:
        return Version(build.split()[1])
    except (IndexError, InvalidVersion):
        return None


def messages(result: CheckResult, database: str | None, what: str = "") -> list[str]:
    """The lines that say what --check found (for stderr), most important first."""
    out: list[str] = []
    by = {s: [f for f in result.files if f.status == s] for s in (MISSING, DRIFT, STALE, COMMENTS)}
    differ = [f.name for f in result.files if f.status in (MISSING, DRIFT, STALE)]
    if differ:
        out.append(
            f"{len(differ)} file(s){what} differ from what `gpuresolve lock` writes: "
            + ", ".join(differ)
        )
    if by[MISSING]:
        out.append(f"missing{what}: " + ", ".join(f.name for f in by[MISSING]))
    edited = [f.name for f in by[DRIFT] if not f.unrecorded]
    if edited:
        out.append(
            f"edited since gpuresolve wrote it{what} (drift): "
            + ", ".join(edited)
            + "; the diff above restores it"
        )
    unrecorded = [f.name for f in by[DRIFT] if f.unrecorded]
    if unrecorded:
        out.append(
            f"no recorded inputs{what} (written by an older gpuresolve, or by hand): "
            + ", ".join(unrecorded)
            + "; `gpuresolve lock` rewrites them"
        )
    seen: set[tuple[str | None, str | None]] = set()
    for f in by[STALE]:
        if (f.old_build, f.new_build) in seen:
            continue
        seen.add((f.old_build, f.new_build))
        old, new = _torch(f.old_build), _torch(f.new_build)
        if old is not None and new is not None and new > old:
            out.append(
                f"torch {new} is now available for this target (the files pin torch {old}); "
                "rerun `gpuresolve lock`"
            )
        elif f.old_build != f.new_build:
            out.append(
                f"the recorded inputs now resolve to {f.new_build} (the files pin "
                f"{f.old_build}); rerun `gpuresolve lock`"
            )
        elif f.new_build is not None:
            out.append(
                f"the recorded inputs now resolve to other pins for {f.new_build} "
                "(the closure changed); rerun `gpuresolve lock`"
            )
        else:  # report.md: no build line of its own, its decision changed
            out.append(
                f"the recorded inputs now give another {f.name} (the ranking or its evidence "
                "changed); rerun `gpuresolve lock`"
            )
    newer = sorted({f.old_database for f in by[STALE] if f.old_database})
    if database and any(d > database for d in newer):
        out.append(
            f"the files were made with the database of {newer[-1]}, newer than this one "
            f"({database}): run `gpuresolve db update` first"
        )
    if by[COMMENTS] and not (by[MISSING] or by[DRIFT] or by[STALE]):
        dates = sorted({f.old_database for f in by[COMMENTS] if f.old_database})
        since = f" of {dates[-1]}" if dates else ""
        out.append(
            f"note: the same pins{what}; only the comments differ (the files record the "
            f"database{since}, this one is {database or 'undated'}); `gpuresolve lock` "
            "refreshes them, nothing needs to change"
        )
    return out
