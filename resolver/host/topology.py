"""How a host's GPUs are linked, from NVML (and `nvidia-smi` where NVML does not answer).

Written down as plain values (like `nvml.collect`) so recorded or synthetic topologies replay
without GPUs. ``peak`` turns it into the bandwidth one direction of the slowest GPU's links
allows, which the NCCL check compares the measured bus bandwidth with.

On HGX boards every NVLink goes to an NVSwitch, not to the other GPU: the far end's PCI bus id is
``FFFFFFFF:FF:FF.0`` and its device type is a switch, so GPUs sharing the fabric are linked at
each one's active-link count x the generation's per-link rate (recorded on a 2 x H200 host,
2026-11-26). NVML numbers NVLink generations as an enum (``NVML_NVLINK_VERSION_4_0`` = 6), read
here from nvidia-ml-py's own constants; a value it does not define reads as unknown.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from resolver.host import topo_smi
from resolver.host.gpustate import clean

NVLINK_MAX_LINKS = 18
# nvidia-ml-py's NVML_NVLINK_VERSION_* enum (nvml.h: 1 = 1.0 ... 8 = 6.0); tests check this table
# against the installed nvidia-ml-py's constants, and `collect` reads them from it when present.
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
# One direction of one NVLink, GB/s, by generation, from NVIDIA's datasheets (total both ways /
# links / 2): P100 160 GB/s over 4 links (1.0: 20); V100 300 over 6 (2.0: 25); A100 600 over 12
# (3.0: 25); H100/H200 SXM 900 over 18 (4.0: 25); B200 1800 over 18 (5.0: 50). 2.2, 3.1 and 6.0
# have no published per-link figure here: their peak is unknown, never guessed.
NVLINK_GBPS = {"1.0": 20.0, "2.0": 25.0, "3.0": 25.0, "4.0": 25.0, "5.0": 50.0}
# NVML_NVLINK_DEVICE_TYPE_*: what a link's far end is.
REMOTE_TYPES = {0: "gpu", 1: "bridge", 2: "switch", 255: "unknown"}
SWITCH_BUS = "ffffffff:ff:ff.0"  # the remote bus id NVML gives for an NVSwitch port (recorded)
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


def version_table(module: Any) -> dict[int, str]:
    """nvidia-ml-py's NVML_NVLINK_VERSION_X_Y constants as {value: "X.Y"} (ours if it has none)."""
    found = {
        v: name[len("NVML_NVLINK_VERSION_") :].replace("_", ".")
        for name in dir(module)
        if re.fullmatch(r"NVML_NVLINK_VERSION_[0-9]+_[0-9]+", name)
        and isinstance(v := getattr(module, name), int)
    }
    return found or dict(NVLINK_VERSIONS)


def _p2p(m: Any, a: Any, b: Any, index_name: str, default: int) -> str | None:
    index = getattr(m, index_name, default)
    if isinstance(index, tuple):  # nvidia-ml-py defines NVML_P2P_CAPS_INDEX_READ as (0,)
        index = index[0]
    status = _call(m, "nvmlDeviceGetP2PStatus", a, b, index)
    return P2P_STATUS.get(status, f"status {status}") if isinstance(status, int) else None


