"""verify names the cause it measured: the faults injected on a real H100, replayed.

tests/fixtures/verify/h100_diag/ holds `verify --benchmark` (text and --json) recorded with
record_diagnosis.sh: healthy, and one fault at a time. Each replay feeds the recorded probe
document and GPU state through the checks and the speed verdict, and expects the first line to
name the fault with its figure, as the recorded text did. The tests marked *synthetic* below
change one recorded fact, or build NVML answers by hand, for the rules no device run covered.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from resolver.catalog import Catalog
from resolver.core.hostprofile import HostProfile
from resolver.host import gpustate
from resolver.verify import checks, diagnose, speed
from resolver.verify.checks import CHECKS as ORDER
from resolver.verify.result import FAIL, PASS, WARN, CheckResult

CHECKS = [c.id for c in ORDER]  # every check's id, in report order

DIAG = Path(__file__).parent / "fixtures" / "verify" / "h100_diag"
CASES = ("healthy", "tf32_override", "other_process", "cvd_empty", "preload_cudnn", "cudnn_off")


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DIAG / f"{name}.json").read_text(encoding="utf-8"))
    return data


def replay(
    report: dict[str, Any], catalog: Catalog
) -> tuple[dict[str, CheckResult], dict[str, Any] | None]:
    """The checks and the speed verdict, recomputed from what the run recorded."""
    probe = report["probe"]
    host = HostProfile.from_json(report["host"])
    results = checks.evaluate(probe, host, catalog)
    annotated = None
    if isinstance(probe.get("benchmark"), dict) and not probe["benchmark"].get("error"):
        annotated, check = speed.judge_run(
            probe, probe["benchmark"], speed.load(), results, report["state"]
        )
        results.append(check)
    else:
        results.append(speed.judge(probe.get("benchmark"), None))
    return {r.id: r for r in results}, annotated


def text_line(name: str, title: str) -> str:
    text = (DIAG / f"{name}.txt").read_text(encoding="utf-8")
    return next(ln for ln in text.splitlines() if ln[6:].startswith(title))


@pytest.mark.parametrize("name", CASES)
def test_replay_gives_the_recorded_verdicts(name: str, shipped: Catalog) -> None:
    report = recorded(name)
    res, _ = replay(report, shipped)
    by_id = {c["id"]: c for c in report["checks"]}
    for key in ("cuda", "cudnn", "libraries", "compute", "speed"):
        assert (res[key].status, res[key].reason) == (
            by_id[key]["status"],
            by_id[key]["reason"],
        ), key
    # The text was a run of its own (its figures differ a little): the same verdicts and causes.
    for key in ("cuda", "cudnn", "speed"):
        line = text_line(name, res[key].title)
        assert line.startswith(res[key].status.upper()), key
        if res[key].status != PASS:
            assert res[key].reason.split(" (")[0] in line, key


def test_healthy_run_passes_with_every_case_judged(shipped: Catalog) -> None:
    res, bench = replay(recorded("healthy"), shipped)
    assert {r.status for r in res.values()} <= {PASS, "skip"}
    assert res["speed"].status == PASS and res["speed"].fix is None
    assert bench is not None
    for case in ("matmul_tf32", "matmul_bf16", "conv2d_bf16", "conv2d_tf32"):
        assert bench[case]["judged"] is True and bench[case]["fraction"] > 0.5, case
    assert "Cudnn" in bench["conv2d_bf16"]["backend"]


def test_tf32_override_is_named_with_its_figure(shipped: Catalog) -> None:
    res, bench = replay(recorded("tf32_override"), shipped)
    check = res["speed"]
    assert check.status == FAIL
    assert check.reason.startswith("NVIDIA_TF32_OVERRIDE=0 is set in this environment")
    assert bench is not None
    assert f"{bench['matmul_tf32']['tflops']:.1f} TFLOP/s" in check.reason
    assert "FP32's" in check.reason and "NVIDIA_TF32_OVERRIDE" in (check.fix or "")


def test_another_process_is_named_with_pid_name_memory(shipped: Catalog) -> None:
    report = recorded("other_process")
    res, _ = replay(report, shipped)
    (proc,) = report["state"]["gpus"][0]["processes"]
    check = res["speed"]
    assert check.status == WARN
    assert check.reason.startswith(
        f"another process uses this GPU: pid {proc['pid']} (python3, 1.0 GiB), 99% utilisation"
    )


def test_empty_cuda_visible_devices_is_named(shipped: Catalog) -> None:
    res, _ = replay(recorded("cvd_empty"), shipped)
    assert res["cuda"].status == FAIL
    assert res["cuda"].reason.startswith(
        "False: CUDA_VISIBLE_DEVICES is set to an empty value: torch sees no GPU (the host has 1"
    )


def test_preloaded_system_cudnn_is_named_by_file(shipped: Catalog) -> None:
    res, _ = replay(recorded("preload_cudnn"), shipped)
    assert res["cudnn"].status == FAIL and "(9, 14, 0)" in res["cudnn"].reason
    assert res["libraries"].status == FAIL and "9.14.0" in res["libraries"].reason


def test_cudnn_disabled_is_named_and_judged(shipped: Catalog) -> None:
    res, bench = replay(recorded("cudnn_off"), shipped)
    check = res["speed"]
    assert check.status == FAIL
    assert check.reason.startswith("torch.backends.cudnn.enabled is False in this interpreter")
    assert bench is not None and "Cudnn" not in bench["conv2d_bf16"]["backend"]


def test_state_keys_are_the_documented_ones() -> None:
    state = recorded("other_process")["state"]
    assert list(state) == ["nvml", "env", "torch", "gpus", "during_benchmark"]
    assert list(state["env"]) == list(diagnose.ENV_SWITCHES)
    gpu = state["gpus"][0]
    assert set(gpu) >= {"clocks", "power", "pcie", "processes", "clock_event_reasons", "mig"}
    assert set(state["during_benchmark"]["gpus"][0]) >= {"sm_mhz_min", "clock_event_reasons"}


def test_every_check_id_is_still_reported() -> None:
    ids = [c["id"] for c in recorded("healthy")["checks"]]
    assert ids == [*(c for c in CHECKS if c != "group"), "speed"]  # recorded before "group"


# --- synthetic: one recorded fact changed, for rules no device run exercised -----------------


def slow_healthy(shipped: Catalog) -> tuple[dict[str, Any], dict[str, Any]]:
    """The healthy run with its BF16 matmul at a quarter of what it measured (synthetic)."""
    report = copy.deepcopy(recorded("healthy"))
    row = report["probe"]["benchmark"]["matmul_bf16"]
    row["tflops"] /= 4
    return report, report["state"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["gpus"][0]["power"].update(limit_w=350.0), "the power limit is 350 W"),
        (
            lambda s: s["during_benchmark"]["gpus"][0].update(
                clock_event_reasons=["HW thermal slowdown"], sm_mhz_min=900
            ),
            "the GPU slowed itself during the benchmark: HW thermal slowdown (SM clock down to 900",
        ),
        (
            lambda s: s["gpus"][0]["clocks"].update(sm_applications_mhz=1200),
            "applications clocks are set to 1200 of 1980 MHz",
        ),
        (
            lambda s: s["gpus"][0].update(utilization={"gpu": 80, "memory": 10}),
            "the GPU was 80% busy before the benchmark",
        ),
    ],
)
def test_synthetic_state_causes(shipped: Catalog, change: Any, expected: str) -> None:
    report, state = slow_healthy(shipped)
    change(state)
    res, _ = replay(report, shipped)
    assert res["speed"].status == FAIL
    assert res["speed"].reason.startswith(expected)


def test_synthetic_power_cap_alone_is_named_last(shipped: Catalog) -> None:
    """The healthy run hit its power cap (normal at full load): named only when nothing else."""
    report, state = slow_healthy(shipped)
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("the GPU ran at its power cap during the benchmark")
    state["gpus"][0]["power"]["limit_w"] = 400.0
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("the power limit is 400 W")
    assert any("power cap" in d for d in res["speed"].details if d.startswith("also seen"))


def test_synthetic_no_cause_keeps_only_what_was_not_ruled_out(shipped: Catalog) -> None:
    report, state = slow_healthy(shipped)
    state["during_benchmark"]["gpus"][0]["clock_event_reasons"] = []
    res, _ = replay(report, shipped)
    fix = res["speed"].fix or ""
    assert fix.startswith("no cause seen")
    for ruled_out in ("another process", "MIG", "cuBLAS", "PTX"):
        assert ruled_out not in fix  # NVML, the libraries and kernels checks saw them fine
    assert "TF32" in fix


def test_synthetic_tf32_off_without_the_variable(shipped: Catalog) -> None:
    report = copy.deepcopy(recorded("healthy"))
    bench = report["probe"]["benchmark"]
    bench["matmul_tf32"]["tflops"] = bench["matmul_fp32"]["tflops"] * 1.05
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("TF32 is not in effect although torch asked for it")


def test_synthetic_launch_blocking_and_foreign_pids(shipped: Catalog) -> None:
    report, state = slow_healthy(shipped)
    report["probe"]["env"]["CUDA_LAUNCH_BLOCKING"] = "1"
    busy = state["during_benchmark"]["gpus"][0]
    busy["processes"] = [{"pid": 4242, "name": "python", "used_mib": 2048}]
    busy["own_process_seen"] = False  # pids of another namespace: maybe the probe itself
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("CUDA_LAUNCH_BLOCKING=1 is set")
    busy["own_process_seen"] = True
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("another process uses this GPU: pid 4242 (python, 2.0")


def test_synthetic_visible_devices_naming_no_gpu() -> None:
    cause = diagnose.cuda_visible_cause({"CUDA_VISIBLE_DEVICES": "3"}, ["NVIDIA H100"])
    assert cause == "CUDA_VISIBLE_DEVICES=3 names no GPU of this host (the host has 1: NVIDIA H100)"
    assert diagnose.cuda_visible_cause({"CUDA_VISIBLE_DEVICES": "0"}, ["NVIDIA H100"]) is None
    assert diagnose.cuda_visible_cause({"CUDA_VISIBLE_DEVICES": "GPU-ab"}, ["X"]) is None
    assert diagnose.cuda_visible_cause({}, ["X"]) is None


# --- synthetic NVML answers: what the sampler writes down ------------------------------------


class FakeNvml:
    """NVML answers built by hand (synthetic), in pynvml's calling shape."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, util: int = 100) -> None:
        self.util = util
        self.shutdown = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return "h0"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: str) -> Any:
        return SimpleNamespace(busId=b"00000000:00:06.0")

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        return SimpleNamespace(gpu=self.util, memory=30)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return 0x4 | 0x40

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:
        return [
            SimpleNamespace(pid=11, usedGpuMemory=3 * 1024**3),
            SimpleNamespace(pid=99, usedGpuMemory=None),
        ]

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        return b"trainer\x1b[31m\xe2\x80\xae"

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return 1500 if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:
        return 1980

    def nvmlDeviceGetApplicationsClock(self, h: str, kind: int) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return 650500

    def nvmlDeviceGetPowerManagementLimit(self, h: str) -> int:
        return 700000

    def nvmlDeviceGetMigMode(self, h: str) -> list[int]:
        return [0, 0]

    def nvmlDeviceGetPersistenceMode(self, h: str) -> int:
        return 1


