"""The NCCL check across a host's GPUs: exact collectives, bus bandwidth against the links.

Pure functions of what `nccl_run` gave back, the NVML topology (`host.topology`) and the probe.
A run that hung or crashed is a FAIL naming the rank, the stage and the timeout; a wrong sum or
gather is a FAIL; the all-reduce bus bandwidth at the largest size is judged against what the
links allow one way (NVLink version x active links, else PCIe generation x width), naming the
cause it can see when it is low: NCCL_P2P_DISABLE / NCCL_SHM_DISABLE / NCCL_P2P_LEVEL set, P2P
not supported between a pair, an NVLink down, a libnccl from outside the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from resolver.host.topology import pair_p2p, peak
from resolver.host.topology import summary as topology_summary
from resolver.verify.diagnose import bus_key, shown
from resolver.verify.nccl_run import NcclRun
from resolver.verify.result import FAIL, PASS, SKIP, WARN, CheckResult, Status

ID, TITLE = "multigpu", "NCCL across GPUs"
# Fractions of the link peak (one direction, `host.topology.peak`) below which the all-reduce bus
# bandwidth at the largest size warns / fails, separately for NVLink/NVSwitch and PCIe, each from
# recorded runs (tests/fixtures/verify/h200x2_multigpu/README.md):
# - NVLink/NVSwitch: nvidia-h200-x2 (2 x H200, NVSwitch, 18 x NVLink 4.0, peak 450 GB/s each way),
#   2026-11-26, all-reduce bus bandwidth at 1 GiB: healthy 327.1-330.0 GB/s in five runs (73%; a
#   plain torch.distributed all-reduce 329.2); NCCL_P2P_DISABLE=1 26.9 and 27.3 GB/s (6%); a bf16
#   matmul loop on GPU 1 151.8 and 153.5 GB/s (34%). Warn below 50% (healthy is 1.45x above it, the
#   loaded GPU below it); fail below 20% (P2P disabled is 3x below it, the loaded GPU 1.7x above).
NVLINK_WARN, NVLINK_FAIL = 0.5, 0.2
# - PCIe: no PCIe-only pair was lent. The only PCIe-bound figure measured is the host-memory path
#   of the same H200 pair with NCCL_P2P_DISABLE=1: 26.9-27.4 GB/s = 43% of PCIe gen5 x16 (63.0
#   GB/s); a healthy peer-to-peer PCIe pair should beat that, so it warns below 40% and fails below
#   10%. Inferred from that one figure, not from a PCIe pair: replace when one is recorded.
PCIE_WARN, PCIE_FAIL = 0.4, 0.1
# What healthy reached, as a fraction of the peak, to say how far a low figure fell (the runs
# above: 327.1-330.0 of 450 GB/s at 1 GiB); none measured on PCIe.
HEALTHY = {"nvlink": 0.73, "pcie": None}
BUSY_PCT = 10  # utilisation before the check that says someone else was computing
THRESHOLDS = {"nvlink": (NVLINK_WARN, NVLINK_FAIL), "pcie": (PCIE_WARN, PCIE_FAIL)}
WARN_BELOW, FAIL_BELOW = NVLINK_WARN, NVLINK_FAIL  # the names earlier code imported


def nvml_indices(probe: Mapping[str, Any] | None, topology: Mapping[str, Any]) -> list[int]:
    """NVML's index of each CUDA device the workers used, matched by PCI bus (else in order)."""
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    by_bus = {bus_key(g.get("pci_bus_id")): g["index"] for g in topology.get("gpus") or []}
    out = [by_bus.get(bus_key(d.get("pci_bus_id"))) for d in devices]
    if all(i is not None for i in out):
        return [int(i) for i in out if i is not None]
    return list(range(len(devices)))


