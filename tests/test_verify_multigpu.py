"""Multi-GPU verify on real recordings of a 2 x H200 NVSwitch host (issue 28), without GPUs.

tests/fixtures/verify/h200x2_multigpu/ was recorded with record_multigpu.sh on nvidia-h200-x2;
h200x2_shared/ is the earlier recording of the same kind (main 6a821b1), which showed the NVSwitch
topology read as PCIe. Each test replays recorded outputs (NVML's topology, `nvidia-smi topo -m`
and `nvlink -s`, the NCCL workers' answers, the probe's benchmarks and NVML's GPU state) through
today's code. Tests marked *synthetic* change one recorded fact, and say which.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

from resolver.host import topo_smi, topology
from resolver.verify import nccl_check, node_speed, speed
from resolver.verify.nccl_run import NcclRun, Rank
from resolver.verify.result import FAIL, PASS, SKIP, WARN

HERE = Path(__file__).parent / "fixtures" / "verify"
REC = HERE / "h200x2_multigpu"
SHARED = HERE / "h200x2_shared"
BUS = {0: "00000000:00:06.0", 1: "00000000:00:07.0"}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def run_of(doc: dict[str, Any]) -> NcclRun:
    """The NCCL run as `nccl_check.judge` received it, from `verify --json`'s `nccl_check.run`."""
    raw = doc["nccl_check"]["run"]
    run = NcclRun(world=raw["world"], timeout_s=raw["timeout_s"], timed_out=raw["timed_out"])
    run.ranks = [
        Rank(rank=r["rank"], data=r["result"], returncode=r["returncode"], stage=r["stage"])
        for r in raw["ranks"]
    ]
    return run


def judge(doc: dict[str, Any]) -> Any:
    return nccl_check.judge(
        run_of(doc), doc["nccl_check"]["topology"], doc["probe"], 2, doc.get("state")
    )


def smi_recorded() -> dict[str, Any]:
    return {
        "error": None,
        "topo": topo_smi.parse_topo_matrix((REC / "topo_m.txt").read_text(encoding="utf-8")),
        "nvlink": topo_smi.parse_nvlink_status((REC / "nvlink_s.txt").read_text(encoding="utf-8")),
    }


# --- topology -----------------------------------------------------------------------------------


