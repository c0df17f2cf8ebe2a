"""Median wall and CPU time of `gpuresolve suggest --json` for a described target, each in a
fresh process: with no user observations, and with a user observations file (what `verify` and
`db import` record) of ``--observations`` wheels laid over the shipped database.

Budget (issues 2 and 23): under 150 ms on a 2-core machine either way; the bare interpreter takes
about 35 ms. Each case runs with its own temporary data and cache folders, warmed first (what a
user's second run finds). CPU time (the child's user + system) is printed beside the wall time:
on a machine shared with other work it is the steadier figure.
Usage: python3 bench/suggest_latency.py [--runs N] [--observations N] [--gpu NAME]
(--gpu "NVIDIA GeForce RTX 5090 D" times a name only the generated name table knows.)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def timed(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=env
        )
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.decode().strip()}")
    return walls, cpus


def write_observations(data_home: Path, count: int) -> int:
    """A user observations file of ``count`` wheels of the shipped database (as `db import` of
    a colleague's reads would leave it), written by gpuresolve's own store."""
    sys.path.insert(0, str(ROOT))
    from resolver import catalog as catalog_mod
    from resolver.core.versions import cc_str
    from resolver.observe import store

    os.environ["XDG_DATA_HOME"] = str(data_home)
    path = catalog_mod.user_data_dir() / store.FILE
    catalog = catalog_mod.load(catalog_mod.shipped_data_dir())
    written = 0
    for rel in catalog.releases:
        for var in rel.variants:
            arch = var.platforms.get("linux-x86_64")
            if arch is None or written >= count:
                continue
            wheel = f"torch-{rel.version}+{var.name}-cp312-cp312-manylinux_2_28_x86_64.whl"
            entry = {
                "wheel": wheel,
                "sha256": hashlib.sha256(wheel.encode()).hexdigest(),
                "read": "2026-11-24",
                "torch": rel.version,
                "variant": var.name,
                "platform": "linux-x86_64",
                "sass": [cc_str(c) for c in arch.sass],
                "ptx": [cc_str(c) for c in arch.ptx],
            }
            store.record(path, entry, "observations")
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--observations", type=int, default=20)
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
    bare, bare_cpu = timed([sys.executable, "-c", "pass"], runs, dict(os.environ))
    print(
        f"bare interpreter:               median {statistics.median(bare) * 1000:7.1f} ms wall, "
        f"{statistics.median(bare_cpu) * 1000:6.1f} ms CPU"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for case in ("no user observations", "user observations"):
            home = Path(tmp) / case.replace(" ", "-")
            env = dict(
                os.environ,
                XDG_DATA_HOME=str(home / "data"),
                GPURESOLVE_CACHE_DIR=str(home / "cache"),
                PYTHONPATH=str(ROOT),
            )
            label = case
            if case == "user observations":
                n = write_observations(home / "data", opts.observations)
                label = f"{n} user observations"
            timed(cmd, 2, env)  # warm the page cache and the catalog cache
            walls, cpus = timed(cmd, runs, env)
            print(
                f"suggest --json, {label + ':':23} median {statistics.median(walls) * 1000:7.1f} "
                f"ms wall, {statistics.median(cpus) * 1000:6.1f} ms CPU  (min "
                f"{min(walls) * 1000:.1f}, max {max(walls) * 1000:.1f}, {runs} runs)"
            )
    print("budget: 150 ms")


if __name__ == "__main__":
    main()
