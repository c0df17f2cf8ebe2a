"""`gpuresolve --help` replayed: the text click rendered for the same code, width and language,
kept in the cache folder, so that a lone `--help` is answered before click is imported.

Importing click is most of `--help` (about three bare interpreters of instructions, against one
formatting pass); the text it renders changes only with gpuresolve's code (the CLI's module),
click's, the width it wraps to and the language of its headings. Those are the file's key: any
change renders afresh, through click, and stores the new text. A text that cannot be read or
written is no error: click renders it, as before. What is read back is bounded and printed
through the one escaping rule.
"""

from __future__ import annotations

import os
import sys

from resolver import __version__

PREFIX = "help-"
MAX_BYTES = 64 * 1024  # the help is about 1.5 KB
_LANGUAGE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")  # gettext's order


def _columns() -> int:
    """The width click wraps to, found as ``shutil.get_terminal_size`` finds it (COLUMNS, else
    stdout's terminal, else 80) without importing shutil; click caps it at 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return min(columns, 80)


def _stamp(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_mtime_ns}.{st.st_size}"


def _click_init() -> str | None:
    """click's ``__init__.py`` on the path this interpreter would import it from."""
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "click", "__init__.py")
        if os.path.isfile(candidate):
            return candidate
    return None


def cache_dir() -> str:
    """``db.location.cache_dir``, with os.path alone (pathlib is no part of this path)."""
    forced = os.environ.get("GPURESOLVE_CACHE_DIR")
    if forced:
        return forced
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(
            os.path.expanduser("~"), "AppData", "Local"
        )
        return os.path.join(base, "gpuresolve", "cache")
    value = os.environ.get("XDG_CACHE_HOME") or ""
    base = value if os.path.isabs(value) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuresolve")


def cache_file() -> str | None:
    """The file for this code, click, width and language; None when click is not found."""
    import zlib

    click_init = _click_init()
    if click_init is None:
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    language = "|".join(os.environ.get(v, "") for v in _LANGUAGE_VARS)
    key = "|".join(
        (
            __version__,
            sys.version,
            _stamp(os.path.join(here, "cli.py")),
            _stamp(os.path.join(here, "commands", "group.py")),
            click_init,
            _stamp(click_init),
            language,
        )
    )
    return os.path.join(cache_dir(), f"{PREFIX}{zlib.crc32(key.encode()):08x}-{_columns()}.txt")


def read(path: str) -> str | None:
    """The stored text (a regular file, bounded), or None."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data or len(data) > MAX_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def store(path: str, text: str) -> None:
    """Write ``text`` atomically, removing the other help texts (ours by name); a folder that
    cannot be written is skipped silently: the help was printed all the same."""
    import contextlib

    folder = os.path.dirname(path)
    tmp: str | None = None
    try:
        os.makedirs(folder, exist_ok=True)
        name = f"{path}.{os.getpid()}.tmp"  # tempfile would add shutil, random and lzma
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        tmp = name
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
        for name in os.listdir(folder):
            if name.startswith(PREFIX) and name.endswith(".txt") and name != os.path.basename(path):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
    except (OSError, ValueError):
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def answer(text: str) -> int:
    """Print the stored help; the exit code, as the CLI's ``main`` ends."""
    from resolver.commands.version import write_out

    return write_out(text, keep="\n")  # the help's lines kept, everything else escaped
