"""`verify --benchmark` on every GPU of a node: each judged against its peak and its peers.

The probe measures each visible GPU in turn (`standalone/probe.py`); each is judged like one GPU
(`verify.speed`). A slow GPU among its peers is the classic node fault (low clocks, a hot card,
another job on one card), so a GPU is also named when it is below ``PEER_BELOW`` of the fastest
GPU of its model AND below ``PEAK_BELOW`` of its datasheet peak: with two GPUs a median decides
nothing, and the second condition keeps a fast node's normal spread from being called a fault.
The node's verdict is its worst GPU's. `benchmark.gpus` in `verify --json` is `gpus_json`'s list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resolver.verify import diagnose, speed
from resolver.verify.diagnose import gpu_state
from resolver.verify.result import FAIL, PASS, SKIP, WARN, CheckResult, Status

# P and Q, from nvidia-h200-x2 (2 x H200), 2026-11-26 (tests/fixtures/verify/h200x2_multigpu/):
# two healthy runs put the slower GPU at 99.4% and 98.8% of the faster (total time of the judged
# cases) and each GPU's slowest case at 63-72% of its datasheet peak; with a bf16 matmul loop on
# GPU 1 alone, GPU 1 ran at 42% of GPU 0 and 28.9% of its peak. P = 90% leaves 8x the healthy
# spread; Q = 55% sits below every healthy GPU's 63%. Both must hold to name a GPU.
PEER_BELOW = 0.9
PEAK_BELOW = 0.55
CAUSE_KINDS = ("clocks", "other_process", "temperature", "power", "pcie_link")
_RANK = {PASS: 0, SKIP: 0, WARN: 1, FAIL: 2}


def _judged(annotated: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        case: row
        for case in speed.CASES
        if isinstance(row := annotated.get(case), dict) and row.get("judged") and row.get("ms")
    }


def relative_speeds(annotated: Sequence[Mapping[str, Any]], models: Sequence[str]) -> list[float]:
    """Each GPU's speed as a fraction of the fastest GPU of its model: the fastest one's total
    time over the judged cases both ran, divided by this one's (1.0 for the fastest)."""
    out = []
    for i, a in enumerate(annotated):
        mine = _judged(a)
        best = 1.0
        for j, b in enumerate(annotated):
            if j == i or models[j] != models[i]:
                continue
            theirs = _judged(b)
            common = [c for c in mine if c in theirs]
            if not common:
                continue
            ratio = sum(float(theirs[c]["ms"]) for c in common) / sum(
                float(mine[c]["ms"]) for c in common
            )
            best = min(best, ratio)
        out.append(round(best, 3))
    return out


def _worst(annotated: Mapping[str, Any]) -> tuple[str | None, float | None]:
    rows = [(c, float(r["fraction"])) for c, r in _judged(annotated).items() if r.get("fraction")]
    return min(rows, key=lambda cr: cr[1]) if rows else (None, None)


def _pcie_cause(snap: Mapping[str, Any] | None) -> diagnose.Cause | None:
    p = (snap or {}).get("pcie") or {}
    width, top = p.get("width"), p.get("max_width")
    if isinstance(width, int) and isinstance(top, int) and width < top:
        return diagnose.Cause(
            diagnose.ALL,
            f"its PCIe link runs at x{width} of x{top}",
            "reseat the card or check the slot (nvidia-smi -q -d PCIE)",
            "pcie_link",
        )
    return None


def _clock_cause(
    busy: Mapping[str, Any] | None, peers: Sequence[Mapping[str, Any] | None]
) -> diagnose.Cause | None:
    """Its SM clock while busy stayed well below its peers' (no reason NVML named)."""
    low = (busy or {}).get("sm_mhz_max")
    best = max(((p or {}).get("sm_mhz_max") or 0 for p in peers), default=0)
    if isinstance(low, (int, float)) and best and low < 0.9 * best:
        return diagnose.Cause(
            diagnose.ALL,
            f"its SM clock reached {low:g} MHz while its peers reached {best:g}",
            "nvidia-smi -q -d CLOCK,PERFORMANCE on that GPU",
            "clocks",
        )
    return None


def judge_node(
    probe: Mapping[str, Any] | None,
    benches: Sequence[Mapping[str, Any]],
    peaks: speed.Peaks,
    results: Sequence[CheckResult] = (),
    state: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], CheckResult]:
    """GPU 0's annotated benchmark (the `benchmark` object, as before) with ``gpus`` added, and
    the node's `speed` check: the worst GPU's verdict, naming it by index and PCI bus id."""
    devices = {d.get("index"): d for d in ((probe or {}).get("cuda") or {}).get("devices") or []}
    judged = [speed.judge_run(probe, b, peaks, results, state) for b in benches]
    annotated = [a for a, _ in judged]
    models = [
        str((a.get("peak_gpu") or {}).get("name") or devices.get(a.get("device"), {}).get("name"))
        for a in annotated
    ]
    relative = relative_speeds(annotated, models)
    busy = [gpu_state(state, probe, a.get("device"))[1] for a in annotated]
    gpus: list[dict[str, Any]] = []
    for n, (a, check) in enumerate(judged):
        peers = [busy[k] for k in range(len(busy)) if k != n and models[k] == models[n]]
        clock = _clock_cause(busy[n], peers) if peers else None
        gpus.append(
            _gpu_entry(probe, state, results, devices, a, check, relative[n], models, n, clock)
        )
    top = dict(annotated[0]) if annotated else {}
    top["gpus"] = gpus
    if len(judged) == 1:
        return top, judged[0][1]
    return top, _node_check(gpus, [c for _, c in judged])


