"""gpuresolve's NCCL worker: one per GPU, inside the environment under test; prints one JSON line.

Like the probe it is standard library and torch only, Python 3.9 syntax, launched as
``python -I -c <this source> --rank R --world N --port P --timeout S [--size BYTES]...`` by
`verify.nccl_run`, which sets NCCL_NVLS_ENABLE=0 (and the other multicast switches) in its
environment. Stages are marked on stderr (``@@gpuresolve-stage NAME``) so a hang or a crash names
where it happened. It checks an all-reduce and an all-gather exactly, then times both over a few
sizes the way nccl-tests does (algorithm bandwidth = bytes / time; bus bandwidth = algbw x
2(n-1)/n for all-reduce, x (n-1)/n for all-gather, whose bytes are the gathered output's).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Any

STAGE_PREFIX = "@@gpuresolve-stage "
FIT_FACTOR = 4  # a size is measured when 4x it is free on every GPU
ENV_KEYS = (
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_NVLS_ENABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_SOCKET_IFNAME",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
)


def stage(result: dict[str, Any], name: str) -> None:
    result["stage"] = name
    sys.stderr.write(STAGE_PREFIX + name + "\n")
    sys.stderr.flush()


def arg(argv: list[str], name: str, default: str | None = None) -> str:
    values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    if not values:
        if default is None:
            raise SystemExit(f"missing {name}")
        return default
    return values[-1]


def nccl_libraries() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        parts = line.split(None, 5)
        name = parts[5].strip() if len(parts) == 6 else ""
        if os.path.basename(name).startswith("libnccl.so") and name not in out:
            out.append(name)
    return out


def timed(torch: Any, dist: Any, fn: Any, iters: int) -> float:
    """Seconds per call, the slowest rank's (a collective is as fast as its slowest member)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    elapsed = torch.tensor([(time.perf_counter() - t) / iters], device="cuda")
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def run(result: dict[str, Any], argv: list[str]) -> None:
    rank, world = int(arg(argv, "--rank")), int(arg(argv, "--world"))
    port, timeout_s = int(arg(argv, "--port")), float(arg(argv, "--timeout", "60"))
    sizes = [int(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--size"]
    result.update(rank=rank, world=world, env={k: os.environ.get(k) for k in ENV_KEYS})
    stage(result, "import-torch")
    import datetime

    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")

    result["torch"] = str(torch.__version__)
    stage(result, "init")
    torch.cuda.set_device(rank)
    kwargs: dict[str, Any] = {
        "init_method": f"tcp://127.0.0.1:{port}",
        "rank": rank,
        "world_size": world,
        "timeout": datetime.timedelta(seconds=timeout_s),
        "device_id": torch.device("cuda", rank),  # binds the communicator to this rank's GPU
    }
    try:
        dist.init_process_group("nccl", **kwargs)
    except TypeError:  # torch before 2.3 has no device_id
        del kwargs["device_id"]
        dist.init_process_group("nccl", **kwargs)
    v = torch.cuda.nccl.version()
    result["nccl_version"] = ".".join(str(x) for x in v[:3]) if isinstance(v, tuple) else str(v)

    stage(result, "all-reduce")
    k = 1 << 16
    x = torch.full((k,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    want = world * (world + 1) / 2.0
    result["all_reduce_ok"] = bool(torch.all(x == want).item())

    stage(result, "all-gather")
    mine = torch.arange(k, dtype=torch.float32, device="cuda") + rank * k
    out = torch.empty(world * k, dtype=torch.float32, device="cuda")
    dist.all_gather_into_tensor(out, mine)
    ref = torch.arange(world * k, dtype=torch.float32, device="cuda")
    result["all_gather_ok"] = bool(torch.equal(out, ref))
    result["libraries"] = nccl_libraries()

    stage(result, "bandwidth")
    # Only sizes that fit comfortably in the emptiest GPU: a quarter of its free memory holds the
    # buffer, the gather's part and NCCL's own staging with room to spare.
    free = torch.tensor([float(torch.cuda.mem_get_info()[0])], device="cuda")
    dist.all_reduce(free, op=dist.ReduceOp.MIN)
    result["free_bytes_min"] = int(free.item())
    result["sizes_skipped"] = [s for s in sizes if s * FIT_FACTOR > free.item()]
    rows = []
    for size in [s for s in sizes if s * FIT_FACTOR <= free.item()]:
        n = max(size // 4 // world * world, world)
        buf = torch.ones(n, dtype=torch.float32, device="cuda")
        part = torch.ones(n // world, dtype=torch.float32, device="cuda")
        iters = 20 if size <= (64 << 20) else 10
        s_ar = timed(torch, dist, lambda b=buf: dist.all_reduce(b), iters)
        s_ag = timed(torch, dist, lambda b=buf, p=part: dist.all_gather_into_tensor(b, p), iters)
        nbytes = n * 4
        for op, s, factor in (
            ("all_reduce", s_ar, 2.0 * (world - 1) / world),
            ("all_gather", s_ag, (world - 1) / world),
        ):
            algbw = nbytes / s / 1e9
            rows.append(
                {"op": op, "bytes": nbytes, "us": s * 1e6, "algbw": algbw, "busbw": algbw * factor}
            )
        del buf, part
        torch.cuda.empty_cache()
    result["bandwidth"] = rows
    stage(result, "destroy")
    dist.destroy_process_group()


def main(argv: list[str]) -> None:
    out_fd = os.dup(1)
    os.dup2(2, 1)  # whatever NCCL or torch prints goes to stderr, not into the JSON
    result: dict[str, Any] = {"stage": None}
    try:
        run(result, argv)
        stage(result, "done")
    except BaseException as exc:  # reported, never a traceback: verify turns it into a FAIL
        result["error"] = {"type": type(exc).__name__, "message": str(exc)[:2000]}
    data = json.dumps(result).encode("utf-8") + b"\n"
    while data:
        data = data[os.write(out_fd, data) :]
    sys.stderr.flush()
    os._exit(0)  # skip teardown: NCCL's exit handlers are slow and sometimes hang


if __name__ == "__main__":
    main(sys.argv[1:])
