"""Every child process ends with us: Ctrl-C, SIGTERM and timeouts kill its whole group.

The fake programs here sleep and start a child of their own that sleeps (as torch's import or
nvidia-smi's driver calls may); each writes its own and its child's pid, and the test checks
that none of them is left once gpuresolve has returned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resolver.host import smi
from resolver.io import subprocs

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and signals")
ROOT = Path(__file__).resolve().parent.parent


def _fake(tmp_path: Path, name: str) -> Path:
    """A program that records its pid and its child's, then sleeps (ignoring its arguments)."""
    script = tmp_path / name
    script.write_text(
        "#!/bin/sh\n"
        f"sleep 300 &\necho $! > '{tmp_path}/{name}.child'\n"
        f"echo $$ > '{tmp_path}/{name}.pid'\n"
        "sleep 300\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _pids(tmp_path: Path, name: str, wait_s: float = 30.0) -> list[int]:
    files = [tmp_path / f"{name}.pid", tmp_path / f"{name}.child"]
    deadline = time.monotonic() + wait_s
    while not all(f.is_file() and f.read_text().strip() for f in files):
        assert time.monotonic() < deadline, f"{name} never started"
        time.sleep(0.05)
    return [int(f.read_text()) for f in files]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone: it holds nothing)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return "\nState:\tZ" not in status


def _gone(pids: list[int], wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_verify_kills_the_probe_and_its_children(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    python = _fake(tmp_path, "python3")
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", "verify", "--python", str(python), "--no-record"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pids: list[int] = []
    try:
        pids = _pids(tmp_path, "python3")
        assert all(_alive(p) for p in pids)
        assert os.getpgid(pids[0]) != os.getpgid(proc.pid)  # the probe has its own group
        time.sleep(0.3)  # inside the wait for the probe (or still loading: either must work)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert _gone(pids), "a probe process outlived gpuresolve"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill_leftovers(pids)


def test_a_hanging_nvidia_smi_is_killed_with_its_children(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "nvidia-smi")
    pids: list[int] = []
    try:
        start = time.monotonic()
        result = smi.subprocess_runner([str(fake), "--query-gpu=name"], 0.5)
        assert result is not None and result.returncode is None  # stopped at the timeout
        assert time.monotonic() - start < 8
        pids = _pids(tmp_path, "nvidia-smi", wait_s=1)
        assert _gone(pids), "nvidia-smi or its child outlived detect"
    finally:
        _kill_leftovers(pids)


def test_an_interrupt_inside_a_started_block_kills_the_group(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "tool")
    pids: list[int] = []
    try:
        with pytest.raises(KeyboardInterrupt), subprocs.started([str(fake)]):
            pids = _pids(tmp_path, "tool")
            raise KeyboardInterrupt
        assert _gone(pids)
    finally:
        _kill_leftovers(pids)


def test_kill_all_ends_a_child_held_across_other_work(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "held")
    proc = subprocs.start([str(fake)])
    pids: list[int] = []
    try:
        pids = _pids(tmp_path, "held")
        subprocs.kill_all()
        assert proc.poll() is not None and _gone(pids)
    finally:
        _kill_leftovers(pids)


def test_run_returns_output_and_status() -> None:
    done = subprocs.run(
        [
            sys.executable,
            "-c",
            "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
        ],
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (
        3,
        "out\n",
        "err\n",
        False,
    )
    echoed = subprocs.run([sys.executable, "-c", "print(input()[::-1])"], timeout=30, input="abc\n")
    assert echoed.stdout == "cba\n"
    with pytest.raises(FileNotFoundError):
        subprocs.run(["gpuresolve-no-such-program"], timeout=5)
