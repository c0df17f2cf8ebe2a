"""`--python`'s one grammar for every command: a version, an interpreter's path, an
environment's directory or a name on PATH; the interpreter found, and its Python read by
running it.

Kept out of the decision layer, which never runs a program: a target is described with a
version, and a path is turned into one here first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from resolver.core.errors import UserError, shown
from resolver.core.platforms import PYTHON_RE, python_option

__all__ = ["default_python", "python_version", "resolve_python"]


def python_version(value: str) -> str:
    """ "3.12", "3.13t", or an interpreter path whose version is read (as uv's --python accepts)."""
    given = python_option(value)
    if given is not None:
        return given
    v = value.strip()
    try:
        v = resolve_python(v)  # a file, an environment's directory, a name on PATH
    except UserError:
        if "/" in v or "\\" in v:
            raise
        raise UserError(
            f"--python {shown(value)}: expected a version like 3.12 or an interpreter path"
        ) from None
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


def default_python(environ: Mapping[str, str] | None = None) -> str:
    """The active virtualenv's or conda env's interpreter, else the one running gpuresolve."""
    env = os.environ if environ is None else environ
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(var)
        if prefix:
            found = _interpreter_in(Path(prefix))
            if found is None:
                raise UserError(f"${var} is {prefix}, but it holds no Python interpreter")
            return str(found)
    return sys.executable


def resolve_python(python: str | None, environ: Mapping[str, str] | None = None) -> str:
    """--python as given (a file, an environment's directory or a name on PATH), checked."""
    if not python:
        return default_python(environ)
    path = Path(python).expanduser()
    try:
        path.is_dir()
    except OSError:  # a name too long for the file system
        raise UserError(f"--python {shown(python)}: no such interpreter") from None
    if path.is_dir():
        found = _interpreter_in(path)
        if found is None:
            raise UserError(f"--python {python}: no Python interpreter in that directory")
        return str(found)
    if path.is_file():
        if not os.access(path, os.X_OK):
            raise UserError(f"--python {python}: not executable")
        return str(path.absolute())  # `--python py` is ./py, never a `py` found on PATH
    if os.sep not in python and "/" not in python:
        import shutil  # with bz2 and lzma: only for a name on PATH, not on every start

        which = shutil.which(python)
        if which:
            return which
    raise UserError(f"--python {python}: no such interpreter")


def _interpreter_in(prefix: Path) -> Path | None:
    for rel in ("bin/python3", "bin/python", "python.exe", "Scripts/python.exe"):
        candidate = prefix / rel
        if candidate.is_file():
            return candidate
    return None
