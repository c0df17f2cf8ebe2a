"""How a host's GPUs are linked, from NVML: NVLink per GPU and per pair, P2P status, PCIe.

Written down as plain values (like `nvml.collect`) so recorded or synthetic topologies replay
without GPUs. ``link_peak_gbps`` turns it into the bandwidth one direction of the slowest GPU's
links allows, which the NCCL check compares the measured bus bandwidth with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from resolver.host.gpustate import clean

NVLINK_MAX_LINKS = 18
# One direction of one NVLink, GB/s, by NVLink version as NVML reports it: NVLink 2 (V100) to 4
# (H100) carry 25 GB/s per link and direction (H100 SXM: 18 links, 450 GB/s each way, 900 both);
# NVLink 5 (B200) 50. Versions NVML numbers differently map to the nearest known one.
NVLINK_GBPS = {2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# One PCIe lane, one direction, GB/s after encoding: gen1 0.25, gen2 0.5, gen3 0.985 (128b/130b),
# gen4 1.969, gen5 3.938, gen6 7.563.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
P2P_STATUS = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by registry key",
    5: "not supported",
    6: "unknown",
}
LEVELS = {
    0: "internal",
    10: "single switch",
    20: "multiple switches",
    30: "host bridge",
    40: "NUMA node",
    50: "system",
}


def _call(m: Any, name: str, *args: Any) -> Any:
    try:
        return getattr(m, name)(*args)
    except Exception:  # NOT_SUPPORTED (no NVLink on this GPU), an old nvidia-ml-py
        return None


def collect(module: Any = None) -> dict[str, Any]:
    """Every GPU's links and every pair's P2P status and common PCIe ancestor."""
    m = module
    if m is None:
        try:
            import pynvml
        except ImportError as exc:
            return {"error": clean(str(exc))}
        m = pynvml
    try:
        m.nvmlInit()
    except Exception as exc:
        return {"error": clean(f"{type(exc).__name__}: {exc}")}
    try:
        handles = [
            _call(m, "nvmlDeviceGetHandleByIndex", i)
            for i in range(_call(m, "nvmlDeviceGetCount") or 0)
        ]
        gpus = [_gpu(m, i, h) for i, h in enumerate(handles) if h is not None]
        pairs = []
        for i, a in enumerate(handles):
            for j in range(i + 1, len(handles)):
                b = handles[j]
                if a is None or b is None:
                    continue
                p2p = _call(
                    m, "nvmlDeviceGetP2PStatus", a, b, getattr(m, "NVML_P2P_CAPS_INDEX_READ", 0)
                )
                level = _call(m, "nvmlDeviceGetTopologyCommonAncestor", a, b)
                pairs.append(
                    {
                        "gpus": [i, j],
                        "p2p": P2P_STATUS.get(p2p, f"status {p2p}")
                        if isinstance(p2p, int)
                        else None,
                        "common_ancestor": LEVELS.get(level) if isinstance(level, int) else None,
                        "nvlinks": _links_between(gpus, i, j),
                    }
                )
        return {"error": None, "gpus": gpus, "pairs": pairs}
    finally:
        with contextlib.suppress(Exception):
            m.nvmlShutdown()


def _gpu(m: Any, index: int, h: Any) -> dict[str, Any]:
    pci = _call(m, "nvmlDeviceGetPciInfo", h)
    links = []
    for link in range(NVLINK_MAX_LINKS):
        state = _call(m, "nvmlDeviceGetNvLinkState", h, link)
        if state is None:
            continue  # no such link on this GPU
        remote = _call(m, "nvmlDeviceGetNvLinkRemotePciInfo_v2", h, link) or _call(
            m, "nvmlDeviceGetNvLinkRemotePciInfo", h, link
        )
        version = _call(m, "nvmlDeviceGetNvLinkVersion", h, link)
        links.append(
            {
                "link": link,
                "active": bool(state),
                "version": version if isinstance(version, int) else None,
                "remote_bus_id": clean(remote.busId) if remote is not None else None,
            }
        )
    return {
        "index": index,
        "name": clean(_call(m, "nvmlDeviceGetName", h)),
        "pci_bus_id": clean(pci.busId) if pci is not None else None,
        "pcie": {
            "gen": _call(m, "nvmlDeviceGetCurrPcieLinkGeneration", h),
            "max_gen": _call(m, "nvmlDeviceGetMaxPcieLinkGeneration", h),
            "width": _call(m, "nvmlDeviceGetCurrPcieLinkWidth", h),
            "max_width": _call(m, "nvmlDeviceGetMaxPcieLinkWidth", h),
        },
        "nvlinks": links,
    }


def _links_between(gpus: list[dict[str, Any]], i: int, j: int) -> int:
    """Active links from GPU i whose far end is GPU j (links to an NVSwitch are not counted)."""
    by_index = {g["index"]: g for g in gpus}
    a, b = by_index.get(i), by_index.get(j)
    if not a or not b or not b.get("pci_bus_id"):
        return 0
    target = str(b["pci_bus_id"]).lower()
    return sum(
        1
        for link in a.get("nvlinks") or []
        if link.get("active") and str(link.get("remote_bus_id") or "").lower() == target
    )


def link_peak_gbps(topology: Mapping[str, Any], indices: list[int]) -> tuple[float | None, str]:
    """One direction of the slowest GPU's links, GB/s, and how it was found.

    With NVLink, each GPU's active links times the per-link rate of their version (a ring uses
    all of them, directly or through NVSwitches); without, its PCIe link at the generation and
    width it could run (the maximum: an idle link trains down to save power).
    """
    gpus = {g["index"]: g for g in topology.get("gpus") or []}
    chosen = [gpus[i] for i in indices if i in gpus]
    if not chosen or len(chosen) != len(indices):
        return None, "the topology does not list every GPU"
    nvlink = []
    for g in chosen:
        active = [lk for lk in g.get("nvlinks") or [] if lk.get("active")]
        rate = NVLINK_GBPS.get(max((lk.get("version") or 0 for lk in active), default=0))
        nvlink.append(len(active) * rate if active and rate else 0.0)
    if all(nvlink):
        low = min(nvlink)
        return low, f"NVLink: {low:g} GB/s each way on the slowest GPU's active links"
    pcie = []
    for g in chosen:
        p = g.get("pcie") or {}
        gen, width = p.get("max_gen") or p.get("gen"), p.get("max_width") or p.get("width")
        if not isinstance(gen, int) or not isinstance(width, int) or gen not in PCIE_LANE_GBPS:
            return None, "the PCIe link of a GPU is unknown"
        pcie.append((PCIE_LANE_GBPS[gen] * width, gen, width))
    low, gen, width = min(pcie)
    return low, f"PCIe gen{gen} x{width}: {low:.1f} GB/s each way"
