"""Run a plan's commands, streaming each installer's output as it comes.

A failed command stops the plan: nothing is rolled back (the installer's own transaction is all
there is), and the caller says so along with the installer's last lines.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from resolver.core import secrets
from resolver.core.errors import UserError
from resolver.io import subprocs
from resolver.io.childenv import installer_environment
from resolver.io.credentials import child_netrc

TAIL_LINES = 25


@dataclass
class StepResult:
    argv: tuple[str, ...]
    returncode: int
    tail: list[str] = field(default_factory=list)  # the last lines it printed

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_step(
    argv: Sequence[str],
    echo: Callable[[str], None],
    environ: Mapping[str, str] | None = None,
    tail_lines: int = TAIL_LINES,
) -> StepResult:
    """Run one command, echoing stdout and stderr (merged) line by line; keep its tail."""
    tail: deque[str] = deque(maxlen=tail_lines)
    # No UV_* setting of the user's replaces the lock's own index lines (childenv says which pass).
    env = installer_environment(os.environ if environ is None else environ)
    env.setdefault("PYTHONUNBUFFERED", "1")  # pip's lines arrive as printed, not in blocks
    with tempfile.TemporaryDirectory(prefix="gpuresolve-login-") as private:
        netrc = child_netrc(private)  # a login given to this command: read from a file, not argv
        if netrc is not None:
            env["NETRC"] = netrc
        return _stream(argv, echo, env, tail)


def _stream(
    argv: Sequence[str], echo: Callable[[str], None], env: dict[str, str], tail: deque[str]
) -> StepResult:
    try:  # Ctrl-C or SIGTERM: the installer gets SIGTERM and a moment, then its group SIGKILL
        with subprocs.started(
            argv,
            grace=5.0,
            stdout=subprocs.PIPE,
            stderr=subprocs.STDOUT,
            env=env,
            text=True,
            errors="replace",
            bufsize=1,
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\r\n").rsplit("\r", 1)[-1]  # a progress bar's last state
                line = secrets.redact(line)
                tail.append(line)
                echo(line)
            proc.stdout.close()
            returncode = proc.wait()
    except OSError as exc:
        raise UserError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    return StepResult(tuple(argv), returncode, list(tail))


def stage_lock(original: str, text: str) -> str:
    """Write ``text`` as a copy of the lock ``original`` in a new temporary directory.

    The copy keeps the lock's file name (micromamba tells a conda-lock file by its ``-lock.yml``
    ending) and sits next to nothing else; the caller removes the directory when done, or keeps
    it for a dry run's command.
    """
    directory = tempfile.mkdtemp(prefix="gpuresolve-install-")
    path = Path(directory) / Path(original).name
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return str(path)
