"""`gpuresolve fleet report` over verify results recorded on real GPUs (tests/fixtures/verify)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.fleet import report as fleet_report
from resolver.fleet.results import read_file
from resolver.verify.identity import add_identity, node_name
from resolver.writers import recorded

FIX = Path(__file__).parent / "fixtures" / "verify"
DIAG = FIX / "h100_diag"
H200 = FIX / "h200x2_shared" / "nccl.json"  # an earlier release: no host.node, no group
MULTI = FIX / "h200x2_multigpu"
HEALTHY = [DIAG / "healthy.json", FIX / "h100_torch211_cu130" / "verify.json", H200]
FAULTY = {
    "tf32_override.json": "NVIDIA_TF32_OVERRIDE=0",
    "other_process.json": "another process uses this GPU",
    "preload_cudnn.json": "cuDNN version incompatibility",
    "cudnn_off.json": "torch.backends.cudnn.enabled is False",
    "cvd_empty.json": "CUDA_VISIBLE_DEVICES is set to an empty value",
}


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(capsys, "fleet", "report", "--json", *args)
    return code, (json.loads(out) if out else {}), err


def _outliers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["node"]: o for g in doc["groups"] for o in g["outliers"]}


def test_healthy_results_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = _report(capsys, *map(str, HEALTHY))
    assert code == 0, err
    assert doc["fleet_report"] == 1 and doc["status"] == "pass"
    assert sum(g["pass"] for g in doc["groups"]) == 3
    assert all(g["outliers"] == [] and g["missing"] == 0 for g in doc["groups"])
    # no group recorded (older releases): by GPU model and driver; the 2-GPU H200 host apart
    names = sorted(g["group"] for g in doc["groups"])
    assert names == [
        "2x NVIDIA H200 · driver 580.159.04",
        "NVIDIA H100 80GB HBM3 · driver 580.159.04",
    ]


def test_each_faulty_node_is_named_with_its_cause(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [*map(str, HEALTHY), *(str(DIAG / name) for name in FAULTY)]
    code, doc, err = _report(capsys, *paths)
    assert code == 1, err
    assert doc["status"] == "fail"
    found = _outliers(doc)
    assert sorted(found) == sorted(FAULTY)  # the healthy ones are never listed
    for name, cause in FAULTY.items():
        assert cause in (found[name]["cause"] or ""), (name, found[name])
        assert found[name]["file"].endswith(name)
    # the busy GPU only warns: it is an outlier by speed against its healthy peers
    busy = found["other_process.json"]["differs"]
    assert any(d.startswith("matmul_bf16 ") and "of the median" in d for d in busy)
    assert any("cuDNN" in d for d in found["preload_cudnn.json"]["differs"])
    h100 = next(g for g in doc["groups"] if g["group"].startswith("NVIDIA H100"))
    assert (h100["pass"], h100["warn"], h100["fail"]) == (2, 1, 4)


def test_text_and_markdown_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "report.md"
    code, out, _ = run_cli(
        capsys, "fleet", "report", str(DIAG / "tf32_override.json"), str(DIAG / "healthy.json"),
        "-o", str(out_file),
    )  # fmt: skip
    assert code == 1
    assert out == out_file.read_text(encoding="utf-8")
    assert "**tf32_override.json**" in out and "NVIDIA_TF32_OVERRIDE=0" in out


def test_folder_and_kubectl_logs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`kubectl logs` output: start-up check lines, one document per line (with and without
    --prefix), an indented document; each named by host.node as a pod's verify sets it."""
    lines = ["gpuresolve-check: torch 2.11.0+cu130 on 1 GPU: ok"]
    for i, name in enumerate(("healthy.json", "tf32_override.json", "healthy.json")):
        doc = json.loads((DIAG / name).read_text(encoding="utf-8"))
        doc["host"]["node"] = f"gpu-node-{i}"
        text = json.dumps(doc, separators=(",", ":"))
        lines.append(f"[pod/verify-h100-{i}-abcde/verify] {text}" if i == 1 else text)
    lines.append("{not json, a log line}")
    last = json.loads((DIAG / "healthy.json").read_text(encoding="utf-8"))
    last["host"]["node"] = "gpu-node-3"
    lines.append(json.dumps(last, indent=2))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (logs / "notes.txt").write_text("not read: text reports in a folder are skipped\n")
    code, doc, err = _report(capsys, str(logs))
    assert code == 1, err
    group = doc["groups"][0]
    assert group["nodes"] == 4 and group["fail"] == 1
    [bad] = group["outliers"]
    assert bad["node"] == "gpu-node-1" and bad["file"].endswith("results.jsonl:3")


