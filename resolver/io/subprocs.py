"""Child processes that end with us: each in its own process group, killed whole.

Every program gpuresolve starts (the verify probe, nvidia-smi, uv and pip, conda tools, the
rattler child, gpuresolve itself) goes through here. A child runs in its own session, so a
terminal's Ctrl-C reaches only gpuresolve; on a timeout, Ctrl-C (KeyboardInterrupt), SIGTERM or
any error while it runs, its whole process group is killed (first SIGTERM when ``grace`` allows
it a clean exit, then SIGKILL), grandchildren included. Standard library only.

When gpuresolve itself is killed outright (SIGKILL: the OOM killer, a CI runner's cancel) none
of that code runs, so on POSIX a watchdog does it instead: one small process per gpuresolve,
started with the first child, in its own session, holding the read end of a pipe whose only
write end is ours. Each child's process group is registered on the pipe; when the pipe ends
(our exit, however it happens, closes the write end), the watchdog sends every registered
group SIGTERM, then SIGKILL after ``WATCHDOG_GRACE_S``. Why a pipe watchdog and not the others:
``PR_SET_PDEATHSIG`` reaches the direct child only (pip's build steps are grandchildren), needs
a ``preexec_fn`` (unsafe with threads) and is Linux-only; a subreaper (``PR_SET_CHILD_SUBREAPER``)
only adopts orphans while it lives, so gpuresolve as its own subreaper dies with the same
SIGKILL, and a separate subreaper would have to spawn every child itself. A pipe's end is
seen by the kernel on any death, and a process group reaches grandchildren, on Linux and macOS.
A group is dropped from the watchdog once its leader is reaped (its id may then be reused by
an unrelated process). What it cannot reach: a descendant that leaves the group (``setsid``, a
daemon), one left running by a child that itself exited normally, and a child started in the
instant before gpuresolve is killed and its registration written (microseconds).
"""

from __future__ import annotations

import contextlib
import locale
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
_POSIX = os.name == "posix"
_live: set[subprocess.Popen[Any]] = set()  # started and not yet known to be over
WATCHDOG_GRACE_S = 2.0  # SIGTERM to SIGKILL, once gpuresolve has gone
CAPTURE_MAX = 64 * 1024 * 1024  # bytes of a captured stream; past it the child is killed
PIPES_AFTER_EXIT_S = 2.0  # a child has exited: how long a process it left may hold its pipes

# Runs as ``python -I -S -c WATCHDOG fd grace``: lines "+pgid" / "-pgid" on fd register and
# drop a group; end of file (gpuresolve gone) ends every registered group. It ignores the
# terminal's signals (its own session anyway) and treats SIGTERM as the end of file.
WATCHDOG = """
import os, signal, sys, time
fd, grace = int(sys.argv[1]), float(sys.argv[2])
groups = set()
def alive(g):
    try:
        os.killpg(g, 0)
        return True
    except OSError:
        return False
def sweep(*_):
    for g in list(groups):
        try:
            os.killpg(g, signal.SIGTERM)
        except OSError:
            groups.discard(g)
    end = time.monotonic() + grace
    while groups and time.monotonic() < end:
        time.sleep(0.05)
        groups.intersection_update([g for g in groups if alive(g)])
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGTERM, sweep)
buf = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except InterruptedError:
        continue
    if not chunk:
        sweep()
    buf += chunk
    *lines, buf = buf.split(b"\\n")
    for line in lines:
        if line[:1] == b"+" and line[1:].isdigit():
            groups.add(int(line[1:]))
        elif line[:1] == b"-" and line[1:].isdigit():
            groups.discard(int(line[1:]))
"""
_watch_lock = threading.Lock()
_watch: dict[str, Any] = {}  # "proc": the watchdog's Popen, "fd": our write end, "pid": ours


@dataclass
class Result:
    """What a finished (or killed: ``timed_out``, a negative ``returncode``) child left."""

    returncode: int
    stdout: str  # "" when not captured
    stderr: str
    timed_out: bool = False
    overflow: str | None = None  # "stdout"/"stderr": it printed more than the limit, killed


