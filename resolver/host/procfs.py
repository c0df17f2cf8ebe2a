"""Kernel-module probe: /sys/module/nvidia, /proc/driver/nvidia and /sys/bus/pci.

The last resort, with no NVIDIA user-space at all (a container given the GPU but not NVML or
nvidia-smi). It gives the *loaded kernel module's* version and the GPU models; the CC comes from
the caller's name lookup. /proc lists the host's GPUs even inside a container that was given none,
so a GPU counts as usable only when its device file /dev/nvidia<minor> exists here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from resolver.core.hostprofile import (
    SOURCE_NAME_LOOKUP,
    SOURCE_PROCFS,
    SOURCE_SYSFS,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_OK,
    GpuInfo,
)
from resolver.host.probe import ProbeResult, gpu, pci_device_hex

SYS_VERSION = "sys/module/nvidia/version"
PROC_VERSION = "proc/driver/nvidia/version"
PROC_GPUS = "proc/driver/nvidia/gpus"
SYS_PCI = "sys/bus/pci/devices"

_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)+$")
_NVRM_RE = re.compile(r"(?:^|\s)([0-9]+\.[0-9]+(?:\.[0-9]+)*)(?=\s|$)")


def parse_sys_version(text: str | None) -> str | None:
    """/sys/module/nvidia/version: the bare version, "580.159.04\\n"."""
    v = (text or "").strip()
    return v if _VERSION_RE.match(v) else None


def parse_proc_version(text: str | None) -> str | None:
    """The version in /proc/driver/nvidia/version's NVRM line, open or proprietary module.

    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..." or
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ...": the first dotted
    number (the GCC line below it is not read).
    """
    for line in (text or "").splitlines():
        if line.startswith("NVRM version:"):
            m = _NVRM_RE.search(line.removeprefix("NVRM version:"))
            return m.group(1) if m else None
    return None


def parse_information(text: str) -> dict[str, str]:
    """A GPU's `information` file: "Key: \\t value" lines, split at the first ':'."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


@dataclass(frozen=True)
class ProcGpu:
    """One GPU as the kernel module lists it."""

    bus: str  # "0000:00:06.0"
    model: str | None
    minor: int | None
    excluded: bool


def proc_gpu(bus: str, info: Mapping[str, str]) -> ProcGpu:
    minor = info.get("Device Minor", "")
    return ProcGpu(
        bus=info.get("Bus Location") or bus,
        model=info.get("Model") or None,
        minor=int(minor) if minor.isascii() and minor.isdigit() else None,
        excluded=info.get("GPU Excluded", "No").lower() == "yes",
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def read(
    root: Path | str = "/", lookup_cc: Callable[[str], str | None] | None = None
) -> ProbeResult:
    """Read the kernel module's files under ``root`` (a fake root in tests)."""
    base = Path(root)
    result = ProbeResult(source=SOURCE_PROCFS)
    sys_v = parse_sys_version(_read(base / SYS_VERSION))
    proc_v = parse_proc_version(_read(base / PROC_VERSION))
    if sys_v:
        result.driver, result.sources["driver"] = sys_v, SOURCE_SYSFS
    elif proc_v:
        result.driver, result.sources["driver"] = proc_v, SOURCE_PROCFS

    listed: list[ProcGpu] = []
    gpus_dir = base / PROC_GPUS
    if gpus_dir.is_dir():
        for entry in sorted(gpus_dir.iterdir(), key=lambda p: p.name):
            text = _read(entry / "information")
            if text is not None:
                listed.append(proc_gpu(entry.name, parse_information(text)))

    if result.driver is None and not listed:
        result.state = STATE_NO_DRIVER
        result.status = "no nvidia kernel module (no /sys/module/nvidia, no /proc/driver/nvidia)"
        return result

    usable = [
        g
        for g in listed
        if not g.excluded and g.minor is not None and (base / "dev" / f"nvidia{g.minor}").exists()
    ]
    result.gpus = [_gpu_info(i, g, base, lookup_cc) for i, g in enumerate(usable)]
    result.state = STATE_OK if result.gpus else STATE_NO_GPU
    hidden = [g for g in listed if g not in usable and not g.excluded]
    excluded = len([g for g in listed if g.excluded])
    result.status = f"ok: {len(usable)} of {len(listed)} listed GPUs have a device file here"
    notes = [_hidden_detail(hidden, more=bool(usable))] if hidden else []
    if excluded:
        notes.append(f"{excluded} GPU{'s are' if excluded > 1 else ' is'} excluded by the driver")
    result.detail = "; ".join(notes) or None
    return result


def _hidden_detail(hidden: list[ProcGpu], *, more: bool) -> str:
    """Why listed GPUs are unusable here: their device files are missing (a container)."""
    one = len(hidden) == 1
    names = ", ".join(sorted({g.model or "unknown model" for g in hidden}))
    files = ", ".join(f"/dev/nvidia{g.minor}" for g in hidden if g.minor is not None) or "unknown"
    return (
        f"the kernel module lists {len(hidden)}{' more' if more else ''} GPU{'' if one else 's'} "
        f"({names}), but {'its device file' if one else 'their device files'} {files} "
        f"{'is' if one else 'are'} not here"
    )


def _gpu_info(
    index: int, g: ProcGpu, base: Path, lookup_cc: Callable[[str], str | None] | None
) -> GpuInfo:
    info = gpu(index, SOURCE_PROCFS, name=g.model)
    pci = pci_device_hex(_read(base / SYS_PCI / g.bus / "device"))
    if pci:
        info.pci_device_id, info.sources["pci_device_id"] = pci, SOURCE_SYSFS
    if lookup_cc and g.model:
        cc = lookup_cc(g.model)
        if cc:
            info.cc, info.sources["cc"] = cc, SOURCE_NAME_LOOKUP
    return info
