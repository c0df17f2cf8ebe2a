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
from typing import TypeVar

from resolver.catalog import Catalog
from resolver.core.versions import DriverKey, driver_key
from resolver.solve.hints import build_hints, solve
from resolver.solve.solver import (
    Candidate,
    Decision,
    Reason,
    Request,
    Target,
    TargetGpu,
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
        self._kinds: dict[Kind, tuple[Decision, list[Restate]]] = {}
        self._named: dict[tuple[Kind, tuple[TargetGpu, ...]], tuple[Decision, list[Restate]]] = {}

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
        """What the verdicts depend on: the target without its name, its GPUs by compute
        capability (a model's name changes only the texts), its driver as a class."""
        if any(g.name for g in target.gpus):
            target = _copy(target, gpus=tuple(TargetGpu(g.cc) for g in target.gpus))
        if target.driver is None:
            return ("exact", target)
        have = target.driver.key
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
        return ("driver", _copy(target, driver=None, name=None), met, tuple(windows))

    def __call__(self, target: Target) -> Decision:
        """The decision for ``target`` (its name dropped), exactly as ``solve`` would give it:
        its kind's first decision, with this machine's GPU names (once per kind and names),
        restated for its driver build."""
        key = _copy(target, name=None) if target.name is not None else target
        found = self._exact.get(key)
        if found is not None:
            return found
        kind = self.kind(key)
        first = self._kinds.get(kind)
        if first is None:
            self.runs += 1
            found = solve(self.catalog, key, self.request)
            first = self._kinds[kind] = (found, restated(found))
        if first[0].target.gpus != key.gpus:
            named = self._named.get((kind, key.gpus))
            if named is None:
                found = _renamed(self.catalog, first[0], key.gpus)
                named = self._named[(kind, key.gpus)] = (found, restated(found))
            first = named
        found = rebind(self.catalog, first[0], key, first[1])
        self._exact[key] = found
        return found


_T = TypeVar("_T")


def _copy(obj: _T, **changes: object) -> _T:
    """A frozen dataclass with ``changes``, copied directly: ``dataclasses.replace`` re-runs
    ``__init__`` (~6 us), and a 10,000-machine fleet makes 40,000 such copies. For the solver's
    own records only, which have no ``__post_init__`` checks to skip."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


_DRIVER_TEXT = frozenset({"driver", "window"})  # reason kinds whose text names the host's driver

# A rejected candidate whose texts name the host's driver: its position, its reasons, and in
# them the positions of each floor's reason (with the floor) and of each window reason.
Restate = tuple[
    int, tuple[Reason, ...], tuple[tuple[int, tuple[str, str | None]], ...], tuple[int, ...]
]


def restated(decision: Decision) -> list[Restate]:
    """The rejected candidates whose reasons name the host's driver, with where they do."""
    out: list[Restate] = []
    for i, c in enumerate(decision.rejected):
        floors, windows = [], []
        for pos, r in enumerate(c.reasons):
            if r.kind == "driver" and c.min_driver is not None:
                floors.append((pos, (c.min_driver, c.min_driver_why)))
            elif r.kind == "window":
                windows.append(pos)
        if floors or windows:
            out.append((i, c.reasons, tuple(floors), tuple(windows)))
    return out


def rebind(
    catalog: Catalog, decision: Decision, target: Target, which: Sequence[Restate] | None = None
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
    if old.driver is None or target.driver is None or _copy(old, driver=target.driver) != target:
        raise ValueError("rebind: the targets differ in more than their driver build")
    windows = [r for r, _ in window_reasons(catalog, target)]
    driver = target.driver
    rejected = list(decision.rejected)
    said: dict[tuple[str, str | None], Reason] = {}  # builds share a few floors: each said once
    for i, before, floors, at in restated(decision) if which is None else which:
        reasons = list(before)
        for pos, need in floors:
            found = said.get(need)
            if found is None:
                found = said[need] = driver_reason(need[0], need[1], driver)
            reasons[pos] = found
        for pos, new_reason in zip(at, windows, strict=True):
            reasons[pos] = new_reason
        rejected[i] = _copy(rejected[i], reasons=tuple(reasons))
    # The one hint naming the host's driver (hints.py): "...; this host has <driver>".
    was, now = f"this host has {old.driver}", f"this host has {target.driver}"
    return _copy(
        decision,
        target=target,
        rejected=tuple(rejected),
        hints=tuple(h.replace(was, now) for h in decision.hints),
    )


def _renamed(catalog: Catalog, decision: Decision, gpus: tuple[TargetGpu, ...]) -> Decision:
    """``decision`` for its machine with ``gpus``: the same compute capabilities, in the same
    order, under other names. Kernel coverage, "no kernels" and driver-window texts name each
    GPU by its label; the hints are made anew."""
    old = decision.target
    if [g.cc for g in old.gpus] != [g.cc for g in gpus]:
        raise ValueError("renamed: the GPUs differ in more than their names")
    target = _copy(old, gpus=gpus)
    pairs = [(a.label, b.label) for a, b in zip(old.gpus, gpus, strict=True)]
    windows = [r for r, _ in window_reasons(catalog, target)]  # each names a GPU

    def relabel(c: Candidate) -> Candidate:
        if not c.coverage and not any(r.kind in ("arch", "window") for r in c.reasons):
            return c
        coverage, reasons = list(c.coverage), list(c.reasons)
        cov = 0
        arch = [i for i, r in enumerate(reasons) if r.kind == "arch"]
        for was, now in pairs:  # each GPU is covered (in order) or has its "no kernels" reason
            if cov < len(coverage) and coverage[cov].startswith(was + ": "):
                coverage[cov] = now + coverage[cov][len(was) :]
                cov += 1
            elif arch:
                i = arch.pop(0)
                text = reasons[i].text.replace(f"for {was}: ", f"for {now}: ", 1)
                reasons[i] = Reason("arch", text)
        left = iter(windows)
        reasons = [next(left) if r.kind == "window" else r for r in reasons]
        return _copy(c, coverage=tuple(coverage), reasons=tuple(reasons))

    selection = relabel(decision.selection) if decision.selection is not None else None
    alternatives = tuple(relabel(c) for c in decision.alternatives)
    rejected = [relabel(c) for c in decision.rejected]
    ok = ([selection] if selection else []) + list(alternatives)
    hints = build_hints(catalog, target, decision.request, selection, ok, rejected)
    return _copy(
        decision,
        target=target,
        selection=selection,
        alternatives=alternatives,
        rejected=tuple(rejected),
        hints=hints,
    )
