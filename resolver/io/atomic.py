"""Write one file atomically (a temporary file beside it and a rename), keeping its mode; and
every ``-o FILE`` a command writes (``write_output``: a regular file, never one of its inputs).

The output folder's lock files go through ``writers.outputs`` (no links, all or nothing), which
holds them to the same rule with ``refuse_input``."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from resolver.core.errors import UserError, escaped

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


def output_path(path: Path, inputs: Iterable[Path] = (), what: str = "-o") -> Path:
    """The regular file a ``-o FILE`` writes: ``path``, or the file its link names (as a shell's
    ``>`` writes through a link); one line (UserError, exit 2) for anything else.

    Refused at once, before any work and without opening it (a FIFO never blocks): a FIFO, a
    device, a socket or a folder where the file goes; a missing folder above it (named as given,
    not as a temporary file); a file that is one of ``inputs`` (the same file, through a link
    or a hard link: a report written over its own results)."""
    shown = escaped(str(path))
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UserError(f"{what} {shown}: cannot write it ({exc.strerror or exc})") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device...)"
        raise UserError(f"{what} {shown}: {kind}: gpuresolve writes only regular files")
    if not target.parent.is_dir():
        raise UserError(f"{what} {shown}: cannot write it: no folder {escaped(str(target.parent))}")
    if mode is not None:
        refuse_input(target, inputs, f"{what} {shown}")
    return target


def refuse_input(path: Path, inputs: Iterable[Path], what: str) -> None:
    """A UserError when the existing file ``path`` is one of ``inputs`` (the same device and
    inode: a link or a hard link to it too): an output never replaces what it was made from."""
    try:
        here = os.stat(path)
    except OSError:
        return
    for item in inputs:
        try:
            there = os.stat(item)
        except OSError:
            continue
        if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            raise UserError(
                f"{what}: the same file as the input {escaped(str(item))}: write the output "
                "elsewhere"
            )


def write_output(path: Path, text: str, inputs: Iterable[Path] = (), what: str = "-o") -> None:
    """``text`` written atomically to the file a ``-o FILE`` names, held to ``output_path``'s
    rule again at the moment of writing; a failure is one line naming the path given."""
    inputs = list(inputs)
    target = output_path(path, inputs, what)
    try:
        atomic_write(target, text)
    except OSError as exc:
        raise UserError(
            f"{what} {escaped(str(path))}: cannot write it ({exc.strerror or exc})"
        ) from None
