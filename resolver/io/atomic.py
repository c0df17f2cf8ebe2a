"""Write one file atomically (a temporary file beside it and a rename), keeping its mode.

The output folder's lock files go through ``writers.outputs`` (no links, all or nothing)."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

_UMASK_LOCK = threading.Lock()


def umask_mode(base: int) -> int:
    """``base`` (0o666 for a file, 0o777 for a directory) less the process umask.

    What ``open()`` or ``mkdir`` would give a new file; ``tempfile`` gives 0600/0700 instead,
    which a rename would otherwise carry over to the lock files. The umask can only be read by
    setting it, so it is restored at once (under a lock, against another thread doing the same).
    """
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return base & ~mask


def replacement_mode(path: Path, base: int = 0o666) -> int:
    """The mode for what replaces ``path``: the existing file's, else ``umask_mode(base)``."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return umask_mode(base)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    A reader sees the old file or the new one, never half of one; an interrupted write leaves
    no temporary file behind. Newlines are written as ``\\n`` on every platform. The file keeps
    the mode of the one it replaces (a new one gets the umask's), not the temporary file's 0600.
    """
    mode = replacement_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.chmod(tmp, mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
