"""Start one NCCL worker per GPU in the target interpreter, with a timeout; every child ends.

Each worker runs in its own process group; when one hangs (a rendezvous that never completes,
a collective stuck on a dead link) or crashes, every group is killed and the result names the
rank, the stage it reached and the timeout. NVLink multicast stays off in every child
(NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1), whatever the
caller's environment says: it can take a shared host's GPUs out of service.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from resolver.core.errors import escaped
from resolver.io import subprocs
from resolver.standalone import NCCL_WORKER
from resolver.standalone.nccl_worker import STAGE_PREFIX
from resolver.verify.run import PROBE_OUTPUT_MAX, foreign

WORKER_FILE = NCCL_WORKER
DEFAULT_TIMEOUT_S = 60.0
# bytes per collective, as nccl-tests -b/-e; up to 1 GiB because 256 MiB under-reads NVLink (a
# 2 x H200 host: plain all-reduce 288 GB/s at 256 MiB, 327 at 1 GiB, 2026-11-26); the worker skips
# those that do not fit comfortably in the emptiest GPU's free memory.
SIZES = (1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30)
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
_LINE_MAX = 300


@dataclass
class Rank:
    """What one worker gave back."""

    rank: int
    data: dict[str, Any] | None = None
    returncode: int | None = None
    signal: str | None = None
    stage: str | None = None
    stderr_tail: list[str] = field(default_factory=list)


@dataclass
class NcclRun:
    world: int
    timeout_s: float
    timed_out: bool = False
    elapsed_s: float = 0.0
    ranks: list[Rank] = field(default_factory=list)

    @property
    def failure(self) -> str | None:
        """One line naming the first rank that failed, its stage and why; None when all ran."""
        for r in self.ranks:
            where = f"rank {r.rank} during {r.stage!r}" if r.stage else f"rank {r.rank}"
            if self.timed_out and r.data is None:
                return f"NCCL did not finish within {self.timeout_s:g} s ({where} hung)"
            if r.signal:
                return f"{where} crashed with {r.signal}"
            if r.data is None:
                last = r.stderr_tail[-1] if r.stderr_tail else "no output"
                return f"{where} exited with status {r.returncode} and no result: {last}"
            err = r.data.get("error")
            if isinstance(err, dict):
                return f"{where} failed: {err.get('type')}: {str(err.get('message'))[:300]}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "timeout_s": self.timeout_s,
            "timed_out": self.timed_out,
            "elapsed_s": self.elapsed_s,
            "failure": self.failure,
            "ranks": [
                {
                    "rank": r.rank,
                    "returncode": r.returncode,
                    "signal": r.signal,
                    "stage": r.stage,
                    "result": r.data,
                    "stderr_tail": r.stderr_tail,
                }
                for r in self.ranks
            ],
        }


def free_port() -> int:
    """A loopback port free now, for the rendezvous (the workers bind it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(environ: Mapping[str, str], rank: int, world: int) -> dict[str, str]:
    env = dict(environ)
    env.update(NO_MULTICAST)
    env["PYTHONNOUSERSITE"] = "1"
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    env.update(MASTER_ADDR="127.0.0.1")
    return env


def run_nccl(
    python: str,
    world: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    sizes: Sequence[int] = SIZES,
    environ: Mapping[str, str] | None = None,
) -> NcclRun:
    """Run the workers and wait for all of them (within ``timeout_s``); kill every one left."""
    source = WORKER_FILE.read_text(encoding="utf-8")
    port = free_port()
    started = time.monotonic()
    procs: list[subprocess.Popen[bytes]] = []
    result = NcclRun(world=world, timeout_s=timeout_s)
    try:
        for rank in range(world):
            args = [python, "-I", "-c", source, "--rank", str(rank), "--world", str(world)]
            args += ["--port", str(port), "--timeout", f"{timeout_s:g}"]
            for size in sizes:
                args += ["--size", str(size)]
            procs.append(
                subprocs.start(  # its own group, watched: it ends with us, SIGKILL included
                    args,
                    stdout=subprocs.PIPE,
                    stderr=subprocs.PIPE,
                    env=child_env(os.environ if environ is None else environ, rank, world),
                )
            )
        outputs = _collect(procs, started, timeout_s, result)
    finally:
        for p in procs:  # every child ends with us, hung or not
            _kill(p)
    result.elapsed_s = round(time.monotonic() - started, 3)
    for rank, (p, (out, err)) in enumerate(zip(procs, outputs, strict=True)):
        result.ranks.append(_rank(rank, p, out, err, source))
    return result


def _collect(
    procs: Sequence[subprocess.Popen[bytes]], started: float, timeout_s: float, result: NcclRun
) -> list[tuple[bytes, bytes]]:
    """Each worker's output, read with a bound (a flood stops every worker, as a hang does)."""
    outputs: list[tuple[bytes, bytes]] = []
    for p in procs:
        left = max(timeout_s - (time.monotonic() - started), 0.1)
        got = subprocs.collect(p, timeout=left, limit=PROBE_OUTPUT_MAX)
        if got.timed_out or got.overflow:
            result.timed_out = result.timed_out or got.timed_out
            for q in procs:
                _kill(q)
        outputs.append((got.stdout, got.stderr))
    return outputs


def _kill(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        subprocs.kill_group(p)
    subprocs.forget(p)


def _rank(rank: int, p: subprocess.Popen[bytes], out: bytes, err: bytes, source: str) -> Rank:
    r = Rank(rank=rank, returncode=p.returncode)
    if p.returncode is not None and p.returncode < 0:
        try:
            r.signal = signal.Signals(-p.returncode).name
        except ValueError:
            r.signal = f"signal {-p.returncode}"
    lines: list[str] = []
    for line in err.decode("utf-8", "replace").replace(source, "<worker>").splitlines():
        if line.startswith(STAGE_PREFIX):
            r.stage = escaped(line[len(STAGE_PREFIX) :].strip()[:40])
        elif line.strip():
            line = line.rstrip()
            lines.append(escaped(line if len(line) <= _LINE_MAX else f"{line[: _LINE_MAX - 3]}..."))
    r.stderr_tail = lines[-8:]
    text = out.decode("utf-8", "replace").strip()
    if text:
        try:
            data = json.loads(text.splitlines()[-1])
        except (ValueError, RecursionError):
            data = None
        r.data = foreign(data) if isinstance(data, dict) else None  # the environment's words
    if r.data is not None and r.signal:
        r.data = None  # killed after printing: not a result to trust
    if r.data is not None and isinstance(r.data.get("stage"), str):
        r.stage = r.data["stage"][:40]
    return r
