"""The output folder of a lock (`-o`, or a team's ``environments/<name>/``): one object for its
whole life: what is in it, what would change, `--check`, writing, the manifest and removals.

One link policy for everything under it: every file is read and written through
``writers/outputs`` (each path component opened with ``O_NOFOLLOW``), the recorded inputs, a
pyproject.toml to edit, report.md and the manifest included. A team lock writes in this order:
its new files (all or nothing), then the stale files that are provably its own are removed, then
the manifest, last. A run cut short in between leaves the old manifest, which still names the
files to remove; the manifest never names a file the folder does not hold as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.core.errors import UserError
from resolver.writers import check as lockcheck
from resolver.writers import lockfiles, lockformats, manifest, outputs, recorded

if TYPE_CHECKING:
    from resolver.core.documents.decision import CheckedFileJson, FileJson

_MAX_HEAD = 4 * 1024 * 1024  # the inputs line sits at the top: a lock's first 4 MiB hold it

__all__ = ["Checked", "FileStatus", "OutputFolder", "Replaced", "format_of", "owned_names"]


def owned_names() -> tuple[str, ...]:
    """The file names a team lock owns and may remove: every format's files but those it edits
    in place (a user's pyproject.toml), and report.md."""
    names = lockformats.file_names()
    return (*(n for n in names if n not in lockformats.in_place()), "report.md")


def format_of(name: str) -> str:
    """The format a written file belongs to, as `--json` names it."""
    base = name.rsplit("/", 1)[-1]
    return lockformats.owner(base) or ("report" if base == "report.md" else "other")


@dataclass(frozen=True)
class FileStatus:
    """One file of the folder after a run: written, unchanged, removed, or its check status."""

    path: Path
    name: str  # relative to the folder
    status: str
    changes: tuple[str, ...] | None = None  # --check: what changed in it
    crlf: bool = False  # --check: checked out with CRLF line endings (git's core.autocrlf)

    def to_json(self) -> FileJson:
        """As `lock --json` lists a file written, unchanged or removed."""
        return {"path": str(self.path), "format": format_of(self.name), "status": self.status}

    def check_json(self) -> CheckedFileJson:
        """As `lock --check --json` lists it: with what changed in it (nothing for a file no
        longer generated), and CRLF line endings where it has them."""
        out: CheckedFileJson = {
            "path": str(self.path),
            "format": format_of(self.name),
            "status": self.status,
            "changes": list(self.changes or ()),
        }
        if self.crlf:
            out["line_endings"] = "crlf"
        return out


@dataclass(frozen=True)
class Checked:
    """What `--check` found: each file's status, the overall outcome and what to say."""

    files: tuple[FileStatus, ...]
    ok: bool
    outcome: str  # drift | stale | database-newer | current
    changes: Any  # the inputs that changed (writers/check.py's shape)
    messages: tuple[str, ...]
    diff: str


@dataclass(frozen=True)
class Replaced:
    """What a team lock did to the folder: the files it wrote, the stale ones it removed, the
    ones it kept (not provably its own) and why."""

    files: tuple[FileStatus, ...]
    removed: tuple[Path, ...] = ()
    kept: tuple[manifest.Stale, ...] = field(default_factory=tuple)


class OutputFolder:
    """The folder a lock writes, read and written under one no-follow policy."""

    def __init__(self, directory: Path, inputs: Iterable[Path] = ()) -> None:
        self.directory = directory
        self.inputs = tuple(inputs)  # the files the lock is made from: never written over

    def read(
        self, name: str, limit: int = outputs.READ_LIMIT, what: str = "a lock file"
    ) -> str | None:
        """The text of ``name`` inside the folder (None: not there); a link, a FIFO, an
        oversized or non-UTF-8 file is one line (exit 2)."""
        return outputs.read_current(self.directory, name, limit, what)

    def recorded_inputs(self) -> tuple[str, recorded.LockInputs] | None:
        """The inputs recorded in the first of the folder's lock files that has them (where,
        inputs; a damaged record is one line); only the first ``_MAX_HEAD`` bytes of each are
        read."""
        for name in lockformats.file_names():
            try:
                head = outputs.read_head(self.directory, name, _MAX_HEAD)
                if head is None:
                    continue
                if len(head) == _MAX_HEAD:  # a character cut at the end is not damage
                    head = head[: head.rfind(b"\n") + 1]
                text = head.decode("utf-8")
            except (OSError, UnicodeDecodeError, UserError):
                continue
            record = recorded.read(name, text)
            if record is not None and isinstance(record.get("target"), dict):
                where = str(self.directory / name)
                return where, recorded.LockInputs.from_json(record, where)
        return None

    def has_lock_files(self) -> bool:
        """Whether the folder holds a file `gpuresolve lock` writes (a uv project's
        pyproject.toml counts only with gpuresolve's table in it)."""
        for name in lockformats.file_names():
            path = self.directory / name
            if name not in lockformats.in_place() and (path.exists() or path.is_symlink()):
                return True  # whatever it is: reading it says what is wrong with it
        return self.recorded_inputs() is not None  # a uv project with [tool.gpuresolve]

    def existing(self, names: Iterable[str], limit: int) -> dict[str, str]:
        """The current text of those of ``names`` that are there (files gpuresolve edits)."""
        found = {name: self.read(name, limit, "a file gpuresolve edits") for name in names}
        return {name: text for name, text in found.items() if text is not None}

    def check(self, files: Mapping[str, str], database: str | None, what: str = "") -> Checked:
        """Compare ``files`` (what a lock would write now) with the folder; writes nothing."""
        result = lockcheck.compare(self.directory, files)
        return Checked(
            files=tuple(
                FileStatus(self.directory / f.name, f.name, f.status, tuple(f.changes), f.crlf)
                for f in result.files
            ),
            ok=result.ok,
            outcome=result.outcome,
            changes=result.changes,
            messages=tuple(lockcheck.messages(result, database, what)),
            diff=result.diff,
        )

    def write(self, files: Mapping[str, str]) -> tuple[FileStatus, ...]:
        """Write every changed file of ``files``, all or nothing; each file's status."""
        changed = {n for n in files if lockfiles.diff_files(self.directory, {n: files[n]})}
        lockfiles.write_files(self.directory, dict(files), check=False, inputs=self.inputs)
        return tuple(
            FileStatus(self.directory / n, n, "written" if n in changed else "unchanged")
            for n in files
        )

    def stale(
        self, files: Mapping[str, str], spec: str | None, ours: Iterable[str]
    ) -> list[manifest.Stale]:
        """The files an earlier team lock recorded that ``files`` no longer has."""
        return manifest.stale(self.directory, dict(files), spec, ours)

    def replace(
        self,
        files: Mapping[str, str],
        spec: str | None,
        ours: Iterable[str],
        not_ours: Iterable[str] | None = None,
    ) -> Replaced:
        """A team lock's files in place of the last one's: ``files`` written (all or nothing),
        then the stale files provably ours (``ours``: the names gpuresolve owns; recorded for
        ``spec``) removed, then the manifest of what is there now, last. ``not_ours``: files
        of the user's that a format edits (a pyproject.toml), never recorded for removal."""
        ours = tuple(ours)
        not_ours = lockformats.in_place() if not_ours is None else not_ours
        recorded = manifest.recorded(self.directory)  # read before anything changes
        stale = self.stale(files, spec, ours)
        written = self.write(files)
        removed: list[Path] = []
        for item in stale:
            if item.removable:
                removed += manifest.remove(
                    self.directory, item.name, recorded[item.name], spec, ours
                )
        owned = manifest.owned(dict(files), not_ours=not_ours)
        lockfiles.write_files(
            self.directory, {manifest.MANIFEST: owned}, check=False, inputs=self.inputs
        )
        gone = tuple(
            FileStatus(self.directory / s.name, s.name, "removed") for s in stale if s.removable
        )
        return Replaced(
            files=gone + written,
            removed=tuple(removed),
            kept=tuple(s for s in stale if not s.removable),
        )
