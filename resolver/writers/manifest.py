"""The record of what `gpuresolve lock SPEC` wrote into a folder, so that it removes only that.

A team lock whose spec loses a platform or a group must take the old files away, but a folder
(the default ``environments/<name>/``, or any ``-o DIR``, even a project's root) also holds files
gpuresolve never wrote: a ``backend/requirements.txt``, a ``docs/report.md``. So every team lock
leaves ``.gpuresolve-manifest.json`` beside its files, naming each one with the sha256 of what
was written. A later run removes a file only when the manifest names it, it sits inside the
folder, it is a plain file (no link) and its content is still byte-for-byte what gpuresolve
wrote; an edited one is kept and named. Nothing is searched for: no other file is looked at.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from resolver import __version__
from resolver.core.errors import UserError
from resolver.writers.atomic import atomic_write

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


def write(directory: Path, files: dict[str, str], not_ours: Iterable[str] = ()) -> None:
    """Record ``files``, less those named in ``not_ours`` (files of the user's we edit)."""
    skip = set(not_ours)
    owned = {n: t for n, t in files.items() if n.rsplit("/", 1)[-1] not in skip}
    atomic_write(directory / MANIFEST, render(owned))


def recorded(directory: Path) -> dict[str, str]:
    """The files an earlier run recorded (relative path -> sha256); {} when there is no
    manifest. A damaged one is an error: guessing could delete a user's file."""
    path = directory / MANIFEST
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MANIFEST_LIMIT + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if len(raw) > MANIFEST_LIMIT:
            raise ValueError(f"larger than {MANIFEST_LIMIT} bytes")
        doc = json.loads(raw.decode("utf-8"))
        files = doc["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("'files' is not a mapping of paths to sha256 digests")
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


def stale(directory: Path, files: dict[str, str]) -> list[Stale]:
    """What the manifest names that ``files`` no longer has, and whether each may go."""
    found: list[Stale] = []
    for name, sha in sorted(recorded(directory).items()):
        if name in files or name == MANIFEST:
            continue
        path = _inside(directory, name)
        if path is None:
            found.append(Stale(name, False, "not a path inside the folder"))
            continue
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue  # already gone
        except OSError as exc:
            found.append(Stale(name, False, f"cannot inspect it: {exc.strerror or exc}"))
            continue
        if not stat.S_ISREG(mode):
            found.append(Stale(name, False, "not a plain file"))
            continue
        try:
            current = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            found.append(Stale(name, False, f"cannot read it: {exc.strerror or exc}"))
            continue
        if current != sha:
            found.append(Stale(name, False, "edited since gpuresolve wrote it"))
            continue
        found.append(Stale(name, True))
    return found


def remove(directory: Path, name: str) -> list[Path]:
    """Delete one removable stale file and the folders it leaves empty, up to ``directory``.

    Returns what was removed; an error is one line naming the file.
    """
    path = directory / name
    try:
        path.unlink()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UserError(f"cannot remove {path}: {exc.strerror or exc}") from None
    removed = [path]
    parent = path.parent
    while parent != directory and directory in parent.parents:
        try:
            parent.rmdir()  # only when empty
        except OSError:
            break
        removed.append(parent)
        parent = parent.parent
    return removed


def _inside(directory: Path, name: str) -> Path | None:
    """``directory/name`` when ``name`` is a plain relative path that stays inside, else None."""
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or "\\" in name or any(p in ("", "..") for p in pure.parts):
        return None
    path = directory.joinpath(*pure.parts)
    try:
        if not path.parent.resolve().is_relative_to(directory.resolve()):
            return None  # a folder on the way is a link out of the folder
    except OSError:
        return None
    return path
