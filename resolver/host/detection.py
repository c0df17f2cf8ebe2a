"""Host detection: ask NVML, then nvidia-smi, then the kernel module's files, and merge.

Each probe is a pure parser plus a thin runner (`nvml`, `smi`, `procfs`, `wsl`, `platform`);
`detect` runs them in that order, keeps the first answer to each fact with its source, and turns
what they saw into one state and plain advice. Every outside input can be injected, so tests run
on recorded outputs and never touch the machine. Nothing heavy is imported here: `detect` must be
quick enough for every CLI call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError, shown
from resolver.core.hostprofile import (
    LOST_BUS_UNKNOWN,
    SOURCE_NAME_LOOKUP,
    SOURCE_NVML,
    SOURCE_PROCFS,
    SOURCE_SMI,
    STATE_MISMATCH,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_NOT_APPLICABLE,
    STATE_OK,
    GpuInfo,
    HostProfile,
)
from resolver.core.versions import Driver
from resolver.host import nvml, procfs, smi, wsl
from resolver.host import platform as host_platform
from resolver.host.probe import ProbeResult

__all__ = ["detect"]

LookupCC = Callable[[str], str | None]

_ORDER = (SOURCE_NVML, SOURCE_SMI, SOURCE_PROCFS)
_GPU_FACTS = ("name", "cc", "memory_mib", "pci_device_id", "mig")


def detect(
    *,
    lookup_cc: LookupCC | None = None,
    runner: smi.Runner | None = None,
    root: Path | str = "/",
    nvml_module: Any = None,
    nvml_raw: Mapping[str, Any] | None = None,
    platform_info: host_platform.PlatformInfo | None = None,
    smi_timeout: float = smi.TIMEOUT_S,
) -> HostProfile:
    """Describe this machine's NVIDIA driver and GPUs (or the fake one the arguments build).

    ``lookup_cc`` maps a GPU name to its CC (the database), for probes that give no CC;
    ``runner`` runs nvidia-smi; ``root`` holds /proc, /sys and /dev; ``nvml_module`` stands in
    for pynvml, or ``nvml_raw`` gives recorded NVML answers instead (see `nvml.collect`);
    ``platform_info`` replaces the running interpreter's platform.
    """
    plat = platform_info or host_platform.probe()
    profile = HostProfile(
        platform=plat.platform,
        python=plat.python,
        python_full=plat.python_full,
        glibc=plat.glibc,
    )
    if plat.system == "darwin":
        profile.state = STATE_NOT_APPLICABLE
        profile.messages.append(
            "macOS has no NVIDIA CUDA driver: only CPU (and Apple MPS) builds of PyTorch run here."
        )
        return profile

    base = Path(root)
    wsl_info = wsl.probe(base) if plat.system == "linux" else wsl.WslInfo(None, None, None)
    profile.wsl = wsl_info.version == 2
    if wsl_info.version:
        profile.sources["wsl"] = SOURCE_PROCFS

    results: list[ProbeResult] = []
    raw = (
        nvml_raw
        if nvml_raw is not None
        else nvml.collect(nvml_module, preload=_nvml_preload(wsl_info))
    )
    results.append(nvml.parse(raw))

    if _settled(results, need_complete=True):
        profile.probes[SOURCE_SMI] = "not run: NVML answered"
    else:
        results.append(smi.run(runner, _smi_binaries(wsl_info), smi_timeout))

    if plat.system != "linux" or profile.wsl:
        profile.probes[SOURCE_PROCFS] = "not run: no NVIDIA kernel module files on this OS"
    elif _settled(results, need_complete=False):
        answered = next(r.source for r in results if r.state in (STATE_OK, STATE_NO_GPU))
        profile.probes[SOURCE_PROCFS] = f"not run: {answered} answered"
    else:
        results.append(procfs.read(base))  # CC by name is looked up below, for every probe

    for r in results:
        profile.probes[r.source] = r.status
    _merge(profile, results, lookup_cc)
    profile.messages.extend(_messages(profile, results, wsl_info))
    # Probes in the order they ran, which is the order of trust (stable JSON diffs).
    profile.probes = {k: profile.probes[k] for k in _ORDER if k in profile.probes}
    return profile


def _nvml_preload(info: wsl.WslInfo) -> Sequence[str]:
    return (info.nvml_lib,) if info.nvml_lib else ()


def _smi_binaries(info: wsl.WslInfo) -> Sequence[str]:
    return ("nvidia-smi", info.smi) if info.smi else ("nvidia-smi",)


def _complete(r: ProbeResult) -> bool:
    """An OK answer that leaves nothing for a later probe to add (a lost GPU's bus id)."""
    return bool(
        r.driver
        and r.gpus
        and all(g.name and g.cc for g in r.gpus)
        and all(lost.pci_bus_id != LOST_BUS_UNKNOWN for lost in r.lost)
    )


def _settled(results: Sequence[ProbeResult], *, need_complete: bool) -> bool:
    """Whether a probe so far gave a definite answer (later probes would only add noise)."""
    for r in results:
        if any(lost.pci_bus_id == LOST_BUS_UNKNOWN for lost in r.lost):
            continue  # a GPU lost without its bus id: the next probe may name it
        if r.state == STATE_NO_GPU:
            return True
        if r.state == STATE_OK and (_complete(r) or not need_complete):
            return True
    return False


def _merge(
    profile: HostProfile, results: Sequence[ProbeResult], lookup_cc: LookupCC | None
) -> None:
    """First answer wins, per fact; the GPU list comes from the first probe that listed GPUs."""
    for fact in ("driver", "driver_cuda", "driver_build_branch"):
        for r in results:
            value = getattr(r, fact)
            if value and fact == "driver":
                value = _driver(profile, r, value)
            if value:
                setattr(profile, fact, value)
                profile.sources[fact] = r.sources.get(fact, r.source)
                break

    # The lost GPUs from the first probe that names their buses (nvidia-smi after NVML), else
    # from the first that saw any.
    named = [r for r in results if r.lost and LOST_BUS_UNKNOWN not in _buses(r)]
    lost = next(iter(named), None) or next((r for r in results if r.lost), None)
    if lost is not None:
        profile.lost_gpus = list(lost.lost)
    first = next((r for r in results if r.gpus), None)
    if first is not None and first.gpus:
        profile.gpus = copy.deepcopy(first.gpus)
        for r in results:
            if r is not first and r.gpus:
                _fill(profile.gpus, r.gpus)
    for g in profile.gpus:
        if g.cc is None and g.name and lookup_cc is not None:
            cc = lookup_cc(g.name)
            if cc:
                g.cc, g.sources["cc"] = cc, SOURCE_NAME_LOOKUP

    states = [(r.state, r.source) for r in results if r.state]
    mismatch = next((src for st, src in states if st == STATE_MISMATCH), None)
    no_gpu = next((src for st, src in states if st == STATE_NO_GPU), None)
    if mismatch:
        # CUDA fails as NVML does until the module and libraries match, whatever /proc lists.
        profile.state, profile.sources["state"] = STATE_MISMATCH, mismatch
    elif first is not None:
        profile.state, profile.sources["state"] = STATE_OK, first.source
    elif no_gpu or profile.driver:
        # A driver answered somewhere, yet no GPU is reachable: a container without its GPUs.
        profile.state = STATE_NO_GPU
        profile.sources["state"] = no_gpu or profile.sources.get("driver", SOURCE_PROCFS)
    else:
        profile.state = STATE_NO_DRIVER
        src = next((s for st, s in states if st == STATE_NO_DRIVER), None)
        if src:
            profile.sources["state"] = src


def _buses(r: ProbeResult) -> set[str]:
    return {lost.pci_bus_id for lost in r.lost}


def _driver(profile: HostProfile, r: ProbeResult, value: str) -> str | None:
    """A probe's driver in `Driver`'s one grammar (a lock records it, --check reads it back);
    another answer is said and left for the next probe."""
    try:
        return str(Driver.parse(value))
    except UserError:
        profile.messages.append(f"{r.source} reported the driver as {shown(value)}: ignored")
        return None


def _fill(gpus: list[GpuInfo], later: Sequence[GpuInfo]) -> None:
    """Fill facts a GPU lacks from a later probe's GPU of the same index and (known) name."""
    by_index = {g.index: g for g in later}
    for g in gpus:
        other = by_index.get(g.index)
        if other is None or (g.name and other.name and g.name != other.name):
            continue
        for key in _GPU_FACTS:
            if getattr(g, key) is None and getattr(other, key) is not None:
                setattr(g, key, getattr(other, key))
                g.sources[key] = other.sources.get(key, "")


def _messages(profile: HostProfile, results: Sequence[ProbeResult], info: wsl.WslInfo) -> list[str]:
    """Plain advice for the state found: what it means here and what to do."""
    by_source = {r.source: r for r in results}
    out: list[str] = []
    if profile.lost_gpus and profile.state == STATE_NO_GPU:
        return out  # its GPUs are lost (said by `lost_note`): not "a container without --gpus"
    if profile.state == STATE_OK:
        for g in profile.gpus:
            if g.cc is None:
                out.append(
                    f"GPU {g.index} ({g.name or 'unknown model'}): compute capability unknown "
                    "(not reported, and the name is not in the database): give it with --gpu."
                )
        nvml_r = by_source.get(SOURCE_NVML)
        if nvml_r is not None and nvml_r.status.startswith("not installed"):
            out.append(
                "Read from nvidia-smi. Install nvidia-ml-py (pip install 'gpuresolve[nvml]') "
                "to read the driver's highest CUDA version directly."
            )
        return out
    if profile.state == STATE_MISMATCH:
        lib = None
        smi_r = by_source.get(SOURCE_SMI)
        if smi_r is not None and smi_r.detail:
            lib = smi.nvml_library_version(smi_r.detail)
        module = "the loaded NVIDIA kernel module" + (
            f" ({profile.driver})" if profile.driver else ""
        )
        libs = f"the driver libraries ({lib})" if lib else "the installed driver libraries"
        out.append(
            f"Driver/library version mismatch: {module} differs from {libs}, usually after a "
            "driver update without a reboot. Reboot, or stop every program using the GPU and "
            "reload the nvidia kernel modules (sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset "
            "nvidia; sudo modprobe nvidia), then run this again."
        )
        return out
    if profile.state == STATE_NO_GPU:
        driver = f" ({profile.driver})" if profile.driver else ""
        text = f"An NVIDIA driver{driver} is loaded but no GPU is usable here — "
        if profile.wsl:
            text += "check the GPU in Windows (nvidia-smi there) and update the Windows driver."
        else:
            text += "a container started without --gpus?"
        proc_r = by_source.get(SOURCE_PROCFS)
        if proc_r is not None and proc_r.detail:
            text += f" ({proc_r.detail[0].upper()}{proc_r.detail[1:]}.)"
        out.append(text)
        return out + _timeout_note(by_source)
    # no driver
    if profile.wsl:
        out.append(
            "No NVIDIA driver is visible from WSL2: install or update the NVIDIA driver on "
            "Windows (never a Linux driver inside WSL); its libraries then appear in "
            "/usr/lib/wsl/lib."
        )
    elif info.version == 1:
        out.append(
            "This is WSL1, which has no GPU access: convert the distribution to WSL2 "
            "(wsl --set-version <distro> 2) and install the NVIDIA driver on Windows."
        )
    else:
        kernel = "no nvidia kernel module is loaded and " if SOURCE_PROCFS in by_source else ""
        out.append(
            f"No NVIDIA driver found: {kernel}neither NVML nor nvidia-smi reached a driver. "
            "Install the NVIDIA driver, or describe the target with --driver and --gpu to "
            "resolve for another machine."
        )
    return out + _timeout_note(by_source)


def lost_note(profile: HostProfile) -> str:
    """What a lost GPU means and what to do: the driver lists it, nothing can use it."""
    lost = ", ".join(f"{g.pci_bus_id} ({g.source}: {g.error})" for g in profile.lost_gpus)
    n = len(profile.lost_gpus)
    answer = f"; resolving for the {len(profile.gpus)} that answer" if profile.gpus else ""
    return (
        f"{n} GPU{'s are' if n > 1 else ' is'} lost: {lost}: the driver lists "
        f"{'them' if n > 1 else 'it'} but cannot open {'them' if n > 1 else 'it'} (the kernel "
        f"log, dmesg, says why; a reboot or a reseat brings a GPU back){answer}"
    )


def _timeout_note(by_source: Mapping[str, ProbeResult]) -> list[str]:
    smi_r = by_source.get(SOURCE_SMI)
    if smi_r is not None and smi_r.status == "timed out" and smi_r.detail:
        return [smi_r.detail[0].upper() + smi_r.detail[1:] + "."]
    return []
