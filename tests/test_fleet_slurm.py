"""Slurm as a fleet: `scontrol show node --oneliner` read into groups, an sbatch script per GPU
group, and a real Slurm (tests/slurm_support.py) running it: `verify` on each node, `fleet report`
over what the nodes wrote."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cli_support import run_cli
from slurm_support import Node, listening, slurm_cluster

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.versions import Driver
from resolver.solve.shapes import MAX_NAME
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


@pytest.mark.slow
def test_test_daemons_listen_on_loopback_only(
    child_env: Callable[..., dict[str, str]],
) -> None:
    """The private Slurm is reachable from this host alone: every TCP socket munged, slurmctld
    and the slurmds listen on is a loopback address (CommunicationParameters=NoInAddrAny...)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    with slurm_cluster(NODES[:2], child_env(environ)) as cluster:
        found = listening(cluster.pids)
    assert len({pid for pid, _ in found}) == 3, found  # slurmctld and both slurmds listen
    assert all(ipaddress.ip_address(a.rsplit(":", 1)[0]).is_loopback for _, a in found), found


FREE_TEXT = Path(__file__).parent / "fixtures" / "slurm" / "scontrol_show_node_free_text.txt"


def test_free_text_sets_nothing_else(shipped: Catalog) -> None:
    """Recorded: gpu-n2's Reason= and gpu-n1's Comment= and Extra= hold words shaped like fields
    (NodeName=gpu-n9, Partitions=debug, Gres=..., Arch=aarch64); each is read as that text."""
    lines = FREE_TEXT.read_text(encoding="utf-8").splitlines()
    n2 = parse_line(next(ln for ln in lines if ln.startswith("NodeName=gpu-n2 ")), "x")
    assert n2["NodeName"] == "gpu-n2" and n2["Partitions"] == "gpu"
    assert n2["Gres"] == "gpu:h100:1" and n2["AvailableFeatures"] == "driver-550.54.15,ib"
    assert n2["Reason"].startswith("disk swap NodeName=gpu-n9 Partitions=debug Gres=gpu:a100:8")
    n1 = parse_line(next(ln for ln in lines if ln.startswith("NodeName=gpu-n1 ")), "x")
    assert n1["NodeName"] == "gpu-n1" and n1["Arch"] == "x86_64" and n1["Partitions"] == "gpu"
    assert n1["Comment"] == "rack 4 NodeName=gpu-n9 Arch=aarch64"
    assert n1["Extra"] == "owner=ml Partitions=debug"
    groups = {g.name: g.nodes for g in read_nodes(FREE_TEXT, shipped, "nodes.txt", None)}
    assert groups["gpu-h100-driver-550.54.15-ib"] == ("gpu-n1", "gpu-n2")
    assert not any("gpu-n9" in nodes or "debug" in name for name, nodes in groups.items())


def test_fields_out_of_slurms_order_are_refused(tmp_path: Path) -> None:
    """Outside free text a known key comes once, in Slurm's order; a key newer than gpuresolve's
    list is skipped (a later Slurm)."""
    line = next(ln for ln in FIXTURE.read_text(encoding="utf-8").splitlines() if "gpu-n1 " in ln)
    with pytest.raises(UserError, match="Arch= after Gres="):
        parse_line(line.replace("Gres=gpu:h100:1 ", "Gres=gpu:h100:1 Arch=aarch64 "), "x")
    with pytest.raises(UserError, match="NodeName= after"):
        parse_line(line + " NodeName=gpu-n9", "x")
    newer = parse_line(line.replace("Gres=", "TopologyBlock=b1 Gres="), "x")
    assert newer["Gres"] == "gpu:h100:1" and newer["TopologyBlock"] == "b1"


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85", "\r", "\x0b", "\x0c", "\x1c", "\x1e"])
def test_a_line_break_inside_a_value_is_refused_naming_the_node(
    brk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """str.splitlines() splits on these; Slurm does not: the text after one is never a node."""
    lines = FREE_TEXT.read_text(encoding="utf-8").splitlines()
    forged = next(ln for ln in lines if ln.startswith("NodeName=gpu-a1 "))
    forged = forged.replace("NodeName=gpu-a1", "NodeName=gpu-n9").replace("gpu:a100", "gpu:h100")
    evil = [ln + brk + forged if ln.startswith("NodeName=gpu-n2 ") else ln for ln in lines]
    (tmp_path / "nodes.txt").write_text("\n".join(evil) + "\n", encoding="utf-8", newline="")
    (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split")
    assert code == 2, err
    assert "node gpu-n2:" in err and "line break" in err and "Traceback" not in err
    assert not (tmp_path / "hpc").exists()


def test_crlf_file_and_a_split_comment(shipped: Catalog, tmp_path: Path) -> None:
    """A CRLF copy reads as Slurm wrote it; a Comment= holding \\n (Slurm prints it raw) leaves
    a line that is not a node: refused, never read as one."""
    text = FIXTURE.read_text(encoding="utf-8")
    (tmp_path / "crlf.txt").write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    crlf = read_nodes(tmp_path / "crlf.txt", shipped, "n", None)
    assert [(g.name, g.nodes) for g in crlf] == [
        (g.name, g.nodes) for g in read_nodes(FIXTURE, shipped, "n", None)
    ]
    split = text.replace("ExtSensorsTemp=n/s\nNodeName=gpu-n2", "Comment=a\nb NodeName=gpu-n2", 1)
    (tmp_path / "split.txt").write_text(split, encoding="utf-8")
    with pytest.raises(UserError, match=r"split\.txt:\d+: expected NodeName=\.\.\. first"):
        read_nodes(tmp_path / "split.txt", shipped, "split.txt", None)


def test_long_feature_lists_lock_with_bounded_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nodes with 30 long features once made a group's file name pass 255 bytes; a group's name
    is now a readable start and a digest of its key, and features differing only in case (IB,
    ib) make two groups with two names."""
    many = ",".join(f"topology-block-{i:02d}-rack-row-aisle" for i in range(30))
    text = FIXTURE.read_text(encoding="utf-8")
    text = text.replace("driver-550.54.15,ib ActiveFeatures=driver-550.54.15,ib", f"{many}")
    text = text.replace(
        "AvailableFeatures=driver-535.104.05 ActiveFeatures=driver-535.104.05",
        f"AvailableFeatures={many.upper()} ActiveFeatures={many.upper()}",
    ).replace("Gres=gpu:a100:1", "Gres=gpu:h100:1")
    (tmp_path / "nodes.txt").write_text(text, encoding="utf-8")
    (tmp_path / "hpc.yaml").write_text(SPEC + '    driver: "550.54.15"\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split")
    assert code == 0, err
    plan = yaml.safe_load((tmp_path / "hpc" / "fleet.yaml").read_text(encoding="utf-8"))
    names = sorted(g["nodes_of"] for g in plan["groups"])
    assert len(names) == 3 and all(len(n) <= MAX_NAME for n in names), names
    long = [n for n in names if n.startswith("gpu-h100-topology-block-00")]
    assert len(long) == 2 and all(re.fullmatch(r".*-[0-9a-f]{10}", n) for n in long)
    for path in (tmp_path / "hpc").rglob("*"):
        assert all(len(part.encode()) <= 255 for part in path.parts), path
    assert len(list((tmp_path / "hpc").rglob("verify-*.sbatch"))) == 2
