"""Slurm as a fleet: `scontrol show node --oneliner` read into groups, an sbatch script per GPU
group, and a real Slurm (tests/slurm_support.py) running it: `verify` on each node, `fleet report`
over what the nodes wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import run_cli
from slurm_support import Node, slurm_cluster

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.versions import Driver
from resolver.team.fleet_report import read_plan
from resolver.team.slurm import parse_line, read_nodes

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "slurm" / "scontrol_show_node_oneliner.txt"
SPEC = """\
name: hpc
python: "3.12"
packages:
  torch: ">=2.4"
targets:
  - slurm: nodes.txt
"""
NODES = (
    Node("gpu-n1", "gpu", "gpu:h100:1", "driver-550.54.15,ib"),
    Node("gpu-n2", "gpu", "gpu:h100:1", "driver-550.54.15,ib"),
    Node("gpu-a1", "gpu", "gpu:a100:1", "driver-535.104.05"),
    Node("cpu-n1", "cpu"),
)


def test_recorded_output_groups(shipped: Catalog) -> None:
    """The fixture is `scontrol show node --oneliner` of the test cluster above (README)."""
    groups = {g.name: g for g in read_nodes(FIXTURE, shipped, "nodes.txt", None)}
    assert sorted(groups) == [
        "cpu-cpu",
        "gpu-a100-driver-535.104.05",
        "gpu-h100-driver-550.54.15-ib",
    ]
    h100 = groups["gpu-h100-driver-550.54.15-ib"]
    assert h100.nodes == ("gpu-n1", "gpu-n2")
    assert str(h100.shape.driver) == "550.54.15" and h100.shape.platform.name == "linux-x86_64"
    assert [(g.name, g.cc, g.count) for g in h100.shape.gpus] == [("NVIDIA H100", (9, 0), 1)]
    assert groups["cpu-cpu"].shape.gpus == () and groups["cpu-cpu"].nodes == ("cpu-n1",)


def test_os_field_with_spaces_and_errors(shipped: Catalog, tmp_path: Path) -> None:
    line = next(ln for ln in FIXTURE.read_text(encoding="utf-8").splitlines() if "=gpu-n1 " in ln)
    fields = parse_line(line, "x")
    assert fields["OS"].startswith("Linux ") and " " in fields["OS"]
    no_driver = line.replace("driver-", "fw-")
    (tmp_path / "n.txt").write_text(no_driver + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="no driver"):
        read_nodes(tmp_path / "n.txt", shipped, "n.txt", None)
    groups = read_nodes(
        tmp_path / "n.txt", shipped, "n.txt", Driver.parse("550.54.15")
    )  # the spec's driver:
    assert str(groups[0].shape.driver) == "550.54.15"
    (tmp_path / "n.txt").write_text(line.replace("Gres=gpu:h100:", "Gres=gpu:zz9000:") + "\n")
    with pytest.raises(UserError, match="names no GPU"):
        read_nodes(tmp_path / "n.txt", shipped, "n.txt", None)
    (tmp_path / "n.txt").write_text(line.replace("NodeName=", "NodeName=bad\x1b") + "\n")
    with pytest.raises(UserError, match="not a node name"):
        read_nodes(tmp_path / "n.txt", shipped, "n.txt", None)


def test_lock_writes_an_sbatch_script_per_gpu_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.txt").write_bytes(FIXTURE.read_bytes())
    (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split")
    assert code == 0, err
    scripts = sorted((tmp_path / "hpc").glob("**/verify-*.sbatch"))
    assert [p.name for p in scripts] == [
        "verify-gpu-a100-driver-535.104.05.sbatch",
        "verify-gpu-h100-driver-550.54.15-ib.sbatch",
    ]
    text = next(p for p in scripts if "h100" in p.name).read_text(encoding="utf-8")
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        "#SBATCH --gres=gpu:h100:1",
        "#SBATCH --nodelist=gpu-n1,gpu-n2",
        "#SBATCH --time=00:30:00",
    ):
        assert line in text
    assert "results/$SLURMD_NODENAME.json" in text and "verify --json" in text


@pytest.mark.slow
def test_real_slurm_runs_verify_and_fleet_report_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], child_env: Callable[..., dict[str, str]]
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env = child_env(
        environ,
        PYTHONPATH=str(ROOT),
        GPURESOLVE=f"{sys.executable} -m resolver",
        GPURESOLVE_PYTHON=sys.executable,  # a Python without torch: verify fails, with its cause
    )
    with slurm_cluster(NODES, env) as cluster:
        listing = cluster.run("scontrol", "show", "node", "--oneliner")
        (tmp_path / "nodes.txt").write_text(listing, encoding="utf-8")
        (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
        code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split")
        assert code == 0, err
        lockdir = tmp_path / "hpc"
        [script] = lockdir.glob("**/verify-gpu-h100-*.sbatch")
        out = cluster.run("sbatch", "--parsable", script.name, cwd=script.parent)
        job = out.strip().split(";")[0]
        deadline = time.monotonic() + 240
        while cluster.run("squeue", "-h", "-j", job).strip():
            assert time.monotonic() < deadline, "the job did not finish" + cluster.tail()
            time.sleep(0.5)
        state = subprocess.run(
            ["scontrol", "show", "job", job], env=cluster.env, capture_output=True, text=True
        ).stdout
    results = script.parent / "results"
    logs = "".join(p.read_text(errors="replace") for p in results.glob("*.out"))
    assert sorted(p.name for p in results.glob("*.json")) == ["gpu-n1.json", "gpu-n2.json"], (
        state + logs
    )
    doc = json.loads((results / "gpu-n1.json").read_text(encoding="utf-8"))
    assert doc["host"]["node"] == "gpu-n1" and doc["status"] == "fail"
    plan = read_plan(lockdir)
    assert doc["group"] == plan["gpu-n1"] == plan["gpu-n2"]  # the group its lock records
    code, text, err = run_cli(
        capsys, "fleet", "report", str(results), "--expect", str(lockdir), "--json"
    )
    assert code == 1, err
    report = json.loads(text)
    [group] = [g for g in report["groups"] if g["nodes"]]
    assert group["group"] == plan["gpu-n1"]
    assert group["fail"] == 2
    named = {o["node"]: o for o in group["outliers"]}
    assert sorted(named) == ["gpu-n1", "gpu-n2"]
    assert all("import" in (o["cause"] or "") for o in named.values())
    # the A100 group's job was not run: --expect names its node missing
    missing = [n for g in report["groups"] for n in g["missing_nodes"]]
    assert missing == ["gpu-a1"] and "cpu-n1" not in plan  # a CPU node runs no GPU job
