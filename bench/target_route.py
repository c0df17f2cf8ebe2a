"""The modules a machine passes through in `gpuresolve lock`, from the command to the writers.

Runs `gpuresolve lock` for a described machine (requirements.txt into a temporary folder) in this
process under a profiler hook that notes every function of gpuresolve called with the machine
among its arguments, in whatever form it has there (the command's target options, a host
profile, the `Target`, a `Decision` or lock input holding it, or one of the facts the command
line gave, still as text: the driver, a GPU name), and prints the modules in the
order it reaches them: the stays (runs of calls in one module), the distinct modules ("rooms"),
the climbs back to a higher layer and the returns to a module already left. Issue 29's goal: at
most 6 modules (it was 12 or more).
Usage: python3 bench/target_route.py [--team]   (--team: a team spec instead of one machine)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

ARGS = ["--driver", "570.124.06", "--gpu", "NVIDIA GeForce RTX 3090", "--python", "3.12"]
# The forms the machine takes on its way (by class name: the bench runs on older code too).
CARRIERS = {"TargetOptions", "HostProfile", "Target", "Decision", "LockInput", "LockRequest"}
# ... and its facts on their own: the values the command line gave, as text.
FACTS = {"570.124.06", "NVIDIA GeForce RTX 3090", "580.95.05", "NVIDIA H100"}


def _carries(value: object) -> bool:
    if type(value).__name__ in CARRIERS or (isinstance(value, str) and value in FACTS):
        return True
    return isinstance(value, (tuple, list)) and any(
        isinstance(v, str) and v in FACTS for v in value
    )


SPEC = """name: route
python: "3.12"
targets:
  - {name: a, driver: "570.124.06", gpus: ["NVIDIA GeForce RTX 3090"]}
  - {name: b, driver: "580.95.05", gpus: ["NVIDIA H100"]}
"""


def layer_of(module: str) -> int:
    from test_architecture import layer_of as contract_layer

    found = contract_layer(module)
    return -1 if found is None else found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--team", action="store_true", help="lock a two-machine team spec")
    opts = parser.parse_args()
    from resolver import cli

    route: list[str] = []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("resolver."):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        carried = any(_carries(frame.f_locals.get(n)) for n in names)
        if carried and (not route or route[-1] != module):
            route.append(module)

    with tempfile.TemporaryDirectory() as tmp:
        if opts.team:
            spec = Path(tmp) / "route.yaml"
            spec.write_text(SPEC, encoding="utf-8")
            argv = ["lock", str(spec), "-o", str(Path(tmp) / "out")]
        else:
            argv = ["lock", *ARGS, "-o", tmp]
        sys.setprofile(hook)
        try:
            cli.main(argv)
        except SystemExit:
            pass
        finally:
            sys.setprofile(None)
    rooms: list[str] = []
    climbs = returns = 0
    for i, module in enumerate(route):
        if module in rooms and rooms[-1] != module:
            returns += 1
        if module not in rooms:
            rooms.append(module)
        if i and layer_of(module) > layer_of(route[i - 1]):
            climbs += 1
    print(f"a machine's route through `gpuresolve lock{' SPEC' if opts.team else ''}`:")
    for module in route:
        print(f"  layer {layer_of(module)}  {module}")
    print(
        f"{len(route)} stays in {len(rooms)} modules, {climbs} climbs back up, "
        f"{returns} returns to a module already left (goal: at most 6 modules)"
    )


if __name__ == "__main__":
    main()
