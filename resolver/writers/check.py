"""`gpuresolve lock --check`: compare what would be written with what is there, and say why.

Three outcomes, so CI fails only for a reason a person must act on:
- **drift**: a file was edited (its recorded digest no longer matches) or is missing: exit 1;
- **stale**: the files are as gpuresolve wrote them, but their inputs now resolve to other pins
  (a newer torch, another closure): exit 1, rerun `gpuresolve lock`;
- **database newer only**: the pins are the same and only comments differ (the database's date,
  its wording): exit 0 with a note. The database date never fails an identical pin set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from packaging.version import Version

from resolver.core.errors import escaped
from resolver.core.secrets import redact
from resolver.writers import recorded
from resolver.writers.outputs import diff_text, read_current

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
    changes: tuple[str, ...] = ()  # what differs between the recorded inputs and today's
    new_database: str | None = None
    crlf: bool = False  # checked out with CRLF line endings (git core.autocrlf): compared as LF


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

    @property
    def changes(self) -> list[str]:
        """What changed since the files were written, once each (a team's spec names its
        target; the platform files' union target is not named again)."""
        found = list(dict.fromkeys(c for f in self.files for c in f.changes))
        if any(c.startswith("spec ") for c in found):
            found = [c for c in found if not c.startswith("the target")]
        return found


def _build_line(text: str) -> str | None:
    for line in text.splitlines()[:40]:
        if line.startswith("# build: "):
            return line.removeprefix("# build: ").strip()
    return None


def compare(directory: Path, files: Mapping[str, str]) -> CheckResult:
    """Each file's status against ``files`` (what `gpuresolve lock` would write now)."""
    checks: list[FileCheck] = []
    diff: list[str] = []
    for name, text in files.items():
        old = read_current(directory, name)
        if old is None:
            checks.append(FileCheck(name, MISSING))
            diff.append(diff_text(name, None, text))
            continue
        # git's core.autocrlf (Windows) checks a lock out with CRLF: the same lines, said once.
        lf = old.replace("\r\n", "\n")
        crlf, old = lf != old, lf
        if old == text:
            checks.append(FileCheck(name, CURRENT, crlf=crlf))
            continue
        record = recorded.read(name, old) or {}
        database = record.get("database")
        old_db = _shown(database) if database else None
        if not recorded.intact(name, old):
            checks.append(
                FileCheck(name, DRIFT, old_database=old_db, unrecorded=not record, crlf=crlf)
            )
            diff.append(diff_text(name, old, text))
            continue
        now = recorded.read(name, text) or {}
        new_db = _shown(now["database"]) if now.get("database") else None
        changes = tuple(input_changes(record, now))
        if recorded.payload(old, name) == recorded.payload(text, name):
            checks.append(
                FileCheck(name, COMMENTS, None, None, old_db, False, changes, new_db, crlf)
            )
        else:
            checks.append(
                FileCheck(
                    name,
                    STALE,
                    _build_line(old),
                    _build_line(text),
                    old_db,
                    False,
                    changes,
                    new_db,
                    crlf,
                )
            )
            diff.append(diff_text(name, old, text))
    return CheckResult(tuple(checks), "".join(diff))


def _shown(value: object) -> str:
    """A recorded value as one short line for the terminal (escaped by the one rule)."""
    if value is None:
        return "none"
    text = redact(value if isinstance(value, str) else json.dumps(value, sort_keys=True))
    text = escaped(text)
    return text if len(text) <= 120 else text[:117] + "..."


_SPEC_KEYS = {"torch": "packages.torch", "with": "packages.with", "pip": "packages.pip"}
# recorded option keys -> the option that sets them
_FLAGS = {"torch_spec": "--torch", "with_": "--with", "env_name": "--name", "formats": "--format"}


def input_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between the inputs a file records and the inputs it would record now, each
    said as the user would change it: the spec's target and field, the split option, a request
    option, the target, the database."""
    out: list[str] = []
    spec = _shown(new.get("spec") or old.get("spec") or "")
    if old.get("split") != new.get("split") and "split" in old and "split" in new:
        out.append(
            f"the split option changed: the files were written with split: "
            f"{_shown(old['split'])}, this run uses split: {_shown(new['split'])} "
            "(--split/--no-split or the spec's split:)"
        )
    if old.get("python") != new.get("python") and "python" in old and "python" in new:
        out.append(
            f"spec {spec}: python changed from {_shown(old['python'])} to {_shown(new['python'])}"
        )
    for part in ("request", "files"):
        before, after = old.get(part), new.get(part)
        if not isinstance(before, dict) or not isinstance(after, dict):
            continue
        for key in sorted(set(before) | set(after), key=str):
            if before.get(key) != after.get(key):
                if spec and part == "request":
                    label = f"spec {spec}: {_SPEC_KEYS.get(key, key)}"
                else:
                    label = _FLAGS.get(key, "--" + str(key).replace("_", "-"))
                out.append(
                    f"{label} changed from {_shown(before.get(key))} to {_shown(after.get(key))}"
                )
    before, after = old.get("targets"), new.get("targets")
    if isinstance(before, dict) and isinstance(after, dict):
        for name in sorted(set(before) | set(after), key=str):
            what = f"spec {spec}: target {_shown(name)}"
            if name not in before:
                out.append(f"{what} was added")
            elif name not in after:
                out.append(f"{what} was removed")
            elif before[name] != after[name]:
                out.extend(_fields(what, before[name], after[name]))
    before, after = old.get("target"), new.get("target")
    if isinstance(before, dict) and isinstance(after, dict) and before != after:
        out.extend(_fields("the target", before, after))
    if old.get("database") != new.get("database") and old.get("database") and new.get("database"):
        out.append(
            f"the database changed: the files record the database of "
            f"{_shown(old['database'])}, this one is {_shown(new['database'])}"
        )
    return out


def _fields(what: str, before: object, after: object) -> list[str]:
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [f"{what} changed"]
    return [
        f"{what}: {_shown(key)} changed from {_shown(before.get(key, 'none'))} to "
        f"{_shown(after.get(key, 'none'))}"
        for key in sorted(set(before) | set(after), key=str)
        if before.get(key) != after.get(key)
    ]


def _torch(build: str | None) -> Version | None:
    """The torch version of a "build:" line ("torch 2.8.0 + CUDA 12.6 (...)")."""
    if not build or not build.startswith("torch "):
        return None
    try:
        return Version(build.split()[1])
    except (IndexError, ValueError):  # InvalidVersion, or digits past the limit
        return None


def messages(result: CheckResult, database: str | None, what: str = "") -> list[str]:
    """The lines that say what --check found (for stderr), most important first."""
    out: list[str] = []
    by = {s: [f for f in result.files if f.status == s] for s in (MISSING, DRIFT, STALE, COMMENTS)}
    crlf = [f.name for f in result.files if f.crlf]
    if crlf:
        out.append(
            f"note: the line endings differ{what}: {', '.join(crlf)} "
            f"{'has' if len(crlf) == 1 else 'have'} CRLF line endings (git core.autocrlf?), "
            "gpuresolve writes LF; compared line by line"
        )
    changes = result.changes
    # Besides the database, did an input change? Then the input, not the database, is the cause.
    inputs_changed = [c for c in changes if not c.startswith("the database changed")]
    if inputs_changed or by[STALE]:
        out.extend(f"changed since the files{what} were written: {c}" for c in changes)
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
    if inputs_changed:
        cause = "the changed inputs"
    elif changes:
        cause = "the recorded inputs, with the newer database,"
    else:
        dates = sorted({f.old_database for f in by[STALE] if f.old_database})
        same = f" of the same date ({dates[-1]})" if dates else ""
        cause = f"the recorded inputs, with a database{same} whose facts or rules changed,"
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
                f"{cause} now resolve to {f.new_build} (the files pin "
                f"{f.old_build}); rerun `gpuresolve lock`"
            )
        elif f.new_build is not None:
            out.append(
                f"{cause} now resolve to other pins for {f.new_build} "
                "(the closure changed); rerun `gpuresolve lock`"
            )
        else:  # report.md: no build line of its own, its decision changed
            out.append(f"{cause} now give another {f.name}; rerun `gpuresolve lock`")
    newer = sorted({f.old_database for f in by[STALE] if f.old_database})
    if database and any(d > database for d in newer):
        out.append(
            f"the files were made with the database of {newer[-1]}, newer than this one "
            f"({database}): run `gpuresolve db update` first"
        )
    if by[COMMENTS] and not (by[MISSING] or by[DRIFT] or by[STALE]):
        dates = sorted({f.old_database for f in by[COMMENTS] if f.old_database})
        if inputs_changed:
            why = "only the recorded inputs differ (see above)"
        elif dates and database and dates[-1] != database:
            why = (
                f"only the comments differ (the files record the database of {dates[-1]}, "
                f"this one is {database})"
            )
        else:
            why = "only the comments differ (gpuresolve's wording)"
        out.append(
            f"note: the same pins{what}; {why}; `gpuresolve lock` refreshes them, nothing needs "
            "to change"
        )
    return out
