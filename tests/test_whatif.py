"""What would change: the driver upgrade that unlocks a newer release (synthetic database)."""

from __future__ import annotations

from typing import Any

from target_support import written

from resolver import catalog as catalog_mod
from resolver.catalog import Catalog
from resolver.present.findings import unlock as sentence
from resolver.solve import Request, Target, TargetGpu
from resolver.solve.findings import NoKernels
from resolver.solve.fleet import solve_fleet
from resolver.solve.whatif import unlocks

H100 = written(
    "linux-x86_64", "3.12", "580.65.06", gpus=(TargetGpu((9, 0)),), nvidia=True, name="h100"
)


def rtx(driver: str = "535.104.05") -> Target:
    return written(
        "linux-x86_64", "3.12", driver, gpus=(TargetGpu((8, 9)),), nvidia=True, name="rtx"
    )


def v100() -> Target:
    return written(
        "linux-x86_64", "3.12", "535.104.05", gpus=(TargetGpu((7, 0)),), nvidia=True, name="v100"
    )


def without_cu126(raw: dict[str, Any]) -> Catalog:
    series = raw["torch.yaml"]["series"][-1]
    series["variants"] = [v for v in series["variants"] if v["name"] != "cu126"]
    return catalog_mod.from_raw(raw)


def test_a_driver_upgrade_unlocks_the_next_release(synth_raw: dict[str, Any]) -> None:
    cat = without_cu126(synth_raw)
    fleet = solve_fleet(cat, [H100, rtx()], Request())
    assert fleet.torch == "2.8.0"  # 2.12.0 has only cu130, which needs driver 580
    (found,) = unlocks(fleet, {"h100": 4, "rtx": 3})
    assert found.torch == "2.12.0" and found.variants == ("cu130",)
    assert sentence(found, "node") == (
        "upgrading the 3 nodes of rtx (3, from 535.104.05) to driver ≥ 580 would allow "
        "torch 2.12.0 (cu130) everywhere"
    )


def test_nothing_newer_means_nothing_to_say(synth_raw: dict[str, Any]) -> None:
    cat = without_cu126(synth_raw)
    fleet = solve_fleet(cat, [H100, rtx("580.65.06")], Request())
    assert fleet.torch == "2.12.0" and unlocks(fleet, {}) == []


def test_missing_kernels_are_no_driver_matter(synth_raw: dict[str, Any]) -> None:
    cat = without_cu126(synth_raw)
    fleet = solve_fleet(cat, [H100, v100()], Request())
    (found,) = unlocks(fleet, {})
    assert found.blocker is not None and found.blocker.member == "v100"
    assert isinstance(found.blocker.reason, NoKernels) and found.blocker.reason.gpu == "sm_70"
    assert sentence(found).startswith("torch 2.12.0: no driver upgrade is enough — v100:")


def test_an_unconfirmed_build_that_already_runs(synth: Catalog) -> None:
    fleet = solve_fleet(synth, [H100, v100()], Request())
    assert fleet.torch == "2.8.0"  # 2.12.0 cu126 runs, but its arch list is secondary
    (found,) = unlocks(fleet, {})
    assert found.variants == ("cu126",) and not found.upgrades and found.unconfirmed
    assert "already runs everywhere" in sentence(found)
