"""The Python of an interpreter given by its path (`--python /usr/bin/python3.11`), by running it.

Kept out of the decision layer, which never runs a program: a target is described with a
version, and a path is turned into one here first.
"""

from __future__ import annotations

from pathlib import Path

from resolver.core.errors import UserError, shown
from resolver.core.platforms import PYTHON_RE, python_option

__all__ = ["python_version"]


def python_version(value: str) -> str:
    """ "3.12", "3.13t", or an interpreter path whose version is read (as uv's --python accepts)."""
    given = python_option(value)
    if given is not None:
        return given
    v = value.strip()
    path = Path(v)
    try:
        exists = path.exists()
    except OSError:  # a name too long for the file system
        exists = False
    if not (exists or "/" in v or "\\" in v):
        raise UserError(
            f"--python {shown(value)}: expected a version like 3.12 or an interpreter path"
        )
    if exists:
        v = str(path.absolute())  # a relative path is that file, never a name looked up on PATH
    from resolver.io import subprocs  # only for a path: running it costs start-up

    code = (
        "import sys,sysconfig;"
        "t='t' if sysconfig.get_config_var('Py_GIL_DISABLED') else '';"
        "print(f'{sys.version_info[0]}.{sys.version_info[1]}{t}')"
    )
    try:
        done = subprocs.run([v, "-c", code], timeout=20)
    except OSError:
        raise UserError(f"--python {shown(value)}: cannot run that interpreter") from None
    if done.timed_out:
        raise UserError(f"--python {shown(value)}: the interpreter did not answer in 20 s")
    if done.returncode != 0:
        raise UserError(f"--python {shown(value)}: cannot run that interpreter")
    out = done.stdout.strip()
    if not PYTHON_RE.match(out):
        raise UserError(f"--python {shown(value)}: it reported an unexpected version {out[:40]!r}")
    return out
