"""A host with a GPU lost: nvidia-smi prints the rows it can read, then "Unable to determine the
device handle for GPU…", and exits 15. Seven GPUs and one lost, never "no driver" and a CPU
build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.catalog import Catalog
from resolver.core.hostprofile import STATE_NO_GPU, STATE_OK, HostProfile, LostGpu
from resolver.host import detect, smi
from resolver.host.platform import PlatformInfo
from resolver.host.smi import CommandResult
from resolver.verify import checks
from resolver.verify.result import FAIL

FIX = Path(__file__).parent / "fixtures"
LOST = FIX / "host" / "transcribed"
VERIFY = FIX / "verify" / "h100_torch211_cu130"
PY = PlatformInfo("linux", "linux-x86_64", "3.12", "3.12.3", "2.39")
NO_NVML: dict[str, Any] = {"import_error": "No module named 'pynvml'"}


def _capture(name: str) -> CommandResult:
    rc = int((LOST / f"{name}.rc").read_text())
    return CommandResult(rc, (LOST / f"{name}.out").read_text())


def _detect(tmp_path: Path, name: str) -> HostProfile:
    result = _capture(name)
    return detect(nvml_raw=NO_NVML, runner=lambda argv, t: result, root=tmp_path, platform_info=PY)


def test_seven_rows_and_a_lost_gpu_parse() -> None:
    probe = smi.interpret(_capture("smi_lost_gpu"))
    assert probe.state == STATE_OK and probe.gpus is not None and len(probe.gpus) == 7
    assert probe.driver == "580.159.04"
    assert probe.lost == [LostGpu("0000:DB:00.0", "Unknown Error", "nvidia-smi")]
    older = smi.interpret(_capture("smi_lost_only_gpu"))
    assert older.state == STATE_NO_GPU and not older.gpus
    assert older.lost == [
        LostGpu("0000:02:00.0", "GPU is lost. Reboot the system to recover this GPU", "nvidia-smi")
    ]


def test_detect_lists_the_lost_gpu_with_its_bus_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _detect(tmp_path, "smi_lost_gpu")
    assert profile.state == STATE_OK and len(profile.gpus) == 7
    assert [g.pci_bus_id for g in profile.lost_gpus] == ["0000:DB:00.0"]
    assert not any("No NVIDIA driver" in m for m in profile.messages)
    assert HostProfile.from_json(json.loads(json.dumps(profile.to_json()))) == profile
    import resolver.host as host_mod

    monkeypatch.setattr(host_mod, "detect", lambda **kw: profile)
    code, out, err = run_cli(capsys, "detect")
    assert code == 0
    assert "GPU ?: lost, PCI bus 0000:DB:00.0 (nvidia-smi: Unknown Error)" in out
    assert "1 GPU is lost" in err and "resolving for the 7 that answer" in err  # a warning
    code, out, _ = run_cli(capsys, "detect", "--json")
    assert json.loads(out)["lost_gpus"] == [
        {"pci_bus_id": "0000:DB:00.0", "error": "Unknown Error", "source": "nvidia-smi"}
    ]


def test_the_only_gpu_lost_is_not_no_driver(tmp_path: Path) -> None:
    profile = _detect(tmp_path, "smi_lost_only_gpu")
    assert profile.state == STATE_NO_GPU and profile.lost_gpus
    assert not any("No NVIDIA driver" in m or "--gpus" in m for m in profile.messages)


def test_suggest_and_lock_resolve_for_the_seven_and_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = tmp_path / "host.json"
    host.write_text(json.dumps(_detect(tmp_path, "smi_lost_gpu").to_json()), encoding="utf-8")
    code, out, err = run_cli(capsys, "suggest", "--json", "--host", str(host))
    data = json.loads(out)
    assert code == 0, err
    assert data["target"]["gpus"] == [{"cc": "9.0", "name": "NVIDIA H100 80GB HBM3"}] * 7
    assert data["selection"]["variant"] != "cpu"
    assert "warning: 1 GPU is lost: 0000:DB:00.0 (nvidia-smi: Unknown Error)" in err
    code, _, err = run_cli(capsys, "lock", "--host", str(host), "-o", str(tmp_path / "lock"))
    assert code == 0, err
    assert "1 GPU is lost" in err and "resolving for the 7 that answer" in err
    text = (tmp_path / "lock" / "requirements.txt").read_text(encoding="utf-8")
    assert "+cpu" not in text


def test_verify_fails_naming_the_lost_gpu(shipped: Catalog) -> None:
    probe = json.loads((VERIFY / "probe.json").read_text(encoding="utf-8"))
    report = json.loads((VERIFY / "verify.json").read_text(encoding="utf-8"))
    host = HostProfile.from_json(report["host"])
    host.lost_gpus = [LostGpu("0000:DB:00.0", "Unknown Error", "nvidia-smi")]
    res = {r.id: r for r in checks.evaluate(probe, host, shipped)}
    assert [k for k, r in res.items() if r.status == FAIL] == ["cuda"]
    assert "0000:DB:00.0 (nvidia-smi: Unknown Error)" in res["cuda"].reason
    assert res["cuda"].fix is not None and "reboot" in res["cuda"].fix


def test_a_host_file_with_a_bad_lost_entry_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _detect(tmp_path, "smi_lost_gpu").to_json()
    data["lost_gpus"] = [{"pci_bus_id": "x\x1b[2J", "error": "e", "source": "nvidia-smi"}]
    host = tmp_path / "host.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_cli(capsys, "suggest", "--host", str(host))
    assert code == 2 and "lost_gpus[0].pci_bus_id" in err and "\x1b" not in err


def _nvml_with_a_lost_gpu(lost_index: int = 7, count: int = 8) -> dict[str, Any]:
    """NVML's answers (in `nvml.collect`'s shape) on the host of smi_lost_gpu: eight devices
    counted, the handle of one cannot be opened."""
    good = {
        "name": "NVIDIA H100 80GB HBM3",
        "cuda_compute_capability": [9, 0],
        "memory_total": 85520809984,
        "pci_device_id": 0x233010DE,
        "mig_mode": [0, 0],
        "errors": {},
    }
    devices = [
        {"index": i, "errors": {"handle": "NVML_ERROR_GPU_IS_LOST"}}
        if i == lost_index
        else {**good, "index": i, "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0", "errors": {}}
        for i in range(count)
    ]
    return {
        "errors": {},
        "driver_version": "580.159.04",
        "cuda_driver_version": 13000,
        "device_count": count,
        "devices": devices,
    }


def test_a_gpu_nvml_cannot_open_is_lost_not_an_unknown_model(tmp_path: Path) -> None:
    """With nvidia-ml-py installed the lost GPU is a device whose handle NVML cannot open: it
    is lost (named by nvidia-smi's bus id, which NVML cannot give without a handle), never a
    GPU of unknown model to build for."""
    smi_out = _capture("smi_lost_gpu")
    profile = detect(
        nvml_raw=_nvml_with_a_lost_gpu(),
        runner=lambda argv, t: smi_out,
        root=tmp_path,
        platform_info=PY,
    )
    assert profile.state == STATE_OK and len(profile.gpus) == 7
    assert all(g.name == "NVIDIA H100 80GB HBM3" for g in profile.gpus)
    assert profile.lost_gpus == [LostGpu("0000:DB:00.0", "Unknown Error", "nvidia-smi")]


def test_without_nvidia_smi_the_nvml_lost_gpu_is_still_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shipped: Catalog
) -> None:
    def no_smi(argv: Any, t: float) -> CommandResult | None:
        return None  # not installed

    profile = detect(
        nvml_raw=_nvml_with_a_lost_gpu(lost_index=0, count=1),
        runner=no_smi,
        root=tmp_path,
        platform_info=PY,
    )
    assert profile.state == STATE_NO_GPU and profile.gpus == []
    assert profile.lost_gpus == [LostGpu("unknown", "GPU index 0: NVML_ERROR_GPU_IS_LOST", "nvml")]
    assert not any("No NVIDIA driver" in m or "--gpus" in m for m in profile.messages)
    host = tmp_path / "host.json"
    host.write_text(json.dumps(profile.to_json()), encoding="utf-8")
    assert HostProfile.from_json(json.loads(host.read_text(encoding="utf-8"))) == profile
    _, _, err = run_cli(capsys, "suggest", "--host", str(host))
    assert "1 GPU is lost: unknown (nvml: GPU index 0: NVML_ERROR_GPU_IS_LOST)" in err
    probe = json.loads((VERIFY / "probe.json").read_text(encoding="utf-8"))
    res = {r.id: r for r in checks.evaluate(probe, profile, shipped)}
    assert res["cuda"].status == FAIL and "GPU index 0" in res["cuda"].reason
