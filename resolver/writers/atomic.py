"""Write rendered files atomically, or compare them with what is on disk (``--check``)."""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from resolver.core.errors import UserError

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


def _current(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it ({exc})") from None


def diff_files(directory: Path, files: Mapping[str, str]) -> str:
    """A unified diff from what is on disk to ``files``; empty when every file is current."""
    out: list[str] = []
    for name, text in files.items():
        old = _current(directory / name)
        if old == text:
            continue
        out.extend(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"a/{name}" if old is not None else "/dev/null",
                tofile=f"b/{name}",
            )
        )
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
    return "".join(out)


def write_files(directory: Path, files: Mapping[str, str], check: bool = False) -> str:
    """Write every file of ``files`` into ``directory`` (atomically), or only compare.

    Returns the unified diff between what was on disk and ``files`` (empty: all current). With
    ``check`` nothing is written. Files already current are not rewritten (their mtime stays).
    """
    diff = diff_files(directory, files)
    if check or not diff:
        return diff
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{directory}: cannot create the directory ({exc})") from None
    for name, text in files.items():
        if _current(directory / name) != text:
            try:
                (directory / name).parent.mkdir(parents=True, exist_ok=True)  # team sub-folders
                atomic_write(directory / name, text)
            except OSError as exc:
                raise UserError(f"{directory / name}: cannot write it ({exc})") from None
    return diff
