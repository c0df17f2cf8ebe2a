"""Solve many machines at the cost of their few kinds: a fleet's solver, memoised.

The solver's verdicts on a machine depend on its platform, Python, driver OS, unknown GPUs, on
its GPUs only through their distinct compute capabilities (a model's name and how many GPUs share
a CC change only the records that name them) and on its driver build only through which driver
floors it meets (every toolkit minimum and minor-version-compatibility floor in the database) and
the verdicts of the GPU-architecture windows on its branch. Machines that agree on all of that
are one kind: the first is solved, once per set of GPUs the kind's decision is restated for their
names and counts (``_reshaped``), and for each machine for its driver (``rebind``), sharing every
part of the decision that does not name the machine: the records naming it get its values (a
decision is data, ``solve/findings.py``), no text is edited. 10,000 distinct machines cost ~100
solver runs (tests/test_fleet_memo.py holds each decision to solving that machine alone), and
``split`` over hundreds of machine shapes stays linear in them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from resolver.catalog import Catalog
from resolver.core.versions import CC, DriverKey
from resolver.db.models import Branch
from resolver.solve import findings as fd
from resolver.solve.findings import ReasonKind as K
from resolver.solve.solver import (
    Candidate,
    Decision,
    Request,
    Target,
    TargetGpu,
    build_hints,
    solve,
    window_reasons,
    window_verdict,
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
        self._seen: dict[int, tuple[Target, Decision]] = {}
        self._drivers: dict[tuple[str, str], tuple[tuple[bool, ...], Branch]] = {}
        self._kinds: dict[Kind, tuple[Decision, list[Restate]]] = {}
        self._named: dict[tuple[Kind, tuple[TargetGpu, ...]], tuple[Decision, list[Restate]]] = {}

    def floors(self, driver_os: str) -> tuple[DriverKey, ...]:
        """Every driver floor a build can ask of ``driver_os`` (toolkit minimums, compat floors)."""
        found = self._floors.get(driver_os)
        if found is None:
            cat = self.catalog
            values = {tk.min_driver.get(driver_os) for tk in cat.toolkits.values()}
            values |= {f.min_driver.get(driver_os) for f in cat.compat_floors.values()}
            found = tuple(sorted({v.key for v in values if v is not None}))
            self._floors[driver_os] = found
        return found

    def kind(self, target: Target) -> Kind:
        """What the verdicts depend on: the target without its name, its GPUs by compute
        capability, each once (a model's name and how many GPUs share a CC change only the
        texts), its driver as a class: the floors it meets, each GPU's driver-window verdict
        and whether its branch is that window's last (the driver text itself where a Windows
        branch-table fact names it). An extension's texts name every GPU: asked for one, the
        GPUs are kept as they are."""
        if not self.request.extensions:
            gpus = self._shape(target.gpus)
            if gpus != target.gpus or any(g.name for g in gpus):
                target = _copy(target, gpus=tuple(TargetGpu(g.cc) for g in gpus))
        if target.driver is None:
            return ("exact", target)
        text = target.driver.text  # by its text: two spellings are never merged
        read = self._drivers.get((text, target.driver_os))
        if read is None:
            have = target.driver.key
            met = tuple(have >= floor for floor in self.floors(target.driver_os))
            branch = self.catalog.driver_branch(target.driver, target.driver_os)
            read = self._drivers[(text, target.driver_os)] = (met, branch)
        met, branch = read
        windows = []
        named = False  # a fact names the driver: a Windows number the branch table places
        for gpu in target.gpus:
            arch = self.catalog.architectures.get(gpu.cc)
            win = arch.drivers if arch is not None else None
            if win is not None:
                verdict = window_verdict(win, branch.lo, branch.hi)
                windows.append((verdict, branch.exact == win.last))
                if branch.record is not None and (verdict is not None or win.cut is not None):
                    named = True
        driver = target.driver if named else None
        return ("driver", _copy(target, driver=driver, name=None), met, tuple(windows))

    def __call__(self, target: Target) -> Decision:
        """The decision for ``target`` (its name dropped), exactly as ``solve`` would give it:
        its kind's first decision, with this machine's GPU names (once per kind and names),
        restated for its driver build."""
        seen = self._seen.get(id(target))  # the same object again: a split asks three times
        if seen is not None and seen[0] is target:
            return seen[1]
        key = unnamed(target)
        found = self._exact.get(key)
        if found is not None:
            self._seen[id(target)] = (target, found)
            return found
        kind = self.kind(key)
        shaped = self._named.get((kind, key.gpus))
        if shaped is None:
            first = self._kinds.get(kind)
            if first is None:
                self.runs += 1
                gpus = self._shape(key.gpus)
                found = solve(
                    self.catalog, _copy(key, gpus=gpus) if gpus != key.gpus else key, self.request
                )
                first = self._kinds[kind] = (found, restated(found))
            shaped = first
            if first[0].target.gpus != key.gpus:
                found = _reshaped(self.catalog, first[0], key.gpus)
                shaped = (found, restated(found))
            self._named[(kind, key.gpus)] = shaped
        found = rebind(self.catalog, shaped[0], key, shaped[1])
        self._exact[key] = found
        self._seen[id(target)] = (target, found)  # held: the id stays its own
        return found

    def _shape(self, gpus: tuple[TargetGpu, ...]) -> tuple[TargetGpu, ...]:
        """The GPUs a kind is solved with: the first of each compute capability, in order."""
        if len(gpus) < 2 or self.request.extensions:
            return gpus
        first: dict[CC, TargetGpu] = {}
        for g in gpus:
            first.setdefault(g.cc, g)
        return gpus if len(first) == len(gpus) else tuple(first.values())


_T = TypeVar("_T")


def unnamed(target: Target) -> Target:
    """``target`` without its name: the machine's shape (copied directly, see ``_copy``)."""
    return _copy(target, name=None) if target.name is not None else target