def _gpu_entry(
    probe: Mapping[str, Any] | None,
    state: Mapping[str, Any] | None,
    results: Sequence[CheckResult],
    devices: Mapping[Any, Mapping[str, Any]],
    a: Mapping[str, Any],
    check: CheckResult,
    relative: float,
    models: Sequence[str],
    n: int,
    clock: diagnose.Cause | None = None,
) -> dict[str, Any]:
    index = a.get("device")
    device = devices.get(index) or {}
    snap, _ = gpu_state(state, probe, index)
    worst_case, worst = _worst(a)
    peer_count = models.count(models[n])
    outlier = peer_count > 1 and relative < PEER_BELOW and worst is not None and worst < PEAK_BELOW
    status: Status = check.status
    if outlier and status == PASS:
        status = WARN
    causes = [c for c in diagnose.speed_causes(a, probe, state, results) if c.kind]
    if clock:  # slower clocks than its peers explain more than a power cap they all hit
        at = next((k for k, c in enumerate(causes) if "power cap" in c.text), len(causes))
        causes.insert(at, clock)
    pcie = _pcie_cause(snap)
    if pcie:
        causes.append(pcie)
    cause = causes[0] if causes and status not in (PASS, SKIP) else None
    figure = f"{worst_case} at {worst:.0%} of peak" if worst is not None else "not judged (no peak)"
    if peer_count > 1:
        figure += f", {relative:.0%} of the fastest {models[n]}"
    detail = f"{cause.text} ({figure})" if cause else figure
    if not cause and status != PASS:
        detail = (
            f"{check.reason}; {figure}"
            if check.status != PASS
            else f"slower than its peers: {figure}"
        )
    if a.get("error"):
        detail = f"no benchmark: {(a.get('error') or {}).get('message')}"
    return {
        "index": index,
        "pci_bus_id": (snap or {}).get("pci_bus_id") or device.get("pci_bus_id"),
        "name": device.get("name"),
        "figures": {
            case: {
                "ms": round(float(row["ms"]), 4),
                "tflops": round(float(row["tflops"]), 1),
                "fraction": row.get("fraction"),
            }
            for case in speed.CASES
            if isinstance(row := a.get(case), dict) and "tflops" in row
        },
        "peak": a.get("peak_gpu"),
        "percent_of_peak": round(worst * 100, 1) if worst is not None else None,
        "relative_to_fastest": relative if peer_count > 1 else None,
        "status": status,
        "cause": cause.kind if cause else None,
        "detail": detail,
        "outlier": outlier,
    }


def _label(g: Mapping[str, Any]) -> str:
    bus = f", {g['pci_bus_id']}" if g.get("pci_bus_id") else ""
    return f"GPU {g['index']} ({diagnose.shown(g.get('name') or '?')}{bus})"


def _node_check(gpus: Sequence[dict[str, Any]], checks: Sequence[CheckResult]) -> CheckResult:
    title = "GPU speed"
    worst = max(range(len(gpus)), key=lambda n: (_RANK[gpus[n]["status"]], -_order(gpus[n])))
    g = gpus[worst]
    lines = tuple(f"{_label(x)}: {x['status'].upper()}: {x['detail']}" for x in gpus)
    if all(x["status"] == SKIP for x in gpus):
        return CheckResult("speed", title, SKIP, checks[0].reason, None, lines)
    if g["status"] in (PASS, SKIP):
        slowest = min(
            (x for x in gpus if x["relative_to_fastest"] is not None),
            key=lambda x: x["relative_to_fastest"],
            default=None,
        )
        spread = (
            f"; the slowest GPU at {slowest['relative_to_fastest']:.0%} of the fastest"
            if slowest
            else ""
        )
        low = min(gpus, key=_order)
        reason = f"{len(gpus)} GPUs, each judged: {checks[gpus.index(low)].reason}{spread}"
        return CheckResult("speed", title, PASS, reason, None, lines)
    others = [x for x in gpus if x is not g and x["status"] != PASS]
    fix = checks[worst].fix if g["cause"] is None else None
    if g["cause"] == "other_process":
        fix = "stop it, or run on an idle GPU"
    reason = f"{_label(g)}: {g['detail']}"
    if others:
        names = ", ".join(f"GPU {x['index']}" for x in others[:4])
        reason += f"; also {names}"
    return CheckResult("speed", title, g["status"], reason, fix, lines)


def _order(g: Mapping[str, Any]) -> float:
    v = g.get("percent_of_peak")
    return float(v) if isinstance(v, (int, float)) else 1e9