def test_nvlink_version_table_is_nvidia_ml_py_enum() -> None:
    pynvml = pytest.importorskip("pynvml")
    assert topology.version_table(pynvml) == topology.NVLINK_VERSIONS
    # nvidia-ml-py releases before the NVLink version names (12.535, the lowest we allow) define
    # none of them: our table then stands in, and there is nothing of theirs to compare it with
    if hasattr(pynvml, "NVML_NVLINK_VERSION_4_0"):
        assert topology.NVLINK_VERSIONS[pynvml.NVML_NVLINK_VERSION_4_0] == "4.0"
    if hasattr(pynvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH"):
        assert topology.REMOTE_TYPES[pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH] == "switch"
    # a value nvidia-ml-py does not define is unknown, never the nearest generation
    assert topology.link_generation({"version": 9}) is None


def test_recorded_topo_matrix_and_nvlink_status_parse() -> None:
    topo = topo_smi.parse_topo_matrix((REC / "topo_m.txt").read_text(encoding="utf-8"))
    assert topo == {"pairs": {"0-1": "NV18"}}  # through the ANSI underline of its header
    status = topo_smi.parse_nvlink_status((REC / "nvlink_s.txt").read_text(encoding="utf-8"))
    assert [g["index"] for g in status["gpus"]] == [0, 1]
    assert status["gpus"][0]["name"] == "NVIDIA H200"
    for g in status["gpus"]:
        assert len(g["links"]) == 18 and all(lk["active"] for lk in g["links"])
        assert {lk["gbps"] for lk in g["links"]} == {26.562}  # signalling rate: shown, not a peak


def test_topo_matrix_pcie_and_hostile_cells() -> None:
    """Synthetic: the recorded matrix with the pair rewritten as a PCIe path, then as junk."""
    text = (REC / "topo_m.txt").read_text(encoding="utf-8")
    assert topo_smi.parse_topo_matrix(text.replace("NV18", "SYS"))["pairs"] == {"0-1": "SYS"}
    junk = text.replace("NV18", "\x1b]0;pwned\x07ZZ")
    assert topo_smi.parse_topo_matrix(junk)["pairs"] == {}
    assert topo_smi.nv_links("NV18") == 18 and topo_smi.nv_links("SYS") == 0


def test_recorded_detect_reads_nvswitch_with_its_peak_and_summary() -> None:
    topo = load(REC / "detect.json")["topology"]
    assert topo["summary"] == "2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok"
    assert topo["peak"]["gbps"] == 450.0 and topo["peak"]["source"] == "nvlink"
    link = topo["gpus"][0]["nvlinks"][0]
    assert (link["version"], link["generation"], link["remote_type"]) == (6, "4.0", "switch")
    assert topo["pairs"][0]["p2p_nvlink"] == "ok" and topo["smi"] is None  # NVML answered
    # today's code on the recorded answers gives the same
    assert topology.summary(topo) == topo["summary"]
    assert topology.peak(topo, [0, 1])["gbps"] == 450.0
    text = (REC / "detect.txt").read_text(encoding="utf-8")
    assert "topology: 2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok" in text


def test_shared_recording_without_p2p_answer_falls_back_to_nvidia_smi() -> None:
    """The earlier recording: NVML gave no P2P status and no device type; `topo -m` answers."""
    topo = copy.deepcopy(load(SHARED / "nccl.json")["nccl_check"]["topology"])
    assert topo["pairs"][0]["p2p"] is None and "remote_type" not in topo["gpus"][0]["nvlinks"][0]
    assert topology.needs_smi(topo)
    assert topology.peak(topo, [0, 1])["gbps"] == 450.0  # the switch's placeholder bus id
    assert topology.summary(topo) == "2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P not reported"
    for g in topo["gpus"]:  # synthetic: NVML also unable to say where the links go
        for lk in g["nvlinks"]:
            lk["remote_bus_id"] = None
    assert topology.pair_fabric(topo, 0, 1) == "pcie"
    topo["smi"] = smi_recorded()
    assert topology.pair_fabric(topo, 0, 1) == "nvswitch"
    assert topology.peak(topo, [0, 1])["basis"].startswith("NVSwitch: 18 x NVLink 4.0")


class RecordedNvml:
    """NVML answering what the recorded `detect --json` topology says it answered (values only)."""

    NVML_NVLINK_VERSION_4_0 = 6
    NVML_NVLINK_VERSION_5_0 = 7
    NVML_P2P_CAPS_INDEX_READ = (0,)
    NVML_P2P_CAPS_INDEX_NVLINK = 2

    def __init__(self, topo: dict[str, Any], p2p: int | None) -> None:
        self.topo, self.p2p = topo, p2p
        self.asked: list[int] = []

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.topo["gpus"])

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return dict(self.topo["gpus"][i])

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:
        return str(h["name"])

    def nvmlDeviceGetPciInfo(self, h: dict[str, Any]) -> Any:
        return type("Pci", (), {"busId": h["pci_bus_id"]})

    def _link(self, h: dict[str, Any], n: int) -> dict[str, Any]:
        links = h["nvlinks"]
        if n >= len(links):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return dict(links[n])

    def nvmlDeviceGetNvLinkState(self, h: dict[str, Any], n: int) -> int:
        return int(self._link(h, n)["active"])

    def nvmlDeviceGetNvLinkVersion(self, h: dict[str, Any], n: int) -> int:
        return int(self._link(h, n)["version"])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: dict[str, Any], n: int) -> int:
        return {"switch": 2, "gpu": 0}[self._link(h, n)["remote_type"]]

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, h: dict[str, Any], n: int) -> Any:
        return type("Pci", (), {"busId": self._link(h, n)["remote_bus_id"]})

    def nvmlDeviceGetP2PStatus(self, a: Any, b: Any, index: int) -> int:
        self.asked.append(index)
        if self.p2p is None:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return self.p2p

    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int:
        return 30

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: dict[str, Any]) -> int:
        return 5

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: dict[str, Any]) -> int:
        return 16

    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetCurrPcieLinkWidth


def test_collect_decodes_the_recorded_answers_and_asks_smi_only_when_nvml_is_silent() -> None:
    recorded = load(REC / "detect.json")["topology"]
    calls: list[int] = []

    def smi() -> dict[str, Any]:
        calls.append(1)
        return smi_recorded()

    m = RecordedNvml(recorded, p2p=0)
    topo = topology.collect(m, smi=smi)
    assert topo["gpus"] == recorded["gpus"] and topo["pairs"] == recorded["pairs"]
    assert sorted(set(m.asked)) == [0, 2] and calls == []  # read and NVLink indices; no smi
    silent = topology.collect(RecordedNvml(recorded, p2p=None), smi=smi)
    assert silent["pairs"][0]["p2p"] is None and calls == [1]
    assert silent["smi"]["topo"]["pairs"] == {"0-1": "NV18"}


