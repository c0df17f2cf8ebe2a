"""The modules a machine passes through in `gpuresolve lock`, from the command to the writers.

Runs `gpuresolve lock --top-level` for a described machine (requirements.txt into a temporary
folder; a team spec with `lock: top-level`) in this process, offline and deterministic: the
closure (uv against an index) is not computed, so the bench needs no network and gives the
same route on every run (the closure is the writers' own work, after the route's end, either
way). A profiler hook notes every function of gpuresolve called with the machine
among its arguments, in whatever form it has there (the command's target options, a host
profile, the `Target`, a `Decision` or lock input holding it, or one of the facts the command
line gave, still as text: the driver, a GPU name), and prints the modules in the
order it reaches them: the stays (runs of calls in one module), the distinct modules ("rooms"),
the climbs back to a higher layer and the returns to a module already left. Issue 29's goal: at
most 6 modules (it was 12 or more). Beside the count, which of those modules get the typed
machine itself (a `Target`, or the decision or lock input holding it): the rest see its options
or its text where the edge parses it once (the count includes them).

Three kinds of call are not counted, because the machine does not pass through a module in them:
- code no module holds (``co_filename`` "<string>"): a dataclass's generated ``__init__`` only
  stores the fields its caller passes; building a `Target` or a `Decision` is the caller's stay,
  not one in the module that declares the class;
- a value's own comparison and hash (``__eq__``, ``__hash__``, ...), which a dict or set calls
  on a key: `Target`'s come from ``core.versions.AsWritten``, and a cache lookup is no stay there;
- the database's own text while it loads (``catalog._load_dir``): its GPU table spells
  "NVIDIA GeForce RTX 3090" too, and indexing that name is not the command line's value.
(All three were counted until 2026-11-26.)
The route starts at `commands/lock.py`, as issue 29 defines it: calls before the command's first
stay (``cli.main`` parsing argv) are not counted (they were until 2026-11-26, and added one module,
``resolver.cli``). Importing `commands/lock.py` (its module code, run when Click loads the command
lazily, before it parses argv) is not that first stay: since 2026-12-02 the option types parse what
they read (``--driver`` into a `Driver`), and that parsing is argv's. It ends at the writers: after
the first stay in ``resolver.writers``, what the writers do with the decision in their own layer
(render each file, its header spelling the target through ``render``) is listed after the figures,
not counted; a stay there in a lower layer is still counted (the writers handing the machine back
to the decision layer, as a team's report did for its what-ifs, or as the writers did when they
solved inside ``lockfiles.prepare``; the flows do both now): ending the count at the writers
hides no work moved there.
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
# ... of which the typed machine itself: the `Target`, and the decision or lock input holding it.
TYPED = {"Target", "Decision", "LockInput", "LockRequest"}
# A value's own methods that dicts, sets and sorting call on it: not a stay in a module.
OWN_PROTOCOL = {"__eq__", "__ne__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__", "__repr__"}
# ... and its facts on their own: the values the command line gave, as text.
FACTS = {"570.124.06", "NVIDIA GeForce RTX 3090", "580.95.05", "NVIDIA H100"}


def _carries(value: object, texts: bool = True) -> bool:
    if type(value).__name__ in CARRIERS:
        return True
    if not texts:
        return False
    if isinstance(value, str) and value in FACTS:
        return True
    return isinstance(value, (tuple, list)) and any(
        isinstance(v, str) and v in FACTS for v in value
    )


SPEC = """name: route
python: "3.12"
lock: top-level
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
    typed: set[str] = set()  # the modules some call of which gets the typed machine
    started = [False]  # the route starts at commands/lock.py (issue 29)
    first: list[str] = []  # each stay's first function
    loading = [0]  # depth of the database's loading

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        code = frame.f_code
        if module == "resolver.catalog" and code.co_name == "_load_dir":
            loading[0] += {"call": 1, "return": -1}.get(event, 0)
            return
        if event != "call" or not module.startswith("resolver."):
            return
        # The command's first call, not its module's import: Click imports the command lazily,
        # then parses argv (a --driver by its option type), which is not the route.
        started[0] = started[0] or (
            module == "resolver.commands.lock" and code.co_name != "<module>"
        )
        if not started[0]:
            return
        if code.co_filename == "<string>" or code.co_name in OWN_PROTOCOL:
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        carried = any(_carries(frame.f_locals.get(n), not loading[0]) for n in names)
        if carried and (not route or route[-1] != module):
            route.append(module)
            first.append(getattr(code, "co_qualname", code.co_name))  # Python 3.11+
        if carried and any(type(frame.f_locals.get(n)).__name__ in TYPED for n in names):
            typed.add(module)

    with tempfile.TemporaryDirectory() as tmp:
        if opts.team:
            spec = Path(tmp) / "route.yaml"
            spec.write_text(SPEC, encoding="utf-8")
            argv = ["lock", str(spec), "-o", str(Path(tmp) / "out")]
        else:
            argv = ["lock", "--top-level", *ARGS, "-o", tmp]
        sys.setprofile(hook)
        try:
            cli.main(argv)
        except SystemExit:
            pass
        finally:
            sys.setprofile(None)
    end = next((i for i, m in enumerate(route) if m.startswith("resolver.writers")), len(route))
    writers = layer_of("resolver.writers")
    kept = [i <= end or layer_of(m) < writers for i, m in enumerate(route)]
    beyond = [(m, f) for m, f, k in zip(route, first, kept, strict=True) if not k]
    route = [m for m, k in zip(route, kept, strict=True) if k]
    first = [f for f, k in zip(first, kept, strict=True) if k]
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
    for module, function in zip(route, first, strict=True):
        print(f"  layer {layer_of(module)}  {module}  ({function})")
    print(
        f"{len(route)} stays in {len(rooms)} modules, {climbs} climbs back up, "
        f"{returns} returns to a module already left (goal: at most 6 modules)"
    )
    seen = [m for m in rooms if m in typed]
    print(
        f"of them, {len(seen)} get the typed machine (a Target, or the decision or lock input "
        f"holding it): {', '.join(m.removeprefix('resolver.') for m in seen)}; the others see "
        "its options or its text at the edge"
    )
    if beyond:
        print("then, in the writers' own work (not counted):")
        for module, function in beyond:
            print(f"  layer {layer_of(module)}  {module}  ({function})")


if __name__ == "__main__":
    main()
