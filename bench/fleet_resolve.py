"""Time resolving a fleet of 10,000 targets (mostly duplicates, as real fleets are).

Budget (team environments issue): under 2 s. Prints the wall time of solve_fleet (and of the
catalog load, separately) for a fleet drawn from a dozen machine shapes.
Usage: python3 bench/fleet_resolve.py [--targets N]
"""

from __future__ import annotations

import argparse
import random
import time

from resolver import catalog as catalog_mod
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import Driver
from resolver.solve import Request, Target, TargetGpu
from resolver.solve.fleet import solve_fleet

SHAPES = [
    ("linux-x86_64", "535.104.05", ["NVIDIA A100-SXM4-80GB"] * 8),
    ("linux-x86_64", "550.54.15", ["NVIDIA A100-SXM4-40GB"] * 4),
    ("linux-x86_64", "560.35.03", ["NVIDIA GeForce RTX 4090"]),
    ("linux-x86_64", "560.35.03", ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]),
    ("linux-x86_64", "570.124.06", ["NVIDIA H100 80GB HBM3"] * 8),
    ("linux-x86_64", "575.57.08", ["NVIDIA L40S"] * 4),
    ("linux-x86_64", "580.95.05", ["NVIDIA B200"] * 8),
    ("linux-x86_64", "580.65.06", ["NVIDIA H200"] * 8),
    ("linux-x86_64", "570.86.10", ["NVIDIA RTX A6000"]),
    ("linux-x86_64", None, []),
    ("linux-aarch64", "580.95.05", ["NVIDIA GB10"]),
    ("macos-arm64", None, []),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", type=int, default=10_000)
    n = parser.parse_args().targets
    t0 = time.perf_counter()
    catalog = catalog_mod.load()
    t1 = time.perf_counter()
    rng = random.Random(7)
    targets = []
    for i in range(n):
        platform, driver, gpus = rng.choice(SHAPES)
        resolved = tuple(TargetGpu(*catalog.resolve_gpu(g)) for g in gpus)
        drv = None if driver is None else Driver.parse(driver)  # typed, as the readers give it
        plat, py = Platform.parse(platform), PythonVersion.parse("3.12")
        targets.append(
            Target(plat, py, drv, "linux", resolved, nvidia=bool(resolved), name=f"m{i}")
        )
    t2 = time.perf_counter()
    decision = solve_fleet(catalog, targets, Request())
    t3 = time.perf_counter()
    picks = ", ".join(f"{c.folder}: {c.candidate.variant.name}" for c in decision.choices)
    print(f"catalog load:        {(t1 - t0) * 1000:8.1f} ms")
    print(f"build {n} targets: {(t2 - t1) * 1000:8.1f} ms")
    print(f"solve_fleet:         {(t3 - t2) * 1000:8.1f} ms  (budget 2000 ms)")
    print(f"result: torch {decision.torch} ({picks})" if decision.ok else "result: no common set")


if __name__ == "__main__":
    main()
