"""Every node gets a verdict, judged against its lock (issue 39): nodes that left no verify result,
a fleet compared with its lock's pins, causes in the order of what decides, the recorded one-GPU
fleet of faults, and `verify --group` holding a node to the GPUs and driver its group expects."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.hostprofile import STATE_NO_DRIVER, GpuInfo, HostProfile
from resolver.core.versions import Driver
from resolver.fleet import report as fleet_report
from resolver.fleet.results import KEPT, read_file, read_results
from resolver.readers import lockfile
from resolver.verify import checks
from resolver.verify.expects import ExpectedGpu, Expects, check_group, find_expects
from resolver.verify.result import FAIL, PASS, SKIP, WARN

FIX = Path(__file__).parent / "fixtures" / "verify"
FLEET = FIX / "h200_fleet"  # seven runs on one H200 (README): three healthy, four conditions
H100 = FIX / "h100_torch211_cu130"


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(capsys, "fleet", "report", "--json", *args)
    return code, (json.loads(out) if out else {}), err


def _outliers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["node"]: o for g in doc["groups"] for o in g["outliers"]}


def test_recorded_h200_fleet_is_judged_right(capsys: pytest.CaptureFixture[str]) -> None:
    """The recorded fleet: TF32 off, a preloaded cuDNN and no visible GPU named with their
    causes; the healthy runs and node-d (whose recording shows no other process on the GPU and
    healthy figures: README) are not."""
    code, doc, err = _report(capsys, str(FLEET))
    assert code == 1, err
    [group] = doc["groups"]
    assert (group["nodes"], group["pass"], group["fail"], group["no_result"]) == (7, 4, 3, 0)
    found = _outliers(doc)
    assert sorted(found) == ["node-c", "node-e", "node-f"]
    assert "NVIDIA_TF32_OVERRIDE=0" in found["node-c"]["cause"]
    assert found["node-c"]["differs"][0].startswith("conv2d_cudnn 29.1 TFLOP/s")
    assert "cuDNN version incompatibility" in found["node-e"]["cause"]
    assert "CUDA_VISIBLE_DEVICES is set to an empty value" in found["node-f"]["cause"]
    # no GPU seen is about the GPU: it decides before a slow case or another cuDNN would
    assert found["node-f"]["decides"] == "gpu" and found["node-e"]["decides"] == "other"


def _healthy(node: str) -> str:
    doc, _ = json.JSONDecoder().raw_decode((FLEET / "node-a.json").read_text(encoding="utf-8"))
    doc["host"]["node"] = node
    return json.dumps(doc, separators=(",", ":")) + "\n"


LEFT = {
    "gpu-n2": ("", "an empty file"),
    "gpu-n3": (
        '{"error": {"code": 2, "message": "--lock hpc/requirements.txt: no such file"}}\n',
        "verify stopped with an error: --lock hpc/requirements.txt: no such file",
    ),
    "gpu-n4": (None, "a verify report cut short"),  # the first 3,000 bytes of a result
    "gpu-n5": (
        '{"kind": "List"}\nbash: line 1: gpuresolve: command not found\n',
        "the last: 'bash: line 1: gpuresolve: command not found'",
    ),
    "gpu-n6": ('{"verify": 1, "status": "maybe"}\n', "'status' is 'maybe'"),
    "gpu-n7": ("\x1b]0;t\x07 oops\n", "\\x1b]0;t\\x07 oops"),
}


def test_nodes_that_left_no_result_are_failed_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What a node leaves when verify did not run or did not finish: each is a failed node named
    after its file (Slurm writes results/NODE.json) with what it left, exit 1, never exit 2."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "gpu-n1.json").write_text(_healthy("gpu-n1"), encoding="utf-8")
    for node, (text, _) in LEFT.items():
        body = _healthy(node)[:3000] if text is None else text
        (results / f"{node}.json").write_text(body, encoding="utf-8")
    lockdir = tmp_path / "hpc"
    lockdir.mkdir()
    nodes = ["gpu-n1", *LEFT, "gpu-n8"]
    plan = {"fleet": 1, "groups": [{"group": "hpc", "nodes_of": "gpu-h200", "nodes": nodes}]}
    (lockdir / fleet_report.PLAN_FILE).write_text(json.dumps(plan), encoding="utf-8")
    code, doc, err = _report(capsys, str(results), "--expect", str(lockdir))
    assert code == 1, err
    [group] = doc["groups"]
    assert group["group"] == "hpc" and group["missing_nodes"] == ["gpu-n8"]
    assert (group["nodes"], group["pass"], group["fail"], group["no_result"]) == (7, 1, 6, 6)
    found = _outliers(doc)
    assert sorted(found) == sorted(LEFT)
    for node, (_, said) in LEFT.items():
        assert found[node]["decides"] == "did-not-run"
        assert found[node]["differs"] == ["no verify result"]
        assert said in found[node]["cause"], (node, found[node])
    assert "\x1b" not in json.dumps(doc)
    # a results folder no node wrote to (the job never started): with the plan, all missing
    (tmp_path / "empty").mkdir()
    code, doc, err = _report(capsys, str(tmp_path / "empty"), "--expect", str(lockdir))
    assert code == 1, err
    assert doc["groups"][0]["missing_nodes"] == sorted(nodes)
    # without a plan they are a group of their own, each still a failed node
    code, doc, _ = _report(capsys, str(results / "gpu-n2.json"), str(results / "gpu-n1.json"))
    assert code == 1
    assert [g["group"] for g in doc["groups"]][-1] == fleet_report.NO_RESULT_GROUP


def test_error_lines_among_a_jobs_logs(tmp_path: Path) -> None:
    """`kubectl logs --prefix` of a Job: a pod whose verify stopped is named by its pod."""
    lines = [
        "[pod/v-0-a/verify] " + _healthy("gpu-0").strip(),
        '[pod/v-1-b/verify] {"error": {"code": 70, "message": "unexpected: boom"}}',
        '{"error": "not ours: an error document has code and message"}',
    ]
    path = tmp_path / "logs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = list(read_file(path))
    assert [(r.node, r.left) for r in found] == [
        ("gpu-0", None),
        ("v-1-b", "verify stopped with an error: unexpected: boom"),
    ]
    assert found[1].file.endswith("logs.jsonl:2")
    # a result keeps only what a report compares: its checks that did not pass, and KEPT
    assert all(c.status in ("fail", "warn") or c.id in KEPT for c in found[0].checks)


NVIDIA = [
    "nvidia-cublas",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime",
    "nvidia-cudnn-cu13",
    "nvidia-cufft",
    "nvidia-cufile",
    "nvidia-curand",
    "nvidia-cusolver",
    "nvidia-cusparse",
    "nvidia-cusparselt-cu13",
    "nvidia-nccl-cu13",
    "nvidia-nvjitlink",
    "nvidia-nvshmem-cu13",
    "nvidia-nvtx",
    "nvidia-ml-py",
]


def _lock(path: Path, cudnn: str = "9.19.0.56") -> Path:
    """A lock pinning torch 2.12.0+cu130 and fourteen nvidia-* wheels at other versions than
    the recorded H100 environment has (its cuDNN and NCCL as recorded, unless ``cudnn``),
    sorted as lock files list them (nvidia-* first)."""
    kept = {"nvidia-cudnn-cu13": cudnn, "nvidia-nccl-cu13": "2.28.9"}
    lines = [f"{name}=={kept.get(name, '99.0.0')}" for name in NVIDIA] + ["torch==2.12.0+cu130"]
    path.write_text("\n".join(sorted(lines)) + "\n", encoding="utf-8")
    return path


def test_expect_compares_with_the_lock_not_the_majority(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, shipped: Catalog
) -> None:
    """Three nodes run torch 2.11.0 (the recorded H100 run), one runs the 2.12.0 its lock pins:
    with --expect the three are named, the wrong torch first, never lost after sixteen nvidia-*
    lines; without, the majority decides and the one right node looks like the odd one out."""
    lockdir = tmp_path / "cluster"
    (lockdir / "linux-x86_64").mkdir(parents=True)
    lock = _lock(lockdir / "linux-x86_64" / "requirements.txt")
    probe = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    host = HostProfile(
        platform="linux-x86_64",
        python="3.12",
        driver="580.159.04",
        state="ok",
        gpus=[GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0")],
    )
    pins = lockfile.read(lock, platform="linux-x86_64")
    judged = {c.id: c for c in checks.evaluate(probe, host, shipped, lock=pins)}
    assert judged["lock"].status == FAIL and judged["lock"].reason.startswith("torch 2.11.0")
    recorded = json.loads((H100 / "verify.json").read_text(encoding="utf-8"))
    results = tmp_path / "results"
    results.mkdir()
    for i in range(4):
        doc = json.loads(json.dumps(recorded))
        doc["host"]["node"], doc["group"] = f"h100-{i}", "cluster"
        if i == 3:  # the node that runs what the lock pins
            doc["torch"], doc["variant"] = "2.12.0+cu130", "cu130"
        else:  # as an older verify listed it: torch after the nvidia-* lines (details: all)
            check = judged["lock"].to_json()
            check["reason"] = "; ".join(check["details"][1:4]) + "; and 12 more"
            check["details"] = [*check["details"][1:], check["details"][0]]
            doc["checks"] = [c for c in doc["checks"] if c["id"] != "lock"] + [check]
            doc["status"] = "fail"
        (results / f"h100-{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    nodes = [f"h100-{i}" for i in range(4)]
    plan = {"fleet": 1, "groups": [{"group": "cluster", "lock": "linux-x86_64/requirements.txt",
                                    "nodes_of": "h100", "nodes": nodes}]}  # fmt: skip
    (lockdir / fleet_report.PLAN_FILE).write_text(json.dumps(plan), encoding="utf-8")
    code, doc, err = _report(capsys, str(results), "--expect", str(lockdir))
    assert code == 1, err
    [group] = doc["groups"]
    assert group["pins"] == {
        "torch": "torch==2.12.0+cu130",
        "variant": "cu130",
        "cudnn": "nvidia-cudnn-cu13==9.19.0.56",
        "nccl": "nvidia-nccl-cu13==2.28.9",
    }
    found = _outliers(doc)
    assert sorted(found) == ["h100-0", "h100-1", "h100-2"]
    for o in found.values():
        assert o["decides"] == "build"
        assert o["differs"][0] == "torch 2.11.0+cu130 (lock: torch==2.12.0+cu130)"
        assert o["cause"] == "lock: torch 2.11.0+cu130 installed; the lock pins torch==2.12.0+cu130"
    _lock(lock, cudnn="9.20.0.1")  # cuDNN too is judged against the lock's wheel
    code, doc, _ = _report(capsys, str(results), "--expect", str(lockdir))
    said = "cuDNN 9.19.0 (lock: nvidia-cudnn-cu13==9.20.0.1)"
    assert said in _outliers(doc)["h100-3"]["differs"]
    code, doc, _ = _report(capsys, str(results))  # no plan: by the majority
    assert code == 1
    assert _outliers(doc)["h100-3"]["differs"][0] == "torch 2.12.0+cu130 (group: 2.11.0+cu130)"


def test_causes_in_the_order_of_what_decides(tmp_path: Path) -> None:
    """A node whose GPU is gone and whose cuDNN differs: the GPU is named first."""
    healthy = [_healthy(f"n{i}") for i in range(3)]
    doc = json.loads(healthy[0])
    doc["host"]["node"] = "n9"
    doc["probe"]["cudnn"]["version_text"] = "9.14.0"
    doc["checks"].append({"id": "cuda", "status": "fail", "reason": "no GPU: lost"})
    doc["status"] = "fail"
    path = tmp_path / "r.jsonl"
    path.write_text("".join(healthy) + json.dumps(doc) + "\n", encoding="utf-8")
    report = fleet_report.build_report(read_results([str(path)]))
    [bad] = report.groups[0].outliers
    assert bad.node == "n9" and bad.decides.value == "gpu"
    assert bad.differs[0].startswith("check cuda fails") and bad.cause == "cuda: no GPU: lost"
    assert any(d.startswith("cuDNN 9.14.0") for d in bad.differs[1:])


A100 = Expects("gpu-a100", (ExpectedGpu("NVIDIA A100", "8.0", 1),), Driver.parse("535.104.05"))


def _host(driver: str | None, *gpus: tuple[str, str]) -> HostProfile:
    return HostProfile(
        platform="linux-x86_64",
        python="3.12",
        driver=driver,
        state="ok" if driver else STATE_NO_DRIVER,
        gpus=[GpuInfo(i, name, cc) for i, (name, cc) in enumerate(gpus)],
    )


@pytest.mark.parametrize(
    ("host", "status", "said"),
    [
        (_host(None), FAIL, "; this host has no NVIDIA driver"),
        (_host("535.104.05", ("NVIDIA A100-SXM4-80GB", "8.0")), PASS, "1 × NVIDIA A100-SXM4"),
        (_host("535.104.05"), FAIL, "an NVIDIA driver (535.104.05) but no usable GPU"),
        (_host("535.104.05", ("NVIDIA H100 80GB HBM3", "9.0")), FAIL, "1 × NVIDIA H100"),
        (_host("535.104.05", *[("NVIDIA A100-SXM4-80GB", "8.0")] * 2), FAIL, "2 × NVIDIA A100"),
        (_host("525.60.13", ("NVIDIA A100-SXM4-80GB", "8.0")), FAIL, "driver is 525.60.13"),
        (_host("550.54.15", ("NVIDIA A100-SXM4-80GB", "8.0")), WARN, "(newer:"),
    ],
)
def test_the_group_check(host: HostProfile, status: str, said: str) -> None:
    got = check_group(A100, host)
    assert got.status == status and said in got.reason, got.reason
    if status != PASS:
        assert got.reason.startswith(
            "this node's group expects 1 × NVIDIA A100 with driver 535.104.05 (node group gpu-a100)"
        )
    assert check_group(None, host).status == SKIP


def test_a_lost_gpu_is_named() -> None:
    from resolver.core.hostprofile import LostGpu

    host = _host("535.104.05")
    host.lost_gpus = [LostGpu("0000:17:00.0", "GPU is lost", "nvidia-smi")]
    got = check_group(A100, host)
    assert got.status == FAIL and got.reason.endswith(
        "this host has an NVIDIA driver (535.104.05) but no usable GPU (1 lost: GPU is lost)"
    )


def test_an_h200_is_not_the_h100_its_group_expects() -> None:
    h100 = Expects("g", (ExpectedGpu("NVIDIA-H100-80GB-HBM3", "9.0", 1),), None)
    assert check_group(h100, _host("580.1", ("NVIDIA H100 80GB HBM3", "9.0"))).status == PASS
    assert check_group(h100, _host("580.1", ("NVIDIA H200", "9.0"))).status == FAIL


def test_a_slurm_lock_passes_the_group_and_verify_finds_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, shipped: Catalog
) -> None:
    """The real loop's files: the sbatch script exports its group, fleet.yaml says what the
    group expects, and verify finds it from the lock wherever the lock sits below the plan."""
    from test_fleet_slurm import FIXTURE, SPEC

    (tmp_path / "nodes.txt").write_bytes(FIXTURE.read_bytes())
    (tmp_path / "hpc.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split")
    assert code == 0, err
    lockdir = tmp_path / "hpc"
    [script] = lockdir.glob("**/verify-gpu-a100-*.sbatch")
    name = script.name.removeprefix("verify-").removesuffix(".sbatch")
    assert f"export GPURESOLVE_GROUP={name}\n" in script.read_text(encoding="utf-8")
    lock = next(script.parent.glob("requirements.txt"))
    expects = find_expects(str(lock), name)
    assert expects.text() == "1 × NVIDIA A100 with driver 535.104.05"
    got = check_group(expects, _host(None))
    assert got.status == FAIL and got.reason == (
        f"this node's group expects 1 × NVIDIA A100 with driver 535.104.05 (node group {name}); "
        "this host has no NVIDIA driver"
    )
    with pytest.raises(UserError, match="no node group of that name"):
        find_expects(str(lock), "gpu-v100")
    alone = tmp_path / "alone" / "requirements.txt"
    alone.parent.mkdir()
    shutil.copy(lock, alone)
    with pytest.raises(UserError, match=r"no fleet\.yaml beside"):
        find_expects(str(alone), name)


def test_group_without_a_lock_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "verify", "--group", "gpu-a100", "--json")
    assert code == 2 and "--lock" in err and "error" in json.loads(out)


def test_a_span_that_is_no_document_is_read_again_line_by_line(tmp_path: Path) -> None:
    """A `{` line opens an indented span; when an unindented line or the end of the file shows
    it is none, its lines are read again: an indented one-line result inside it, and the line
    that ended it, are each found, on their own line."""
    one = _healthy("gpu-1").strip()
    text = "\n".join(
        [
            "{",
            "  " + _healthy("gpu-2").strip(),
            "  not json",
            one,
            "{",
            "  " + one.replace("gpu-1", "gpu-3"),
        ]
    )
    path = tmp_path / "logs.log"
    path.write_text(text, encoding="utf-8")  # no newline at the end: the span is cut short
    found = [(r.node, r.file.rsplit(":", 1)[1]) for r in read_file(path)]
    assert found == [("gpu-2", "2"), ("gpu-1", "4"), ("gpu-3", "6")]


@pytest.mark.parametrize(
    ("expects", "said"),
    [
        (None, "records no expects: (written by an older gpuresolve"),
        ({"gpus": [{"name": "NVIDIA A100", "cc": "8.0", "count": "1"}]}, "expects: count '1'"),
        ({"gpus": [{"name": "NVIDIA A100", "cc": "\x1b[2J"}]}, "expects: cc '\\x1b[2J'"),
        ({"gpus": [{"cc": "8.0", "count": 1}]}, "expects: a GPU without a name"),
    ],
)
def test_a_plan_that_says_no_expectation_is_bad_input(
    tmp_path: Path, expects: Any, said: str
) -> None:
    plan = {"fleet": 1, "groups": [{"group": "g", "nodes_of": "gpu-a100", "nodes": [],
                                    "expects": expects}]}  # fmt: skip
    (tmp_path / "fleet.yaml").write_text(json.dumps(plan), encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("torch==2.11.0\n", encoding="utf-8")
    with pytest.raises(UserError) as exc:
        find_expects(str(tmp_path / "requirements.txt"), "gpu-a100")
    assert said in str(exc.value) and "\x1b" not in str(exc.value)


def test_a_kubernetes_job_carries_its_group_to_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped example's H100 Job: its ConfigMap mounted as a folder (the lock and the
    group's plan entry) and its GPURESOLVE_GROUP are all verify needs to hold the node to 8 x
    H100 on driver 580.95.05; on this host (no torch for this Python) it fails, saying why."""
    import yaml

    example = Path(__file__).parent.parent / "environments" / "gpu-cluster" / "linux-x86_64"
    text = (example / "verify-h100-80gb-hbm3-x8-580.95.05.yaml").read_text(encoding="utf-8")
    configmap, job = yaml.safe_load_all(text)
    mount = tmp_path / "etc-gpuresolve"
    mount.mkdir()
    for name, body in configmap["data"].items():
        (mount / name).write_text(body, encoding="utf-8")
    [container] = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    monkeypatch.setenv("GPURESOLVE_GROUP", env["GPURESOLVE_GROUP"])
    monkeypatch.setenv("GPURESOLVE_NODE_NAME", "h100-01")
    lock = str(mount / "requirements.txt")
    args = ("verify", "--json", "--no-record", "--lock", lock, "--python", sys.executable)
    code, out, err = run_cli(capsys, *args)
    assert code == 1, err
    held = {c["id"]: c for c in json.loads(out)["checks"]}["group"]
    assert held["status"] == "fail"
    assert held["reason"].startswith(
        "this node's group expects 8 × NVIDIA-H100-80GB-HBM3 with driver 580.95.05 (node group "
        "h100-80gb-hbm3-x8-580.95.05); this host has "
    )
