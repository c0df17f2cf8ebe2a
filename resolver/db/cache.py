"""The pickled catalog cache: a miss, never an error.

Parsing the YAML costs more than the rest of `suggest` together, so the validated catalog is
pickled into the user's cache directory. Any trouble with it (a damaged or foreign file, a
read-only or missing directory, a full disk) only means parsing again.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PREFIX = "catalog-"  # every file this module writes starts so (`db reset` removes them)
KEEP = 4  # caches kept besides the newest: two installed gpuresolves (pipx, a venv) or a user
# database and the shipped one each keep theirs instead of evicting each other on every run


def read(path: Path, kind: type[T]) -> T | None:
    """The cached object of type ``kind``, or None (absent, damaged, stale or foreign)."""
    try:
        with open(path, "rb") as fh:
            obj = pickle.load(fh)  # our own file, in the user's own cache directory
    except Exception:  # truncated, garbage, an old class layout, unreadable: a miss
        return None
    return obj if isinstance(obj, kind) else None


def write(path: Path, obj: object) -> None:
    """Store ``obj`` at ``path`` atomically, keeping the ``KEEP`` most recently written other
    caches; silently skipped when the cache directory cannot be written."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _evict(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=PREFIX, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        tmp = None
    except (OSError, pickle.PicklingError, RecursionError):
        pass  # a read-only home or a full disk: go on without a cache
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _evict(keep_free_for: Path) -> None:
    """Remove all but the ``KEEP`` most recently written caches other than ``keep_free_for``."""
    others: list[tuple[float, Path]] = []
    for old in keep_free_for.parent.glob(f"{PREFIX}*.pickle"):
        if old == keep_free_for:
            continue
        with contextlib.suppress(OSError):
            others.append((old.stat().st_mtime, old))
    others.sort(reverse=True)
    for _mtime, old in others[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