def test_synthetic_snapshot_cleans_and_excludes() -> None:
    snap = gpustate.snapshot(FakeNvml(), exclude_pids={99})
    (gpu,) = snap["gpus"]
    assert gpu["processes"] == [{"pid": 11, "name": "trainer?[31m?", "used_mib": 3072}]
    assert gpu["own_process_seen"] is True
    assert gpu["clock_event_reasons"] == ["SW power cap", "HW thermal slowdown"]
    assert gpu["clocks"]["sm_applications_mhz"] is None  # not supported: unknown, not an error
    assert gpu["power"]["draw_w"] == 650.5 and gpu["power"]["default_limit_w"] is None
    assert (gpu["mig"], gpu["persistence"], gpu["ecc"]) == (False, True, None)


def test_synthetic_sampler_folds_busy_samples_and_ends() -> None:
    fake = FakeNvml()
    sampler = gpustate.Sampler(sample=True, exclude_pids={99}, module=fake, interval_s=0.01)
    import time

    time.sleep(0.1)
    state = sampler.finish()
    assert state["nvml"] == "ok" and fake.shutdown
    (busy,) = state["during_benchmark"]["gpus"]
    assert busy["busy_samples"] >= 1 and busy["sm_mhz_min"] == 1500
    assert busy["own_process_seen"] is True and [p["pid"] for p in busy["processes"]] == [11]


