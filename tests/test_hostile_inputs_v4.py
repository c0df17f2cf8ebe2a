"""Issue 36's classes tried again as an attacker and a new user would: node lists, `fleet
report`'s inputs, project and user configuration, the environment, locks read back. Each case
ends in a documented exit code and one line, bounded in time and size, nothing raw printed."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.team import fleet_report

FIX = Path(__file__).parent / "fixtures"
HEALTHY = FIX / "verify" / "h100_diag" / "healthy.json"


def _result(node: str, tflops: float) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(HEALTHY.read_text(encoding="utf-8"))
    doc["host"]["node"] = node
    doc["benchmark"]["matmul_bf16"]["tflops"] = tflops
    return doc


def test_fleet_report_compares_each_node_with_figures_worked_out_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet of thousands of nodes is read in seconds: each GPU's medians are worked out
    once, not once per node (3,000 results took minutes: quadratic). Counted, not timed."""
    calls = 0
    median = statistics.median

    def counted(values: Any) -> Any:
        nonlocal calls
        calls += 1
        return median(values)

    monkeypatch.setattr(fleet_report.statistics, "median", counted)
    results = tmp_path / "results"
    results.mkdir()
    nodes = 300
    for i in range(nodes):
        doc = _result(f"gpu-n{i}", 10.0 if i == 7 else 100.0)
        (results / f"gpu-n{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = run_cli(capsys, "fleet", "report", "--json", str(results))
    assert code == 1, err  # gpu-n7 is slow: named, the others not
    doc = json.loads(out)
    assert [o["node"] for g in doc["groups"] for o in g["outliers"]] == ["gpu-n7"]
    assert calls < 10, calls  # per GPU and case, not per node (300 here)
