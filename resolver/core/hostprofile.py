"""The host profile: what detection found, each fact with the probe that gave it.

It is the one hand-off from probes to the solver (``to_target``) and round-trips through JSON, so a
`gpuresolve detect --json` file recorded on one machine describes it anywhere (team fleets). A
plain record with no probing of its own, so it lives in core: the probes (host/) fill it, the
decision layer (solve/), which must not import host/, reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resolver.core.errors import UserError, shown
from resolver.core.fields import Fields
from resolver.core.platforms import PLATFORMS, PYTHON_RE
from resolver.core.versions import GLIBC_RE, Driver

if TYPE_CHECKING:
    from resolver.core.documents.reports import HostDoc

__all__ = [
    "LOST_BUS_UNKNOWN",
    "MAX_LOST_ERROR",
    "PCI_BUS_ID_RE",
    "SOURCE_NAME_LOOKUP",
    "SOURCE_NVML",
    "SOURCE_PROCFS",
    "SOURCE_SMI",
    "SOURCE_SYSFS",
    "STATE_MISMATCH",
    "STATE_NOT_APPLICABLE",
    "STATE_NO_DRIVER",
    "STATE_NO_GPU",
    "STATE_OK",
    "GpuInfo",
    "HostProfile",
    "LostGpu",
]

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

_CC_RE = re.compile(r"^[0-9]+\.[0-9]$")  # "8.6", "12.0"
_BRANCH_RE = re.compile(r"^[0-9]{3,4}$")  # "580"
_BUILD_BRANCH_RE = re.compile(r"^[rR]?[0-9]{3,4}(?:[._][0-9]{1,4}){0,3}$")  # "r582_49"
PCI_BUS_ID_RE = re.compile(r"[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")  # 0000:17:00.0
LOST_BUS_UNKNOWN = "unknown"  # a lost GPU only NVML saw: without a handle it has no bus id
MAX_LOST_ERROR = 200  # the driver's reason, one short line


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
class LostGpu:
    """A GPU the driver lists but cannot open (fallen off the bus, "GPU is lost"): its PCI bus
    id and the tool's reason. Not a GPU to build for, but the machine is not whole."""

    pci_bus_id: str  # "0000:17:00.0", as the driver printed it
    error: str  # "Unknown Error", "GPU is lost. Reboot the system to recover this GPU"
    source: str  # the probe that said so


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
    driver_branch: str | None = None  # "580": the release branch, from the driver version (a
    # Windows number is not its branch: 581.57 is R580); None where it cannot be told
    driver_build_branch: str | None = None  # "r582_49": what NVML names (R560+), shown only
    state: str = STATE_NO_DRIVER
    gpus: list[GpuInfo] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # fact -> probe, for host-level facts
    messages: list[str] = field(default_factory=list)  # what the user should know or do
    # What each probe said ("ok", "not installed", "NVML_ERROR_DRIVER_NOT_LOADED", "not run: ..."),
    # so a shared `detect --json` shows why a fact is missing.
    probes: dict[str, str] = field(default_factory=dict)
    lost_gpus: list[LostGpu] = field(default_factory=list)  # listed by the driver, unusable

    @property
    def driver_os(self) -> str:
        """Whose driver floors apply: WSL2 runs on the Windows driver."""
        return "windows" if self.wsl or self.platform.startswith("windows") else "linux"

    def to_json(self) -> HostDoc:
        """The `detect --json` document (the fields in order, then ``driver_os``)."""
        return {
            "platform": self.platform,
            "python": self.python,
            "python_full": self.python_full,
            "glibc": self.glibc,
            "wsl": self.wsl,
            "driver": self.driver,
            "driver_cuda": self.driver_cuda,
            "driver_branch": self.driver_branch,
            "driver_build_branch": self.driver_build_branch,
            "state": self.state,
            "gpus": [
                {
                    "index": g.index,
                    "name": g.name,
                    "cc": g.cc,
                    "memory_mib": g.memory_mib,
                    "pci_device_id": g.pci_device_id,
                    "mig": g.mig,
                    "sources": dict(g.sources),
                }
                for g in self.gpus
            ],
            "sources": dict(self.sources),
            "messages": list(self.messages),
            "probes": dict(self.probes),
            "lost_gpus": [
                {"pci_bus_id": lost.pci_bus_id, "error": lost.error, "source": lost.source}
                for lost in self.lost_gpus
            ],
            "driver_os": self.driver_os,
        }

    @classmethod
    def from_json(cls, data: Any) -> HostProfile:
        """Read back what ``to_json`` wrote (unknown keys are ignored: newer writers add keys).

        A hand-edited or foreign file raises ``ValueError`` naming the key, never an
        AttributeError deep inside the solver.
        """
        doc = Fields(data, "")
        platform = doc.need("platform")
        if platform not in PLATFORMS:
            raise ValueError(f"platform: expected one of {', '.join(PLATFORMS)}, got {platform!r}")
        python = doc.need("python", like="3.12", pattern=PYTHON_RE)
        gpus = []
        for i, item in enumerate(doc.items("gpus")):
            g = Fields(item, f"gpus[{i}]")
            index = g.integer("index")
            memory = g.integer("memory_mib")
            gpus.append(
                GpuInfo(
                    index=i if index is None else index,
                    name=g.text("name"),
                    cc=g.text("cc", like="8.6", pattern=_CC_RE),
                    memory_mib=memory,
                    pci_device_id=g.text("pci_device_id"),
                    mig=g.text("mig"),
                    sources=g.strings("sources"),
                )
            )
        wsl = doc.flag("wsl")
        messages = doc.texts("messages")
        return cls(
            platform=platform,
            python=python,
            python_full=doc.text("python_full"),
            glibc=doc.text("glibc", like="2.39", pattern=GLIBC_RE),
            wsl=wsl,
            driver=_driver(doc.text("driver", like="580.65.06")),
            driver_cuda=doc.text("driver_cuda"),
            driver_branch=doc.text("driver_branch", like="580", pattern=_BRANCH_RE),
            driver_build_branch=doc.text(
                "driver_build_branch", like="r582_49", pattern=_BUILD_BRANCH_RE
            ),
            state=doc.text("state") or STATE_NO_DRIVER,
            gpus=gpus,
            sources=doc.strings("sources"),
            messages=list(messages),
            probes=doc.strings("probes"),
            lost_gpus=[_lost(item, i) for i, item in enumerate(doc.items("lost_gpus"))],
        )


def _driver(value: str | None) -> str | None:
    """A host file's driver in `Driver`'s one grammar (a lock records it; --check reads it)."""
    if value is None:
        return None
    try:
        return str(Driver.parse(value))
    except UserError:
        got = shown(value)
        raise ValueError(f"driver: expected a version like '580.65.06', got {got}") from None


def _lost(item: Any, i: int) -> LostGpu:
    doc = Fields(item, f"lost_gpus[{i}]")
    bus = doc.need("pci_bus_id")
    if bus != LOST_BUS_UNKNOWN:
        bus = doc.need("pci_bus_id", like="0000:17:00.0", pattern=PCI_BUS_ID_RE)
    error = doc.need("error")
    if len(error) > MAX_LOST_ERROR:
        raise ValueError(f"lost_gpus[{i}].error: longer than {MAX_LOST_ERROR} characters")
    return LostGpu(bus, error, doc.need("source"))
