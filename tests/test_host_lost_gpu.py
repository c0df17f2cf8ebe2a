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
from resolver.host import detect, smi
from resolver.host.platform import PlatformInfo
from resolver.host.profile import STATE_NO_GPU, STATE_OK, HostProfile, LostGpu
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
    code, out, _ = run_cli(capsys, "detect")
    assert code == 0
    assert "GPU ?: lost, PCI bus 0000:DB:00.0 (nvidia-smi: Unknown Error)" in out
    assert "1 GPU is lost" in out and "resolving for the 7 that answer" in out
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
