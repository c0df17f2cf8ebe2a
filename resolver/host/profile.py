"""The host profile: what detection found, each fact with the probe that gave it.

It is the one hand-off from probes to the solver (``to_target``) and round-trips through JSON, so a
`gpuresolve detect --json` file recorded on one machine describes it anywhere (team fleets).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Detection states, named plainly for the user.
STATE_OK = "ok"  # a driver and at least one usable GPU
STATE_NO_DRIVER = "no-driver"  # no NVIDIA kernel driver on this machine
STATE_NO_GPU = "no-gpu"  # a driver is visible but no GPU is usable here (container without GPUs)
STATE_MISMATCH = "driver-mismatch"  # "Driver/library version mismatch": reboot or reload the module
STATE_NOT_APPLICABLE = "not-applicable"  # macOS: no NVIDIA driver exists for it

# Probe names, as recorded in ``sources`` (which probe gave a fact) and ``probes`` (what each said).
SOURCE_NVML = "nvml"  # NVIDIA's management library, through nvidia-ml-py
SOURCE_SMI = "nvidia-smi"  # `nvidia-smi --query-gpu` CSV
SOURCE_PROCFS = "procfs"  # /proc/driver/nvidia
SOURCE_SYSFS = "sysfs"  # /sys/module/nvidia, /sys/bus/pci
SOURCE_NAME_LOOKUP = "name-lookup"  # CC looked up from the GPU's name in the database


@dataclass
class GpuInfo:
    """One GPU as detected. ``sources`` maps each fact's name to the probe that gave it."""

    index: int
    name: str | None
    cc: str | None  # "9.0"
    memory_mib: int | None = None
    pci_device_id: str | None = None  # "0x2335" (device id only, lower-case hex)
    mig: str | None = None  # "enabled" | "disabled" | None (not supported or unknown)
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class HostProfile:
    """Everything the solver needs to know about one machine, with provenance."""

    platform: str  # linux-x86_64 | linux-aarch64 | windows-x86_64 | macos-arm64
    python: str  # "3.12" (or "3.13t" for a free-threaded build)
    python_full: str | None = None  # "3.12.3"
    glibc: str | None = None  # "2.39"
    wsl: bool = False  # WSL2: Linux userland on a Windows driver (Windows driver floors apply)
    driver: str | None = None  # "580.159.04"
    driver_cuda: str | None = None  # highest CUDA the driver supports, "13.0"
    state: str = STATE_NO_DRIVER
    gpus: list[GpuInfo] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # fact -> probe, for host-level facts
    messages: list[str] = field(default_factory=list)  # what the user should know or do
    # What each probe said ("ok", "not installed", "NVML_ERROR_DRIVER_NOT_LOADED", "not run: ..."),
    # so a shared `detect --json` shows why a fact is missing.
    probes: dict[str, str] = field(default_factory=dict)

    @property
    def driver_os(self) -> str:
        """Whose driver floors apply: WSL2 runs on the Windows driver."""
        return "windows" if self.wsl or self.platform.startswith("windows") else "linux"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["driver_os"] = self.driver_os
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostProfile:
        """Read back what ``to_json`` wrote (unknown keys are ignored: newer writers add keys)."""
        gpus = [
            GpuInfo(
                index=int(g.get("index", i)),
                name=g.get("name"),
                cc=g.get("cc"),
                memory_mib=g.get("memory_mib"),
                pci_device_id=g.get("pci_device_id"),
                mig=g.get("mig"),
                sources=dict(g.get("sources") or {}),
            )
            for i, g in enumerate(data.get("gpus") or [])
        ]
        return cls(
            platform=str(data["platform"]),
            python=str(data["python"]),
            python_full=data.get("python_full"),
            glibc=data.get("glibc"),
            wsl=bool(data.get("wsl", False)),
            driver=data.get("driver"),
            driver_cuda=data.get("driver_cuda"),
            state=str(data.get("state", STATE_NO_DRIVER)),
            gpus=gpus,
            sources=dict(data.get("sources") or {}),
            messages=list(data.get("messages") or []),
            probes=dict(data.get("probes") or {}),
        )
