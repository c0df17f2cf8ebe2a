"""Time `gpuresolve fleet report` over 20,000 and 100,000 verify results, beside `json.loads`.

Budgets (issue 39): one group of 20,000 results (one JSON line each, ~8 KB) in at most 1.5x the
time Python's `json.loads` alone takes on the same lines; 100,000 results (several files: one
result file is capped at 256 MiB) in bounded memory (at most 500 MiB).

The results are made from the verify runs recorded on real GPUs (tests/fixtures/verify/h200_fleet,
one H200: healthy, TF32 off, cuDNN preloaded, no visible GPU; h100_diag: a GPU shared with another
process), compacted to one line as the Kubernetes Job prints them, each with its own node name,
the group of its lock and its benchmark figures jittered by up to 2%. ``--line-kb`` (default 8,
the issue's size) drops parts of the probe's document the report never reads (``TRIM``) until a
line is that long or nothing is left to drop (~11 KB: the checks, the benchmark and the GPU
state remain); 0 keeps the documents whole (~25 KB). One node in 200 is faulty. Files hold
``--per-file`` results (10,000: one file stays under the 256 MiB cap).

Each figure is taken in a fresh process (`python -m resolver fleet report --json`, its output
discarded): wall time and peak memory (ru_maxrss); `json.loads` is timed in a fresh process too,
reading the same files line by line. Usage: python3 bench/fleet_report_scale.py [--line-kb N]
[--sizes 20000,100000] [--per-file 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "verify"
HEALTHY = ["node-a", "node-b", "node-g", "node-d"]
FAULTY = [("h200_fleet", "node-c"), ("h200_fleet", "node-e"), ("h200_fleet", "node-f")]
GROUP = "cluster/linux-x86_64"
# What the report never reads, dropped in this order until a line is --line-kb: the installed
# distributions, the loaded libraries' paths, the interpreter's markers and environment.
TRIM = ("dists", "libraries", "markers", "env", "python", "timings")

LOADS = """
import json, sys, time
t0 = time.perf_counter()
n = 0
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
            n += 1
print(json.dumps({"seconds": time.perf_counter() - t0, "documents": n}))
"""


def _doc(folder: str, name: str) -> dict:
    text = (FIX / folder / f"{name}.json").read_text(encoding="utf-8")
    doc, _ = json.JSONDecoder().raw_decode(text)
    return doc


def templates(line_kb: int) -> tuple[list[dict], list[dict]]:
    healthy = [_doc("h200_fleet", n) for n in HEALTHY]
    faulty = [_doc(f, n) for f, n in FAULTY] + [_doc("h100_diag", "other_process")]
    for doc in healthy + faulty:
        doc["group"] = GROUP
        probe = doc.get("probe") or {}
        for key in TRIM if line_kb else ():
            if len(json.dumps(doc, separators=(",", ":"))) <= line_kb * 1024:
                break
            probe.pop(key, None)
    return healthy, faulty


def write(folder: Path, total: int, per_file: int, line_kb: int, seed: int = 39) -> list[Path]:
    rng = random.Random(seed)
    healthy, faulty = templates(line_kb)
    files: list[Path] = []
    fh = None
    for i in range(total):
        if i % per_file == 0:
            if fh:
                fh.close()
            files.append(folder / f"results-{len(files):03d}.jsonl")
            fh = open(files[-1], "w", encoding="utf-8")  # noqa: SIM115 - closed above/below
        doc = rng.choice(faulty) if i % 200 == 199 else rng.choice(healthy)
        doc = json.loads(json.dumps(doc))
        doc["host"]["node"] = doc["host"]["hostname"] = f"gpu-{i:06d}"
        bench = doc.get("benchmark") or {}
        for case in bench.values():
            if isinstance(case, dict) and isinstance(case.get("tflops"), float):
                case["tflops"] *= 1 + rng.uniform(-0.02, 0.02)
        assert fh is not None
        fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
    if fh:
        fh.close()
    return files


def child(args: list[str]) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak MiB, stdout) of one fresh process. CPU time is the fair
    figure on a shared machine (wall time there counts the other jobs' turns)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode not in (0, 1):
        sys.exit(f"{args[:4]}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    # ru_maxrss of the children is the largest of any child so far: runs go smallest first
    return wall, cpu, after.ru_maxrss / 1024, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--line-kb", type=int, default=8)
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--per-file", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="write the results here and keep them")
    opts = ap.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="fleet-report-bench-"))
    command = [sys.executable, "-m", "resolver", "fleet", "report", "--json"]
    try:
        one = write(base, 1, 1, opts.line_kb)[0]  # start-up: each process reading one line
        start = min(child([*command, str(one)])[1] for _ in range(3))
        start_loads = min(child([sys.executable, "-c", LOADS, str(one)])[1] for _ in range(3))
        print(
            f"start-up (CPU): fleet report {start:.2f} s, the json.loads loop {start_loads:.2f} s"
        )
        for total in (int(s) for s in opts.sizes.split(",")):
            folder = base / f"n{total}"
            folder.mkdir(parents=True, exist_ok=True)
            files = write(folder, total, opts.per_file, opts.line_kb)
            size = sum(p.stat().st_size for p in files)
            loads, loads_cpu, _, _ = child([sys.executable, "-c", LOADS, *map(str, files)])
            wall, cpu, peak, out = child([*command, str(folder)])
            doc = json.loads(out)
            named = sum(len(g["outliers"]) for g in doc["groups"])
            print(
                f"{total:>7} results in {len(files)} file(s), {size / total / 1024:.1f} KB a "
                f"line: fleet report {wall:.2f} s wall, {cpu:.2f} s CPU, peak {peak:.0f} MiB; "
                f"json.loads alone {loads:.2f} s wall, {loads_cpu:.2f} s CPU: "
                f"{cpu / loads_cpu:.2f}x (CPU), {wall / loads:.2f}x (wall), "
                f"{(cpu - start) / (loads_cpu - start_loads):.2f}x (CPU, start-ups left out); "
                f"{named} node(s) named"
            )
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
