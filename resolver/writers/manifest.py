"""The record of what `gpuresolve lock SPEC` wrote into a folder, so that it removes only that.

A team lock whose spec loses a platform or a group must take the old files away, but a folder
(the default ``environments/<name>/``, or any ``-o DIR``, even a project's root) also holds files
gpuresolve never wrote: a ``backend/requirements.txt``, a ``docs/report.md``. So every team lock
leaves ``.gpuresolve-manifest.json`` beside its files, naming each one with the sha256 of what
was written. The manifest is only a hint of where to look (a bad merge or a malicious change
can add any name to it): a later run removes a file only when it is provably gpuresolve's: one
of the file names gpuresolve writes, at most ``group/platform/`` deep inside the folder,
reached without a link, a regular file whose ``gpuresolve-inputs`` stamp is intact (its
digest matches its body) and names this spec, and still the bytes the manifest recorded.
Anything else is kept and named. A folder is removed only when removing our file left it empty.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from resolver import __version__
from resolver.core.errors import UserError
from resolver.writers import outputs
from resolver.writers import recorded as stamps

MANIFEST = ".gpuresolve-manifest.json"
MANIFEST_LIMIT = 1024 * 1024
_NOTE = (
    "Files `gpuresolve lock` wrote into this folder, with the sha256 of each. It removes only "
    "these, and only while they are unchanged. Keep this file beside them."
)


def digest(text: str) -> str:
    """The sha256 of ``text`` as the writers put it on disk (UTF-8, ``\\n`` newlines)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render(files: dict[str, str]) -> str:
    """The manifest for ``files`` (relative path -> text): deterministic, no timestamps."""
    doc = {
        "generator": f"gpuresolve {__version__}",
        "note": _NOTE,
        "files": {name: digest(text) for name, text in sorted(files.items())},
    }
    return json.dumps(doc, indent=2) + "\n"


def owned(files: dict[str, str], not_ours: Iterable[str] = ()) -> str:
    """The manifest of ``files``, less those named in ``not_ours`` (files of the user's we
    edit); written together with the files (all or nothing)."""
    skip = set(not_ours)
    return render({n: t for n, t in files.items() if n.rsplit("/", 1)[-1] not in skip})


def recorded(directory: Path) -> dict[str, str]:
    """The files an earlier run recorded (relative path -> sha256); {} when there is no
    manifest. A damaged one is an error: guessing could delete a user's file."""
    path = directory / MANIFEST
    text = outputs.read_current(directory, MANIFEST, MANIFEST_LIMIT)
    if text is None:
        return {}
    try:
        doc = json.loads(text)
        files = doc["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("'files' is not a mapping of paths to sha256 digests")
        for name in files:
            outputs.parts(name, str(path))
    except UserError:
        raise UserError(
            f"{path}: damaged (a name that is not a file gpuresolve writes); gpuresolve removes "
            "nothing without it: restore it from version control or delete it (old files then stay)"
        ) from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise UserError(
            f"{path}: damaged ({' '.join(str(exc).split())[:120]}); gpuresolve removes nothing "
            "without it: restore it from version control or delete it (old files then stay)"
        ) from None
    return files


@dataclass(frozen=True)
class Stale:
    """A file an earlier run wrote that this run no longer writes."""

    name: str  # relative to the folder, as recorded
    removable: bool
    why_kept: str = ""


def stale(
    directory: Path, files: dict[str, str], spec: str | None, removable: Iterable[str]
) -> list[Stale]:
    """What the manifest names that ``files`` no longer has, and whether each may go.

    ``spec``: the spec file's name the stamps must record; ``removable``: the file names
    gpuresolve writes and owns (never a user's file it edits in place).
    """
    ours = frozenset(removable)
    found: list[Stale] = []
    for name, sha in sorted(recorded(directory).items()):
        if name in files or name == MANIFEST:
            continue
        why = _why_not_ours(directory, name, sha, spec, ours)
        if why is None:
            found.append(Stale(name, True))
        elif why:
            found.append(Stale(name, False, why))
    return found


def _why_not_ours(
    directory: Path, name: str, sha: str, spec: str | None, ours: frozenset[str]
) -> str | None:
    """None: provably ours; "": already gone; else why the file is kept."""
    base = outputs.parts(name)[-1]
    if base not in ours:
        return "it is not a file gpuresolve writes"
    try:
        text = outputs.read_current(directory, name)
    except UserError:
        return "it is not a regular file reached without a link inside the folder"
    if text is None:
        return ""
    if digest(text) != sha or not stamps.intact(base, text):
        return "it was edited since gpuresolve wrote it"
    stamp = stamps.read(base, text) or {}
    if stamp.get("spec") != spec:
        return "its recorded inputs are not this spec's"
    return None


def remove(
    directory: Path, name: str, sha: str, spec: str | None, ours: Iterable[str]
) -> list[Path]:
    """Delete one stale file (checked again: provably ours) and the folders on its way that it
    leaves empty, through folder descriptors (no link followed). Returns what was removed."""
    if _why_not_ours(directory, name, sha, spec, frozenset(ours)) is not None:
        return []
    *folders, base = outputs.parts(name)
    removed: list[Path] = []
    with outputs.folder(directory, tuple(folders)) as fd:
        if fd is None:
            return []
        try:
            os.unlink(base, dir_fd=fd)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UserError(f"cannot remove {directory / name}: {exc.strerror or exc}") from None
    removed.append(directory / name)
    while folders:
        last = folders.pop()
        with outputs.folder(directory, tuple(folders)) as fd:
            if fd is None:
                break
            try:
                os.rmdir(last, dir_fd=fd)  # only when empty
            except OSError:
                break
        removed.append(directory.joinpath(*folders, last))
    return removed
