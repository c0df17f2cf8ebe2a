"""Median wall time of `gpuresolve suggest --json` for a described target, each in a fresh process.

Budget (issue 2): under 150 ms on a 2-core machine; the bare interpreter takes about 35 ms.
Usage: python3 bench/suggest_latency.py [--runs N] [--gpu NAME]
(--gpu "NVIDIA GeForce RTX 5090 D" times a name only the generated name table knows.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARGS = [
    "suggest",
    "--json",
    "--driver",
    "570.124.06",
    "--gpu",
    "NVIDIA GeForce RTX 3090",
    "--python",
    "3.12",
    "--with",
    "torchvision",
]


def timed(cmd: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.decode().strip()}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--gpu", default=ARGS[ARGS.index("--gpu") + 1])
    opts = parser.parse_args()
    runs = opts.runs
    args = [opts.gpu if a == ARGS[ARGS.index("--gpu") + 1] else a for a in ARGS]
    # The console script beside this interpreter (a version manager's shim on PATH would add its
    # own start-up); else the module.
    script = Path(sys.executable).with_name("gpuresolve")
    cmd = [str(script), *args] if script.is_file() else [sys.executable, "-m", "resolver", *args]
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        print("note: PYTHONDONTWRITEBYTECODE was set; unset here, as an installed wheel has .pyc")
    timed(cmd, 2)  # warm the page cache
    bare = timed([sys.executable, "-c", "pass"], runs)
    ours = timed(cmd, runs)
    print(f"bare interpreter:         median {statistics.median(bare) * 1000:7.1f} ms")
    print(
        f"gpuresolve suggest --json: median {statistics.median(ours) * 1000:7.1f} ms"
        f"  (min {min(ours) * 1000:.1f}, max {max(ours) * 1000:.1f}, {runs} runs)"
    )
    print("budget: 150 ms")


if __name__ == "__main__":
    main()