def causes(
    run: NcclRun | None,
    topology: Mapping[str, Any],
    indices: Sequence[int],
    roots: Sequence[str],
    state: Mapping[str, Any] | None = None,
) -> list[str]:
    """What was seen that slows NCCL down, most certain first."""
    env: dict[str, Any] = {}
    libs: list[str] = []
    for r in run.ranks if run else []:
        env.update((r.data or {}).get("env") or {})
        libs += [p for p in (r.data or {}).get("libraries") or [] if p not in libs]
    out: list[str] = []
    for var, what in (
        ("NCCL_P2P_DISABLE", "GPUs exchange through host memory instead of peer-to-peer"),
        ("NCCL_SHM_DISABLE", "no shared-memory path between the processes either"),
        ("NCCL_P2P_LEVEL", "peer-to-peer is limited to closer GPUs"),
        ("NCCL_ALGO", "NCCL's algorithm is forced"),
        ("NCCL_PROTO", "NCCL's protocol is forced"),
    ):
        value = env.get(var)
        if value and (var not in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE") or value != "0"):
            out.append(f"{var}={shown(value)} is set: {what}")
    chosen = set(indices)
    for pair in topology.get("pairs") or []:
        a, b = pair.get("gpus") or [None, None]
        p2p = pair_p2p(topology, a, b) if a in chosen and b in chosen else None
        if p2p not in (None, "ok"):
            out.append(f"peer-to-peer between GPU {a} and {b}: {p2p}")
    for g in topology.get("gpus") or []:
        if g.get("index") not in chosen:
            continue
        links = g.get("nvlinks") or []
        down = [lk["link"] for lk in links if not lk.get("active")]
        if links and down:
            out.append(
                f"GPU {g['index']}: NVLink {', '.join(map(str, down[:6]))} down "
                f"({len(links) - len(down)} of {len(links)} active)"
            )
        p = g.get("pcie") or {}
        width, top = p.get("width"), p.get("max_width")
        if isinstance(width, int) and isinstance(top, int) and width < top:
            out.append(f"GPU {g['index']}: PCIe x{p['width']} of x{p['max_width']}")
    out += _busy(state, chosen)
    real_roots = [os.path.realpath(r) for r in roots]
    for path in libs:
        real = os.path.realpath(path)
        if real_roots and not any(real.startswith(r.rstrip("/") + "/") for r in real_roots):
            out.append(f"libnccl from outside the environment: {shown(path)}")
    if env.get("NCCL_IB_DISABLE"):
        out.append(
            f"NCCL_IB_DISABLE={shown(env['NCCL_IB_DISABLE'])} is set (no effect inside one host)"
        )
    return out


def _busy(state: Mapping[str, Any] | None, chosen: set[int]) -> list[str]:
    """GPUs another process was computing on before the check (NVML's snapshot, `gpustate`)."""
    out = []
    for g in (state or {}).get("gpus") or []:
        if g.get("index") not in chosen:
            continue
        procs = g.get("processes") or []
        util = (g.get("utilization") or {}).get("gpu")
        bus = f" ({shown(g['pci_bus_id'])})" if g.get("pci_bus_id") else ""
        if procs:
            who = ", ".join(
                f"pid {p.get('pid')} ({shown(p.get('name') or '?')})" for p in procs[:3]
            )
            busy = f", {util}% busy" if isinstance(util, int) else ""
            out.append(f"GPU {g['index']}{bus}: another process uses it: {who}{busy}")
        elif isinstance(util, int) and util >= BUSY_PCT:
            out.append(f"GPU {g['index']}{bus} was {util}% busy before the check (no process seen)")
    return out


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**30:g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:g} MiB"


def mig_slices(probe: Mapping[str, Any] | None) -> list[str]:
    """The CUDA devices that are MIG slices (NCCL does not run across MIG instances)."""
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    return [
        f"GPU {d.get('index')} ({shown(d.get('name'))})"
        for d in devices
        if re.search(r"\bMIG\b", str(d.get("name") or ""))
    ]


