"""Time `gpuresolve lock` on team specs that scale in machine shapes, in a fresh process each.

Two specs are written to a temporary directory and locked (requirements.txt only):
- ``split``: ``split: true`` over ``--shapes`` distinct machine shapes (GPU model × driver build ×
  platform, some GPU-less members); budget (issue 23): under 10 s on a 2-core machine;
- ``drivers``: ``--targets`` targets, each with its own driver build (no split), drawn from a few
  GPU models on branches 535–580; budget: under 5 s.
Each child prints the spec read, the lock (solve + render) and the end-to-end wall and CPU time.
Usage: python3 bench/team_scale.py [--shapes N] [--targets N] [--only split|drivers]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SPLIT_GPUS = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA L40S",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 3090",
    "NVIDIA B200",
    "NVIDIA RTX A6000",
    "Tesla T4",
    "Tesla V100",
    "Tesla P100",
    "NVIDIA GeForce GTX 1080 Ti",
    "NVIDIA L4",
]
BRANCHES = [(525, 60), (535, 104), (550, 54), (560, 35), (570, 124), (575, 57), (580, 95)]
DRIVER_GPUS = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A10G"]


def split_spec(shapes: int) -> str:
    rng = random.Random(23)
    seen: set[tuple[str, str, str, int]] = set()
    lines = ["name: split-scale", 'python: "3.12"', 'packages: {torch: ">=2.4"}', "split: true"]
    lines.append("targets:")
    i = 0
    while len(seen) < shapes:
        platform = rng.choice(["linux-x86_64"] * 6 + ["windows-x86_64", "linux-aarch64"])
        if i % 25 == 0:
            key = (platform, "", "", 0)
            if key not in seen:
                seen.add(key)
                lines.append(f"  - {{name: cpu-{i}, platform: {platform}, no_gpu: true}}")
            i += 1
            continue
        gpu = rng.choice(SPLIT_GPUS if platform != "linux-aarch64" else ["NVIDIA GH200 480GB"])
        branch, minor = rng.choice(BRANCHES)
        driver = f"{branch}.{minor + rng.randrange(40)}.{rng.randrange(1, 20):02d}"
        count = rng.choice([1, 2, 4, 8])
        key = (platform, gpu, driver, count)
        if key in seen:
            continue
        seen.add(key)
        lines.append(
            f'  - {{name: m{i}, count: {count}, platform: {platform}, driver: "{driver}", '
            f'gpus: ["{gpu}"]}}'
        )
        i += 1
    return "\n".join(lines) + "\n"


def driver_spec(targets: int) -> str:
    rng = random.Random(10_000)
    lines = ["name: driver-scale", 'python: "3.12"', 'packages: {torch: ">=2.4"}', "split: false"]
    lines.append("targets:")
    drivers: set[str] = set()
    while len(drivers) < targets:
        branch, minor = rng.choice(BRANCHES[1:])
        drivers.add(f"{branch}.{minor + rng.randrange(200)}.{rng.randrange(1, 100):02d}")
    for i, driver in enumerate(sorted(drivers)):
        gpu = DRIVER_GPUS[i % len(DRIVER_GPUS)]
        lines.append(f'  - {{name: node-{i}, driver: "{driver}", gpus: ["{gpu}"]}}')
    return "\n".join(lines) + "\n"


CHILD = """
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
from resolver import catalog as catalog_mod
from resolver.team.spec import load_spec
from resolver.flows.team import lock_team
from resolver.writers import lockfiles
from resolver.solve import memo
runs = []
solve = memo.solve
memo.solve = lambda *args: runs.append(1) or solve(*args)  # counts the solver runs
catalog = catalog_mod.load()
t1 = time.perf_counter()
spec = load_spec(sys.argv[1], catalog)
t2 = time.perf_counter()
options = lockfiles.LockOptions(formats=frozenset({"requirements"}), top_level=True)  # no index
team = lock_team(catalog, spec, options)
t3, c3 = time.perf_counter(), time.process_time()
print(f"  read the spec ({len(spec.members)} targets): {(t2 - t1) * 1000:8.0f} ms")
print(f"  lock (solve + render):          {(t3 - t2) * 1000:8.0f} ms")
kind = memo.FleetSolver(catalog, spec.request).kind
by_cc = {kind(t) for t in spec.targets}
by_name = {(kind(t), tuple(g.name for g in t.gpus)) for t in spec.targets}
print(f"  solver runs: {len(runs)} (machine kinds by compute capability: {len(by_cc)}, "
      f"by GPU name: {len(by_name)})")
print(f"  end to end:                     {(t3 - t0) * 1000:8.0f} ms wall, "
      f"{(c3 - c0) * 1000:.0f} ms CPU  (budget {sys.argv[2]} ms)")
print("  result: " + "; ".join(f"{l or 'all'}: torch {d.torch}" for l, d in team.groups[:4])
      + (f"; … {len(team.groups)} groups" if len(team.groups) > 4 else ""))
"""


def run(kind: str, title: str, text: str, budget_ms: int, work: Path) -> None:
    spec = work / f"{kind}.yaml"
    spec.write_text(text, encoding="utf-8")
    print(title)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", CHILD, str(spec), str(budget_ms)], check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", type=int, default=300)
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--only", choices=("split", "drivers"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.only in (None, "split"):
            run(
                "split",
                f"split: true over {args.shapes} shapes",
                split_spec(args.shapes),
                10_000,
                work,
            )
        if args.only in (None, "drivers"):
            run("drivers", f"{args.targets} driver builds", driver_spec(args.targets), 5_000, work)


if __name__ == "__main__":
    main()
