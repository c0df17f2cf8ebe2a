"""`gpuresolve --version`: which code, and the date of the database it decides with, answered
without click or the database.

The line names the database `choose` picks (``$GPURESOLVE_DATA_DIR``, else the newer of the
user's and the shipped one), its date read from the head of its ``torch.yaml``: loading the whole
database to print one line cost four times a bare interpreter. A user database whose body is
damaged is still named here; the next command that loads it warns and falls back.
The console script answers a lone ``--version`` or ``-V`` here before click is imported
(`start.py`); ``gpuresolve --version`` among other options goes through click to the same line.
"""

from __future__ import annotations

import contextlib
import sys

from resolver import __version__
from resolver.core.errors import GpuresolveError, escaped


def version_line() -> str:
    """``gpuresolve 0.1.0 (database 2026-11-24)``."""
    from resolver.db import location

    try:
        _version, updated = location.read_head(location.choose().directory)
    except (GpuresolveError, OSError, RuntimeError) as exc:  # --version must answer anyway
        flat = " ".join(str(exc).split())
        return f"gpuresolve {__version__} (database unreadable: {flat[:200]})"
    return f"gpuresolve {__version__} (database {updated or 'undated'})"


def answer() -> int:
    """Print the version line; the exit code, as the CLI's ``main`` ends."""
    return write_out(version_line())


def write_out(text: str, keep: str = "") -> int:
    """Write ``text``, escaped by the one rule (but ``keep``), and a newline to stdout before
    click is imported; the exit code the CLI's ``main`` gives: 141 when stdout's reader is gone
    (`| true`: the flush at exit must not fail), 2 when stdout cannot be written."""
    import os

    with contextlib.suppress(AttributeError, OSError, ValueError):  # "é" under an ASCII locale
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        sys.stdout.write(escaped(text, keep) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sys.stderr.write(f"gpuresolve: error: cannot write output: {escaped(reason)}\n")
        return 2
    return 0
