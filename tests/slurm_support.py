"""A real Slurm (Debian's slurm-wlm 22.05, munge) on localhost for one test: a private munged,
``slurmctld -D`` and one ``slurmd -D -N NAME`` per node (Debian builds slurmd with multiple-slurmd
support), with the config, sockets, state, spool and logs in a folder of the test's, on ports free
for this xdist worker. Never /etc/slurm, no system service; every daemon is stopped by its PID.

Skipped where not root (slurmd runs jobs as their user) or where the packages are not installed
(`.ci/run` installs them with a policy-rc.d that denies starting services).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

DAEMONS = (
    "munged",
    "mungekey",
    "slurmctld",
    "slurmd",
    "sbatch",
    "srun",
    "scontrol",
    "squeue",
    "sinfo",
)


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    gres: str | None = None  # "gpu:h100:1", or "gpu:1" without a type
    features: str | None = None  # "driver-550.54.15,ib"


@dataclass(frozen=True)
class Cluster:
    conf: Path
    env: dict[str, str]
    logs: Path
    pids: tuple[int, ...]  # munged, slurmctld, each slurmd

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 30) -> str:
        done = subprocess.run(
            list(args), env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise AssertionError(f"{args}: {done.returncode}: {done.stderr}{self.tail()}")
        return done.stdout

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n" + p.read_text(errors="replace")[-2000:]
            for p in sorted(self.logs.glob("*"))
        )


def require_slurm() -> None:
    if os.geteuid() != 0:
        pytest.skip("a private Slurm needs root (slurmd runs jobs as their user)")
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        pytest.skip(
            f"Slurm or munge not installed ({', '.join(missing)}): apt-get install slurm-wlm"
        )


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _config(base: Path, nodes: Sequence[Node], ports: list[int]) -> str:
    lines = [
        "ClusterName=gpuresolve-test",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={base}/munge.sock",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={base}/state",
        f"SlurmdSpoolDir={base}/spool/%n",
        f"SlurmctldPidFile={base}/slurmctld.pid",
        f"SlurmdPidFile={base}/slurmd-%n.pid",
        f"SlurmctldLogFile={base}/log/slurmctld.log",
        f"SlurmdLogFile={base}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SchedulerType=sched/builtin",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "GresTypes=gpu",
        # slurmctld, slurmd and srun bind the address they are given, not every interface
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
    ]
    for node, port in zip(nodes, ports[1:], strict=True):
        line = f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=1"
        if node.gres:
            line += f" Gres={node.gres}"
        if node.features:
            line += f" Feature={node.features}"
        lines.append(line + " State=UNKNOWN")
    for part in sorted({n.partition for n in nodes}):
        members = ",".join(n.name for n in nodes if n.partition == part)
        lines.append(f"PartitionName={part} Nodes={members} MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _gres_conf(nodes: Sequence[Node]) -> str:
    lines = []
    for n in nodes:
        if n.gres:  # gpu:TYPE:COUNT, or gpu:COUNT (a GRES without a type)
            *_, gtype, count = ["", *n.gres.split(":")]
            typed = f" Type={gtype}" if gtype != "gpu" else ""
            lines.append(f"NodeName={n.name} Name=gpu{typed} File=/dev/null Count={count}")
    return "\n".join(lines) + "\n"


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Each daemon by its PID (the last started first); nothing is left running."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def slurm_cluster(nodes: Sequence[Node], env: dict[str, str]) -> Iterator[Cluster]:
    """Start munged, slurmctld and a slurmd per node; yield once every node is idle."""
    require_slurm()
    # a short folder: a Unix socket's path is at most 107 bytes
    base = Path(tempfile.mkdtemp(prefix="slurm-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for sub in ("state", "spool", "log"):
            (base / sub).mkdir()
        base.chmod(0o711)  # munged wants its socket's folder searchable by all
        key = base / "munge.key"
        subprocess.run(
            [_exe("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True
        )
        key.chmod(0o400)
        ports = _free_ports(1 + len(nodes))
        conf = base / "slurm.conf"
        conf.write_text(_config(base, nodes, ports), encoding="utf-8")
        (base / "gres.conf").write_text(_gres_conf(nodes), encoding="utf-8")
        full_env = {**env, "SLURM_CONF": str(conf)}
        logs = base / "log"

        def start(*args: str, name: str) -> None:
            out = (logs / f"{name}.out").open("wb")
            procs.append(
                subprocess.Popen(
                    list(args),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=full_env,
                    start_new_session=True,
                )
            )
            out.close()

        start(
            _exe("munged"), "-F", "-f", f"--socket={base}/munge.sock", f"--key-file={key}",
            f"--pid-file={base}/munged.pid", f"--log-file={logs}/munged.log",
            f"--seed-file={base}/munged.seed", name="munged",
        )  # fmt: skip
        _wait(lambda: (base / "munge.sock").exists(), 10, "munged's socket")
        start(_exe("slurmctld"), "-D", "-f", str(conf), name="slurmctld")
        for node in nodes:
            start(
                _exe("slurmd"), "-D", "-f", str(conf), "-N", node.name, name=f"slurmd-{node.name}"
            )
        cluster = Cluster(conf, full_env, logs, tuple(p.pid for p in procs))

        def idle() -> bool:
            for proc in procs:
                if proc.poll() is not None:
                    raise AssertionError(f"a Slurm daemon exited ({proc.args!r}){cluster.tail()}")
            done = subprocess.run(
                [_exe("sinfo"), "-h", "-N", "-o", "%N %t"], env=full_env, capture_output=True,
                text=True, timeout=10,
            )  # fmt: skip
            states = [ln.split()[1] for ln in done.stdout.splitlines() if ln.strip()]
            return done.returncode == 0 and len(states) == len(nodes) and set(states) == {"idle"}

        _wait(idle, 30, "every node idle")
        yield cluster
    finally:
        _stop(procs)
        shutil.rmtree(base, ignore_errors=True)


def _wait(ready: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(ready) and ready():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def listening(pids: Sequence[int]) -> list[tuple[int, str]]:
    """The (pid, local address) of every TCP socket those processes listen on, from /proc."""
    inodes: dict[str, int] = {}
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir() if fds.is_dir() else ():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        path = Path("/proc/net", table)
        lines = path.read_text().splitlines()[1:] if path.exists() else []
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # TCP_LISTEN
                addr, port = cols[1].split(":")
                found.append((inodes[cols[9]], f"{_address(addr, width)}:{int(port, 16)}"))
    return found


def _address(hex_addr: str, width: int) -> str:
    """/proc/net/tcp's address (each 32-bit word in host byte order) as text."""
    import ipaddress

    raw = b"".join(
        int(hex_addr[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, width, 8)
    )
    return str(ipaddress.ip_address(raw))
