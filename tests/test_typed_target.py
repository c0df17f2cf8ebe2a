"""A `Target` holds typed values parsed once; machines stay apart by their driver as written.

`Driver` compares numerically (570.124.6 == 570.124.06), but two machines that write their
driver differently are two machines: every cache, group and output keeps each one's spelling.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import run_cli
from target_support import written

from resolver.catalog import Catalog
from resolver.core.platforms import BY_NAME, Platform, PythonVersion
from resolver.core.versions import Driver
from resolver.present import findings as words
from resolver.solve import Request, TargetGpu
from resolver.solve.memo import FleetSolver
from resolver.solve.shapes import Shape, ShapeGpu, group

SHORT, PADDED = "570.124.6", "570.124.06"
RTX3090 = "NVIDIA GeForce RTX 3090"


def test_the_typed_values_print_as_written() -> None:
    assert str(Driver.parse(PADDED)) == PADDED and Driver.parse(PADDED) == Driver.parse(SHORT)
    assert str(Platform.parse("linux-aarch64")) == "linux-aarch64"
    assert Platform.parse("linux-aarch64").arch == "aarch64"
    assert str(PythonVersion.parse("3.13t")) == "3.13t"


def test_targets_differ_by_their_driver_as_written(shipped: Catalog) -> None:
    gpus = (TargetGpu(*shipped.resolve_gpu(RTX3090)),)
    a = written("linux-x86_64", "3.12", SHORT, gpus=gpus, nvidia=True)
    b = written("linux-x86_64", "3.12", PADDED, gpus=gpus, nvidia=True)
    assert a.driver == b.driver  # the same driver by number ...
    assert a != b and len({a, b}) == 2  # ... but two machines
    assert a == written("linux-x86_64", "3.12", SHORT, gpus=gpus, nvidia=True)
    solver = FleetSolver(shipped, Request())
    assert [str(solver(t).target.driver) for t in (a, b, a)] == [SHORT, PADDED, SHORT]
    hints = [h for h in words.hints(solver(b).hints) if "this host has" in h]
    assert hints and all(h.endswith(PADDED) or f"{PADDED}," in h for h in hints)


def test_shapes_differ_by_their_driver_as_written() -> None:
    l4 = (ShapeGpu("NVIDIA-L4", (8, 9), 1),)
    linux = BY_NAME["linux-x86_64"]
    a = Shape(linux, Driver.parse(SHORT), gpus=l4, nvidia=True)
    b = Shape(linux, Driver.parse(PADDED), gpus=l4, nvidia=True)
    groups = group([("n-1", a), ("n-2", b)], source="x")
    assert sorted(g.name for g in groups) == [f"l4-{PADDED}", f"l4-{SHORT}"]


SPEC = f"""name: drivers
python: "3.12"
lock: top-level
packages:
  torch: ">=2.4"
  with: [torchvision]
targets:
  - {{name: a, driver: "{SHORT}", gpus: ["{RTX3090}"]}}
  - {{name: b, driver: "{PADDED}", gpus: ["{RTX3090}"]}}
  - {{name: c, driver: "535.104.05", gpus: ["{RTX3090}"]}}
"""


def test_a_team_of_both_spellings_writes_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "drivers.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 0, err
    report = (tmp_path / "drivers" / "report.md").read_text(encoding="utf-8")
    hw = f"linux-x86_64; {RTX3090} (sm_86)"
    for name, driver in (("a", SHORT), ("b", PADDED)):
        assert f"| {name} | 1 | {hw}; driver {driver} |" in report
        assert f"SASS sm_86; driver {driver} >= 525.60.13" in report
        assert f"- {name}: torch " in report and f"this host has {driver}\n" in report
        assert f'"{name}":{{"driver":"{driver}"' in report  # the record `lock --check` reads
    assert f"a (1, from {SHORT}), b (1, from {PADDED}), c (1, from 535.104.05)" in report
    code, out, err = run_cli(capsys, "lock", str(spec), "--check")
    assert code == 0 and "all current" in out, out + err
