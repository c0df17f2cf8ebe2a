"""The memoised fleet solver decides each machine exactly as solving it alone does.

A fleet of hundreds of distinct machines (GPU models of real fleets, one to eight GPUs, driver
builds of every branch, a tenth on Windows), drawn as bench/distinct_targets.py draws 10,000:
each machine's decision from the shared kinds, restated for its GPU names, GPU count and driver
text, equals the decision of a solve of that machine alone, field by field and text by text.
"""

from __future__ import annotations

import gc
import itertools
import random
from dataclasses import replace
from pathlib import Path

import pytest
from target_support import written

from resolver.catalog import Catalog
from resolver.core.vocab import DriverPolicy, EvidenceLevel
from resolver.solve import Request, Target, TargetGpu, solve
from resolver.solve.memo import FleetSolver

GPUS = [
    *("NVIDIA A100", "NVIDIA A800", "NVIDIA A30", "NVIDIA A40", "NVIDIA A10", "NVIDIA A10G"),
    *("NVIDIA RTX A6000", "NVIDIA GeForce RTX 3090", "NVIDIA L4", "NVIDIA L40S"),
    *("NVIDIA GeForce RTX 4090", "NVIDIA H100", "NVIDIA H200", "NVIDIA B200", "Tesla T4"),
    *("Tesla V100", "NVIDIA GeForce GTX 1080 Ti", "Jetson AGX Orin"),
]
BRANCHES = [(418, 40), (525, 60), (535, 104), (550, 54), (570, 124), (580, 95), (590, 44)]


def distinct_fleet(catalog: Catalog, size: int, seed: int) -> list[Target]:
    """``size`` machines, no two alike; some mix two GPU models."""
    rng = random.Random(seed)
    drivers = [f"{b}.{m + d}.{build:02d}" for b, m in BRANCHES for d in (0, 9) for build in (1, 6)]
    shapes = list(itertools.product(drivers, GPUS, (1, 2, 4, 8)))
    out: list[Target] = []
    for i, (driver, gpu, count) in enumerate(rng.sample(shapes, size)):
        gpus = [TargetGpu(*catalog.resolve_gpu(gpu))] * count
        if i % 7 == 3:  # a second model after the first: two compute capabilities, or one
            gpus.append(TargetGpu(*catalog.resolve_gpu(rng.choice(GPUS))))
        if i % 11 == 5:
            gpus.insert(0, gpus[-1])
        windows = i % 10 == 9
        if any(str(t.driver) == driver and t.gpus == tuple(gpus) for t in out):
            continue  # the same machine as one drawn before
        out.append(
            written(
                "windows-x86_64" if windows else "linux-x86_64",
                "3.12",
                driver,
                "windows" if windows else "linux",
                tuple(gpus),
                nvidia=True,
                name=f"m{i}",
            )
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "request_",
    [Request(), Request(policy=DriverPolicy.STRICT), Request(evidence=EvidenceLevel.OBSERVED)],
    ids=["compat", "strict", "observed"],
)
def test_each_machine_decides_as_it_does_alone(shipped: Catalog, request_: Request) -> None:
    targets = distinct_fleet(shipped, 240, seed=29)
    solver = FleetSolver(shipped, request_)
    for t in targets:
        assert solver(t) == solve(shipped, replace(t, name=None), request_), t
    assert len({(t.platform, t.driver, t.gpus) for t in targets}) == len(targets) > 200
    assert solver.runs < len(targets) / 2  # kinds shared: GPU names and counts are restated


@pytest.mark.slow
def test_an_extension_names_each_gpu_so_machines_are_kinds_by_gpu_name(shipped: Catalog) -> None:
    from packaging.specifiers import SpecifierSet

    request = Request(extensions=(("xformers", SpecifierSet()),))
    targets = distinct_fleet(shipped, 60, seed=7)
    solver = FleetSolver(shipped, request)
    for t in targets:
        assert solver(t) == solve(shipped, replace(t, name=None), request), t


def _spec(path: Path, head: list[str], shipped: Catalog, count: int, seed: int) -> Path:
    """A team spec of ``count`` distinct machines (``distinct_fleet``) under ``head``."""
    lines = [*head, "targets:"]
    for t in distinct_fleet(shipped, count, seed=seed):
        gpus = ", ".join(repr(g.name) for g in t.gpus)
        lines.append(
            f'  - {{name: {t.name}, platform: {t.platform}, driver: "{t.driver}", gpus: [{gpus}]}}'
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reading_and_locking_a_fleet_makes_no_reference_cycles(
    shipped: Catalog, tmp_path: Path
) -> None:
    """load_spec and lock_team hold the cyclic collector off (resolver/core/collector.py): that
    keeps memory bounded only because what they make is freed by reference counting alone."""
    from resolver.flows.team import lock_team
    from resolver.team.spec import load_spec
    from resolver.writers import lockfiles

    path = _spec(tmp_path / "cycles.yaml", ["name: cycles", 'python: "3.12"'], shipped, 40, 3)
    options = lockfiles.LockOptions(top_level=True)
    gc.collect()
    gc.disable()
    try:
        team = lock_team(shipped, load_spec(path, shipped), options)
        assert "report.md" in team.files
        del team
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0


def test_windows_driver_numbers_are_kinds_by_their_branch_not_their_major(
    shipped: Catalog,
) -> None:
    """A Windows driver's branch is read from NVIDIA's table or bounded (580.96 may be R575 or
    R580): machines of one major number can get different driver-window verdicts (a V100 is
    dropped in R580), so they are kinds apart, and each still decides as it does alone."""
    drivers = ["570.133.01", "570.161.05", "575.57.08", "580.96.14", "580.104.02", "581.57"]
    targets = [
        written(
            "windows-x86_64",
            "3.12",
            driver,
            "windows",
            (TargetGpu(*shipped.resolve_gpu(gpu)),) * count,
            nvidia=True,
            name=f"{gpu}-{driver}-{count}",
        )
        for gpu in ("Tesla V100", "NVIDIA GeForce GTX 1080 Ti", "NVIDIA A100")
        for driver in drivers
        for count in (1, 2)
    ]
    solver = FleetSolver(shipped, Request())
    for t in targets:
        assert solver(t) == solve(shipped, replace(t, name=None), Request()), t


@pytest.mark.slow
@pytest.mark.parametrize("formats", [("requirements",), ("requirements", "conda", "uv")])
def test_a_team_lock_writes_the_bytes_solving_each_machine_alone_writes(
    shipped: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, formats: tuple[str, ...]
) -> None:
    """Every file of a split team lock of 150 distinct machines (report.md with each machine's
    row and what a driver upgrade would change, each group's sets) is the same, byte for byte,
    whether the fleet solver shares kinds or solves each machine on its own."""
    from resolver.flows.team import lock_team
    from resolver.solve.memo import unnamed
    from resolver.team.spec import load_spec
    from resolver.writers import lockfiles

    head = ["name: alone", 'python: "3.12"', 'packages: {torch: ">=2.4"}']
    path = _spec(tmp_path / "alone.yaml", head, shipped, 150, 11)
    spec = load_spec(path, shipped)
    options = lockfiles.LockOptions(formats=frozenset(formats), top_level=True)
    shared = lock_team(shipped, spec, options, existing=lambda rel: None)
    assert len(shared.groups) > 3  # split: several groups, each with its own sets

    def alone(self: FleetSolver, target: Target) -> object:
        return solve(self.catalog, unnamed(target), self.request)

    monkeypatch.setattr(FleetSolver, "__call__", alone)
    assert lock_team(shipped, spec, options, existing=lambda rel: None).files == shared.files
