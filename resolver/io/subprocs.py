"""Child processes that end with us: each in its own process group, killed whole.

Every program gpuresolve starts (the verify probe, nvidia-smi, uv and pip, conda tools, the
rattler child, gpuresolve itself) goes through here. A child runs in its own session, so a
terminal's Ctrl-C reaches only gpuresolve; on a timeout, Ctrl-C (KeyboardInterrupt), SIGTERM or
any error while it runs, its whole process group is killed (first SIGTERM when ``grace`` allows
it a clean exit, then SIGKILL), grandchildren included. Standard library only (core layer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
_POSIX = os.name == "posix"
_live: set[subprocess.Popen[Any]] = set()  # started and not yet known to be over


@dataclass
class Result:
    """What a finished (or killed: ``timed_out``, a negative ``returncode``) child left."""

    returncode: int
    stdout: str  # "" when not captured
    stderr: str
    timed_out: bool = False


def start(argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """Popen ``argv`` in a new session (its own process group); OSError as Popen raises it."""
    popen.setdefault("stdin", DEVNULL)
    if _POSIX:
        popen["start_new_session"] = True
    else:  # pragma: no cover - Windows: a new group, killed by taskkill-less terminate
        popen.setdefault("creationflags", getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
    proc = subprocess.Popen(list(argv), **popen)
    _live.add(proc)
    return proc


def forget(proc: subprocess.Popen[Any]) -> None:
    """``proc`` is over (reaped by its owner): `kill_all` leaves it alone."""
    _live.discard(proc)


def kill_all(grace: float = 0.0) -> None:
    """Kill every started child (with its group) that is still running: the CLI's last word,
    so that a child held across other work (the verify probe) never outlives an interrupt."""
    for proc in list(_live):
        if proc.poll() is None:
            kill_group(proc, grace)
        _live.discard(proc)


def kill_group(proc: subprocess.Popen[Any], grace: float = 0.0) -> None:
    """End ``proc`` and every process of its group: SIGTERM and up to ``grace`` seconds for the
    leader to exit, then SIGKILL to the whole group (grandchildren that outlive the leader too)."""
    if _POSIX:
        if grace > 0 and proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
        _signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    _live.discard(proc)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group outlives its leader while members remain


@contextlib.contextmanager
def started(
    argv: Sequence[str], *, grace: float = 0.0, **popen: Any
) -> Iterator[subprocess.Popen[Any]]:
    """A started child that is killed with its group unless it has exited when the block ends
    (an exception, Ctrl-C or SIGTERM included); its pipes are closed either way."""
    proc = start(argv, **popen)
    try:
        yield proc
    except BaseException:
        kill_group(proc, grace)
        raise
    finally:
        if proc.poll() is None:
            kill_group(proc, grace)
        forget(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def run(
    argv: Sequence[str],
    *,
    timeout: float | None,
    capture: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace: float = 0.0,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> Result:
    """Run ``argv`` to its end or ``timeout`` seconds (None: no limit), then kill its group.

    ``capture`` collects stdout and stderr (as text, undecodable bytes replaced); otherwise
    they go where ``stdout``/``stderr`` say (default: ours). Raises OSError when it cannot start
    (FileNotFoundError for a missing program)."""
    popen: dict[str, Any] = {
        "env": None if env is None else dict(env),
        "cwd": cwd,
        "text": True,
        "errors": "replace",
    }
    if capture:
        popen.update(stdout=PIPE, stderr=PIPE)
    else:
        popen.update(stdout=stdout, stderr=stderr)
    if input is not None:
        popen["stdin"] = PIPE
    with started(argv, grace=grace, **popen) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc, grace)
            try:  # what it wrote before the kill, unless a grandchild holds the pipes
                out, err = proc.communicate(timeout=1)
            except (subprocess.TimeoutExpired, ValueError, OSError):
                out, err = "", ""
            return Result(proc.returncode, out or "", err or "", timed_out=True)
    return Result(proc.returncode, out or "", err or "")