def _copy(obj: _T, **changes: object) -> _T:
    """A frozen dataclass with ``changes``, copied directly: ``dataclasses.replace`` re-runs
    ``__init__`` (~6 us), and a 10,000-machine fleet makes 300,000 such copies. For the solver's
    own records only, which have no ``__post_init__`` checks to skip. The new object gets its
    own copy of the fields as its ``__dict__`` (set past the frozen ``__setattr__``). A finding
    (a ``NamedTuple``, ``solve/findings.py``) is copied by its own ``_replace``."""
    if isinstance(obj, tuple):
        made: _T = getattr(obj, "_replace")(**changes)  # noqa: B009 (not on _T for mypy)
        return made
    new = object.__new__(type(obj))
    fields = obj.__dict__.copy()
    fields.update(changes)
    object.__setattr__(new, "__dict__", fields)
    return new


# A rejected candidate whose reasons name the host's driver (a driver floor it misses, a window
# its branch falls out of): its position, and the first such candidate with the very same reasons
# (builds of one CUDA major share a floor), restated once for both.
Restate = tuple[int, int]


def restated(decision: Decision) -> list[Restate]:
    """The rejected candidates whose reasons name the host's driver."""
    out: list[Restate] = []
    first: dict[tuple[fd.Reason, ...], int] = {}
    for i, c in enumerate(decision.rejected):
        if any(isinstance(r, (fd.DriverTooOld, fd.OutsideWindow)) for r in c.reasons):
            out.append((i, first.setdefault(c.reasons, i)))
    return out


