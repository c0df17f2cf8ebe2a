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


def read(path: Path, kind: type[T]) -> T | None:
    """The cached object of type ``kind``, or None (absent, damaged, stale or foreign)."""
    try:
        with open(path, "rb") as fh:
            obj = pickle.load(fh)  # our own file, in the user's own cache directory
    except Exception:  # truncated, garbage, an old class layout, unreadable: a miss
        return None
    return obj if isinstance(obj, kind) else None


def write(path: Path, obj: object) -> None:
    """Store ``obj`` at ``path`` atomically, replacing older caches; silently skipped when the
    cache directory cannot be written."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{PREFIX}*.pickle"):
            old.unlink(missing_ok=True)
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
