"""One writer at a time for a shared store: an advisory lock held while the store is read,
merged and written back.

Two `verify` runs sharing a HOME, or eight `db import`s, each read the observations, add
theirs and write the file back: without a lock, the last rename wins and the others' entries
are lost while each says "ok". Holding this lock from the read to the rename makes every
read-merge-write see the one before it.

What is locked is the folder that holds the store (a file, or the database folder that
`db update` swaps whole): on POSIX ``fcntl.flock`` on that folder itself, so nothing is left
beside the user's files, and it is the same folder before and after a swap. flock is released
by the kernel when the process ends, however it ends, so a killed run never leaves a stale
lock. Where a folder cannot be flocked (some network file systems) and on Windows
(``msvcrt.locking``, released when the handle closes, for a killed process too) a lock file
``.NAME.lock`` beside the store is used instead, and never removed (a removed lock file lets a
waiting run lock a file nobody else sees). Standard library only: a library such as filelock
would add a dependency for the same two calls, and the bounded wait, the no-follow opening
and our one-line errors around them are needed anyway.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from resolver.core.errors import UserError

LOCK_WAIT_S = 120.0  # then one line, exit 2: another run holds the store that long
_POLL_S = 0.05


def lock_path(store: Path) -> Path:
    """The lock file of ``store`` where its folder cannot be locked: ``.NAME.lock`` beside it."""
    return store.parent / f".{store.name}.lock"


def write_error(path: Path, exc: OSError) -> UserError:
    """One line for a write that failed: a full disk, a read-only or missing folder."""
    reason = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exceeded",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return UserError(f"{path}: cannot write it ({reason}); nothing was changed")


@contextlib.contextmanager
def locked(store: Path, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the exclusive lock of ``store`` for the block; wait for it up to ``wait_s``.

    UserError (exit 2) when the lock file cannot be made (a read-only or full disk) or another
    run holds the lock longer than ``wait_s`` seconds."""
    path, fd = _open_lock(store)
    try:
        deadline = time.monotonic() + wait_s
        while not _locked_now(fd, path):
            if time.monotonic() > deadline:
                raise UserError(
                    f"{store}: another gpuresolve has been writing it for over {wait_s:g} s "
                    f"(it holds {path}); try again when it has finished"
                )
            time.sleep(_POLL_S)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def _open_lock(store: Path) -> tuple[Path, int]:
    """The folder holding ``store``, open for flock; else its lock file, made if need be."""
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        if sys.platform != "win32":
            fd = os.open(store.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                _try_lock(fd)  # can it be locked at all? (released at once below)
                _unlock(fd)
                return store.parent, fd
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EBADF, errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
    except OSError as exc:
        raise write_error(store.parent, exc) from None
    path = lock_path(store)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        return path, os.open(path, flags, 0o666)
    except OSError as exc:
        raise write_error(path, exc) from None


def _locked_now(fd: int, path: Path) -> bool:
    try:
        return _try_lock(fd)
    except OSError as exc:  # ENOLCK: a file system without locks (an old NFS mount)
        raise UserError(f"{path}: cannot lock it ({exc.strerror or exc})") from None


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
