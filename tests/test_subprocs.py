"""Every child process ends with us: Ctrl-C, SIGTERM and timeouts kill its whole group.

The fake programs here sleep and start a child of their own that sleeps (as torch's import or
nvidia-smi's driver calls may); each writes its own and its child's pid, and the test checks
that none of them is left once gpuresolve has returned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import default_action, scrubbed_env

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
        preexec_fn=default_action(sig),
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


def test_a_ctrl_c_caught_inside_exec_source_still_exits_130(tmp_path: Path) -> None:
    """The root of a flaky exit -2 after "aborted": Ctrl-C landing while a dataclass or a
    namedtuple is being created (their code is exec'd source text, during verify's imports)
    leaves CPython's "unhandled interrupt" mark set, and `python -m` then kills itself with
    SIGINT at exit. Raised here deterministically inside an exec of source text."""
    (tmp_path / "interrupted_in_exec.py").write_text(
        "from resolver import cli\n"
        "@cli.cli.command('boom')\n"
        "def boom() -> None:\n"
        "    exec('raise KeyboardInterrupt')\n"
        "cli.main(['boom'])\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_in_exec"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr.strip()) == (130, "gpuresolve: aborted")


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


# --- SIGKILL: no handler of ours runs, the watchdog ends the children -------------------------


def _sigkill_during(argv: list[str], tmp_path: Path, name: str) -> None:
    """Start gpuresolve ``argv``, SIGKILL it once ``name`` and its child run, and require that
    both are gone soon after (the watchdog's SIGTERM, then SIGKILL)."""
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", *argv],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        pids = _pids(tmp_path, name)
        assert all(_alive(p) for p in pids)
        proc.kill()
        proc.wait(30)
        assert _gone(pids, wait_s=15), f"{name} or its child outlived a SIGKILLed gpuresolve"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_leftovers(pids)


def test_sigkill_during_verify_ends_the_probe_and_its_child(tmp_path: Path) -> None:
    python = _fake(tmp_path, "python3")
    _sigkill_during(["verify", "--python", str(python), "--no-record"], tmp_path, "python3")


def test_sigkill_during_install_ends_its_child_and_grandchild(tmp_path: Path) -> None:
    python = _fake(tmp_path, "python3")
    argv = ["install", "--python", str(python), "--no-gpu", "--platform", "linux-x86_64"]
    _sigkill_during([*argv, "--installer", "pip"], tmp_path, "python3")


def _scrubbed_env(tmp: str) -> dict[str, str]:
    """pip from a clean environment (conftest's scrubbed_env), gpuresolve from this checkout."""
    return scrubbed_env(PYTHONPATH=str(ROOT), TMPDIR=tmp)


@pytest.mark.slow
def test_sigkill_during_pips_build_step_ends_pip_and_the_build(tmp_path: Path) -> None:
    """A real pip building a real source tree: the build step (pip's child, our grandchild)
    starts a child of its own and sleeps; gpuresolve's process is SIGKILLed meanwhile."""
    pytest.importorskip("setuptools")
    src = tmp_path / "slowpkg"
    src.mkdir()
    (tmp_path / "tmp").mkdir()  # pip's own temporary folders, left by its SIGKILL
    (src / "setup.py").write_text(
        "import os, subprocess, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(tmp_path / 'build.child')!r}, 'w').write(str(child.pid))\n"
        f"open({str(tmp_path / 'pip.pid')!r}, 'w').write(str(os.getppid()))\n"
        f"open({str(tmp_path / 'build.pid')!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(300)\n",
        encoding="utf-8",
    )
    pip = [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation"]
    pip += ["--target", str(tmp_path / "site"), str(src)]
    driver = (
        "import sys\nfrom resolver.io import subprocs\n"
        f"subprocs.run({pip!r}, timeout=None, capture=False)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        env=_scrubbed_env(str(tmp_path / "tmp")),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        files = [tmp_path / n for n in ("pip.pid", "build.pid", "build.child")]
        deadline = time.monotonic() + 120
        while not all(f.is_file() and f.read_text().strip() for f in files):
            assert time.monotonic() < deadline and proc.poll() is None, "the build never started"
            time.sleep(0.1)
        pids = [int(f.read_text()) for f in files]
        assert all(_alive(p) for p in pids)
        proc.kill()
        proc.wait(30)
        assert _gone(pids, wait_s=15), "pip or its build step outlived a SIGKILLed gpuresolve"
        assert not (tmp_path / "site" / "slowpkg").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_leftovers(pids)


def _children_of(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc (Linux)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry.name))
    return out


def _argv(pid: int) -> list[bytes]:
    """A process's argv, or none where it ended between being listed and being read."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_sigkill_during_installs_real_pip_ends_pip(tmp_path: Path) -> None:
    """`gpuresolve install` runs a real pip in a real virtualenv against an index that accepts
    the connection and never answers; gpuresolve is SIGKILLed while pip waits on it."""
    venv_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv_dir)], check=True, timeout=300)
    python = venv_dir / "bin" / "python"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # never accepted: pip's request hangs until its own timeout
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/whl"
    env = _scrubbed_env(str(tmp_path))
    argv = ["install", "--python", str(python), "--pytorch-index", url, "--installer", "pip"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", *argv, "--gpu", "8.6", "--driver", "580.65.06"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pips: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not pips:
            assert time.monotonic() < deadline and proc.poll() is None, "pip never started"
            pips = [p for p in _children_of(proc.pid) if b"pip" in _argv(p)[2:4]]
            time.sleep(0.1)
        time.sleep(1.0)  # pip is waiting on the index
        assert _alive(pips[0])
        proc.kill()
        proc.wait(30)
        assert _gone(pips, wait_s=15), "pip outlived a SIGKILLed gpuresolve install"
    finally:
        silent.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_leftovers(pips)


def test_run_stops_a_child_that_floods_its_output() -> None:
    """Captured output is bounded: a child printing without end is killed with its group at
    the limit, never read until memory runs out."""
    start = time.monotonic()
    flood = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    done = subprocs.run([sys.executable, "-c", flood], timeout=120, limit=1 << 20)
    assert done.overflow == "stdout" and not done.timed_out and done.returncode != 0
    assert len(done.stdout) <= 1 << 20 and "printed more than" in done.stderr
    assert time.monotonic() - start < 60


def test_run_feeds_input_and_reads_text_as_a_text_pipe_does() -> None:
    code = "import sys; sys.stdout.write(sys.stdin.read().upper() + '\\r\\nend\\r')"
    done = subprocs.run([sys.executable, "-c", code], timeout=60, input="abc")
    assert (done.returncode, done.stdout, done.overflow) == (0, "ABC\nend\n", None)


def test_a_flooding_nvidia_smi_is_stopped_not_parsed(tmp_path: Path) -> None:
    """Seen: an nvidia-smi printing 200 MB of good rows held `detect` past two minutes."""
    fake = tmp_path / "nvidia-smi"
    row = "0, NVIDIA H100 80GB HBM3, 580.159.04, 9.0, 0x233010DE, 81559, Disabled"
    fake.write_text(f"#!/bin/sh\nyes '{row}'\n", encoding="utf-8")
    fake.chmod(0o755)
    start = time.monotonic()
    probe = smi.run(binaries=(str(fake),))
    assert probe.gpus is None and "printed more than" in probe.status
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_a_process_left_holding_the_pipes_ends_soon_after_its_parent(tmp_path: Path) -> None:
    """Seen: a fake interpreter that printed its result and exited, leaving `sleep 30 &` with
    its stdout, held verify 30 s (up to the probe's whole timeout). Once the child has exited,
    what it left in its group gets PIPES_AFTER_EXIT_S, then is killed."""
    script = tmp_path / "leaves"
    script.write_text(
        f"#!/bin/sh\nsleep 300 &\necho $! > '{tmp_path}/left.pid'\necho done\n", encoding="utf-8"
    )
    script.chmod(0o755)
    start = time.monotonic()
    done = subprocs.run([str(script)], timeout=120)
    assert (done.returncode, done.stdout, done.timed_out) == (0, "done\n", False)
    assert time.monotonic() - start < subprocs.PIPES_AFTER_EXIT_S + 20
    left = int((tmp_path / "left.pid").read_text())
    try:
        assert _gone([left]), "the process it left outlived the call"
    finally:
        _kill_leftovers([left])
