"""The output folder: read, compare and write lock files without following a link out of it.

Everything under ``-o`` is opened one path component at a time from a folder descriptor with
``O_NOFOLLOW``, so a platform or group folder that is a link to elsewhere, an output file that is
a link to ``/dev/zero`` or a FIFO is refused with one line (exit 2) instead of being written
through, read forever or read until memory runs out. ``-o`` itself is the user's choice and may
be a link. Writes are all-or-nothing: every name is checked first, every new text is written to
a temporary file beside its target, and only when all are on disk are they renamed into place;
on an error the temporary files and the folders made for them are removed again.
"""

from __future__ import annotations

import difflib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from resolver.core.errors import UserError, escaped, shown, unsafe_char
from resolver.core.secrets import redact
from resolver.io.atomic import refuse_input, umask_mode

READ_LIMIT = 16 * 1024 * 1024  # a lock file with hashes for a large closure is a few MB
MAX_DEPTH = 3  # group/platform/file: gpuresolve writes nothing deeper
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def parts(name: str, where: str = "") -> tuple[str, ...]:
    """The components of a relative file name gpuresolve may write; one line when it is not one
    (absolute, ``..``, a backslash, a character ``core.errors.unsafe_char`` names, too deep)."""
    pure = PurePosixPath(name)
    bad = (
        not name
        or len(name) > 1024
        or pure.is_absolute()
        or "\\" in name
        or unsafe_char(name) is not None
        or any(p in ("", ".", "..") for p in name.split("/"))
        or len(pure.parts) > MAX_DEPTH
    )
    if bad:
        raise UserError(
            f"{where or 'a file name'}: {shown(name, 120)} is not a file name gpuresolve writes"
        )
    return pure.parts


def _refuse(directory: Path, rel: str, exc: OSError | None = None, kind: str = "") -> UserError:
    path = directory / rel
    if exc is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        kind = "a link or not a folder"
    reason = kind or (exc.strerror if exc is not None and exc.strerror else str(exc))
    return UserError(
        f"{path}: {reason}: gpuresolve writes only regular files in real folders inside the "
        "output folder (never through a link)"
    )


@contextmanager
def folder(directory: Path, folders: tuple[str, ...]) -> Iterator[int | None]:
    """A descriptor of ``directory/folders`` opened without following links (None: missing)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        yield None
        return
    except NotADirectoryError:  # -o itself: a file, a FIFO, a device
        raise UserError(
            f"{escaped(str(directory))}: not a folder (-o names the output folder)"
        ) from None
    except OSError as exc:
        raise _refuse(directory, "", exc) from None
    try:
        for i, part in enumerate(folders):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                fd = -1
                break
            except OSError as exc:
                raise _refuse(directory, "/".join(folders[: i + 1]), exc) from None
            os.close(fd)
            fd = nxt
        yield fd if fd >= 0 else None
    finally:
        if fd >= 0:
            os.close(fd)


def read_current(
    directory: Path, name: str, limit: int = READ_LIMIT, what: str = "a lock file"
) -> str | None:
    """The text of ``directory/name`` (None: there is none); a link, FIFO, device, directory,
    oversized or non-UTF-8 file is one line, at once."""
    data = read_head(directory, name, limit + 1)
    if data is None:
        return None
    if len(data) > limit:
        raise UserError(f"{directory / name}: larger than {limit // (1024 * 1024)} MiB: not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{directory / name}: not UTF-8 text (byte {exc.start})") from None


def read_head(directory: Path, name: str, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``directory/name`` (None: there is none), opened as every file
    under the output folder is: no link followed on the way or at the end, a regular file only."""
    *folders, base = parts(name)
    with folder(directory, tuple(folders)) as dfd:
        if dfd is None:
            return None
        try:
            fd = os.open(base, _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refuse(directory, name, exc) from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise _refuse(directory, name, kind="not a regular file")
            return fh.read(limit)


def diff_files(directory: Path, files: Mapping[str, str]) -> str:
    """A unified diff from what is on disk to ``files``; empty when every file is current."""
    return "".join(
        diff_text(name, read_current(directory, name), text) for name, text in files.items()
    )


def diff_text(name: str, old: str | None, text: str) -> str:
    """A unified diff of one file from ``old`` (None: not there) to ``text``."""
    if old == text:
        return ""
    out = list(
        difflib.unified_diff(
            _lines(old or ""),
            _lines(text),
            fromfile=f"a/{name}" if old is not None else "/dev/null",
            tofile=f"b/{name}",
        )
    )
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n\\ No newline at end of file\n"
    return redact("".join(out))  # a login in a file written before is never shown


def _lines(text: str) -> list[str]:
    """``text``'s lines as a lock file's readers and ``git diff`` see them: ended by ``\\n``
    only (``splitlines`` also breaks at U+2028, U+0085, a form feed...: a hand-edited line would
    show as several, its break characters raw at their ends instead of escaped by the printer)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return [*out, lines[-1]] if lines[-1] else out


def preflight(directory: Path, names: list[str], inputs: Iterable[Path] = ()) -> None:
    """Every name checked before the first write: a real folder on the way, a regular file or
    nothing at the end, none of the lock's ``inputs`` (a spec called ``fleet.yaml`` in the
    folder), and no name that is another's folder (a group called ``report.md``)."""
    inputs = list(inputs)
    if os.path.lexists(directory) and not directory.is_dir():
        raise UserError(f"{directory}: not a folder")
    files = {parts(n) for n in names}
    for p in files:
        for i in range(1, len(p)):
            if p[:i] in files:
                raise UserError(
                    f"{directory / '/'.join(p[:i])}: both a file and a folder of this lock "
                    "(a group or platform named like a file gpuresolve writes): rename the target"
                )
        path = directory
        for i, part in enumerate(p):
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                break
            except OSError as exc:
                raise _refuse(directory, "/".join(p[: i + 1]), exc) from None
            last = i == len(p) - 1
            if stat.S_ISLNK(mode) or (stat.S_ISREG(mode) if not last else not stat.S_ISREG(mode)):
                kind = (
                    "a link"
                    if stat.S_ISLNK(mode)
                    else ("not a regular file" if last else "a file where a folder goes")
                )
                raise _refuse(directory, "/".join(p[: i + 1]), kind=kind)
            if not last and not stat.S_ISDIR(mode):
                raise _refuse(directory, "/".join(p[: i + 1]), kind="not a folder")
            if last and inputs:
                refuse_input(path, inputs, str(path))


