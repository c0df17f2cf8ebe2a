"""Slurm as a fleet: `scontrol show node --oneliner` read into groups, an sbatch script per GPU
group, and a real Slurm (tests/slurm_support.py) running it: `verify` on each node, `fleet report`
over what the nodes wrote."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cli_support import run_cli
from slurm_support import Node, listening, slurm_cluster

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.versions import Driver
from resolver.fleet.report import read_plan
from resolver.fleet.slurm import parse_line, read_nodes
from resolver.solve.shapes import MAX_NAME

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
    lockdir = tmp_path / "hpc"
    assert f'#SBATCH --chdir="{lockdir}"' in text  # runs in the lock, submitted from anywhere
    assert "#SBATCH --output=results/%x-%j.out" in text and "SLURM_SUBMIT_DIR" not in text
    assert '"$GPURESOLVE_RESULTS/$SLURMD_NODENAME.json"' in text and "verify --json" in text
    assert (tmp_path / "hpc" / "results" / "README.md").is_file()  # Slurm needs the folder
    code, out, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split", "--check")
    assert code == 0 and "all current" in out, out + err


def test_a_lock_folder_sbatch_cannot_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.txt").write_bytes(FIXTURE.read_bytes())
    (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
    out = tmp_path / 'a"b%c'
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "-o", str(out))
    assert code == 2 and "#SBATCH --chdir" in err and not out.exists()


DOCS = ROOT / "docs" / "how-to" / "fleet-verify.md"
LOOP_NODES = (
    Node("gpu-n1", "gpu", "gpu:h100:1", "driver-550.54.15,ib"),
    Node("gpu-n2", "gpu", "gpu:h100:1", "driver-550.54.15,ib"),
    Node("gpu-n3", "gpu", "gpu:h100:1", "driver-550.54.15,ib"),  # drained below
    Node("gpu-u1", "dgx", "gpu:1", "driver-535.104.05"),  # a GRES without a type
    Node("cpu-n1", "cpu"),
)


def documented_loop() -> tuple[str, str]:
    """(the spec, the bash commands) the Slurm part of docs/how-to/fleet-verify.md shows."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("**Slurm.**") :]
    spec = re.search(r"```yaml\n# hpc\.yaml\n(.*?)```", section, re.S)
    loop = re.search(r"```bash\n(.*?)```", section, re.S)
    assert spec and loop, "the Slurm section shows a spec and the commands"
    return spec.group(1), loop.group(1)


