"""The machine's route through `gpuresolve lock` (issue 29), as bench/target_route.py counts it:
the modules the command's machine passes through, from commands/lock.py to the writers. This
holds the figures ARCHITECTURE.md states, so a change that spreads the machine over more
modules again (a helper handed the whole `Target`, a facade that only delegates) fails here."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from cli_support import run_child

ROOT = Path(__file__).resolve().parent.parent
# Stays the route gave up (issue 29): the options held in the command layer, the GPU name
# going through the catalog's facade, the extension hints handed the whole machine; (issue 37)
# the hints apart from the solver, the described machine made a Target below the target flow,
# the driver parsed after Click read it.
LEFT = {
    "resolver.commands.common",
    "resolver.db.models",
    "resolver.solve.ext_hints",
    "resolver.solve.hints",
    "resolver.solve.target",
}


def _route(tmp_path: Path, *args: str) -> tuple[list[str], int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["TMPDIR"] = str(tmp_path)  # the bench's lock writes into a temporary folder
    proc = run_child(
        [sys.executable, str(ROOT / "bench" / "target_route.py"), *args], env, tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    counted = proc.stdout.split("(goal:", 1)[0]
    modules = re.findall(r"^  layer \d+  (\S+)  ", counted, re.MULTILINE)
    found = re.search(r"(\d+) stays in (\d+) modules", proc.stdout)
    assert found is not None, proc.stdout
    assert int(found[1]) == len(modules)
    return modules, int(found[2])


@pytest.mark.slow
@pytest.mark.parametrize(("args", "most"), [((), 6), (("--team",), 11)], ids=["one", "team"])
def test_the_route_from_the_command_to_the_writers(
    tmp_path: Path, args: tuple[str, ...], most: int
) -> None:
    modules, rooms = _route(tmp_path, *args)
    assert rooms == len(set(modules)) <= most, modules
    assert modules[0] == "resolver.commands.lock"  # the route starts at the command
    assert "resolver.writers.lockfiles" in modules  # ... and reaches the writers
    assert not LEFT & set(modules), modules
    if not args:  # one machine: its driver is parsed where Click reads it, before the route
        assert "resolver.core.versions" not in modules, modules
