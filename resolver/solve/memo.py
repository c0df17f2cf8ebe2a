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

from collections.abc import Sequence
from dataclasses import replace

from resolver.catalog import Catalog
from resolver.core.versions import DriverKey, driver_key
from resolver.solve.hints import solve
from resolver.solve.solver import (
    Candidate,
    Decision,
    Request,
    Target,
    driver_reason,
    window_reasons,
)

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


_DRIVER_TEXT = frozenset({"driver", "window"})  # reason kinds whose text names the host's driver


def restated(decision: Decision) -> list[int]:
    """The positions of the rejected candidates whose reasons name the host's driver."""
    return [
        i for i, c in enumerate(decision.rejected) if any(r.kind in _DRIVER_TEXT for r in c.reasons)
    ]


def rebind(
    catalog: Catalog, decision: Decision, target: Target, which: Sequence[int] | None = None
) -> Decision:
    """``decision`` restated for ``target``, a machine of the same kind with another driver build.

    Same kind means the same everything but the driver build, which meets and misses the same
    driver floors and falls in the same branch windows (resolver/solve/memo.py keys on exactly
    that): the verdicts are the same, only the texts naming the host's driver differ. A fleet of
    10,000 driver builds costs its few kinds of solver runs this way, not 10,000. ``which``
    (from ``restated``) spares finding the rejected candidates whose texts name the driver.
    """
    old = decision.target
    if old == target:
        return decision
    if old.driver is None or target.driver is None or replace(old, driver=target.driver) != target:
        raise ValueError("rebind: the targets differ in more than their driver build")
    windows = [r for r, _ in window_reasons(catalog, target)]
    driver = target.driver
    rejected = list(decision.rejected)
    for i in restated(decision) if which is None else which:
        c = rejected[i]
        left = iter(windows)
        reasons = tuple(
            driver_reason(c.min_driver, c.min_driver_why, driver)
            if r.kind == "driver" and c.min_driver is not None
            else next(left)
            if r.kind == "window"
            else r
            for r in c.reasons
        )
        # dataclasses.replace re-runs __init__ (~10 us): a 10,000-machine fleet restates
        # ~200,000 candidates, so the copy is made directly (one field differs)
        new = object.__new__(Candidate)
        new.__dict__.update(c.__dict__)
        object.__setattr__(new, "reasons", reasons)
        rejected[i] = new
    # The one hint naming the host's driver (hints.py): "...; this host has <driver>".
    was, now = f"this host has {old.driver}", f"this host has {target.driver}"
    return replace(
        decision,
        target=target,
        rejected=tuple(rejected),
        hints=tuple(h.replace(was, now) for h in decision.hints),
    )