def collect(module: Any = None, smi: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Every GPU's links and every pair's P2P status (read and over NVLink) and PCIe ancestor;
    where NVML leaves a pair's P2P or a link's generation unanswered, `nvidia-smi`'s reports."""
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
        versions = version_table(m)
        handles = [
            _call(m, "nvmlDeviceGetHandleByIndex", i)
            for i in range(_call(m, "nvmlDeviceGetCount") or 0)
        ]
        gpus = [_gpu(m, i, h, versions) for i, h in enumerate(handles) if h is not None]
        pairs = []
        for i, a in enumerate(handles):
            for j in range(i + 1, len(handles)):
                b = handles[j]
                if a is None or b is None:
                    continue
                level = _call(m, "nvmlDeviceGetTopologyCommonAncestor", a, b)
                pairs.append(
                    {
                        "gpus": [i, j],
                        "p2p": _p2p(m, a, b, "NVML_P2P_CAPS_INDEX_READ", 0),
                        "p2p_nvlink": _p2p(m, a, b, "NVML_P2P_CAPS_INDEX_NVLINK", 2),
                        "common_ancestor": LEVELS.get(level) if isinstance(level, int) else None,
                        "nvlinks": _links_between(gpus, i, j),
                    }
                )
    finally:
        with contextlib.suppress(Exception):
            m.nvmlShutdown()
    topo: dict[str, Any] = {"error": None, "gpus": gpus, "pairs": pairs, "smi": None}
    if needs_smi(topo):
        topo["smi"] = (smi or topo_smi.collect)()
    return topo


def needs_smi(topo: Mapping[str, Any]) -> bool:
    """NVML left a pair's P2P status or an active link's generation unanswered."""
    pairs = topo.get("pairs") or []
    if any(p.get("p2p") is None and p.get("p2p_nvlink") is None for p in pairs):
        return True
    return any(
        lk.get("active") and not link_generation(lk)
        for g in topo.get("gpus") or []
        for lk in g.get("nvlinks") or []
    )


def _gpu(m: Any, index: int, h: Any, versions: Mapping[int, str]) -> dict[str, Any]:
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
        kind = _call(m, "nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
        links.append(
            {
                "link": link,
                "active": bool(state),
                "version": version if isinstance(version, int) else None,
                "generation": versions.get(version) if isinstance(version, int) else None,
                "remote_bus_id": clean(remote.busId) if remote is not None else None,
                "remote_type": REMOTE_TYPES.get(kind, "unknown") if isinstance(kind, int) else None,
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


def link_generation(link: Mapping[str, Any]) -> str | None:
    """ "4.0" for a link NVML numbered 6; an older record's bare enum value reads the same."""
    gen = link.get("generation")
    if isinstance(gen, str):
        return gen
    version = link.get("version")
    return NVLINK_VERSIONS.get(version) if isinstance(version, int) else None


def to_switch(link: Mapping[str, Any]) -> bool:
    """The link's far end is an NVSwitch (by device type, else by its placeholder bus id)."""
    if link.get("remote_type") == "switch":
        return True
    return str(link.get("remote_bus_id") or "").lower() == SWITCH_BUS


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


def _active(g: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [lk for lk in g.get("nvlinks") or [] if lk.get("active")]


def _smi_cell(topo: Mapping[str, Any], a: int, b: int) -> str | None:
    pairs = ((topo.get("smi") or {}).get("topo") or {}).get("pairs") or {}
    cell = pairs.get(f"{min(a, b)}-{max(a, b)}")
    return str(cell) if cell else None


def _pair(topo: Mapping[str, Any], a: int, b: int) -> Mapping[str, Any]:
    want = sorted([a, b])
    found = (p for p in topo.get("pairs") or [] if sorted(p.get("gpus") or []) == want)
    return next(found, {})


def pair_fabric(topo: Mapping[str, Any], a: int, b: int) -> str:
    """How GPUs a and b reach each other: "nvswitch", "nvlink" (direct) or "pcie"."""
    gpus = {g["index"]: g for g in topo.get("gpus") or []}
    ga, gb = gpus.get(a) or {}, gpus.get(b) or {}
    pair = _pair(topo, a, b)
    if pair.get("nvlinks"):
        return "nvlink"
    if any(to_switch(lk) for lk in _active(ga)) and any(to_switch(lk) for lk in _active(gb)):
        return "nvswitch"
    if topo_smi.nv_links(_smi_cell(topo, a, b)):
        # `topo -m` says NV#: through NVSwitches when NVML saw no link to the other GPU
        return "nvswitch" if _active(ga) and not pair.get("nvlinks") else "nvlink"
    return "pcie"


def pair_p2p(topo: Mapping[str, Any], a: int, b: int) -> str | None:
    """P2P between a and b: NVML's NVLink answer, else its read answer; None: not answered."""
    pair = _pair(topo, a, b)
    nvlink, read = pair.get("p2p_nvlink"), pair.get("p2p")
    if nvlink == "ok" or read == "ok":
        return "ok"
    return nvlink or read


def _smi_active(topo: Mapping[str, Any], index: int) -> int | None:
    for g in ((topo.get("smi") or {}).get("nvlink") or {}).get("gpus") or []:
        if g.get("index") == index:
            return sum(1 for lk in g.get("links") or [] if lk.get("active"))
    return None


def peak(topology: Mapping[str, Any], indices: Sequence[int]) -> dict[str, Any]:
    """One direction of the slowest GPU's links: ``{source, links, per_link_gbps, gbps, basis}``
    (``gbps`` None with the reason in ``basis`` when it cannot be known).

    With every pair on NVLink (direct or through NVSwitches), each GPU's active links times the
    per-link rate of their generation (a ring uses all of them); otherwise the PCIe link at the
    generation and width it could run (the maximum: an idle link trains down to save power).
    """
    gpus = {g["index"]: g for g in topology.get("gpus") or []}
    chosen = [gpus[i] for i in indices if i in gpus]
    unknown = {"source": None, "links": None, "per_link_gbps": None, "gbps": None}
    if not chosen or len(chosen) != len(indices):
        return {**unknown, "basis": "the topology does not list every GPU"}
    fabrics = {pair_fabric(topology, a, b) for n, a in enumerate(indices) for b in indices[n + 1 :]}
    if fabrics and "pcie" not in fabrics:
        best: tuple[float, int, float, str] | None = None
        for g in chosen:
            active = _active(g)
            count = len(active) or _smi_active(topology, g["index"]) or 0
            gen = _gen_of(g)
            rate = NVLINK_GBPS.get(gen or "")
            if not count or rate is None:
                what = f"NVLink {gen}" if gen else "an unknown NVLink generation"
                return {**unknown, "source": "nvlink", "basis": f"GPU {g['index']}: {what}"}
            if best is None or count * rate < best[0]:
                best = (count * rate, count, rate, gen or "?")
        assert best is not None
        gbps, count, rate, generation = best
        fabric = "NVSwitch" if "nvswitch" in fabrics else "NVLink"
        return {
            "source": "nvlink",
            "links": count,
            "per_link_gbps": rate,
            "gbps": gbps,
            "basis": (
                f"{fabric}: {count} x NVLink {generation} x {rate:g} GB/s = {gbps:g} GB/s each way"
            ),
        }
    return _pcie_peak(chosen, unknown)


def _pcie_peak(chosen: Sequence[Mapping[str, Any]], unknown: dict[str, Any]) -> dict[str, Any]:
    pcie: list[tuple[float, int, int]] = []
    for g in chosen:
        p = g.get("pcie") or {}
        pgen, width = p.get("max_gen") or p.get("gen"), p.get("max_width") or p.get("width")
        if not isinstance(pgen, int) or not isinstance(width, int) or pgen not in PCIE_LANE_GBPS:
            return {**unknown, "source": "pcie", "basis": "the PCIe link of a GPU is unknown"}
        pcie.append((PCIE_LANE_GBPS[pgen] * width, pgen, width))
    low, pgen, width = min(pcie)
    return {
        "source": "pcie",
        "links": width,
        "per_link_gbps": PCIE_LANE_GBPS[pgen],
        "gbps": low,
        "basis": f"PCIe gen{pgen} x{width}: {low:.1f} GB/s each way",
    }


def link_peak_gbps(topology: Mapping[str, Any], indices: list[int]) -> tuple[float | None, str]:
    """``peak``'s GB/s and the sentence saying how it was found."""
    p = peak(topology, indices)
    return p["gbps"], p["basis"]


def short_name(name: Any) -> str:
    return re.sub(r"^NVIDIA\s+", "", str(name or "unknown GPU"))


def summary(topology: Mapping[str, Any], indices: Sequence[int] | None = None) -> str | None:
    """One line: "2 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok"; None without GPUs."""
    gpus = [g for g in topology.get("gpus") or [] if indices is None or g["index"] in indices]
    if not gpus:
        return None
    names: dict[str, int] = {}
    for g in gpus:
        names[short_name(g.get("name"))] = names.get(short_name(g.get("name")), 0) + 1
    parts = [" + ".join(f"{n} × {name}" for name, n in names.items())]
    idx = [g["index"] for g in gpus]
    fabrics = {pair_fabric(topology, a, b) for n, a in enumerate(idx) for b in idx[n + 1 :]}
    if len(gpus) == 1 or fabrics == {"pcie"}:
        p = peak(topology, idx)
        parts.append(p["basis"].split(":")[0] if p["source"] == "pcie" else "PCIe")
    else:
        parts.append("NVSwitch" if "nvswitch" in fabrics else "NVLink")
        counts = {(len(_active(g)), _gen_of(g)) for g in gpus}
        if len(counts) == 1:
            count, gen = counts.pop()
            parts.append(f"{count} × NVLink {gen or '(generation unknown)'} each")
        else:
            each = ", ".join(f"GPU {g['index']} {len(_active(g))}" for g in gpus)
            parts.append(f"active links differ: {each}")
        if "pcie" in fabrics:
            parts.append("some pairs on PCIe only")
    if len(gpus) > 1:
        states = {pair_p2p(topology, a, b) for n, a in enumerate(idx) for b in idx[n + 1 :]}
        if states == {"ok"}:
            parts.append("P2P ok")
        elif None in states and len(states) == 1:
            parts.append("P2P not reported")
        else:
            bad = sorted(str(s) for s in states if s not in ("ok", None))
            parts.append("P2P " + ", ".join(bad or ["partly reported"]))
    return ", ".join(parts)


def _gen_of(g: Mapping[str, Any]) -> str | None:
    gens = [gen for lk in _active(g) if (gen := link_generation(lk))]
    return max(gens, key=lambda v: tuple(int(x) for x in v.split(".") if x.isdigit()), default=None)