# --- the NCCL check -----------------------------------------------------------------------------


def test_recorded_healthy_passes_against_the_nvswitch_peak_at_1_gib() -> None:
    doc = load(REC / "nccl_healthy.json")
    check, out = judge(doc)
    assert check.status == PASS
    assert "328.0 GB/s at 1 GiB = 73% of NVSwitch: 18 x NVLink 4.0 x 25 GB/s" in check.reason
    assert out["peak"] == {"source": "nvlink", "links": 18, "per_link_gbps": 25.0, "gbps": 450.0}
    assert out["thresholds"]["source"] == "nvlink"
    assert [g["pci_bus_id"] for g in out["gpus"]] == [BUS[0], BUS[1]]
    for name in ("nccl_healthy.txt", "bench_healthy.txt"):
        line = next(
            ln
            for ln in (REC / name).read_text(encoding="utf-8").splitlines()
            if "NCCL across" in ln
        )
        assert line.startswith("PASS") and "at 1 GiB = 73% of NVSwitch" in line


def test_recorded_p2p_disabled_fails_naming_the_variable_and_the_drop() -> None:
    check, _ = judge(load(REC / "nccl_p2p_off.json"))
    assert check.status == FAIL
    assert check.reason.startswith("NCCL_P2P_DISABLE=1 is set")
    assert "26.9 GB/s at 1 GiB = 6% of NVSwitch" in check.reason
    assert re.search(r"1[0-9]\.[0-9]x below the 73% a healthy host reached", check.reason)
    assert check.fix is not None and check.fix.startswith("unset NCCL_P2P_DISABLE")


def test_recorded_load_on_gpu1_warns_naming_that_gpu() -> None:
    check, _ = judge(load(REC / "bench_load.json"))
    assert check.status == WARN
    assert check.reason.startswith(f"GPU 1 ({BUS[1]}): another process uses it: pid 2507")
    assert "151.8 GB/s at 1 GiB = 34%" in check.reason


def test_shared_recordings_are_judged_against_nvlink_now() -> None:
    """main 6a821b1 called the healthy run 469% of PCIe and P2P-disabled a PASS at 43% of PCIe."""
    doc = load(SHARED / "nccl.json")
    check, _ = judge(doc)
    assert check.status == PASS and "296.0 GB/s at 256 MiB = 66% of NVSwitch" in check.reason
    for name, env, status in (
        ("p2p.txt", {"NCCL_P2P_DISABLE": "1"}, FAIL),
        ("p2pshm.txt", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, FAIL),
        ("bench2.txt", {}, PASS),
    ):
        rows = rows_of_text((SHARED / name).read_text(encoding="utf-8"))
        run = copy.deepcopy(run_of(doc))
        for r in run.ranks:
            assert r.data is not None
            r.data.update(bandwidth=rows, env=env)
        got, _ = nccl_check.judge(run, doc["nccl_check"]["topology"], doc["probe"], 2)
        assert got.status == status, name
        if env:
            assert got.reason.startswith("NCCL_P2P_DISABLE=1 is set"), name
    bad = (SHARED / "badif.txt").read_text(encoding="utf-8")
    assert "FAIL  NCCL across GPUs  rank 0 during 'init' failed" in bad


def rows_of_text(text: str) -> list[dict[str, Any]]:
    """The bandwidth rows a recorded text report printed ("all_reduce 256 MiB: bus 27.4 GB/s
    (alg 27.4)"), back into the workers' row shape."""
    rows = []
    for m in re.finditer(r"(all_reduce|all_gather) ([0-9.]+) MiB: bus ([0-9.]+) GB/s", text):
        busbw = float(m.group(3))
        rows.append(
            {"op": m.group(1), "bytes": int(float(m.group(2)) * 2**20), "busbw": busbw, "us": 0}
            | {"algbw": busbw * (1 if m.group(1) == "all_reduce" else 2)}
        )
    return rows


def test_mig_slices_skip_with_a_reason() -> None:
    """Synthetic: the recorded healthy probe with GPU 0 renamed as a MIG slice."""
    doc = load(REC / "nccl_healthy.json")
    probe = copy.deepcopy(doc["probe"])
    probe["cuda"]["devices"][0]["name"] = "NVIDIA H200 MIG 1g.18gb"
    check, _ = nccl_check.judge(run_of(doc), doc["nccl_check"]["topology"], probe, 2)
    assert check.status == SKIP and "MIG slices" in check.reason


