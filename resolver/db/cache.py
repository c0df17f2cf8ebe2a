"""The catalog cache: the parsed YAML as JSON, a miss and never an error.

Parsing the YAML costs more than the rest of `suggest` together, so the database's raw parsed
data is stored as JSON in the user's cache directory and, on the next run, goes through the same
validation (`from_raw`) as the YAML itself. The cache folder may be shared (a CI cache), so its
files are input: JSON cannot run code (pickle could, and marshal is documented as unsafe for
untrusted data), only plain JSON values are accepted, links and non-regular files are refused,
and any trouble (a damaged or foreign file, a read-only or missing directory, a full disk) only
means parsing again, silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

PREFIX = "catalog-"  # every file this module writes starts so (`db reset` removes them)
SUFFIX = ".json"
KEEP = 4  # caches kept besides the newest: two installed gpuresolves (pipx, a venv) or a user
# database and the shipped one each keep theirs instead of evicting each other on every run
MAX_BYTES = 32 * 1024 * 1024  # the shipped database's cache is about 0.2 MB
MAX_DEPTH = 32  # the database's YAML nests under 10 levels


def read(path: Path) -> dict[str, Any] | None:
    """The cached mapping at ``path``, or None (absent, damaged, linked, oversized or foreign)."""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return None
        obj = json.loads(data)
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8 or not JSON: a miss
        return None
    finally:
        os.close(fd)
    return obj if isinstance(obj, dict) and _plain(obj, 0) else None


def _plain(obj: object, depth: int) -> bool:
    """Whether ``obj`` nests at most ``MAX_DEPTH - depth`` levels of containers.

    `json.loads` returns only JSON values (str keys, str/int/float/bool/None leaves), so depth
    is all that is left to check; level by level, looking at containers only (a fifth of the
    time of visiting every value: this runs on every start)."""
    level = [obj]
    for _ in range(MAX_DEPTH - depth + 1):
        deeper: list[object] = []
        for node in level:
            values = node.values() if type(node) is dict else node if type(node) is list else ()
            deeper.extend(v for v in values if type(v) is dict or type(v) is list)
        if not deeper:
            return True
        level = deeper
    return False


def write(path: Path, obj: dict[str, Any]) -> None:
    """Store ``obj`` at ``path`` atomically, keeping the ``KEEP`` most recently written other
    caches; silently skipped when the cache directory cannot be written."""
    import tempfile  # only to write: it imports shutil, random and lzma, a cost on every start

    tmp: str | None = None
    try:
        data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        _evict(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=PREFIX, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        tmp = None
    except (OSError, TypeError, ValueError, RecursionError):
        pass  # a read-only home, a full disk or data JSON cannot hold: go on without a cache
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _evict(keep_free_for: Path) -> None:
    """Remove all but the ``KEEP`` most recently written caches other than ``keep_free_for``
    (regular files with our prefix and suffix only, never through a link)."""
    others: list[tuple[float, Path]] = []
    for old in keep_free_for.parent.glob(f"{PREFIX}*{SUFFIX}"):
        if old == keep_free_for:
            continue
        with contextlib.suppress(OSError):
            st = old.lstat()
            if stat.S_ISREG(st.st_mode):
                others.append((st.st_mtime, old))
    others.sort(reverse=True)
    for _mtime, old in others[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
