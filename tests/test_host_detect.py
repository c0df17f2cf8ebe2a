"""`detect` end to end on recorded machines and failure states, with every input faked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from resolver.core.hostprofile import (
    STATE_MISMATCH,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_NOT_APPLICABLE,
    STATE_OK,
    HostProfile,
)
from resolver.host import detect, procfs, smi, wsl
from resolver.host.platform import PlatformInfo
from resolver.host.smi import CommandResult

FIX = Path(__file__).parent / "fixtures" / "host"
H100 = FIX / "h100_driver580"
BUS = "0000:00:06.0"
# The recording machine's interpreter, so whole recorded profiles compare equal.
DEVICE_PY = PlatformInfo("linux", "linux-x86_64", "3.12", "3.12.3", "2.39")
NO_NVML: dict[str, Any] = {"import_error": "No module named 'pynvml'"}
needs_colons = pytest.mark.skipif(sys.platform == "win32", reason="':' in file names")

Runner = Callable[[Sequence[str], float], CommandResult | None]


def load(rel: str) -> Any:
    return json.loads((FIX / rel).read_text())


def capture(rel: str) -> CommandResult:
    return CommandResult(int((FIX / f"{rel}.rc").read_text()), (FIX / f"{rel}.out").read_text())


def answer(result: CommandResult | None, calls: list[list[str]] | None = None) -> Runner:
    """A runner that gives ``result`` to every nvidia-smi query (None: not installed)."""

    def run(argv: Sequence[str], timeout: float) -> CommandResult | None:
        if calls is not None:
            calls.append(list(argv))
        return result

    return run


def never(argv: Sequence[str], timeout: float) -> CommandResult | None:
    raise AssertionError(f"must not run {argv}")


def put(root: Path, rel: str, content: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def h100_root(root: Path, *, dev: bool = True) -> Path:
    put(root, procfs.SYS_VERSION, (H100 / "sys_module_version.out").read_text())
    put(root, f"{procfs.SYS_PCI}/{BUS}/device", (H100 / "sys_pci_device.out").read_text())
    put(root, procfs.PROC_VERSION, (H100 / "proc_version.out").read_text())
    put(
        root,
        f"{procfs.PROC_GPUS}/{BUS}/information",
        (H100 / "proc_gpu_information.out").read_text(),
    )
    put(root, "proc/sys/kernel/osrelease", (H100 / "proc_osrelease.out").read_text())
    if dev:
        put(root, "dev/nvidia0")
    return root


def same_as_recorded(profile: HostProfile, rel: str) -> None:
    """Equal to a recorded `detect` output, except the advice, whose wording may improve."""
    got: dict[str, Any] = dict(profile.to_json())
    want = load(rel)
    got.pop("messages"), want.pop("messages")
    for key, empty in ADDED_SINCE_RECORDING.items():  # the JSON only gains keys
        if key not in want:
            assert got.pop(key) == empty
    assert got == want


# Keys `detect --json` gained after these recordings, with the value a healthy host gives.
ADDED_SINCE_RECORDING: dict[str, Any] = {"lost_gpus": []}


def round_trips(profile: HostProfile) -> None:
    data = json.loads(json.dumps(profile.to_json()))
    assert HostProfile.from_json(data).to_json() == profile.to_json()


# --- recorded machines ---------------------------------------------------------------------------


def test_h100_nvml_reproduces_the_recorded_profile(tmp_path: Path) -> None:
    profile = detect(
        nvml_raw=load("h100_driver580/nvml_raw.json"),
        runner=never,
        root=h100_root(tmp_path),
        platform_info=DEVICE_PY,
    )
    got = profile.to_json()
    assert got.pop("lost_gpus") == []  # a key added since the recording
    assert got == load("h100_driver580/detect.json")  # no advice to give
    round_trips(profile)


@needs_colons
def test_h100_without_nvidia_user_space_reproduces_the_recording(tmp_path: Path) -> None:
    """Recorded with libnvidia-ml hidden: NVML and nvidia-smi fail, /proc and /dev remain."""
    profile = detect(
        nvml_raw=load("h100_driver580_nolib/nvml_raw.json"),
        runner=answer(capture("h100_driver580_nolib/smi_query")),
        root=h100_root(tmp_path),
        platform_info=DEVICE_PY,
    )
    same_as_recorded(profile, "h100_driver580_nolib/detect.json")
    assert profile.messages[0].startswith(
        "GPU 0 (NVIDIA H100 80GB HBM3): compute capability unknown"
    )
    # With the database's name lookup the CC is known, and says where it came from.
    looked_up = detect(
        lookup_cc={"NVIDIA H100 80GB HBM3": "9.0"}.get,
        nvml_raw=load("h100_driver580_nolib/nvml_raw.json"),
        runner=answer(capture("h100_driver580_nolib/smi_query")),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert looked_up.state == STATE_OK and looked_up.messages == []
    assert (looked_up.gpus[0].cc, looked_up.gpus[0].sources["cc"]) == ("9.0", "name-lookup")
    round_trips(looked_up)


def test_h100_from_nvidia_smi_alone(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    profile = detect(
        nvml_raw=NO_NVML,
        runner=answer(capture("h100_driver580/smi_query"), calls),
        root=h100_root(tmp_path),
        platform_info=DEVICE_PY,
    )
    assert calls == [smi.query_command("nvidia-smi")]
    assert (profile.state, profile.driver, profile.driver_cuda) == (STATE_OK, "580.159.04", None)
    assert profile.sources == {"driver": "nvidia-smi", "state": "nvidia-smi"}
    assert profile.gpus[0].cc == "9.0" and profile.gpus[0].sources["cc"] == "nvidia-smi"
    assert profile.probes == {
        "nvml": "not installed (pip install nvidia-ml-py)",
        "nvidia-smi": "ok",
        "procfs": "not run: nvidia-smi answered",
    }
    assert any("nvidia-ml-py" in m for m in profile.messages)
    round_trips(profile)


def test_nvml_gap_is_filled_by_nvidia_smi(tmp_path: Path) -> None:
    raw = load("h100_driver580/nvml_raw.json")
    dev = raw["devices"][0]
    dev["cuda_compute_capability"] = None
    dev["errors"]["cuda_compute_capability"] = "NVML_ERROR_UNKNOWN"
    profile = detect(
        nvml_raw=raw,
        runner=answer(capture("h100_driver580/smi_query")),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    g = profile.gpus[0]
    assert (g.cc, g.sources["cc"], g.sources["name"]) == ("9.0", "nvidia-smi", "nvml")
    assert profile.sources["driver"] == "nvml"
    assert profile.probes["nvml"] == "ok, with errors: NVML_ERROR_UNKNOWN"


def test_old_driver_without_compute_cap_uses_the_name(tmp_path: Path) -> None:
    def run(argv: Sequence[str], timeout: float) -> CommandResult:
        if "compute_cap" in argv[1]:
            return CommandResult(2, (FIX / "transcribed/smi_r470_compute_cap.out").read_text())
        return CommandResult(0, (FIX / "transcribed/smi_r470_nocc.out").read_text())

    profile = detect(
        lookup_cc={"NVIDIA GeForce RTX 3090": "8.6"}.get,
        nvml_raw=NO_NVML,
        runner=run,
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.driver) == (STATE_OK, "470.182.03")
    assert (profile.gpus[0].cc, profile.gpus[0].sources["cc"]) == ("8.6", "name-lookup")


# --- failure states ------------------------------------------------------------------------------


def test_no_driver_on_an_empty_machine(tmp_path: Path) -> None:
    """NVML's answer recorded on a CPU-only machine; no nvidia-smi; empty /proc and /sys."""
    profile = detect(
        nvml_raw=load("cpu_no_driver/nvml_raw.json"),
        runner=answer(None),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.driver, profile.gpus) == (STATE_NO_DRIVER, None, [])
    assert profile.messages[0].startswith("No NVIDIA driver found")
    assert profile.probes == {
        "nvml": "NVML_ERROR_LIBRARY_NOT_FOUND",
        "nvidia-smi": "not installed",
        "procfs": "no nvidia kernel module (no /sys/module/nvidia, no /proc/driver/nvidia)",
    }
    round_trips(profile)