def judge(
    run: NcclRun | None,
    topology: Mapping[str, Any] | None,
    probe: Mapping[str, Any] | None,
    visible: int,
    state: Mapping[str, Any] | None = None,
) -> tuple[CheckResult, dict[str, Any]]:
    """The check, and `verify --json`'s `nccl_check` (topology, bandwidths, peak, thresholds);
    ``state`` is NVML's snapshot before the probe (`host.gpustate`), for busy GPUs."""
    topo = dict(topology or {})
    doc: dict[str, Any] = {
        "visible_gpus": visible,
        "topology": topo or None,
        "run": run.to_json() if run else None,
        "bandwidth": None,
        "peak_gbps": None,
        "peak_basis": None,
        "thresholds": {"warn": WARN_BELOW, "fail": FAIL_BELOW},
        "peak": None,
        "summary": None,
        "gpus": None,
    }
    if visible < 2:
        why = "no GPU visible" if visible == 0 else "one GPU visible: nothing to run NCCL across"
        return CheckResult(ID, TITLE, SKIP, why), doc
    mig = mig_slices(probe)
    if mig:
        why = f"{', '.join(mig[:4])}: MIG slices, and NCCL does not run across MIG instances"
        return CheckResult(ID, TITLE, SKIP, why), doc
    roots = ((probe or {}).get("libraries") or {}).get("roots") or []
    indices = nvml_indices(probe, topo)
    doc["gpus"] = _named(probe, topo, indices)
    seen = causes(run, topo, indices, roots, state)
    failure = run.failure if run else "NCCL was not run"
    if failure:
        fix = "every worker was ended; rerun with NCCL_DEBUG=INFO to see where it stopped"
        return CheckResult(ID, TITLE, FAIL, failure, fix, tuple(seen)), doc
    assert run is not None
    wrong = [
        f"rank {r.rank}: {op} result wrong"
        for r in run.ranks
        for op in ("all_reduce", "all_gather")
        if not (r.data or {}).get(f"{op}_ok")
    ]
    if wrong:
        return CheckResult(ID, TITLE, FAIL, "; ".join(wrong[:2]), "see details", tuple(seen)), doc
    first = run.ranks[0].data or {}
    rows = first.get("bandwidth") or []
    doc["bandwidth"] = rows
    lines = [
        f"{r['op']} {_size(r['bytes'])}: bus {r['busbw']:.1f} GB/s (alg {r['algbw']:.1f})"
        for r in rows
    ]
    skipped = first.get("sizes_skipped") or []
    if skipped:
        free = first.get("free_bytes_min")
        lines.append(
            f"not measured: {', '.join(_size(s) for s in skipped)} (the emptiest GPU has "
            f"{_size(free) if isinstance(free, (int, float)) else '?'} free)"
        )
    summary = topology_summary(topo, indices)
    doc["summary"] = summary
    if summary:
        lines.insert(0, f"topology: {summary}")
    p = peak(topo, indices) if topo.get("gpus") else None
    basis = p["basis"] if p else "no topology"
    peak_gbps = p["gbps"] if p else None
    doc.update(peak_gbps=peak_gbps, peak_basis=basis)
    if p:
        doc["peak"] = {k: p[k] for k in ("source", "links", "per_link_gbps", "gbps")}
    warn, fail = THRESHOLDS.get(str((p or {}).get("source")), (WARN_BELOW, FAIL_BELOW))
    doc["thresholds"] = {"warn": warn, "fail": fail, "source": (p or {}).get("source")}
    ar = [r for r in rows if r.get("op") == "all_reduce"]
    head = f"all-reduce and all-gather exact on {visible} GPUs"
    if not ar or not peak_gbps:
        return CheckResult(
            ID, TITLE, PASS, f"{head}; bandwidth not judged ({basis})", None, tuple(lines)
        ), doc
    top = max(ar, key=lambda r: r["bytes"])
    frac = float(top["busbw"]) / peak_gbps
    figure = (
        f"all-reduce bus bandwidth {top['busbw']:.1f} GB/s at {_size(top['bytes'])} = {frac:.0%} "
        f"of {basis}"
    )
    status: Status = FAIL if frac < fail else WARN if frac < warn else PASS
    if status == PASS:
        return CheckResult(ID, TITLE, PASS, f"{head}; {figure}", None, tuple(lines)), doc
    healthy = HEALTHY.get(str(p["source"])) if p else None
    if healthy and frac > 0:
        figure += f", {healthy / frac:.1f}x below the {healthy:.0%} a healthy host reached"
    limit = fail if status == FAIL else warn
    reason = f"{seen[0]} ({figure})" if seen else f"{figure} (below {limit:.0%})"
    more = "; ".join(seen[1:3]) if len(seen) > 1 else None
    if seen and re.match(r"NCCL_[A-Z0-9_]+=", seen[0]):
        var = seen[0].split("=", 1)[0]
        more = f"unset {var} unless a known driver or platform bug needs it" + (
            f"; also: {more}" if more else ""
        )
    elif seen and "another process" in seen[0]:
        more = "stop it, or run on idle GPUs" + (f"; also: {more}" if more else "")
    if not seen:
        more = "no cause seen: check the ACS/IOMMU settings and `nvidia-smi topo -m`"
    return CheckResult(ID, TITLE, status, reason, more, (*lines, *seen[1:])), doc


def _named(
    probe: Mapping[str, Any] | None, topo: Mapping[str, Any], indices: Sequence[int]
) -> list[dict[str, Any]]:
    """Each CUDA device with NVML's index and PCI bus id beside it (the two orders can differ)."""
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    by_index = {g["index"]: g for g in topo.get("gpus") or []}
    out = []
    for d, nv in zip(devices, indices, strict=False):
        g = by_index.get(nv) or {}
        out.append(
            {
                "cuda_index": d.get("index"),
                "nvml_index": nv,
                "pci_bus_id": g.get("pci_bus_id") or d.get("pci_bus_id"),
                "name": d.get("name") or g.get("name"),
            }
        )
    return out
