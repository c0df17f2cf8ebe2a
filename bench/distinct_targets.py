"""Time `gpuresolve lock` on a team spec of ``--targets`` distinct machines, in a fresh process.

Every target differs from every other (GPU model, GPU count, driver build, platform), drawn from
24 GPU models of real fleets (several names per compute capability) on drivers of branches
535-580, a tenth on Windows. Budget (issue 29): under 3 s on a 2-core machine, end to end (about
2.5 s in 2026-11; 7.6 s before). The child prints the solver runs made beside the machine kinds
counted by GPU name and by compute capability: the memo keys kinds by their distinct compute
capabilities (one GPU of a model and eight are one kind), so runs follow the smaller figure.
Usage: python3 bench/distinct_targets.py [--targets N]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTS = [1, 2, 4, 8]
BRANCHES = [(535, 104), (550, 54), (560, 35), (570, 124), (575, 57), (580, 95)]
# The GPU models of real fleets: several names per compute capability.
GPUS = [
    *("NVIDIA A100", "NVIDIA A800", "NVIDIA A30"),  # 8.0
    *("NVIDIA A40", "NVIDIA A10", "NVIDIA A10G", "NVIDIA RTX A6000", "NVIDIA GeForce RTX 3090"),
    *("NVIDIA L4", "NVIDIA L40", "NVIDIA L40S", "NVIDIA GeForce RTX 4090"),  # 8.9
    *("NVIDIA RTX 6000 Ada Generation", "NVIDIA H100", "NVIDIA H200", "NVIDIA H800"),
    *("NVIDIA H20", "NVIDIA B200", "NVIDIA B100", "Tesla T4", "Quadro RTX 8000", "Tesla V100"),
]


def spec_text(targets: int) -> str:
    sys.path.insert(0, str(ROOT))
    from resolver import catalog as catalog_mod

    catalog = catalog_mod.load()
    for name in GPUS:
        catalog.resolve_gpu(name)  # every name is known (else the spec would fail)
    rng = random.Random(29)
    drivers = [
        f"{branch}.{minor + m}.{build:02d}"
        for branch, minor in BRANCHES
        for m in range(60)
        for build in range(1, 20)
    ]
    chosen = rng.sample(list(itertools.product(drivers, GPUS, COUNTS)), targets)
    lines = ["name: distinct", 'python: "3.12"', 'packages: {torch: ">=2.4"}', "targets:"]
    for i, (driver, gpu, count) in enumerate(chosen):
        platform = "windows-x86_64" if i % 10 == 9 else "linux-x86_64"
        listed = ", ".join([repr(gpu)] * count)
        lines.append(
            f'  - {{name: m{i}, platform: {platform}, driver: "{driver}", gpus: [{listed}]}}'
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", type=int, default=10_000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from team_scale import run  # the same child: spec read, lock, solver runs, end to end

    with tempfile.TemporaryDirectory() as tmp:
        text = spec_text(args.targets)
        run("distinct", f"{args.targets} distinct targets", text, 3_000, Path(tmp))


if __name__ == "__main__":
    main()
