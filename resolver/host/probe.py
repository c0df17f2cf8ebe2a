"""What one probe found, before `detect` merges the probes into a `HostProfile`.

Every parser returns a `ProbeResult`, so the merge rule ("the first probe that answers a fact keeps
it") is written once, and each parser can be tested alone on recorded text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from resolver.core.errors import UserError, escaped
from resolver.core.hostprofile import GpuInfo, LostGpu
from resolver.core.versions import parse_cc


@dataclass
class ProbeResult:
    """Facts from one probe. ``state`` None means the probe could not tell (absent or broken)."""

    source: str
    state: str | None = None
    driver: str | None = None
    driver_cuda: str | None = None
    driver_build_branch: str | None = None  # "r582_49": NVML's nvmlSystemGetDriverBranch (R560+)
    gpus: list[GpuInfo] | None = None  # None: this probe did not enumerate GPUs
    sources: dict[str, str] = field(default_factory=dict)  # host fact -> probe (sysfs vs procfs)
    status: str = "ok"  # one line for HostProfile.probes: "ok", "not installed", an error name
    detail: str | None = None  # the tool's own words (error text), quoted in user messages
    lost: list[LostGpu] = field(default_factory=list)  # listed by the driver, not answering


def gpu(index: int, source: str, **facts: str | int | None) -> GpuInfo:
    """A GpuInfo whose non-empty facts are all credited to ``source``."""
    info = GpuInfo(
        index=index,
        name=_probe_text(facts.get("name")),
        cc=_cc(facts.get("cc")),
        memory_mib=_opt_int(facts.get("memory_mib")),
        pci_device_id=_opt_str(facts.get("pci_device_id")),
        mig=_opt_str(facts.get("mig")),
    )
    for key in ("name", "cc", "memory_mib", "pci_device_id", "mig"):
        if getattr(info, key) is not None:
            info.sources[key] = source
    return info


def _probe_text(value: str | int | None) -> str | None:
    """A name a probe printed (nvidia-smi, NVML), with control and bidi characters escaped.

    The one rule for probe output: kept (the machine is still what it is) but never raw on the
    terminal or in a lock file; input files with such characters are refused instead.
    """
    return None if value is None else escaped(str(value))


def _cc(value: str | int | None) -> str | None:
    """A compute capability a probe gave, in the one grammar every reader uses ("9.0"); one
    that grammar refuses ("99999999999999999999999.9" from a broken nvidia-smi) is unknown
    (looked up by name), never a host whose `detect` or `--host` file is exit 2."""
    if value is None:
        return None
    try:
        major, minor = parse_cc(str(value))
    except UserError:
        return None
    return f"{major}.{minor}"


def _opt_str(value: str | int | None) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: str | int | None) -> int | None:
    return None if value is None else int(value)


def pci_device_hex(value: int | str | None) -> str | None:
    """PCI ids as NVML/nvidia-smi give them (0x233510DE: device << 16 | vendor) -> "0x2335".

    A bare 16-bit id (sysfs's "0x2335") is kept as is, lower-cased.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip(), 16)  # int() accepts the "0x" prefix with base 16
        except ValueError:
            return None
    if value > 0xFFFF:
        value >>= 16
    return f"0x{value:04x}"
