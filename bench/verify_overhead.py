"""How much longer `gpuresolve verify` takes than importing torch and initialising CUDA.

Prints the median wall time of ``python -c "import torch; torch.cuda.init()"`` and of
``python -m resolver verify --json`` (no --benchmark) in fresh processes on the same host, run
alternately after one warm-up each, and their ratio (the target: at most 1.2). Run it from the
repository root with the interpreter that holds torch: ``python3 bench/verify_overhead.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import torch; torch.cuda.init()"


def timed(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0, 1)) -> tuple[float, str]:
    """Wall time and stdout of a fresh process; any other exit status ends the benchmark."""
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if done.returncode not in ok:
        sys.exit(f"{' '.join(cmd[:4])} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each (default 5)")
    parser.add_argument("--python", default=sys.executable, help="interpreter holding torch")
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    base_cmd = [args.python, "-c", BASELINE]
    verify_cmd = [sys.executable, "-m", "resolver", "verify", "--json", "--python", args.python]
    timed(base_cmd, env, ok=(0,))  # warm-ups: page cache, driver state; torch must import
    timed(verify_cmd, env)
    base: list[float] = []
    ver: list[float] = []
    probe: list[float] = []
    gpu_tests: list[float] = []
    for _ in range(args.runs):
        base.append(timed(base_cmd, env, ok=(0,))[0])
        wall, out = timed(verify_cmd, env)
        ver.append(wall)
        report = json.loads(out)
        probe.append(float((report.get("probe") or {}).get("elapsed_s") or 0.0))
        stages = (report.get("probe") or {}).get("timings") or {}
        if "gpu-tests" in stages and "libraries" in stages:
            gpu_tests.append(float(stages["libraries"]) - float(stages["gpu-tests"]))
        status = report.get("status")
    b, v = statistics.median(base), statistics.median(ver)
    print(f"python: {args.python}")
    print(f"runs: {args.runs} each, alternating, after one warm-up each")
    for label, xs in (("import torch; torch.cuda.init()", base), ("gpuresolve verify --json", ver)):
        med = statistics.median(xs)
        print(f"{label:<33} median {med:.3f} s (min {min(xs):.3f}, max {max(xs):.3f})")
    print(f"{'  of which the probe process':<33} median {statistics.median(probe):.3f} s")
    if gpu_tests:
        print(f"{'  of which its GPU tests':<33} median {statistics.median(gpu_tests):.3f} s")
    print(f"ratio verify / baseline: {v / b:.2f} (target <= 1.2); last verify status: {status}")


if __name__ == "__main__":
    main()
