"""What would change: the driver upgrade that unlocks a newer torch release for a whole fleet.

Pure, over the fleet decision the lock already made (every member's decision carries every
release's candidate with the reasons it was rejected), so it costs no extra solving. A newer
release is within reach when, on each platform, one of its builds is blocked on every member by
driver reasons only: then upgrading those members to the build's minimum driver unlocks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from resolver.core.versions import Driver
from resolver.solve import Candidate, Decision, Target
from resolver.solve.findings import Reason
from resolver.solve.findings import ReasonKind as K
from resolver.solve.fleet import FleetDecision, slots


@dataclass(frozen=True)
class Upgrade:
    member: str
    machines: int
    driver: Driver | None
    needed: Driver


@dataclass(frozen=True)
class Blocker:
    """Why no driver upgrade is enough: a member's reason, or a build it lacks."""

    member: str | None  # None: no build of the release for the platform at all
    reason: Reason | None  # None: the member has no build of ``variant``
    variant: str | None
    platform: str


@dataclass(frozen=True)
class Unlock:
    """How a newer release would run everywhere: its builds, the upgrades, or what blocks it."""

    torch: str
    variants: tuple[str, ...]  # the build chosen per platform ("cu132")
    upgrades: tuple[Upgrade, ...]
    blocker: Blocker | None = None  # why no driver upgrade is enough
    unconfirmed: bool = False  # an architecture list of the builds rests on a secondary source


def unlocks(fleet: FleetDecision, counts: Mapping[str, int]) -> list[Unlock]:
    """For the next newer release and the newest one: the upgrades, or what blocks them."""
    if not fleet.ok or fleet.torch is None:
        return []
    current = _vkey(fleet.torch)
    releases: dict[str, tuple[int, ...]] = {}
    # Each member's newer builds by release and variant, in one pass over its candidates (a
    # fleet of 10,000 driver builds has 10,000 members, each with ~100 candidates).
    newer: list[Builds] = []
    for _, d in fleet.members:
        mine: Builds = {}
        for c in _candidates(d):
            if c.release.key > current:
                releases[c.release.version] = c.release.key
                mine.setdefault(c.release.version, {})[c.variant.name] = c
        newer.append(mine)
    if not releases:
        return []
    ordered = sorted(releases, key=lambda v: releases[v])
    wanted = [ordered[0]] if len(ordered) == 1 else [ordered[0], ordered[-1]]
    return [_unlock(fleet, counts, version, newer) for version in wanted]


Builds = dict[str, dict[str, Candidate]]  # release -> variant -> a member's candidate


def _candidates(d: Decision) -> list[Candidate]:
    return [c for c in (d.selection, *d.alternatives, *d.rejected) if c is not None]


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


# Which blocker to name when none of a release's builds is within reach: the most telling.
_BLOCKER_ORDER = {K.ARCH: 0, K.PYTHON: 1, K.SPEC: 2, K.COMPANION: 3, K.UNKNOWN: 4}


def _unlock(
    fleet: FleetDecision, counts: Mapping[str, int], version: str, newer: list[Builds]
) -> Unlock:
    by_platform: dict[tuple[str, bool], list[tuple[Target, dict[str, Candidate]]]] = {}
    slot_of = slots([t for t, _ in fleet.members])
    for i, (t, _d) in enumerate(fleet.members):
        by_platform.setdefault(slot_of[i], []).append((t, newer[i].get(version, {})))
    variants: list[str] = []
    upgrades: dict[str, Upgrade] = {}
    unconfirmed = False
    for slot in sorted(by_platform):
        platform = slot[0]
        members = by_platform[slot]
        gpus = any(t.nvidia or t.gpus for t, _ in members)
        options: list[tuple[tuple[object, ...], str, list[Upgrade], bool]] = []
        blockers: list[tuple[int, tuple[int, ...], str, Blocker]] = []
        builds = [mine for _, mine in members]  # each member's builds of this release
        names = {
            name
            for mine in builds
            for name, c in mine.items()
            if not (gpus and c.variant.kind == "cpu")
        }
        for variant in sorted(names):
            cuda = _cuda(builds, variant)
            needs: list[Upgrade] = []
            confirmed = True
            why: tuple[int, tuple[int, ...], str, Blocker] | None = None
            for t, mine in members:
                c = mine.get(variant)
                name = t.name or t.platform.name
                if c is None:
                    why = why or (9, cuda, name, Blocker(name, None, variant, platform))
                    continue
                confirmed = confirmed and c.confirmed
                kinds = {r.kind for r in c.reasons}
                if not kinds:
                    continue
                if kinds == {K.DRIVER} and c.min_driver is not None:
                    needs.append(Upgrade(name, counts.get(name, 1), t.driver, c.min_driver))
                else:
                    first = min(
                        (r for r in c.reasons if r.kind != K.DRIVER),
                        key=lambda r: _BLOCKER_ORDER.get(r.kind, 5),
                    )
                    rank = (_BLOCKER_ORDER.get(first.kind, 5), tuple(-p for p in cuda))
                    if why is None or rank < why[:2]:
                        why = (*rank, name, Blocker(name, first, None, platform))
            if why is not None:
                blockers.append(why)
                continue
            # Fewest machines to upgrade, then a confirmed build, then the newest CUDA.
            cost = (sum(u.machines for u in needs), not confirmed, tuple(-p for p in cuda))
            options.append((cost, variant, needs, confirmed))
        if not options:
            blocker = (
                min(blockers, key=lambda b: b[:3])[3]
                if blockers
                else Blocker(None, None, None, platform)
            )
            return Unlock(version, (), (), blocker)
        _, variant, needs, confirmed = min(options, key=lambda o: o[0])
        variants.append(variant)
        unconfirmed = unconfirmed or not confirmed
        for u in needs:
            upgrades[u.member] = u
    return Unlock(
        version,
        tuple(variants),
        tuple(sorted(upgrades.values(), key=lambda u: (u.needed, u.member))),
        None,
        unconfirmed,
    )


def _cuda(builds: list[dict[str, Candidate]], variant: str) -> tuple[int, ...]:
    """The CUDA version of a build (0.0 for the CPU build), for preferring the newest."""
    for mine in builds:
        c = mine.get(variant)
        if c is not None and c.variant.cuda:
            return c.variant.cuda.key
    return (0, 0)