def write_files(
    directory: Path, files: Mapping[str, str], check: bool = False, inputs: Iterable[Path] = ()
) -> str:
    """Write every changed file of ``files`` into ``directory``, all or nothing; or only compare;
    never over one of ``inputs`` (``preflight``).

    Returns the unified diff between what was on disk and ``files`` (empty: all current).
    Files already current are not rewritten (their mtime stays).
    """
    diff = diff_files(directory, files)
    if check or not diff:
        return diff
    changed = [n for n in files if read_current(directory, n) != files[n]]
    preflight(directory, list(files), inputs)
    made: list[Path] = []  # folders this run created, to take away again on an error
    staged: list[tuple[int, str, str]] = []  # (folder fd, temporary name, final name)
    fds: list[int] = []
    try:
        _makedirs(directory, made)
        for name in changed:
            *folders, base = parts(name)
            fd = _open_dirs(directory, tuple(folders), made)
            fds.append(fd)
            # a fresh name each time: a leftover of a crashed run (same PID) never blocks a write
            tmp = f".{base}.gpuresolve-{os.getpid()}-{secrets.token_hex(4)}.tmp"
            try:
                mode = stat.S_IMODE(os.stat(base, dir_fd=fd, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                mode = umask_mode(0o666)
            out = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd
            )
            staged.append((fd, tmp, base))
            with os.fdopen(out, "wb") as fh:
                fh.write(files[name].encode("utf-8"))
                fh.flush()
                os.fchmod(fh.fileno(), mode)
                os.fsync(fh.fileno())
        for fd, tmp, base in staged:
            os.replace(tmp, base, src_dir_fd=fd, dst_dir_fd=fd)
        staged.clear()
    except BaseException as exc:
        for fd, tmp, _ in staged:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
        for folder in reversed(made):
            with suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):
            where = directory / changed[len(staged)] if len(staged) < len(changed) else directory
            raise UserError(
                f"{where}: cannot write it ({exc.strerror or exc}); nothing was changed"
            ) from None
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return diff


def _makedirs(directory: Path, made: list[Path]) -> None:
    missing: list[Path] = []
    path = directory
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir()
        made.append(folder)


def _open_dirs(directory: Path, folders: tuple[str, ...], made: list[Path]) -> int:
    """A descriptor of ``directory/folders``, creating the missing ones (no link followed)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, part in enumerate(folders):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, umask_mode(0o777), dir_fd=fd)
                made.append(directory.joinpath(*folders[: i + 1]))
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refuse(directory, "/".join(folders[: i + 1]), exc) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd
