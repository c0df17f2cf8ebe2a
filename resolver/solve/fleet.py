"""Resolve one build set for a whole fleet: a pure function over the single-target solver.

A fleet shares one torch release; each platform of the fleet gets one build variant that runs on
every member of that platform (all GPUs covered, every driver compatible). GPU-less members of a
platform that has GPUs (CI runners, CPU pools) get the CPU build in a set of their own (the
platform's "-cpu" set), not the GPU machines' 2.5 GB CUDA build. Machines of one kind (the same
verdicts: resolver/solve/memo.py) are solved once, so the cost is in kinds, not machines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from resolver.catalog import Catalog
from resolver.core.vocab import EvidenceLevel
from resolver.db.evidence import trusted, weakest
from resolver.solve import Candidate, Decision, Request, Target
from resolver.solve.findings import (
    Conflict,
    Fits,
    Hint,
    NothingRuns,
    NothingShared,
    PlatformsApart,
    Reason,
)
from resolver.solve.memo import FleetSolver, unnamed

BuildKey = tuple[str, str]  # (torch version, variant)
Slot = tuple[str, bool]  # (platform, the platform's GPU-less members apart from its GPU ones)
Progress = Callable[[int], None]  # told how many more targets (or shapes) are done


@dataclass(frozen=True)
class PlatformChoice:
    platform: str
    candidate: Candidate  # as evaluated for the first member of the platform
    members: tuple[str, ...]
    confirmed: bool  # trusted at the request's evidence level for every member
    evidence: str = "observed"  # the weakest evidence grade among the members' builds
    cpu: bool = False  # the GPU-less members of a platform whose other members have GPUs

    @property
    def folder(self) -> str:
        """Where its files go when a fleet has several sets: ``linux-x86_64``, ``…-cpu``."""
        return f"{self.platform}-cpu" if self.cpu else self.platform


@dataclass(frozen=True)
class FleetDecision:
    """The common set (per platform), or why none exists; per-member decisions for the report."""

    torch: str | None
    choices: tuple[PlatformChoice, ...]
    members: tuple[tuple[Target, Decision], ...]  # each named member with its own decision
    conflicts: tuple[Conflict, ...]  # which members force what
    alternatives: tuple[tuple[str, bool], ...]  # other common torch releases, newest first:
    # each with whether it is trusted at the request's evidence level
    hints: tuple[tuple[str, Hint], ...]  # each member's hints, after the member's name

    @property
    def ok(self) -> bool:
        return self.torch is not None


def _gpu(t: Target) -> bool:
    return t.nvidia or bool(t.gpus)


def slots(targets: Sequence[Target]) -> dict[int, Slot]:
    """Each target's set (by position): its platform, apart for GPU-less members where the
    platform also has GPU members."""
    gpu_platforms = {t.platform.name for t in targets if _gpu(t)}
    return {
        i: (t.platform.name, not _gpu(t) and t.platform.name in gpu_platforms)
        for i, t in enumerate(targets)
    }


def solve_fleet(
    catalog: Catalog,
    targets: Sequence[Target],
    request: Request,
    solver: FleetSolver | None = None,
    progress: Progress | None = None,
) -> FleetDecision:
    """The newest torch release with, on each platform, a variant every member can run.

    ``solver`` shares solved machine kinds between calls (a split lock's groups); ``progress``
    is told of each target solved.
    """
    solver = solver or FleetSolver(catalog, request)
    members: list[tuple[Target, Decision]] = []
    for t in targets:
        members.append((t, solver(t)))
        if progress is not None:
            progress(1)
    slot_of = slots(targets)
    by_platform: dict[Slot, list[tuple[Target, Decision]]] = defaultdict(list)
    for i, (t, d) in enumerate(members):
        by_platform[slot_of[i]].append((t, d))

    # For each set: build -> candidate, kept only where every member can run it.
    common: dict[Slot, dict[BuildKey, list[Candidate]]] = {}
    for plat, group in by_platform.items():
        sets: list[dict[BuildKey, Candidate]] = []
        for _, d in _distinct(group, evidence=True):
            fits = [c for c in (d.selection, *d.alternatives) if c is not None]
            sets.append({(c.release.version, c.variant.name): c for c in fits})
        keys = set.intersection(*(set(s) for s in sets)) if sets else set()
        common[plat] = {k: [s[k] for s in sets] for k in keys}

    versions = set.intersection(*({v for v, _ in c} for c in common.values())) if common else set()
    ranked = sorted(
        versions,
        key=lambda v: (_all_confirmed(common, v, request), tuple(int(p) for p in v.split("."))),
        reverse=True,
    )
    names = {
        plat: tuple(t.name or t.platform.name for t, _ in group)
        for plat, group in by_platform.items()
    }
    if not ranked:
        return FleetDecision(
            None, (), tuple(members), _conflicts(by_platform, common), (), _fleet_hints(members)
        )
    best = ranked[0]
    choices = []
    for plat in sorted(common):
        options = [(k, cands) for k, cands in common[plat].items() if k[0] == best]
        _, cands = max(options, key=lambda kc: _variant_rank(kc[1], request))
        choices.append(
            PlatformChoice(
                plat[0],
                cands[0],
                names[plat],
                all(trusted(c.evidence, request.level) for c in cands),
                weakest(c.evidence for c in cands),
                plat[1],
            )
        )
    return FleetDecision(
        best,
        tuple(choices),
        tuple(members),
        (),
        tuple((v, _all_confirmed(common, v, request)) for v in ranked[1:6]),
        _fleet_hints(members),
    )


def _unique(group: list[tuple[Target, Decision]]) -> list[tuple[Target, Decision]]:
    seen: set[int] = set()
    out = []
    for t, d in group:
        if id(d) not in seen:
            seen.add(id(d))
            out.append((t, d))
    return out


def _distinct(
    group: list[tuple[Target, Decision]], *, evidence: bool
) -> list[tuple[Target, Decision]]:
    """The first member of each set of builds (with their evidence grades, where ``evidence``):
    a fleet of 10,000 driver builds has a handful, and pairs of them are compared."""
    seen: set[frozenset[tuple[str, ...]]] = set()
    # Machines of one kind share their decision's builds (memo.py restates only the rejected):
    # each set of builds is keyed once, not once per machine.
    keys: dict[tuple[int, int], tuple[Decision, frozenset[tuple[str, ...]]]] = {}
    out = []
    for t, d in group:
        known = keys.get((id(d.selection), id(d.alternatives)))  # held: the ids stay its own
        if known is not None:
            key = known[1]
        else:
            fits = (c for c in (d.selection, *d.alternatives) if c is not None)
            key = frozenset(
                (c.release.version, c.variant.name, *((c.evidence,) if evidence else ()))
                for c in fits
            )
            keys[(id(d.selection), id(d.alternatives))] = (d, key)
        if key not in seen:
            seen.add(key)
            out.append((t, d))
    return out


def _all_confirmed(
    common: dict[Slot, dict[BuildKey, list[Candidate]]], version: str, req: Request
) -> bool:
    if req.level == EvidenceLevel.ANY:
        return True
    return all(
        any(
            all(trusted(c.evidence, req.level) for c in cands)
            for k, cands in builds.items()
            if k[0] == version
        )
        for builds in common.values()
    )


def _variant_rank(cands: list[Candidate], req: Request) -> tuple[object, ...]:
    first = cands[0]
    confirmed = all(trusted(c.evidence, req.level) for c in cands)
    return (confirmed, *first.rank_key(True)[1:])


def _describe_fits(decision: Decision) -> Fits:
    fits = [c for c in (decision.selection, *decision.alternatives) if c is not None]
    if not fits:
        return Fits((), "", "")
    variants = tuple(sorted({c.variant.name for c in fits}))
    newest = max(fits, key=lambda c: c.release.key)
    oldest = min(fits, key=lambda c: c.release.key)
    return Fits(variants, oldest.release.version, newest.release.version)


def _conflicts(
    by_platform: dict[Slot, list[tuple[Target, Decision]]],
    common: dict[Slot, dict[BuildKey, list[Candidate]]],
) -> tuple[Conflict, ...]:
    """Which members force what: pairs (or single members) with no build in common."""
    out: list[Conflict] = []
    for (plat, _cpu), group in sorted(by_platform.items()):
        uniq = _unique(group)
        for t, d in uniq:
            if d.selection is None:
                out.append(NothingRuns(t.name or plat, _first_reason(d)))
        if common.get((plat, _cpu)):
            continue
        kinds = _distinct(group, evidence=False)
        for i, (a, da) in enumerate(kinds):
            sa = _build_set(da)
            for b, db in kinds[i + 1 :]:
                if sa and _build_set(db) and not sa & _build_set(db):
                    a_fits, b_fits = _describe_fits(da), _describe_fits(db)
                    out.append(NothingShared(a.name or plat, a_fits, b.name or plat, b_fits))
    if not out and len(by_platform) > 1:
        fits = tuple(
            (plat, cpu, tuple(sorted({v for v, _ in c}, key=_vkey)))
            for (plat, cpu), c in sorted(common.items())
        )
        out.append(PlatformsApart(fits))
    return tuple(out)


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _build_set(d: Decision) -> set[BuildKey]:
    return {(c.release.version, c.variant.name) for c in (d.selection, *d.alternatives) if c}


def _first_reason(d: Decision) -> tuple[Reason, ...]:
    newest = max(d.rejected, key=lambda c: c.release.key, default=None)
    return newest.reasons if newest else ()


def _fleet_hints(members: list[tuple[Target, Decision]]) -> tuple[tuple[str, Hint], ...]:
    """Each member's hints after its name (each line is said once: ``present.fleet_hints``)."""
    return tuple((t.name or t.platform.name, h) for t, d in members for h in d.hints)


def split_groups(
    catalog: Catalog,
    targets: Sequence[Target],
    request: Request,
    solver: FleetSolver | None = None,
    progress: Progress | None = None,
) -> list[tuple[list[Target], FleetDecision]]:
    """Greedy grouping for --split: each kind of target, in the spec's order, joins the first
    group it shares a set with; a group keeps its members in the spec's order (and is named after
    the first).

    Each distinct machine is solved once (kinds of machine once, see FleetSolver) and a group
    keeps, per set, the builds all its members run: joining is a set intersection, not a fleet
    solve, so hundreds of machine shapes cost about what each costs alone.
    """
    solver = solver or FleetSolver(catalog, request)
    order: list[Target] = []  # one representative per shape, in the spec's order
    shapes: dict[Target, list[Target]] = {}
    for t in targets:
        key = unnamed(t)
        if key not in shapes:
            shapes[key] = []
            order.append(t)
        shapes[key].append(t)
    groups: list[tuple[list[Target], dict[Slot, set[BuildKey]]]] = []
    # Where each set's builds last joined: the groups before it turned them away, and a group
    # only narrows as members join (fewer builds, more sets), so they would turn them away again.
    joined: dict[tuple[Slot, frozenset[BuildKey]], int] = {}
    # A kind's machines share its builds (see _distinct): each set is made once.
    sets: dict[tuple[int, int], tuple[Decision, set[BuildKey]]] = {}
    for rep in order:
        decision = solver(rep)
        known = sets.get((id(decision.selection), id(decision.alternatives)))
        if known is None:
            known = sets[(id(decision.selection), id(decision.alternatives))] = (
                decision,
                _build_set(decision),
            )
        builds = known[1]
        slot = (rep.platform.name, not _gpu(rep))
        seen = (slot, frozenset(builds))
        for at in range(joined.get(seen, 0), len(groups)):
            reps, common = groups[at]
            trial = {**common, slot: common[slot] & builds if slot in common else builds}
            if _versions(trial):
                reps.append(rep)
                common[slot] = trial[slot]
                joined[seen] = at
                break
        else:
            joined[seen] = len(groups)
            groups.append(([rep], {slot: builds}))
        if progress is not None:
            progress(1)
    position = {id(t): i for i, t in enumerate(targets)}
    out = []
    for reps, _ in groups:
        full = sorted((t for r in reps for t in shapes[unnamed(r)]), key=lambda t: position[id(t)])
        out.append((full, solve_fleet(catalog, full, request, solver)))
    return out


def _versions(common: dict[Slot, set[BuildKey]]) -> set[str]:
    """The torch releases every set has a build of."""
    return set.intersection(*({v for v, _ in builds} for builds in common.values()))