def start(argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """Popen ``argv`` in a new session (its own process group); OSError as Popen raises it."""
    popen.setdefault("stdin", DEVNULL)
    if _POSIX:
        popen["start_new_session"] = True
    else:  # pragma: no cover - Windows: a new group, killed by taskkill-less terminate
        popen.setdefault("creationflags", getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
    if _POSIX:  # the watchdog first: registering the child must not wait for its start-up
        with _watch_lock:
            _watchdog_fd()
    proc = subprocess.Popen(list(argv), **popen)
    _live.add(proc)
    if _POSIX:
        _tell_watchdog(f"+{proc.pid}")
    return proc


def forget(proc: subprocess.Popen[Any]) -> None:
    """``proc`` is over (reaped by its owner): `kill_all` and the watchdog leave it alone."""
    if proc in _live and _POSIX:
        _tell_watchdog(f"-{proc.pid}")
    _live.discard(proc)


def _tell_watchdog(line: str) -> None:
    """Send one line to the watchdog, starting it first (or again, after a fork or its death).

    Without a watchdog (no interpreter to run it, no pipe) children still end on every exit
    gpuresolve itself sees; only the SIGKILL case is lost, so this never fails a command."""
    with _watch_lock:
        for _attempt in range(2):
            fd = _watchdog_fd()
            if fd is None:
                return
            try:
                os.write(fd, f"{line}\n".encode())
                return
            except OSError:  # it died (someone killed it): the next attempt starts another
                _drop_watchdog()


def _watchdog_fd() -> int | None:
    if _watch.get("pid") == os.getpid() and _watch["proc"].poll() is None:
        return int(_watch["fd"])
    _drop_watchdog()
    if not sys.executable:
        return None
    read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits them
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", WATCHDOG, str(read_end), str(WATCHDOG_GRACE_S)],
            pass_fds=(read_end,),
            stdin=DEVNULL,
            stdout=DEVNULL,
            stderr=DEVNULL,
            cwd="/",  # holds no folder busy (an unmount, a temporary folder's removal)
            start_new_session=True,
        )
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    _watch.update(proc=proc, fd=write_end, pid=os.getpid())
    return write_end


def _drop_watchdog() -> None:
    """Forget a dead watchdog, or one inherited through a fork (its pipe is the parent's)."""
    if "fd" in _watch and _watch.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            os.close(_watch["fd"])
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            _watch["proc"].wait(1)
    _watch.clear()


def kill_all(grace: float = 0.0) -> None:
    """Kill every started child (with its group) that is still running: the CLI's last word,
    so that a child held across other work (the verify probe) never outlives an interrupt."""
    for proc in list(_live):
        if proc.poll() is None:
            kill_group(proc, grace)
        forget(proc)


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
    forget(proc)  # reaped: its id may be reused, so the watchdog must not signal it later


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
    limit: int = CAPTURE_MAX,
) -> Result:
    """Run ``argv`` to its end or ``timeout`` seconds (None: no limit), then kill its group.

    ``capture`` collects stdout and stderr (as text, undecodable bytes replaced), each up to
    ``limit`` bytes: a child that prints more (a broken nvidia-smi, a hostile environment's
    Python) is killed with its group and ``overflow`` names the stream, never read to
    MemoryError. Otherwise they go where ``stdout``/``stderr`` say (default: ours). Raises
    OSError when it cannot start (FileNotFoundError for a missing program)."""
    popen: dict[str, Any] = {"env": None if env is None else dict(env), "cwd": cwd}
    if not capture:
        popen.update(stdout=stdout, stderr=stderr, text=True, errors="replace")
        if input is not None:
            popen["stdin"] = PIPE
        with started(argv, grace=grace, **popen) as proc:
            try:
                proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc, grace)
                return Result(proc.returncode, "", "", timed_out=True)
        return Result(proc.returncode, "", "")
    popen.update(stdout=PIPE, stderr=PIPE, stdin=DEVNULL if input is None else PIPE)
    with started(argv, grace=grace, **popen) as proc:
        if input is not None:
            _feed(proc, input.encode(_ENCODING, "replace"))
        wait = math.inf if timeout is None else timeout
        got = collect(proc, timeout=wait, limit=limit, grace=grace)
    out, err = _text(got.stdout), _text(got.stderr)
    if got.overflow:
        err += f"\n[gpuresolve: {argv[0]} printed more than {limit} bytes on {got.overflow}]\n"
    return Result(proc.returncode, out, err, timed_out=got.timed_out, overflow=got.overflow)


_ENCODING = locale.getpreferredencoding(False)  # what text=True pipes use


def _text(data: bytes) -> str:
    """As a text-mode pipe reads it: the locale's encoding, universal newlines."""
    return data.decode(_ENCODING, "replace").replace("\r\n", "\n").replace("\r", "\n")


def _feed(proc: subprocess.Popen[Any], data: bytes) -> None:
    """Write ``data`` to the child's stdin in a thread (its output is read meanwhile), close."""

    def write() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(data)
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()

    threading.Thread(target=write, daemon=True).start()


@dataclass
class Collected:
    """What a child printed, read with a bound: ``overflow`` names the stream that passed it
    (the child was then killed), ``timed_out`` a child killed at its deadline."""

    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    overflow: str | None = None


def collect(
    proc: subprocess.Popen[bytes], *, timeout: float, limit: int, grace: float = 0.0
) -> Collected:
    """Read ``proc``'s stdout and stderr (binary pipes) until it exits, ``timeout`` seconds
    pass or a stream passes ``limit`` bytes; in the last two cases its group is killed.

    ``communicate`` keeps whatever a child prints: a program that floods its output (a hostile
    or broken module in the environment being verified) would fill our memory first."""
    streams = {"stdout": proc.stdout, "stderr": proc.stderr}
    bufs = {name: bytearray() for name in streams}
    over: list[str] = []

    def pump(name: str) -> None:
        stream, buf = streams[name], bufs[name]
        assert stream is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stream.fileno(), 65536):
                if len(buf) + len(chunk) > limit:
                    buf += chunk[: limit - len(buf)]
                    over.append(name)
                    return
                buf += chunk

    threads = [
        threading.Thread(target=pump, args=(name,), daemon=True)
        for name, stream in streams.items()
        if stream is not None
    ]
    for thread in threads:
        thread.start()
    end = time.monotonic() + min(timeout, 10**9)
    while not over and any(t.is_alive() for t in threads) and time.monotonic() < end:
        for thread in threads:
            thread.join(0.05)
        if proc.poll() is not None:  # the child is done; a process it left holds the pipes
            end = min(end, time.monotonic() + PIPES_AFTER_EXIT_S)
    timed_out = False
    if not over:
        try:
            proc.wait(max(end - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
    if over or timed_out:
        kill_group(proc, grace)
    elif any(t.is_alive() for t in threads):  # what it left in its group ends with it
        _signal_group(proc, signal.SIGKILL)
    for thread in threads:  # the pipes end once the group is gone (a stray holder: 10 s)
        thread.join(10)
    overflow = over[0] if over else None
    return Collected(bytes(bufs["stdout"]), bytes(bufs["stderr"]), timed_out, overflow)
