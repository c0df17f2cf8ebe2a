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
from collections.abc import Mapping, Sequence
from typing import Any

from resolver.host.topology import link_peak_gbps
from resolver.verify.diagnose import bus_key, shown
from resolver.verify.nccl_run import NcclRun
from resolver.verify.result import FAIL, PASS, SKIP, WARN, CheckResult, Status

ID, TITLE = "multigpu", "NCCL across GPUs"
# Fractions of the link peak below which the all-reduce bus bandwidth warns / fails. Inferred,
# not yet measured here: nccl-tests on healthy NVLink and PCIe hosts report bus bandwidths of
# roughly 0.6-0.9 of one direction of the links; no multi-GPU run has been recorded for gpuresolve.
WARN_BELOW, FAIL_BELOW = 0.4, 0.1


def nvml_indices(probe: Mapping[str, Any] | None, topology: Mapping[str, Any]) -> list[int]:
    """NVML's index of each CUDA device the workers used, matched by PCI bus (else in order)."""
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    by_bus = {bus_key(g.get("pci_bus_id")): g["index"] for g in topology.get("gpus") or []}
    out = [by_bus.get(bus_key(d.get("pci_bus_id"))) for d in devices]
    if all(i is not None for i in out):
        return [int(i) for i in out if i is not None]
    return list(range(len(devices)))


def causes(
    run: NcclRun | None, topology: Mapping[str, Any], indices: Sequence[int], roots: Sequence[str]
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
        if a in chosen and b in chosen and pair.get("p2p") not in (None, "ok"):
            out.append(f"peer-to-peer between GPU {a} and {b}: {pair['p2p']}")
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


def judge(
    run: NcclRun | None,
    topology: Mapping[str, Any] | None,
    probe: Mapping[str, Any] | None,
    visible: int,
) -> tuple[CheckResult, dict[str, Any]]:
    """The check, and `verify --json`'s `nccl_check` (topology, bandwidths, peak, thresholds)."""
    topo = dict(topology or {})
    doc: dict[str, Any] = {
        "visible_gpus": visible,
        "topology": topo or None,
        "run": run.to_json() if run else None,
        "bandwidth": None,
        "peak_gbps": None,
        "peak_basis": None,
        "thresholds": {"warn": WARN_BELOW, "fail": FAIL_BELOW},
    }
    if visible < 2:
        why = "no GPU visible" if visible == 0 else "one GPU visible: nothing to run NCCL across"
        return CheckResult(ID, TITLE, SKIP, why), doc
    roots = ((probe or {}).get("libraries") or {}).get("roots") or []
    indices = nvml_indices(probe, topo)
    seen = causes(run, topo, indices, roots)
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
    rows = (run.ranks[0].data or {}).get("bandwidth") or []
    doc["bandwidth"] = rows
    lines = tuple(
        f"{r['op']} {r['bytes'] / 2**20:g} MiB: bus {r['busbw']:.1f} GB/s (alg {r['algbw']:.1f})"
        for r in rows
    )
    peak, basis = link_peak_gbps(topo, indices) if topo.get("gpus") else (None, "no topology")
    doc.update(peak_gbps=peak, peak_basis=basis)
    ar = [r for r in rows if r.get("op") == "all_reduce"]
    head = f"all-reduce and all-gather exact on {visible} GPUs"
    if not ar or not peak:
        return CheckResult(
            ID, TITLE, PASS, f"{head}; bandwidth not judged ({basis})", None, lines
        ), doc
    top = max(ar, key=lambda r: r["bytes"])
    frac = float(top["busbw"]) / peak
    figure = f"all-reduce bus bandwidth {top['busbw']:.1f} GB/s = {frac:.0%} of {basis}"
    status: Status = FAIL if frac < FAIL_BELOW else WARN if frac < WARN_BELOW else PASS
    if status == PASS:
        return CheckResult(ID, TITLE, PASS, f"{head}; {figure}", None, lines), doc
    reason = f"{seen[0]} ({figure})" if seen else f"{figure} (below {WARN_BELOW:.0%})"
    more = "; ".join(seen[1:3]) if len(seen) > 1 else None
    if not seen:
        more = "no cause seen: check the ACS/IOMMU settings and `nvidia-smi topo -m`"
    return CheckResult(ID, TITLE, status, reason, more, (*lines, *seen[1:])), doc