def test_same_node_twice_is_shown_twice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        shutil.copy(DIAG / "tf32_override.json", tmp_path / sub / "tf32_override.json")
    code, doc, _ = _report(capsys, str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 1
    names = sorted(_outliers(doc))
    assert len(names) == 2 and all(n.startswith("tf32_override.json (") for n in names)


def test_expect_names_missing_nodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = json.loads((DIAG / "healthy.json").read_text(encoding="utf-8"))
    doc["host"]["node"] = "gpu-a"  # older result: no group; the plan's group is used
    (tmp_path / "a.json").write_text(json.dumps(doc), encoding="utf-8")
    lockdir = tmp_path / "lock"
    lockdir.mkdir()
    plan: dict[str, Any] = {"fleet": 1, "groups": [{"group": "h100", "nodes": ["gpu-a", "gpu-b"]}]}
    (lockdir / fleet_report.PLAN_FILE).write_text(
        json.dumps(plan), encoding="utf-8"
    )  # JSON is YAML
    code, out, _ = _report(capsys, str(tmp_path / "a.json"), "--expect", str(lockdir))
    assert code == 1
    [group] = out["groups"]
    assert group["group"] == "h100" and group["pass"] == 1
    assert group["missing"] == 1 and group["missing_nodes"] == ["gpu-b"]
    plan["groups"][0]["nodes"] = ["gpu-a"]
    (lockdir / fleet_report.PLAN_FILE).write_text(
        json.dumps(plan), encoding="utf-8"
    )  # JSON is YAML
    assert _report(capsys, str(tmp_path / "a.json"), "--expect", str(lockdir))[0] == 0


def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Exit 2 is for arguments that cannot be read: a fleet report given as a result, no such
    path, a folder without results (a node's damaged result is a failed node:
    test_fleet_verdicts)."""
    path = tmp_path / "r.json"
    path.write_text('{"fleet_report": 1, "status": "pass", "groups": []}\n', encoding="utf-8")
    code, out, err = run_cli(capsys, "fleet", "report", str(path))
    assert code == 2 and out == ""
    assert "a fleet report" in err and len(err.strip().splitlines()) == 1
    assert run_cli(capsys, "fleet", "report", str(tmp_path / "absent.json"))[0] == 2
    (tmp_path / "empty").mkdir()
    assert run_cli(capsys, "fleet", "report", str(tmp_path / "empty"))[0] == 2


def test_hostile_values_are_escaped(tmp_path: Path) -> None:
    doc = json.loads((DIAG / "cvd_empty.json").read_text(encoding="utf-8"))
    doc["host"]["node"] = "evil\x1b[2Jnode"  # not a node name: the file names it
    doc["checks"][5]["reason"] = "bad \x1b]0;title\x07 \u202e"
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    [result] = read_file(path)
    assert result.node is None
    text = fleet_report.render_markdown(fleet_report.build_report([result]))
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b" in text


def test_a_result_without_a_driver_is_grouped_as_driver_unknown(tmp_path: Path) -> None:
    doc = json.loads((DIAG / "healthy.json").read_text(encoding="utf-8"))
    del doc["host"]["driver"]
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    report = fleet_report.build_report(read_file(path))
    assert [g.name for g in report.groups] == ["NVIDIA H100 80GB HBM3 · driver unknown"]
    assert "driver driver" not in fleet_report.render_markdown(report)


def test_verify_identity(tmp_path: Path) -> None:
    env = {"SLURMD_NODENAME": "node-7", "GPURESOLVE_NODE_NAME": "bad name"}
    assert node_name(env) == "node-7"
    assert node_name({**env, "GPURESOLVE_NODE_NAME": "k8s-gpu-1"}) == "k8s-gpu-1"
    data: Any = {"host": None}  # a partial report: only what add_identity reads
    add_identity(data, "gpu-cluster/linux-x86_64", env)
    assert data["host"]["node"] == "node-7" and data["group"] == "gpu-cluster/linux-x86_64"
    assert "hostname" in data["host"]
    add_identity(data, "../escape", {})
    assert data["group"] is None and data["host"]["node"] is None
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        recorded.stamp("requirements.txt", "# header\ntorch==2.11.0\n", {"group": "g1/x"}),
        encoding="utf-8",
    )
    assert recorded.lock_group(lock) == "g1/x"
    assert recorded.lock_group(tmp_path / "none.txt") is None


@pytest.mark.skipif(os.name != "posix", reason="a #! script stands in for the interpreter")
def test_verify_json_names_node_and_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded H100 probe replayed through `verify --json`; the group of a team lock."""
    from test_verify_checks import H100
    from test_verify_run import fake_python

    from resolver.flows import verify as verify_flow

    probe = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    (tmp_path / "probe.json").write_text(json.dumps(probe), encoding="utf-8")  # one line
    python = fake_python(tmp_path, f"cat '{tmp_path / 'probe.json'}'")
    monkeypatch.setattr(verify_flow, "detect", lambda catalog: None)
    monkeypatch.setenv("GPURESOLVE_NODE_NAME", "h100-01")
    monkeypatch.setenv("SLURMD_NODENAME", "ignored")
    args = ("verify", "--python", str(python), "--no-record", "--json")
    _, out, _ = run_cli(capsys, *args)
    doc = json.loads(out)
    assert doc["host"]["node"] == "h100-01" and "hostname" in doc["host"]
    assert doc["group"] is None  # no lock: no group
    monkeypatch.delenv("GPURESOLVE_NODE_NAME")
    doc = json.loads(run_cli(capsys, *args)[1])
    assert doc["host"]["node"] == "ignored"
    lock = tmp_path / "requirements.txt"
    text = "# Generated by gpuresolve\ntorch==2.11.0+cu130\n"
    lock.write_text(recorded.stamp(lock.name, text, {"group": "gpu-cluster/linux-x86_64"}))
    verify_flow.identify(doc, str(lock))
    assert doc["group"] == "gpu-cluster/linux-x86_64"


def test_two_gpu_hosts_nccl_and_a_busy_second_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """The 2 x H200 runs recorded on the device: three healthy, NCCL_P2P_DISABLE=1 (verify fails
    it) and a bf16 loop on GPU 1 during the benchmark (verify warns): both named, with the
    variable and the busy GPU."""
    names = ["nccl_healthy", "bench_healthy", "bench_healthy2", "nccl_p2p_off", "bench_load"]
    code, doc, err = _report(capsys, *(str(MULTI / f"{n}.json") for n in names))
    assert code == 1, err
    [group] = doc["groups"]
    assert group["group"] == "2x NVIDIA H200 · driver 580.159.04"
    assert (group["pass"], group["warn"], group["fail"]) == (3, 1, 1)
    found = _outliers(doc)
    assert sorted(found) == ["bench_load.json", "nccl_p2p_off.json"]
    p2p = found["nccl_p2p_off.json"]
    assert any(d.startswith("NCCL all-reduce 27.0 GB/s, 8% of the median") for d in p2p["differs"])
    assert "NCCL_P2P_DISABLE=1" in p2p["cause"]
    load = found["bench_load.json"]
    assert any(d.startswith("NCCL all-reduce 151.8 GB/s") for d in load["differs"])
    # the slowest GPU counts: GPU 1 ran beside a bf16 loop, GPU 0 (the top-level figures) did not
    assert any(d.startswith("matmul_bf16 309.8 TFLOP/s") for d in load["differs"])
    assert "GPU 1" in load["cause"] and "another process uses this GPU" in load["cause"]


def test_documents_found_among_junk_lines(tmp_path: Path) -> None:
    """Log noise that looks like JSON (unterminated lines, lone `{` lines with no `}`) around an
    indented report, a one-line one and a prefixed one: each found once, on its line."""
    doc = json.loads((DIAG / "healthy.json").read_text(encoding="utf-8"))
    junk = '{"a": "unterminated\n' * 2000 + "{\n" * 2000
    text = (
        junk
        + json.dumps(doc, indent=2)
        + "\n{\n  not json\n}\n"
        + json.dumps(doc)
        + "\n[pod/verify-0-x/verify] "
        + json.dumps(doc)
        + "\n"
        + "{\n" * 2000
    )
    path = tmp_path / "logs.txt"
    path.write_text(text, encoding="utf-8")
    found = list(read_file(path))
    first = 4001
    indented = json.dumps(doc, indent=2).count("\n") + 1
    assert [r.file.rsplit(":", 1)[1] for r in found] == [
        str(first),
        str(first + indented + 3),
        str(first + indented + 4),
    ]
    assert found[2].node == "verify-0-x"  # no host.node: the pod the prefix names


def test_docs_example_is_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documentation's fleet report example, line for line (its `...` elisions aside)."""
    page = Path(__file__).parent.parent / "docs" / "how-to" / "fleet-verify.md"
    readme = page.read_text(encoding="utf-8")
    start = readme.index("$ gpuresolve fleet report healthy.json")
    block = readme[start : readme.index("```", start)].splitlines()
    names = block[0].split()[4:]
    for name in names:
        src = H200 if name == "h200x2.json" else DIAG / name
        shutil.copy(src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "fleet", "report", *names)
    assert code == 1
    printed = out.splitlines()
    assert len(printed) >= len(block) - 1
    for want, got in zip(block[1:], printed, strict=False):
        if "..." in want:
            head, *rest = want.split("...")
            assert got.startswith(head) and all(part.strip(" ;") in got for part in rest)
        else:
            assert got == want


def test_a_nodes_text_is_never_markdown_structure_or_html() -> None:
    """report.md is rendered where teams read it (a pull request, a wiki): a node's text shows
    as written, never as HTML, a link, an image or a code span."""
    from resolver.fleet.report import _cell

    hostile = "<img src=x onerror=alert(1)> [click](http://evil) ![](http://t) `code` a|b &amp;"
    shown = _cell(hostile)
    for raw in ("<img", "[click]", "![]", "`code`", "a|b"):
        assert raw not in shown
    assert shown.endswith(" &amp;amp;")  # an entity in the text shows as written, not as "&"
    assert shown.startswith("&lt;img src=x onerror=alert(1)&gt; \\[click\\](http://evil)")
    assert _cell("gpu-n1: torch 2.14.1+cu126 (lock: torch==2.14.1)") == (
        "gpu-n1: torch 2.14.1+cu126 (lock: torch==2.14.1)"
    )
