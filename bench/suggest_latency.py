"""`gpuresolve suggest --json` for a described target against a bare interpreter, as ratios.

Each round runs, one after the other, the same interpreter's `python -c pass` and the command in
each case, so a machine shared with other work slows them alike; the medians of ``--runs`` rounds
(15 by default) and their ratios are printed. The cases: warm with no user observations (the
catalog cache written by an earlier run), warm with a user observations file of
``--observations`` wheels (what `verify` and `db import` record), and a fresh HOME (empty data
and cache folders every run: what a first run, a container or a CI job finds); and, warm,
`gpuresolve --version`, `--help` and `detect --json` (what a newcomer types first; detect's
probes take what this machine's driver takes: no budget).
Budgets (issue 40): warm `suggest --json` at most 4x the bare interpreter, `--version` and
`--help` at most 2.5x; a fresh HOME at most 1.5x warm. ``suggest --with vllm`` (issue 38): warm,
with the extension packages' history loaded (no budget: it is off every other case's path).
CPU time (the child's user + system) is printed beside the wall time: the steadier figure.
Every run starts in an empty folder, as in a project without gpuresolve settings (run from a
checkout of gpuresolve, its own pyproject.toml, which names gpuresolve, would be parsed too).
``--instructions``: each case once under valgrind's cachegrind (``--cache-sim=no``), its
instructions and their ratio to the bare interpreter's: the same figure on a loaded machine as on
an idle one (wall time on a shared machine is noise), but harsher than wall time, which also
counts the exec, the page faults and the loading a bare interpreter pays too.
Usage: python3 bench/suggest_latency.py [--runs N] [--observations N] [--gpu NAME] [--instructions]
(--gpu "NVIDIA GeForce RTX 5090 D" times a name only the generated name table knows.)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
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


WITH_CASE = "suggest --with vllm"


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


def instructions(cmd: list[str], env: dict[str, str]) -> int:
    """The instructions ``cmd`` executes (user space), counted by cachegrind."""
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    proc = subprocess.run(
        [*valgrind, f"--cachegrind-out-file={os.devnull}", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        env=env,
    )
    found = re.search(r"I\s+refs:\s+([0-9,]+)", proc.stderr)
    if proc.returncode not in (0, 1) or found is None:
        sys.exit(f"{' '.join(cmd)} under valgrind failed: {proc.stderr.strip()[-500:]}")
    return int(found.group(1).replace(",", ""))


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
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--observations", type=int, default=20)
    parser.add_argument("--gpu", default=ARGS[ARGS.index("--gpu") + 1])
    parser.add_argument("--instructions", action="store_true", help="count, under cachegrind")
    opts = parser.parse_args()
    args = [opts.gpu if a == ARGS[ARGS.index("--gpu") + 1] else a for a in ARGS]
    # The console script beside this interpreter (a version manager's shim on PATH would add its
    # own start-up); else the module.
    script = Path(sys.executable).with_name("gpuresolve")
    cmd = [str(script), *args] if script.is_file() else [sys.executable, "-m", "resolver", *args]
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        print("note: PYTHONDONTWRITEBYTECODE was set; unset here, as an installed wheel has .pyc")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "project").mkdir()
        os.chdir(Path(tmp) / "project")
        envs: dict[str, dict[str, str]] = {}
        for case in ("warm", "warm, user observations", "fresh HOME"):
            home = Path(tmp) / case.replace(" ", "-").replace(",", "")
            envs[case] = dict(
                os.environ,
                HOME=str(home),
                XDG_DATA_HOME=str(home / "data"),
                XDG_CACHE_HOME=str(home / "cache"),
                PYTHONPATH=str(ROOT),
            )
            envs[case].pop("GPURESOLVE_CACHE_DIR", None)
            envs[case].pop("GPURESOLVE_DATA_DIR", None)
            if case == "warm, user observations":
                n = write_observations(home / "data", opts.observations)
                print(f"{n} user observations written")
        for case in ("warm", "warm, user observations"):
            timed(cmd, 2, envs[case])  # warm the page cache and the catalog cache
        fresh = Path(tmp) / "fresh-HOME"
        runs = {c: cmd for c in envs}
        for flag in ("--version", "--help", "detect --json"):  # warm, as a newcomer's first
            envs[flag], runs[flag] = envs["warm"], [*cmd[: len(cmd) - len(args)], *flag.split()]
        # issue 38: warm with an extension package asked for, what loading their history costs
        # (it is off the path of every other case)
        envs[WITH_CASE], runs[WITH_CASE] = envs["warm"], [*cmd, "--with", "vllm"]
        if opts.instructions:
            counted = {"bare": instructions([sys.executable, "-c", "pass"], dict(os.environ))}
            for case, env in envs.items():
                if case == "fresh HOME":
                    shutil.rmtree(fresh, ignore_errors=True)
                else:
                    timed(runs[case], 1, env)  # its caches (the help's too) written
                counted[case] = instructions(runs[case], env)
            os.chdir(ROOT)
            for case, count in counted.items():
                ratio = "" if case == "bare" else f"  {count / counted['bare']:5.1f}x bare"
                print(f"{case + ':':25} {count / 1e6:8.1f} M instructions{ratio}")
            print(f"fresh HOME / warm: {counted['fresh HOME'] / counted['warm']:.2f}x")
            return
        results: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in ("bare", *envs)}
        for _ in range(opts.runs):
            for case, env in (("bare", dict(os.environ)), *envs.items()):
                if case == "fresh HOME":
                    shutil.rmtree(fresh, ignore_errors=True)
                run = [sys.executable, "-c", "pass"] if case == "bare" else runs[case]
                wall, cpu = timed(run, 1, env)
                results[case][0].extend(wall)
                results[case][1].extend(cpu)
        os.chdir(ROOT)
    med = {c: (statistics.median(w), statistics.median(p)) for c, (w, p) in results.items()}
    for case, (wall, cpu) in med.items():
        ratio = (
            ""
            if case == "bare"
            else f"  {wall / med['bare'][0]:5.1f}x bare (CPU {cpu / med['bare'][1]:4.1f}x)"
        )
        print(f"{case + ':':25} median {wall * 1000:7.1f} ms wall, {cpu * 1000:6.1f} ms CPU{ratio}")
    print(
        f"fresh HOME / warm: {med['fresh HOME'][0] / med['warm'][0]:.2f}x wall "
        f"(CPU {med['fresh HOME'][1] / med['warm'][1]:.2f}x)"
    )
    print(
        "budgets: warm <= 4x bare; --version, --help <= 2.5x bare; fresh HOME <= 1.5x warm "
        f"({opts.runs} alternated rounds)"
    )


if __name__ == "__main__":
    main()