@pytest.mark.slow
def test_real_slurm_runs_the_documented_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], child_env: Callable[..., dict[str, str]]
) -> None:
    """The docs' commands, as written, on a real Slurm with a drained node, an untyped GRES, a
    CPU node, a node without gpuresolve and a script submitted from a third folder: every node
    that can run verifies, and `fleet report` names each node with its cause."""
    spec, loop = documented_loop()
    shim = tmp_path / "bin"  # `gpuresolve` on the PATH: this checkout's, but not on gpu-n2
    shim.mkdir()
    (shim / "gpuresolve").write_text(
        '#!/bin/sh\nif [ "$SLURMD_NODENAME" = gpu-n2 ]; then\n'
        '    echo "gpuresolve: command not found" >&2; exit 127\nfi\n'
        f'exec {sys.executable} -m resolver "$@"\n'
    )
    (shim / "gpuresolve").chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    environ.pop("GPURESOLVE", None)  # the scripts' default: `gpuresolve` from the PATH
    env = child_env(
        environ,
        PYTHONPATH=str(ROOT),
        PATH=f"{shim}{os.pathsep}{environ.get('PATH', '/usr/bin:/bin')}",
        GPURESOLVE_PYTHON=sys.executable,  # a Python without torch: verify fails, with its cause
    )
    work, elsewhere = tmp_path / "a lock folder", tmp_path / "elsewhere"  # a space: quoted
    work.mkdir()
    elsewhere.mkdir()
    (work / "hpc.yaml").write_text(spec + "lock: top-level\n", encoding="utf-8")  # no index
    lockdir = work / "hpc"
    with slurm_cluster(LOOP_NODES, env) as cluster:
        cluster.run("scontrol", "update", "nodename=gpu-n3", "state=drain", "reason=fan NodeName=x")
        done = subprocess.run(
            ["bash", "-c", loop], cwd=work, env=cluster.env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr + cluster.tail()  # nodes fail
        [untyped] = lockdir.glob("**/verify-dgx-*.sbatch")
        subprocess.run(
            ["sbatch", "--wait", str(untyped)], cwd=elsewhere, env=cluster.env,
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    assert "gpu-n1" in done.stdout and "gpu-n2" in done.stdout
    plan = yaml.safe_load((lockdir / "fleet.yaml").read_text(encoding="utf-8"))
    [h100] = [g for g in plan["groups"] if g["nodes_of"].startswith("gpu-h100")]
    assert h100["nodes"] == ["gpu-n1", "gpu-n2"]
    assert h100["left_out"]["gpu-n3"].startswith("Slurm state IDLE+DRAIN: fan NodeName=x")
    assert "--nodelist=gpu-n1,gpu-n2\n" in (lockdir / h100["job"]).read_text(encoding="utf-8")
    assert "#SBATCH --gres=gpu:1\n" in untyped.read_text(encoding="utf-8")
    results = lockdir / "results"
    assert sorted(p.name for p in results.glob("*.json")) == [
        "gpu-n1.json",
        "gpu-n2.json",
        "gpu-u1.json",
    ]
    assert len(list(results.glob("gpuresolve-verify-*.out"))) == 2  # each job's log beside them
    assert not [*work.glob("*.out"), *elsewhere.glob("*.out"), *lockdir.glob("linux-*/*.out")]
    doc = json.loads((results / "gpu-u1.json").read_text(encoding="utf-8"))
    assert doc["host"]["node"] == "gpu-u1" and doc["status"] == "fail"
    code, text, err = run_cli(  # --expect: any folder inside the lock
        capsys, "fleet", "report", str(results), "--expect", str(untyped.parent), "--json"
    )
    assert code == 1, err
    report = json.loads(text)
    assert not [n for g in report["groups"] for n in g["missing_nodes"]]
    failed = {o["node"]: o["cause"] or "" for g in report["groups"] for o in g["outliers"]}
    assert sorted(failed) == ["gpu-n1", "gpu-n2", "gpu-u1"]
    assert "import" in failed["gpu-n1"] and "import" in failed["gpu-u1"]
    assert "empty file: verify did not run" in failed["gpu-n2"]  # no gpuresolve on that node
    assert (results / "gpu-n2.json").read_bytes() == b""
    # each script passed its group: verify held the node to its group's GPUs (issue 39)
    named = [o for g in report["groups"] for o in g["outliers"] if o["node"] != "gpu-n2"]
    assert all("check group fails" in o["differs"] for o in named)
    code, text, err = run_cli(capsys, "fleet", "report", str(results), "--expect", str(lockdir))
    assert code == 1, err  # the text names each node with its cause
    for node in ("gpu-n1", "gpu-n2", "gpu-u1"):
        assert node in text, text
    assert "**gpu-n3**: left out by the lock, not verified: Slurm state IDLE+DRAIN: fan" in text
    report = json.loads(run_cli(capsys, "fleet", "report", str(results), "--expect",
                                str(lockdir), "--json")[1])  # fmt: skip
    left = {n["node"]: n["reason"] for g in report["groups"] for n in g["left_out"]}
    assert sorted(left) == ["cpu-n1", "gpu-n3"], left  # drained; a CPU node gets no GPU job
    assert left["cpu-n1"] == "no GPU" and left["gpu-n3"].startswith("Slurm state IDLE+DRAIN")
    held = {c["id"]: c for c in doc["checks"]}["group"]
    assert held["status"] == "fail" and held["reason"].startswith("this node's group expects ")
    if shutil.which("nvidia-smi") is None:
        assert held["reason"].endswith("; this host has no NVIDIA driver")


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


def test_unavailable_nodes_are_left_out_with_their_state(
    shipped: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded: gpu-n2 is IDLE+DRAIN. It stays in its group's lock, leaves the job (which would
    pend on it forever) and is listed in fleet.yaml with its state and reason; the entry's
    include_unavailable: true sends the job there too."""
    [h100] = [g for g in read_nodes(FREE_TEXT, shipped, "n", None) if "h100" in g.name]
    assert h100.nodes == ("gpu-n1", "gpu-n2")
    down = h100.placement["gpu-n2"].unavailable
    assert down is not None and down.startswith("Slurm state IDLE+DRAIN: disk swap NodeName=")
    assert h100.placement["gpu-n1"].unavailable is None
    kept = [g for g in read_nodes(FREE_TEXT, shipped, "n", None, (), True) if "h100" in g.name]
    assert kept[0].placement["gpu-n2"].unavailable is None
    for state, left in (("DOWN+NOT_RESPONDING", True), ("MIXED+COMPLETING", False)):
        line = FREE_TEXT.read_text(encoding="utf-8").replace("State=IDLE ", f"State={state} ")
        (tmp_path / "s.txt").write_text(line, encoding="utf-8")
        nodes = read_nodes(tmp_path / "s.txt", shipped, "s", None)
        assert (nodes[0].placement["cpu-n1"].unavailable is not None) is left
    (tmp_path / "s.txt").write_text(FIXTURE.read_text().replace("State=IDLE", "State=idle+x"))
    with pytest.raises(UserError, match="State: not a Slurm state"):
        read_nodes(tmp_path / "s.txt", shipped, "s", None)

    (tmp_path / "nodes.txt").write_bytes(FREE_TEXT.read_bytes())
    (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"))
    assert code == 0, err
    lockdir = tmp_path / "hpc"
    plan = yaml.safe_load((lockdir / "fleet.yaml").read_text(encoding="utf-8"))
    [group] = [g for g in plan["groups"] if g["nodes_of"].startswith("gpu-h100")]
    assert group["nodes"] == ["gpu-n1"] and "IDLE+DRAIN" in group["left_out"]["gpu-n2"]
    script = (lockdir / group["job"]).read_text(encoding="utf-8")
    assert "#SBATCH --nodes=1\n" in script and "#SBATCH --nodelist=gpu-n1\n" in script
    assert read_plan(lockdir / "results") == read_plan(lockdir)  # --expect: any folder inside
    assert read_plan(lockdir / "linux-x86_64") == read_plan(lockdir / "fleet.yaml")
    (tmp_path / "hpc.yaml").write_text(SPEC + "    include_unavailable: true\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"))
    assert code == 0, err
    plan = yaml.safe_load((lockdir / "fleet.yaml").read_text(encoding="utf-8"))
    [group] = [g for g in plan["groups"] if g["nodes_of"].startswith("gpu-h100")]
    assert group["nodes"] == ["gpu-n1", "gpu-n2"] and "left_out" not in group


UNAVAILABLE = (
    "DRAIN", "DOWN", "FAIL", "MAINTENANCE", "NOT_RESPONDING", "RESERVED", "POWERED_DOWN",
    "INVALID_REG", "REBOOT_ISSUED",
)  # fmt: skip


@pytest.mark.parametrize(
    ("state", "left"),
    [
        *((f"IDLE+{flag}", True) for flag in UNAVAILABLE if flag not in ("DOWN", "FAIL")),
        ("DOWN", True),
        ("FAIL", True),
        ("DOWN+DRAIN", True),
        ("ALLOCATED+FAIL", True),
        ("MIXED+MAINTENANCE+RESERVED", True),
        ("IDLE", False),
        ("MIXED", False),
        ("ALLOCATED+COMPLETING", False),
        ("IDLE+CLOUD", False),
        ("IDLE+PLANNED", False),
    ],
)
def test_each_unavailable_state_is_left_out(
    shipped: Catalog, tmp_path: Path, state: str, left: bool
) -> None:
    """One case per state the issue names (a base state or a flag, as Slurm joins them with
    `+`), and states a job can still start on, which stay in."""
    text = FREE_TEXT.read_text(encoding="utf-8").replace("State=IDLE ", f"State={state} ")
    (tmp_path / "s.txt").write_text(text, encoding="utf-8")
    nodes = read_nodes(tmp_path / "s.txt", shipped, "s", None)
    why = nodes[0].placement["cpu-n1"].unavailable
    assert (why is not None) is left, (state, why)
    if left:
        assert why is not None and why.startswith(f"Slurm state {state}")


def _untyped(tmp_path: Path, features: str = "driver-535.104.05") -> Path:
    """The fixture with gpu-a1's GRES untyped (gpu:1) and the given features."""
    text = FIXTURE.read_text(encoding="utf-8").replace("Gres=gpu:a100:1", "Gres=gpu:1")
    text = text.replace("AvailableFeatures=driver-535.104.05", f"AvailableFeatures={features}")
    (tmp_path / "nodes.txt").write_text(text, encoding="utf-8")
    return tmp_path / "nodes.txt"


def test_untyped_gres_takes_its_model_from_a_feature_or_the_spec(
    shipped: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gres=gpu:1 names no model: a gpu-model-TYPE node feature names it, else the first
    gpu_model: rule matching the node (by partition or node-name pattern), else exit 2."""
    from resolver.fleet.slurm import ModelRule

    def models(path: Path, *rules: ModelRule) -> dict[str, list[str]]:
        groups = read_nodes(path, shipped, "n", None, rules)
        return {g.name: [x.name for x in g.shape.gpus] for g in groups}

    with pytest.raises(UserError, match=r"a GRES without a type .*gpu_model:"):
        models(_untyped(tmp_path))
    by_partition = models(_untyped(tmp_path), ModelRule("a100", partition="gpu"))
    assert by_partition["gpu-gpu-a100-driver-535.104.05"] == ["NVIDIA A100"]
    rules = (ModelRule("h100", nodes="gpu-n*"), ModelRule("A100", nodes="gpu-a[0-9]"))
    assert models(_untyped(tmp_path), *rules)["gpu-gpu-a100-driver-535.104.05"] == ["NVIDIA A100"]
    with pytest.raises(UserError, match="without a type"):
        models(_untyped(tmp_path), ModelRule("a100", partition="cpu"))
    featured = _untyped(tmp_path, "driver-535.104.05,gpu-model-h100")
    assert "gpu-gpu-h100-driver-535.104.05-gpu-model-h100" in models(
        featured, ModelRule("a100")
    )  # the node's own feature first
    script_spec = SPEC + "    gpu_model:\n      - partition: gpu\n        model: a100\n"
    (tmp_path / "hpc.yaml").write_text(script_spec, encoding="utf-8")
    _untyped(tmp_path)
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"))
    assert code == 0, err
    [script] = (tmp_path / "hpc").glob("**/verify-gpu-gpu-a100-*.sbatch")
    assert "#SBATCH --gres=gpu:1\n" in script.read_text(encoding="utf-8")
    for bad, says in (
        ("    gpu_model: zz9000\n", "gpu_model.model: 'zz9000' names no GPU"),
        ("    gpu_model: [{partition: gpu}]\n", "gpu_model[0]: model: missing"),
        ("    gpu_model: [{rack: 4, model: a100}]\n", "gpu_model[0]: expected {model: M}"),
        ("    include_unavailable: maybe\n", "include_unavailable: expected true or false"),
    ):
        (tmp_path / "hpc.yaml").write_text(SPEC + bad, encoding="utf-8")
        code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"))
        assert code == 2 and says in err, err