@needs_colons
def test_container_without_gpus_reproduces_the_recording(tmp_path: Path) -> None:
    """Recorded with an empty read-only /dev: /proc still shows the driver and the GPU."""
    profile = detect(
        nvml_raw=load("h100_driver580_nodev/nvml_raw.json"),
        runner=answer(capture("h100_driver580_nodev/smi_query")),
        root=h100_root(tmp_path, dev=False),
        platform_info=DEVICE_PY,
    )
    same_as_recorded(profile, "h100_driver580_nodev/detect.json")
    assert (profile.state, profile.driver, profile.gpus) == (STATE_NO_GPU, "580.159.04", [])
    assert profile.messages == [
        "An NVIDIA driver (580.159.04) is loaded but no GPU is usable here — a container started "
        "without --gpus? (The kernel module lists 1 GPU (NVIDIA H100 80GB HBM3), but its device "
        "file /dev/nvidia0 is not here.)"
    ]
    round_trips(profile)


def test_no_driver_message_from_nvidia_smi_alone(tmp_path: Path) -> None:
    """nvidia-smi cannot reach a driver and nothing else knows one: no driver."""
    profile = detect(
        nvml_raw=NO_NVML,
        runner=answer(capture("h100_driver580_nodev/smi_query")),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.sources["state"]) == (STATE_NO_DRIVER, "nvidia-smi")


