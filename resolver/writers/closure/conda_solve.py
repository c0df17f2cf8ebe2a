"""A real conda solve for the target's platform, with py-rattler, in a child process.

py-rattler solves offline against any channel (a name, a mirror URL, a ``file://`` directory)
and honours constraints on virtual packages, so no conda, mamba or micromamba is needed. It
crashes at interpreter exit now and then (a background Rust thread touching the GIL during
finalisation), so it never runs in this process: a child solves, prints JSON, and ends with
``os._exit``. An unreachable channel or a missing solver is one clear line.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resolver.core import secrets
from resolver.core.errors import UserError
from resolver.io import subprocs
from resolver.io.credentials import for_request
from resolver.standalone import RATTLER_CHILD

SOLVE_TIMEOUT_S = 600
INSTALL_HINT = "pip install 'gpuresolve[conda]'"


@dataclass(frozen=True)
class CondaRecord:
    """One package of a solved conda environment."""

    name: str
    version: str
    build: str
    subdir: str
    url: str
    md5: str
    sha256: str
    depends: tuple[str, ...]


def rattler_available() -> bool:
    return importlib.util.find_spec("rattler") is not None


def solve(
    channels: Sequence[str],
    specs: Sequence[str],
    subdir: str,
    virtual_packages: Mapping[str, str],
    cache_dir: str | None = None,
) -> list[CondaRecord]:
    """Solve ``specs`` for ``subdir`` with exactly the target's virtual packages."""
    if not rattler_available():
        raise UserError(f"conda-lock.yml needs a conda solver: {INSTALL_HINT} (py-rattler)")
    if cache_dir is None:
        from resolver.catalog import cache_dir as gpuresolve_cache

        cache_dir = str(gpuresolve_cache() / "rattler")
    request = {  # on the child's stdin: a channel's token is used there, never on a command line
        "channels": [for_request(c) if "://" in c else c for c in channels],
        "specs": list(specs),
        "subdir": subdir,
        "virtual_packages": [_virtual(n, v) for n, v in virtual_packages.items()],
        "cache_dir": cache_dir,
    }
    try:
        proc = subprocs.run(
            [sys.executable, str(RATTLER_CHILD)],
            input=json.dumps(request),
            timeout=SOLVE_TIMEOUT_S,
        )
    except OSError as exc:
        raise UserError(f"cannot run the conda solver ({exc})") from None
    if proc.timed_out:
        raise UserError(f"the conda solve did not finish within {SOLVE_TIMEOUT_S} s")
    answer = _answer(proc.stdout)
    if answer is None:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise UserError(f"the conda solver failed: {secrets.redact(tail[0])}")
    if "error" in answer:
        message = _one_line(str(answer["kind"]), str(answer["error"]), channels)
        raise UserError(secrets.redact(message))
    return [
        CondaRecord(
            name=r["name"],
            version=r["version"],
            build=r["build"],
            subdir=r["subdir"],
            url=secrets.public(r["url"]),  # a channel's token is never written
            md5=r["md5"],
            sha256=r["sha256"],
            depends=tuple(r["depends"]),
        )
        for r in answer["records"]
    ]


def _virtual(name: str, value: str) -> list[str]:
    """conda-lock's ``"1 x86_64"`` (version, build) -> [name, version, build]."""
    version, _, build = value.partition(" ")
    return [name, version, build or "0"]


def _answer(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _one_line(kind: str, error: str, channels: Sequence[str]) -> str:
    """The solver's (multi-line, tree-drawn) message as one line a user can act on."""
    parts = [p.strip(" │├└─") for p in error.splitlines() if p.strip(" │├└─")]
    causes = [p.removeprefix("Caused by:").strip() for p in parts if p.startswith("Caused by:")]
    if causes:  # rattler's error chain: the request, then the root cause
        parts = [parts[0], causes[-1]]
    text = "; ".join(parts)
    if kind == "GatewayError":
        where = ", ".join(channels)
        return f"cannot read the conda channel ({where}): {text} (--channel sets a mirror)"
    if kind == "SolverError":
        return f"no conda solution for the target: {text}"
    return f"the conda solver failed: {kind}: {text}"
