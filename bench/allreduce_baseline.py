"""A plain `torch.distributed` all-reduce across every visible GPU: the figure gpuresolve's NCCL
check is compared with on the same host.

One process per GPU (started here with the environment inherited, so NVLink multicast stays off
when the caller set NCCL_NVLS_ENABLE=0 and friends), 5 warm-ups and 20 timed all-reduces per size,
float32, bus bandwidth = bytes / time x 2(n-1)/n as nccl-tests reports it. Prints one line per
size and, with ``--json FILE``, writes them. Run with the interpreter that holds torch:
``python3 bench/allreduce_baseline.py [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

SIZES = (1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30)
for _var, _value in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ[_var] = _value  # whatever the caller said: multicast can take shared GPUs down


def worker(rank: int, world: int, port: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        device_id=torch.device("cuda", rank),
    )
    rows = []
    for size in SIZES:
        buf = torch.ones(size // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        t = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        s = torch.tensor([(time.perf_counter() - t) / 20], device="cuda")
        dist.all_reduce(s, op=dist.ReduceOp.MAX)
        algbw = size / float(s.item()) / 1e9
        rows.append(
            {
                "bytes": size,
                "us": float(s.item()) * 1e6,
                "algbw": algbw,
                "busbw": algbw * 2 * (world - 1) / world,
            }
        )
        del buf
        torch.cuda.empty_cache()
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main() -> int:
    import torch
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    world = torch.cuda.device_count()
    if world < 2:
        print("needs two or more GPUs", file=sys.stderr)
        return 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, port, queue), nprocs=world, start_method="spawn")
    rows = queue.get()
    for r in rows:
        print(
            f"all_reduce {r['bytes'] / 2**20:g} MiB: bus {r['busbw']:.1f} GB/s "
            f"(alg {r['algbw']:.1f}, {r['us']:.0f} us)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"world": world, "torch": torch.__version__, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