# --- every GPU benchmarked ----------------------------------------------------------------------


def node(doc: dict[str, Any]) -> Any:
    probe = doc["probe"]
    benches = [probe["benchmark"], *probe["benchmark_others"]]
    return node_speed.judge_node(probe, benches, speed.load(), [], doc["state"])


def test_recorded_load_on_gpu1_names_gpu1_and_not_gpu0() -> None:
    doc = load(REC / "bench_load.json")
    top, check = node(doc)
    assert check.status == WARN
    assert check.reason.startswith(f"GPU 1 (NVIDIA H200, {BUS[1]}): another process uses this GPU")
    assert "42% of the fastest H200 SXM" in check.reason and "GPU 0" not in check.reason
    g0, g1 = top["gpus"]
    assert (g0["status"], g0["cause"]) == (PASS, None)
    assert (g1["status"], g1["cause"], g1["pci_bus_id"]) == (WARN, "other_process", BUS[1])
    assert g1["relative_to_fastest"] < node_speed.PEER_BELOW < 0.95
    text = (REC / "bench_load.txt").read_text(encoding="utf-8")
    assert f"1    {BUS[1]}   NVIDIA H200" in text and "WARN (other_process)" in text
    assert re.search(rf"0    {re.escape(BUS[0])} .* PASS$", text, re.M)


@pytest.mark.parametrize("name", ["bench_healthy.json", "bench_healthy2.json"])
def test_recorded_healthy_node_passes_with_every_gpu_judged(name: str) -> None:
    top, check = node(load(REC / name))
    assert check.status == PASS and check.reason.startswith("2 GPUs, each judged")
    assert [g["index"] for g in top["gpus"]] == [0, 1]
    for g in top["gpus"]:
        assert g["status"] == PASS and g["cause"] is None
        assert g["relative_to_fastest"] >= 0.98  # the spread PEER_BELOW was set from
        assert g["percent_of_peak"] / 100 > node_speed.PEAK_BELOW
        assert 0.5 < g["figures"]["matmul_bf16"]["fraction"] < 1.0  # GPU 1 timed on GPU 1


def test_benchmark_gpus_json_keys() -> None:
    top, _ = node(load(REC / "bench_load.json"))
    for g in top["gpus"]:
        assert {
            "index",
            "pci_bus_id",
            "name",
            "figures",
            "peak",
            "percent_of_peak",
            "status",
            "cause",
            "detail",
        } <= set(g)
        assert g["cause"] in (None, *node_speed.CAUSE_KINDS)
    json.dumps(top)


def test_peer_rule_names_a_gpu_the_datasheet_threshold_misses() -> None:
    """Synthetic: the healthy run with GPU 1 at 75% of GPU 0's speed in every case (its slowest
    case then ~53% of peak: above the 50% warn threshold) and an SM clock that stayed at 1400 MHz
    while GPU 0's reached 1980: named by the peer rule, cause clocks."""
    doc = copy.deepcopy(load(REC / "bench_healthy.json"))
    probe = doc["probe"]
    b0, b1 = probe["benchmark"], probe["benchmark_others"][0]
    for case in speed.CASES:
        if isinstance(b1.get(case), dict):
            b1[case].update(ms=b0[case]["ms"] / 0.75, tflops=b0[case]["tflops"] * 0.75)
    for g in doc["state"]["during_benchmark"]["gpus"]:
        if g["index"] == 1:
            g["sm_mhz_max"] = 1400
    top, check = node(doc)
    g1 = top["gpus"][1]
    assert 0.5 < g1["percent_of_peak"] / 100 < node_speed.PEAK_BELOW and g1["outlier"]
    assert check.status == WARN and check.reason.startswith(f"GPU 1 (NVIDIA H200, {BUS[1]})")
    assert g1["cause"] == "clocks" and "SM clock reached 1400 MHz" in check.reason
    assert top["gpus"][0]["status"] == PASS


# --- the commands, end to end on the recorded answers -------------------------------------------


class RecordedSampler:
    """`host.gpustate.Sampler` giving back the GPU state NVML was recorded to give."""

    state: ClassVar[dict[str, Any]] = {}

    def __init__(self, **_: Any) -> None: ...

    def finish(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)