def test_synthetic_plain_run_takes_one_snapshot_and_idle_samples_say_nothing() -> None:
    state = gpustate.Sampler(sample=False, module=FakeNvml()).finish()
    assert state["during_benchmark"] is None and state["gpus"][0]["index"] == 0
    idle = gpustate.Busy()
    idle.add(gpustate.snapshot(FakeNvml(util=0)))
    assert idle.to_json() == {"samples": 1, "gpus": []}


def test_sampler_without_nvml_says_why() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise OSError("NVML Shared Library Not Found")

    state = gpustate.Sampler(sample=True, module=Broken()).finish()
    assert state["nvml"] == "OSError: NVML Shared Library Not Found" and state["gpus"] is None


def test_docs_show_the_recorded_lines() -> None:
    """The documentation's diagnosed runs are the recorded ones, line for line."""
    page = Path(__file__).parent.parent / "docs" / "how-to" / "failing-verify.md"
    readme = page.read_text(encoding="utf-8")
    recorded_lines = {
        ln
        for f in (*DIAG.glob("*.txt"), *(DIAG.parent / "h200x2_multigpu").glob("*.txt"))
        for ln in f.read_text(encoding="utf-8").splitlines()
    }
    section = readme[: readme.index("**`state`**")]
    shown = [ln for ln in section.splitlines() if ln[:6] in ("PASS  ", "WARN  ", "FAIL  ")]
    shown += [ln for ln in section.splitlines() if ln.startswith("  conv2d 3x3")]
    assert len(shown) >= 7
    assert [ln for ln in shown if ln not in recorded_lines] == []
    # the README's excerpt: every line of its verify block is a recorded line
    front = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    block = front.split("```text\nverify ", 1)[1].split("```", 1)[0]
    excerpt = ("verify " + block).splitlines()
    assert len(excerpt) >= 5
    assert [ln for ln in excerpt if ln not in recorded_lines] == []


def test_synthetic_env_values_are_printed_clean(shipped: Catalog) -> None:
    """An environment variable read back from the probe never prints a control character."""
    report, state = slow_healthy(shipped)
    state["during_benchmark"]["gpus"][0]["clock_event_reasons"] = []
    report["probe"]["env"]["LD_PRELOAD"] = "/x/lib\x1b[2J\u202e.so"
    res, _ = replay(report, shipped)
    assert res["speed"].reason.startswith("LD_PRELOAD=/x/lib?[2J?.so is set")
    assert diagnose.shown("a" * 500).endswith("...") and len(diagnose.shown("a" * 500)) == 200
