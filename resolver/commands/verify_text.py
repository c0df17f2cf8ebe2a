"""`gpuresolve verify`'s text report: a line per check, the benchmark's measurements against
the datasheet peaks, and the GPU's state while it ran."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resolver.verify.result import CheckResult
    from resolver.verify.run import ProbeRun

__all__ = ["benchmark_lines", "report_text", "state_lines"]

_LABEL = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


def report_text(
    interpreter: str,
    run: ProbeRun,
    results: list[CheckResult],
    bench: Any,
    bench_asked: bool,
    state: dict[str, Any] | None = None,
) -> str:
    from resolver.verify import result

    torch = (run.data or {}).get("torch") or {}
    py = ((run.data or {}).get("python") or {}).get("version")
    head = f"verify {interpreter}" + (f" (Python {py})" if py else "")
    if torch.get("version"):
        head += f": torch {torch['version']}"
    lines = [head]
    width = max(len(r.title) for r in results) if results else 0
    for r in results:
        lines.append(f"{_LABEL[r.status]}  {r.title.ljust(width)}  {r.reason}")
        pad = " " * (6 + width + 2)
        for d in (
            r.details if r.status != "pass" or r.id in ("libraries", "compute", "multigpu") else ()
        ):
            lines.append(f"{pad}{d}")
        if r.fix and r.status in ("fail", "warn"):
            lines.append(f"{pad}fix: {r.fix}")
    if bench_asked:
        lines.extend(benchmark_lines(run, bench))
        lines.extend(state_lines(run, bench, state))
    s = result.summary(results)
    lines.append(
        f"result: {result.overall(results).upper()}: {s['pass']} passed, {s['warn']} warning(s), "
        f"{s['fail']} failed" + (f", {s['skip']} skipped" if s["skip"] else "")
    )
    return "\n".join(lines)


def benchmark_lines(run: ProbeRun, bench: Any) -> list[str]:
    if not bench:
        return ["benchmark: skipped (needs a CUDA device torch can use)"]
    if bench.get("error"):
        return [f"benchmark: failed: {bench['error'].get('message')}"]
    devices = ((run.data or {}).get("cuda") or {}).get("devices") or []
    name = next((d.get("name") for d in devices if d.get("index") == bench.get("device")), "")
    shapes = bench.get("shapes") or {}
    out = [f"benchmark on GPU {bench.get('device')} {name}".rstrip()]
    out.append(f"  {'case':<22}{'ms':>9}{'TFLOP/s':>10}{'of peak':>9}")
    rows = (
        ("conv2d_cudnn", "conv2d, cuDNN on", None),
        ("conv2d_no_cudnn", "conv2d, cuDNN off", ("conv2d_cudnn", "cuDNN")),
        ("matmul_tf32", "matmul, TF32", None),
        ("matmul_fp32", "matmul, FP32", ("matmul_tf32", "TF32")),
        ("matmul_bf16", "matmul, BF16", None),
        ("conv2d_bf16", "conv2d 3x3, BF16", None),
        ("conv2d_tf32", "conv2d 3x3, TF32", None),
    )
    for key, label, versus in rows:
        r = bench.get(key)
        if not r:
            continue
        frac = r.get("fraction")
        share = f"{frac:.0%}" if isinstance(frac, (int, float)) else "-"
        if isinstance(frac, (int, float)) and not r.get("judged"):
            share = f"({share})"
        line = f"  {label:<22}{r['ms']:>9.3f}{r['tflops']:>10.1f}{share:>9}"
        if versus and bench.get(versus[0]):
            line += f"   {versus[1]} {r['ms'] / bench[versus[0]]['ms']:.1f}x faster"
        out.append(line)
    if shapes:
        out.append(f"  (conv2d {shapes.get('conv2d')}; matmul {shapes.get('matmul')})")
        if shapes.get("conv2d_judged"):
            out.append(
                f"  (conv2d 3x3 {shapes['conv2d_judged']}, this interpreter's cuDNN switches)"
            )
    gpus = bench.get("gpus") or []
    if len(gpus) > 1:
        out.append("  every GPU, measured one at a time (the table above is GPU 0's):")
        out.append(
            f"  {'GPU':<5}{'PCI bus id':<19}{'name':<22}{'of peak':>8}{'of fastest':>11}  verdict"
        )
        for g in gpus:
            pct, rel = g.get("percent_of_peak"), g.get("relative_to_fastest")
            verdict = str(g.get("status")).upper() + (f" ({g['cause']})" if g.get("cause") else "")
            out.append(
                f"  {g.get('index')!s:<5}{g.get('pci_bus_id') or '?'!s:<19}"
                f"{str(g.get('name') or '?')[:21]:<22}"
                f"{(f'{pct:.0f}%' if isinstance(pct, (int, float)) else '-'):>8}"
                f"{(f'{rel:.0%}' if isinstance(rel, (int, float)) else '-'):>11}  {verdict}"
            )
    gpu = bench.get("peak_gpu")
    if gpu:
        t = bench.get("thresholds") or {}
        out.append(
            f"  of peak: the {gpu['name']} datasheet's dense peak ({gpu['grade']}; "
            f"{', '.join(gpu['source'])}); a case below {t.get('warn', 0):.0%} warns, below "
            f"{t.get('fail', 0):.0%} fails; (in brackets): shown, not judged"
        )
    return out


def state_lines(run: ProbeRun, bench: Any, state: dict[str, Any] | None) -> list[str]:
    """One line of the benchmarked GPU's state as NVML read it (all of it is in --json)."""
    from resolver.verify import diagnose

    if not state or not isinstance(bench, dict):
        return []
    if not state.get("gpus"):
        return [f"  GPU state: not read ({state.get('nvml') or 'no NVML'})"]
    snap, busy = diagnose.gpu_state(state, run.data, bench.get("device"))
    if snap is None:
        return ["  GPU state: NVML does not name the benchmarked GPU"]
    clocks, power, pcie = snap.get("clocks") or {}, snap.get("power") or {}, snap.get("pcie") or {}
    busy = busy or {}
    parts = [
        f"SM {busy.get('sm_mhz_min', '?')}-{busy.get('sm_mhz_max', '?')} of "
        f"{clocks.get('sm_max_mhz', '?')} MHz while busy"
        if busy
        else f"SM max {clocks.get('sm_max_mhz', '?')} MHz",
        f"power limit {power.get('limit_w', '?')} W (default {power.get('default_limit_w', '?')})",
        f"PCIe gen{pcie.get('gen', '?')} x{pcie.get('width', '?')} "
        f"(max gen{pcie.get('max_gen', '?')} x{pcie.get('max_width', '?')})",
    ]
    reasons = [r for r in busy.get("clock_event_reasons") or [] if r != "GPU idle"]
    if reasons:
        parts.append("clock events: " + ", ".join(reasons))
    procs = diagnose.other_processes(snap, busy)
    parts.append(f"other processes: {len(procs)}")
    return ["  GPU state: " + "; ".join(parts)]