def rebind(
    catalog: Catalog, decision: Decision, target: Target, which: Sequence[Restate] | None = None
) -> Decision:
    """``decision`` restated for ``target``, a machine of the same kind with another driver build.

    Same kind means the same everything but the driver build, which meets and misses the same
    driver floors and falls in the same branch windows (``FleetSolver.kind`` keys on exactly
    that): the verdicts are the same, only the records naming the host's driver differ. A fleet
    of 10,000 driver builds costs its few kinds of solver runs this way, not 10,000. ``which``
    (from ``restated``) spares finding the rejected candidates whose reasons name the driver.
    """
    old = decision.target
    if old == target:
        return decision
    if old.driver is None or target.driver is None or _copy(old, driver=target.driver) != target:
        raise ValueError("rebind: the targets differ in more than their driver build")
    driver = target.driver
    windows: list[fd.OutsideWindow] | None = None  # the target's, made where a record needs them
    rejected = list(decision.rejected)
    told: dict[int, tuple[fd.Reason, ...]] = {}  # the same reasons before: the same after
    for i, alike in restated(decision) if which is None else which:
        again = told.get(alike)
        if again is None:
            placed = 0
            reasons: list[fd.Reason] = []
            for r in rejected[i].reasons:  # a build's window reasons: the target's, in order
                if isinstance(r, fd.DriverTooOld):
                    r = _copy(r, have=driver)
                elif isinstance(r, fd.OutsideWindow):
                    if windows is None:
                        windows = [w for w, _ in window_reasons(catalog, target)]
                    r = windows[placed]
                    placed += 1
                reasons.append(r)
            again = told[alike] = tuple(reasons)
        rejected[i] = _copy(rejected[i], reasons=again)
    hints = tuple(
        _copy(h, have=driver)
        if isinstance(h, fd.NeedsDriver)
        else _copy(h, windows=tuple(dict.fromkeys(w for w, _ in window_reasons(catalog, target))))
        if isinstance(h, fd.InstallBranch)
        else h
        for h in decision.hints
    )
    return _copy(decision, target=target, rejected=tuple(rejected), hints=hints)


def _reshaped(catalog: Catalog, decision: Decision, gpus: tuple[TargetGpu, ...]) -> Decision:
    """``decision`` for its machine with ``gpus``: the same compute capabilities in the same
    order of first appearance, under other names and each any number of times. Each GPU has its
    own kernel coverage or "no kernels" reason and its own driver-window reason (with its fact);
    a CC's verdict, the build's facts and its grade are the same for every GPU of that CC. The
    hints are made anew."""
    old = decision.target
    if list(dict.fromkeys(g.cc for g in old.gpus)) != list(dict.fromkeys(g.cc for g in gpus)):
        raise ValueError("reshaped: the GPUs differ in more than their names and counts")
    target = _copy(old, gpus=gpus)
    windows = window_reasons(catalog, target)  # each names a GPU
    labels = [(g.cc, g.label) for g in gpus]
    # Builds share their kernel verdicts (one arch list serves many builds): each told once,
    # keyed by the verdicts' values (plain tuples hash fast; the records' own hash is Python's).
    Told = tuple[tuple[fd.Covered, ...], tuple[fd.Reason, ...]]
    told: dict[tuple[object, ...], Told] = {}

    def retell(coverage: tuple[fd.Covered, ...], arch: tuple[fd.NoKernels, ...]) -> Told:
        covered = {c.cc: c for c in reversed(coverage)}  # each CC's first
        missing = {r.cc: r for r in reversed(arch)}
        return (
            tuple(_copy(covered[cc], gpu=label) for cc, label in labels if cc in covered),
            tuple(_copy(missing[cc], gpu=label) for cc, label in labels if cc in missing),
        )

    def relabel(c: Candidate) -> Candidate:
        arch = tuple(r for r in c.reasons if isinstance(r, fd.NoKernels))
        window = any(r.kind == K.WINDOW for r in c.reasons)
        if not c.coverage and not arch and not window:
            return c
        key = (
            tuple((x.cc, x.reach.ptx, x.reach.via) for x in c.coverage),
            tuple((r.cc, r.sass, r.ptx) for r in arch),
        )
        known = told.get(key)
        if known is None:
            known = told[key] = retell(c.coverage, arch)
        coverage, no_kernels = known
        if not arch and not window:
            return _copy(c, coverage=coverage)
        reasons: list[fd.Reason] = []
        said = 0
        for r in c.reasons:  # each block (the GPUs' "no kernels", their windows) in its place
            if r.kind == K.ARCH:
                reasons.extend(no_kernels)
                no_kernels = ()
            elif r.kind == K.WINDOW:
                said += 1
                if said == 1:
                    reasons.extend(w for w, _ in windows)
            else:
                reasons.append(r)
        driver_facts = c.driver_facts
        if said:  # the window facts close the driver facts, one per window reason
            kept = driver_facts[: len(driver_facts) - said]
            driver_facts = (*kept, *(f for _, f in windows))
        return _copy(c, coverage=coverage, reasons=tuple(reasons), driver_facts=driver_facts)

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