def test_nvidia_smi_says_no_devices(tmp_path: Path) -> None:
    profile = detect(
        nvml_raw=NO_NVML,
        runner=answer(capture("h100_driver580/smi_bad_index")),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.sources["state"]) == (STATE_NO_GPU, "nvidia-smi")
    assert profile.messages[0].startswith("An NVIDIA driver is loaded but no GPU is usable here")
    assert profile.probes["procfs"] == "not run: nvidia-smi answered"


def test_nvml_counts_zero_gpus(tmp_path: Path) -> None:
    raw = load("h100_driver580/nvml_raw.json")
    raw["device_count"], raw["devices"] = 0, []
    profile = detect(nvml_raw=raw, runner=never, root=tmp_path, platform_info=DEVICE_PY)
    assert (profile.state, profile.driver, profile.driver_cuda) == (
        STATE_NO_GPU,
        "580.159.04",
        "13.0",
    )


@needs_colons
def test_driver_library_mismatch(tmp_path: Path) -> None:
    """Kernel module 535 still loaded after an upgrade to 580 user space (transcribed texts)."""
    root = h100_root(tmp_path)
    put(root, procfs.SYS_VERSION, "535.104.05\n")
    put(root, procfs.PROC_VERSION, (FIX / "transcribed/proc_version_proprietary.out").read_text())
    profile = detect(
        nvml_raw=load("transcribed/nvml_mismatch.json"),
        runner=answer(CommandResult(18, (FIX / "transcribed/smi_mismatch.out").read_text())),
        root=root,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.sources["state"]) == (STATE_MISMATCH, "nvml")
    assert (profile.driver, profile.sources["driver"]) == ("535.104.05", "sysfs")
    text = profile.messages[0]
    assert "535.104.05" in text and "580.95" in text
    assert "Reboot" in text and "modprobe nvidia" in text
    round_trips(profile)


def test_nvidia_smi_timeout(tmp_path: Path) -> None:
    profile = detect(
        nvml_raw=NO_NVML,
        runner=answer(CommandResult(None, "")),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert profile.state == STATE_NO_DRIVER
    assert profile.probes["nvidia-smi"] == "timed out"
    assert any("did not answer" in m for m in profile.messages)


# --- other platforms -----------------------------------------------------------------------------


def test_macos_is_not_applicable(tmp_path: Path) -> None:
    mac = PlatformInfo("darwin", "macos-arm64", "3.12", "3.12.3", None)
    profile = detect(
        nvml_raw={"init_error": "must not be read"}, runner=never, root=tmp_path, platform_info=mac
    )
    assert (profile.state, profile.probes, profile.driver_os) == (STATE_NOT_APPLICABLE, {}, "linux")
    assert "macOS" in profile.messages[0]
    round_trips(profile)


def test_wsl2_uses_the_windows_driver_nvidia_smi(tmp_path: Path) -> None:
    put(tmp_path, "proc/sys/kernel/osrelease", (FIX / "transcribed/wsl2_osrelease.out").read_text())
    put(tmp_path, wsl.SMI)
    calls: list[str] = []

    def run(argv: Sequence[str], timeout: float) -> CommandResult | None:
        calls.append(argv[0])
        if argv[0] == "nvidia-smi":
            return None  # not on PATH
        return capture("h100_driver580/smi_query")

    profile = detect(nvml_raw=NO_NVML, runner=run, root=tmp_path, platform_info=DEVICE_PY)
    assert calls == ["nvidia-smi", str(tmp_path / wsl.SMI)]
    assert (profile.wsl, profile.driver_os, profile.state) == (True, "windows", STATE_OK)
    assert profile.probes["procfs"].startswith("not run")
    round_trips(profile)


def test_wsl2_without_a_windows_driver(tmp_path: Path) -> None:
    put(tmp_path, "proc/sys/kernel/osrelease", (FIX / "transcribed/wsl2_osrelease.out").read_text())
    profile = detect(
        nvml_raw=load("cpu_no_driver/nvml_raw.json"),
        runner=answer(None),
        root=tmp_path,
        platform_info=DEVICE_PY,
    )
    assert (profile.state, profile.wsl) == (STATE_NO_DRIVER, True)
    assert "driver on Windows" in profile.messages[0]


def test_windows_skips_the_kernel_files(tmp_path: Path) -> None:
    win = PlatformInfo("windows", "windows-x86_64", "3.12", "3.12.3", None)
    profile = detect(
        nvml_raw=load("h100_driver580/nvml_raw.json"),
        runner=never,
        root=tmp_path,
        platform_info=win,
    )
    assert (profile.state, profile.driver_os) == (STATE_OK, "windows")


# --- speed ---------------------------------------------------------------------------------------


def test_import_is_light() -> None:
    """The CLI imports this on every call: no NVML, subprocess or ctypes until detect runs."""
    code = (
        "import sys, resolver.host; "
        "print(sorted({'pynvml', 'subprocess', 'ctypes'} & set(sys.modules)))"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    ).stdout
    assert out.strip() == "[]"
