"""NVML probe: recorded raw values -> facts, and the collector against a fake pynvml."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from resolver.core.hostprofile import (
    STATE_MISMATCH,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_OK,
    GpuInfo,
)
from resolver.host import detect, nvml
from resolver.host.platform import PlatformInfo

FIX = Path(__file__).parent / "fixtures" / "host"
LINUX = PlatformInfo("linux", "linux-x86_64", "3.12", "3.12.3", "2.39")


def raw(rel: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / rel).read_text())
    return data


# --- parse: recorded dicts ------------------------------------------------------------------------


def test_h100_recorded_values() -> None:
    r = nvml.parse(raw("h100_driver580/nvml_raw.json"))
    assert (r.state, r.status, r.driver, r.driver_cuda) == (STATE_OK, "ok", "580.159.04", "13.0")
    assert r.sources == {"driver": "nvml", "driver_cuda": "nvml"}
    assert r.gpus == [
        GpuInfo(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            cc="9.0",
            memory_mib=81559,  # nvidia-smi says 81559 MiB for the same card
            pci_device_id="0x2330",  # 0x233010DE >> 16
            mig="disabled",
            sources=dict.fromkeys(("name", "cc", "memory_mib", "pci_device_id", "mig"), "nvml"),
        )
    ]


@pytest.mark.parametrize(
    ("rel", "state"),
    [
        ("cpu_no_driver/nvml_raw.json", STATE_NO_DRIVER),  # recorded: pynvml, no driver at all
        ("h100_driver580_nolib/nvml_raw.json", STATE_NO_DRIVER),  # recorded: library hidden
        ("transcribed/nvml_mismatch.json", STATE_MISMATCH),
    ],
)
def test_init_errors_map_to_states(rel: str, state: str) -> None:
    r = nvml.parse(raw(rel))
    assert r.state == state
    assert r.gpus is None and r.driver is None
    assert r.status == raw(rel)["init_error"]


def test_driver_not_loaded_is_no_driver() -> None:
    assert nvml.parse({"init_error": "NVML_ERROR_DRIVER_NOT_LOADED"}).state == STATE_NO_DRIVER


def test_module_missing_is_skipped_not_a_state() -> None:
    r = nvml.parse({"import_error": "No module named 'pynvml'"})
    assert r.state is None
    assert r.status.startswith("not installed")


def test_zero_devices_is_no_gpu() -> None:
    r = nvml.parse(
        {
            "errors": {},
            "driver_version": "580.159.04",
            "cuda_driver_version": 13000,
            "device_count": 0,
            "devices": [],
        }
    )
    assert (r.state, r.gpus, r.driver) == (STATE_NO_GPU, [], "580.159.04")


def test_mig_not_supported_and_missing_libcuda() -> None:
    r = nvml.parse(
        {
            "errors": {"cuda_driver_version": "NVML_ERROR_LIBRARY_NOT_FOUND"},
            "driver_version": "570.124.06",
            "cuda_driver_version": None,
            "device_count": 1,
            "devices": [
                {
                    "index": 0,
                    "name": "NVIDIA GeForce RTX 4090",
                    "cuda_compute_capability": [8, 9],
                    "memory_total": 25757220864,
                    "pci_device_id": 0x268410DE,
                    "mig_mode": None,
                    "errors": {"mig_mode": "NVML_ERROR_NOT_SUPPORTED"},
                }
            ],
        }
    )
    assert r.state == STATE_OK and r.status == "ok"  # NOT_SUPPORTED is an answer, not a problem
    assert r.driver_cuda is None and "driver_cuda" not in r.sources
    assert r.gpus is not None
    g = r.gpus[0]
    assert (g.cc, g.memory_mib, g.pci_device_id, g.mig) == ("8.9", 24564, "0x2684", None)
    assert "mig" not in g.sources


@pytest.mark.parametrize(
    ("value", "text"), [(13000, "13.0"), (12080, "12.8"), (11040, "11.4"), (0, None), (None, None)]
)
def test_cuda_version_str(value: int | None, text: str | None) -> None:
    assert nvml.cuda_version_str(value) == text


# --- collect: a fake pynvml ----------------------------------------------------------------------


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class FakeNvml:
    """Just enough of pynvml; values from the recorded H200 probe (which returned bytes)."""

    NVMLError = FakeNvmlError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

    def __init__(self, init_error: int | None = None, mig_error: int | None = None) -> None:
        self.init_error = init_error
        self.mig_error = mig_error
        self.branch_error: int | None = None
        self.shutdown = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNvmlError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown += 1

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"  # as the H200 capture shows: an older binding returns bytes

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 13000

    def nvmlSystemGetDriverBranch(self) -> SimpleNamespace:
        if self.branch_error is not None:
            raise FakeNvmlError(self.branch_error)
        return SimpleNamespace(version=1, branch=b"r582_49")  # the device machine's real answer

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> object:
        return ("handle", i)

    def nvmlDeviceGetName(self, h: object) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetCudaComputeCapability(self, h: object) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, h: object) -> SimpleNamespace:
        return SimpleNamespace(total=143771 * 1024 * 1024)

    def nvmlDeviceGetPciInfo(self, h: object) -> SimpleNamespace:
        return SimpleNamespace(pciDeviceId=0x233510DE, busId=b"00000000:00:06.0")

    def nvmlDeviceGetMigMode(self, h: object) -> list[int]:
        if self.mig_error is not None:
            raise FakeNvmlError(self.mig_error)
        return [1, 1]


def test_collect_then_parse_h200() -> None:
    fake = FakeNvml()
    data = nvml.collect(fake)
    assert fake.shutdown == 1
    json.dumps(data)  # recordable as a fixture
    assert data["driver_version"] == "580.159.04"
    assert data["devices"][0]["pci_bus_id"] == "00000000:00:06.0"
    r = nvml.parse(data)
    assert r.driver_cuda == "13.0"
    assert r.driver_build_branch == "r582_49" and r.sources["driver_build_branch"] == "nvml"
    assert r.gpus is not None
    g = r.gpus[0]
    assert (g.name, g.cc, g.memory_mib, g.pci_device_id, g.mig) == (
        "NVIDIA H200",
        "9.0",
        143771,
        "0x2335",
        "enabled",
    )


def test_collect_records_error_names() -> None:
    data = nvml.collect(FakeNvml(mig_error=3))
    assert data["devices"][0]["errors"] == {"mig_mode": "NVML_ERROR_NOT_SUPPORTED"}
    assert data["devices"][0]["mig_mode"] is None
    assert nvml.collect(FakeNvml(init_error=18)) == {
        "init_error": "NVML_ERROR_LIB_RM_VERSION_MISMATCH"
    }


class FakeOldNvml(FakeNvml):
    """A binding too old to wrap nvmlSystemGetCudaDriverVersion_v2."""

    def __getattribute__(self, name: str) -> Any:
        if name == "nvmlSystemGetCudaDriverVersion_v2":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_collect_old_binding_without_a_function() -> None:
    data = nvml.collect(FakeOldNvml())
    assert data["errors"] == {"cuda_driver_version": "NVML_ERROR_FUNCTION_NOT_FOUND"}
    r = nvml.parse(data)
    assert r.state == STATE_OK and r.driver_cuda is None


def test_collect_preload_missing_library(tmp_path: Path) -> None:
    fake = FakeNvml(init_error=12)
    assert nvml.collect(fake, preload=[str(tmp_path / "missing.so")]) == {
        "init_error": "NVML_ERROR_LIBRARY_NOT_FOUND"
    }


def test_collect_retries_after_preloading(monkeypatch: pytest.MonkeyPatch) -> None:
    """WSL2: libnvidia-ml.so.1 is only in /usr/lib/wsl/lib; once loaded, init succeeds."""
    fake = FakeNvml(init_error=12)
    loaded: list[str] = []

    def preload(paths: Any) -> bool:
        loaded.extend(paths)
        fake.init_error = None
        return True

    monkeypatch.setattr(nvml, "_preload", preload)
    data = nvml.collect(fake, preload=["/usr/lib/wsl/lib/libnvidia-ml.so.1"])
    assert loaded == ["/usr/lib/wsl/lib/libnvidia-ml.so.1"]
    assert data["driver_version"] == "580.159.04"


def test_collect_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    # where the driver's library loads (without it, pynvml is not even imported)
    monkeypatch.setattr(nvml, "_library_loads", lambda preload: True)
    assert "import_error" in nvml.collect()


def test_detect_with_a_fake_module(tmp_path: Path) -> None:
    def runner(argv: Any, timeout: float) -> None:
        raise AssertionError("nvidia-smi must not run when NVML answered")

    profile = detect(nvml_module=FakeNvml(), runner=runner, root=tmp_path, platform_info=LINUX)
    assert profile.state == STATE_OK
    assert profile.probes == {
        "nvml": "ok",
        "nvidia-smi": "not run: NVML answered",
        "procfs": "not run: nvml answered",
    }
    assert profile.gpus[0].mig == "enabled"


def test_driver_branch_before_r560_is_recorded_as_missing() -> None:
    fake = FakeNvml()
    fake.branch_error = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: the driver predates R560
    data = nvml.collect(fake)
    assert data["errors"]["driver_branch"] == "NVML_ERROR_FUNCTION_NOT_FOUND"
    r = nvml.parse(data)
    assert (
        r.state == STATE_OK
        and r.driver_build_branch is None
        and "driver_build_branch" not in r.sources
    )


@pytest.mark.parametrize(
    ("text", "branch"),
    [
        ("580", "580"),
        ("r580_00", "r580_00"),
        ("r582_49", "r582_49"),  # Linux 580.159.04's real answer: a build branch, kept as read
        ("R595", "R595"),
        ("580\x00", None),
        ("58", None),
        ("580; rm", None),
        ("٥٨٠", None),
        (None, None),
        ("5" * 40, None),
    ],
)
def test_branch_text_is_validated(text: str | None, branch: str | None) -> None:
    assert nvml.branch_str(text) == branch


def _nvml_library_loads() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(
    _nvml_library_loads() or __import__("os").name == "nt",
    reason="needs a non-Windows machine without libnvidia-ml.so.1",
)
def test_no_nvml_library_answers_as_pynvml_without_importing_it(tmp_path: Path) -> None:
    """Without the driver's library, the collector says what pynvml's init says (so detection
    reports the same), and never imports pynvml (its import was most of `detect` there)."""
    import subprocess
    import sys

    import pynvml

    assert nvml.collect() == nvml.collect(pynvml)
    code = (
        "import sys; from resolver.host import nvml; nvml.collect(); print('pynvml' in sys.modules)"
    )
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": root},
        timeout=120,
        check=True,
    ).stdout
    assert out.strip() == "False"
