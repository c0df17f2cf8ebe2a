"""Solve many machines at the cost of their few kinds: a fleet's solver, memoised.

The solver's verdicts on a machine depend on its platform, Python, driver OS, GPUs, unknown GPUs
and on its driver build only through which driver floors it meets (every toolkit minimum and
minor-version-compatibility floor in the database) and which GPU-architecture windows its branch
falls in. Machines that agree on all of that are one kind: the first is solved, the rest are the
same decision restated for their driver (``rebind``). A fleet of 10,000 driver builds on a few
GPU models then costs a few dozen solver runs, and ``split`` over hundreds of machine shapes
stays linear in them.
"""

from __future__ import annotations

from dataclasses import replace

from resolver.catalog import Catalog
from resolver.solve.solver import Decision, Request, Target, rebind, restated, solve
from resolver.versions import DriverKey, driver_key

Kind = tuple[object, ...]


class FleetSolver:
    """``solve`` for one catalog and request, once per kind of machine (names are ignored)."""

    def __init__(self, catalog: Catalog, request: Request) -> None:
        self.catalog = catalog
        self.request = request
        self.runs = 0  # solver runs made (the rest were restated): the benches print it
        self._floors: dict[str, tuple[DriverKey, ...]] = {}
        self._exact: dict[Target, Decision] = {}
        self._kinds: dict[Kind, tuple[Decision, list[int]]] = {}

    def floors(self, driver_os: str) -> tuple[DriverKey, ...]:
        """Every driver floor a build can ask of ``driver_os`` (toolkit minimums, compat floors)."""
        found = self._floors.get(driver_os)
        if found is None:
            cat = self.catalog
            values = {tk.min_driver.get(driver_os) for tk in cat.toolkits.values()}
            values |= {f.min_driver.get(driver_os) for f in cat.compat_floors.values()}
            found = tuple(sorted({driver_key(v) for v in values if v is not None}))
            self._floors[driver_os] = found
        return found

    def kind(self, target: Target) -> Kind:
        """What the verdicts depend on: the target without its name, its driver as a class."""
        if target.driver is None:
            return ("exact", target)
        have = driver_key(target.driver)
        met = tuple(have >= floor for floor in self.floors(target.driver_os))
        major = have[0]
        windows = []
        for gpu in target.gpus:
            arch = self.catalog.architectures.get(gpu.cc)
            win = arch.drivers if arch is not None else None
            if win is not None:
                windows.append(
                    (
                        win.last is not None and major > win.last,
                        win.first is not None and major < win.first,
                    )
                )
        return ("driver", replace(target, driver="", name=None), met, tuple(windows))

    def __call__(self, target: Target) -> Decision:
        """The decision for ``target`` (its name dropped), exactly as ``solve`` would give it."""
        key = replace(target, name=None)
        found = self._exact.get(key)
        if found is not None:
            return found
        kind = self.kind(key)
        first = self._kinds.get(kind)
        if first is None:
            self.runs += 1
            found = solve(self.catalog, key, self.request)
            self._kinds[kind] = (found, restated(found))
        else:
            found = rebind(self.catalog, first[0], key, first[1])
        self._exact[key] = found
        return found
