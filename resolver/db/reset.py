"""`gpuresolve db reset`: remove the user database and the catalog cache, and nothing else.

Only names that gpuresolve writes are removed: the database files `db update` writes
(location.DB_FILES), the temporary siblings of an interrupted update (``.data.new-*``,
``.data.old-*``), and the cache's ``catalog-*`` files. Anything else found there is named and
left in place, and a directory is removed only once it is empty.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from resolver.db import cache as _cache
from resolver.db import location

if TYPE_CHECKING:
    from resolver.core.documents.reports import DbResetDoc


@dataclass
class ResetPlan:
    data_dir: Path
    cache_dir: Path | None
    remove: list[Path] = field(default_factory=list)  # files and gpuresolve's own temp dirs
    remove_dirs: list[Path] = field(default_factory=list)  # removed when empty afterwards
    keep: list[Path] = field(default_factory=list)  # not gpuresolve's: left in place

    def to_json(self, *, dry_run: bool, failed: list[str]) -> DbResetDoc:
        return {
            "data_dir": str(self.data_dir),
            "cache_dir": str(self.cache_dir) if self.cache_dir else None,
            "dry_run": dry_run,
            "removed": [str(p) for p in self.remove],
            "kept": [str(p) for p in self.keep],
            "failed": failed,
        }


def _entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []


def plan(data_dir: Path | None = None, cache_dir: Path | None = None) -> ResetPlan:
    """What a reset removes (raises OSError when a directory cannot be listed)."""
    data = data_dir or location.user_data_dir()
    try:
        cache = cache_dir or location.cache_dir()
    except RuntimeError:
        cache = None
    out = ResetPlan(data, cache)
    if os.path.lexists(data) and not data.is_dir():
        out.keep.append(data)  # a file where the database should be: not ours to guess at
    for entry in _entries(data):
        if entry.name in location.DB_FILES and (entry.is_symlink() or not entry.is_dir()):
            out.remove.append(entry)
        else:
            out.keep.append(entry)
    if data.is_dir():
        out.remove_dirs.append(data)
    for entry in _entries(data.parent):  # an update interrupted between its renames
        if entry.name.startswith((f".{data.name}.new-", f".{data.name}.old-")):
            out.remove.append(entry)
    if cache is not None:
        for entry in _entries(cache):
            if entry.name.startswith(_cache.PREFIX) and entry.suffix in (
                ".json",
                ".pickle",
                ".tmp",
            ):
                out.remove.append(entry)
    return out


def apply(p: ResetPlan) -> list[str]:
    """Remove what ``p`` lists; returns one message per path that could not be removed."""
    failed: list[str] = []
    for path in p.remove:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            failed.append(f"{path}: {exc.strerror or exc}")
    for directory in p.remove_dirs:
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            if not p.keep and not failed:  # something appeared since the plan was made
                failed.append(f"{directory}: not empty")
    return failed