@pytest.mark.skipif(os.name != "posix", reason="#! scripts")
def test_verify_benchmark_command_on_the_recorded_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_support import run_cli
    from test_verify_nccl import script

    from resolver.core.hostprofile import HostProfile
    from resolver.flows import verify as verify_flow
    from resolver.host import gpustate
    from resolver.verify import nccl_run

    doc = load(REC / "bench_load.json")
    (tmp_path / "probe.json").write_text(json.dumps(doc["probe"]), encoding="utf-8")
    python = script(tmp_path, f"cat '{tmp_path / 'probe.json'}'")
    RecordedSampler.state = doc["state"]
    monkeypatch.setattr(gpustate, "Sampler", RecordedSampler)
    monkeypatch.setattr(verify_flow, "detect", lambda c: HostProfile.from_json(doc["host"]))
    monkeypatch.setattr(topology, "collect", lambda: doc["nccl_check"]["topology"])
    monkeypatch.setattr(nccl_run, "run_nccl", lambda *a, **k: run_of(doc))
    args = ("verify", "--python", python, "--benchmark", "--no-record")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0  # warnings only
    speed_line = next(ln for ln in out.splitlines() if ln.startswith("WARN  GPU speed"))
    assert f"GPU 1 (NVIDIA H200, {BUS[1]}): another process uses this GPU" in speed_line
    assert "topology: 2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok" in out
    assert re.search(r"^  1    00000000:00:07\.0 .* WARN \(other_process\)$", out, re.M)
    code, out, _ = run_cli(capsys, *args, "--json")
    report = json.loads(out)
    gpus = report["benchmark"]["gpus"]
    assert [(g["index"], g["status"], g["cause"]) for g in gpus] == [
        (0, PASS, None),
        (1, WARN, "other_process"),
    ]
    assert report["nccl_check"]["peak"]["source"] == "nvlink"
    assert report["benchmark"]["device"] == 0 and "matmul_bf16" in report["benchmark"]


def test_detect_prints_and_reports_the_recorded_topology(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_support import run_cli

    import resolver.host as host
    from resolver.core.hostprofile import HostProfile

    doc = load(REC / "detect.json")
    raw = {k: v for k, v in doc["topology"].items() if k not in ("summary", "peak")}
    # the package's name, which `detect` imports: another test's monkeypatch of it leaves a
    # plain attribute behind on undo, so patching detection.detect alone depends on test order
    monkeypatch.setattr(host, "detect", lambda **_: HostProfile.from_json(doc))
    monkeypatch.setattr(topology, "collect", lambda: copy.deepcopy(raw))
    _, out, _ = run_cli(capsys, "detect")
    assert "topology: 2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok" in out.splitlines()
    _, out, _ = run_cli(capsys, "detect", "--json")
    assert json.loads(out)["topology"] == doc["topology"]


FINAL = REC / "final"


@pytest.mark.parametrize("name", ["nccl_p2p_off", "bench_load", "bench_healthy"])
def test_final_code_recording_replays_to_its_own_verdicts(name: str) -> None:
    """The confirmation run on the final code: today's judgement of its recorded answers is the
    verdict it printed, word for word (the NCCL check, and with --benchmark the node's speed)."""
    doc = load(FINAL / f"{name}.json")
    recorded = {c["id"]: c for c in doc["checks"]}
    check, _ = judge(doc)
    assert (check.status, check.reason) == (
        recorded["multigpu"]["status"],
        recorded["multigpu"]["reason"],
    )
    if "speed" in recorded:
        top, speed_check = node(doc)
        assert (speed_check.status, speed_check.reason) == (
            recorded["speed"]["status"],
            recorded["speed"]["reason"],
        )
        assert top["gpus"] == doc["benchmark"]["gpus"]
    text = (FINAL / f"{name}.txt").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if "NCCL across GPUs" in ln)
    assert line.startswith(check.status.upper())  # the text run was a run of its own


def test_final_code_recording_names_gpu1_and_the_variable() -> None:
    load_line = next(
        ln
        for ln in (FINAL / "bench_load.txt").read_text(encoding="utf-8").splitlines()
        if ln.startswith("WARN  GPU speed")
    )
    assert f"GPU 1 (NVIDIA H200, {BUS[1]}): another process uses this GPU" in load_line
    assert "GPU 0" not in load_line
    p2p = (FINAL / "nccl_p2p_off.txt").read_text(encoding="utf-8")
    assert "FAIL  NCCL across GPUs  NCCL_P2P_DISABLE=1 is set" in p2p
    assert "fix: unset NCCL_P2P_DISABLE" in p2p
    healthy = (FINAL / "nccl_healthy.txt").read_text(encoding="utf-8")
    assert re.search(r"PASS  NCCL across GPUs .* at 1 GiB = 7[0-9]% of NVSwitch", healthy)
