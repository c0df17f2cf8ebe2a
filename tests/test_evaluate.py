"""solve.evaluate: one build's verdict on its own is the verdict the whole solve gives it."""

from __future__ import annotations

import pytest
from target_support import written

from resolver.catalog import Catalog
from resolver.core.versions import parse_cc
from resolver.solve import Candidate, Request, TargetGpu, decide, evaluate

TARGETS = {
    "pascal-580": written(
        "linux-x86_64", "3.12", "580.65.06", "linux", (TargetGpu(parse_cc("6.1"), None),), True
    ),
    "blackwell-570": written(
        "linux-x86_64", "3.12", "570.124.06", "linux", (TargetGpu(parse_cc("12.0"), None),), True
    ),
    "windows-no-driver": written("windows-x86_64", "3.13t", None, "windows", (), True),
    "mac": written("macos-arm64", "3.12", None, "linux", (), False),
}


def _key(c: Candidate) -> tuple[object, ...]:
    return (c.ok, c.reasons, c.min_driver, c.jit, c.coverage, c.evidence)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_evaluate_agrees_with_the_solve(shipped: Catalog, name: str) -> None:
    target = TARGETS[name]
    verdicts = set()
    for request in (Request(), Request(cuda="12.6"), Request(allow_unconfirmed=True)):
        decision = decide(shipped, target, request)
        pool = [c for c in (decision.selection, *decision.alternatives) if c is not None]
        pool += decision.rejected
        for cand in pool:
            alone = evaluate(shipped, target, request, cand.release, cand.variant)
            assert _key(alone) == _key(cand), (cand.release.version, cand.variant.name)
            verdicts.add(cand.ok)
    assert verdicts == {True, False}  # builds that fit and builds that do not were compared
