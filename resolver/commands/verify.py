"""`gpuresolve verify`: prove an installed environment really runs on this machine's GPU."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from resolver.commands.common import SAFE_TEXT, Seconds, emit_json

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.core.hostprofile import HostProfile
    from resolver.observe.runtime import Recorded
    from resolver.verify.result import CheckResult
    from resolver.verify.run import ProbeRun

VERIFY_JSON_VERSION = 1
_LABEL = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


@click.command()
@click.option(
    "--python",
    "python",
    metavar="PATH",
    type=SAFE_TEXT,
    help="Interpreter (or environment directory) to check; default: the active virtualenv or "
    "conda env, else this Python.",
)
@click.option(
    "--lock",
    "lock_file",
    metavar="FILE",
    type=SAFE_TEXT,
    help="requirements.txt, environment.yml, conda-lock.yml or pylock.toml the environment "
    "must match.",
)
@click.option(
    "--benchmark",
    is_flag=True,
    help="Also time matmuls and a cuDNN convolution, judged against the datasheet peak, naming "
    "the cause it sees when slow.",
)
@click.option(
    "--nccl",
    is_flag=True,
    help="Run NCCL across the GPUs (automatic with two or more visible): exact all-reduce and "
    "all-gather, bus bandwidth judged against the links.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON (a stable contract)."
)
@click.option(
    "--timeout",
    type=Seconds(1, 3600),
    metavar="SECONDS",
    default=120,
    show_default=True,
    help="Seconds the probe may run before it counts as hung.",
)
@click.option(
    "--with",
    "with_",
    multiple=True,
    metavar="PKG",
    help="Also import an extension package and run one small operation of it on the GPU "
    "(xformers, flash-attn, bitsandbytes, torchao, vllm, triton), each capped by --timeout.",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Do not record the build's facts (arch list, CUDA, cuDNN, NCCL) as an observation.",
)
def verify(
    python: str | None,
    lock_file: str | None,
    benchmark: bool,
    nccl: bool,
    as_json: bool,
    timeout: float,
    with_: tuple[str, ...],
    no_record: bool,
) -> None:
    """Check that torch in an environment imports, matches this host and really uses the GPU.

    Exit 0 when every check passes (warnings allowed), 1 when one fails, 2 when verify cannot
    run (no such interpreter, unreadable lock file).
    """
    from resolver.verify.run import ProbeProcess, resolve_python

    packages = _extension_names(with_)
    t0 = time.monotonic()
    interpreter = resolve_python(python)
    lock = None
    if lock_file:  # the probe must know the lock's packages: read it first
        from resolver.host import platform as host_platform
        from resolver.readers import lockfile

        lock = lockfile.read(lock_file, platform=host_platform.probe().platform)
    want = sorted({p.name for p in lock.pins}) if lock else []
    # The probe starts first: torch imports in the child while the rest of gpuresolve loads,
    # the host is detected and the database loads here.
    proc = ProbeProcess(interpreter, want=want, benchmark=benchmark, timeout_s=timeout)
    from resolver.host.gpustate import Sampler

    # NVML beside the probe, in a thread: the GPU's state before the probe uses it (and with
    # --benchmark, samples while it measures), never on the plain run's critical path.
    sampler = Sampler(sample=benchmark, exclude_pids=(proc.proc.pid,))
    from resolver.core.errors import UserError
    from resolver.verify import checks, diagnose, result

    catalog, catalog_error = _load_catalog()
    host = _detect(catalog)
    curated = None if no_record else _curated_builds()  # still while torch imports
    run = proc.finish()
    state = sampler.finish()
    if not run.started and not run.signal and not run.timed_out:
        last = run.stderr_tail[-1][:200] if run.stderr_tail else f"exit status {run.returncode}"
        raise UserError(f"cannot run the probe with {interpreter} (Python 3.9+ needed): {last}")
    results = checks.evaluate(
        run.data,
        host,
        catalog,
        lock=lock,
        probe_failure=run.failure,
        catalog_error=catalog_error,
        stderr_tail=run.stderr_tail,
    )
    nccl_doc = (
        _nccl_check(interpreter, run, results, timeout, state)
        if nccl or _visible(run) > 1
        else None
    )
    if packages:  # after the probe: both use the GPU
        from resolver.verify import ext_checks

        ran = [ext_checks.run_one(interpreter, p, timeout) for p in packages]
        results.append(ext_checks.judge(ran))
    bench = (run.data or {}).get("benchmark") if benchmark else None
    recorded = None if no_record else _record(run.data, curated)
    if benchmark:
        bench = _judge_speed(run, bench, catalog, results, state)
    status = result.overall(results)
    if as_json:
        data = report_json(
            interpreter, run, results, host, catalog, lock_file, bench, time.monotonic() - t0
        )
        data["observation"] = recorded.to_json() if recorded else None
        data["state"] = diagnose.state_json(run.data, state)
        data["nccl_check"] = nccl_doc
        emit_json(data)
    else:
        click.echo(report_text(interpreter, run, results, bench, benchmark, state))
        for line in recorded.lines if recorded else ():
            click.echo(f"note: {line}", err=True)
    sys.exit(1 if status == result.FAIL else 0)


def _extension_names(given: tuple[str, ...]) -> list[str]:
    """--with's names, canonical, each once; exit 2 for one verify has no operation for."""
    from resolver.core.errors import UserError
    from resolver.solve.extensions import EXTENSIONS

    names: list[str] = []
    for item in given:
        name = item.strip().lower().replace("_", "-")
        if name not in EXTENSIONS:
            raise UserError(f"--with {item!r}: verify runs {', '.join(EXTENSIONS)}")
        if name not in names:
            names.append(name)
    return names


def _visible(run: ProbeRun) -> int:
    cuda = (run.data or {}).get("cuda") or {}
    return int(cuda.get("device_count") or 0) if cuda.get("available") else 0


def _nccl_check(
    interpreter: str,
    run: ProbeRun,
    results: list[CheckResult],
    timeout: float,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One NCCL worker per visible GPU (after the probe: both use the GPUs), judged."""
    from resolver.host import topology
    from resolver.verify import nccl_check, nccl_run

    visible = _visible(run)
    topo = topology.collect() if visible > 1 else None
    ran = (
        nccl_run.run_nccl(interpreter, visible, timeout_s=min(timeout, nccl_run.DEFAULT_TIMEOUT_S))
        if visible > 1
        else None
    )
    check, doc = nccl_check.judge(ran, topo, run.data, visible, state)
    results.append(check)
    return doc


def _curated_builds() -> dict[str, Any] | None:
    """The curated torch.yaml an observation is compared with, read ahead (None: unreadable)."""
    from resolver import catalog as catalog_mod
    from resolver.core.errors import UserError
    from resolver.observe import compare, runtime  # noqa: F401 - imported while torch imports

    try:
        return compare.read_torch_doc(catalog_mod.data_dir())
    except UserError:
        return None


def _record(probe: dict[str, Any] | None, curated: dict[str, Any] | None) -> Recorded:
    """The probed build's facts into the user's observations (machine-independent only)."""
    from resolver import catalog as catalog_mod
    from resolver.observe.runtime import record_verified
    from resolver.observe.store import FILE

    return record_verified(probe, catalog_mod.user_data_dir() / FILE, curated)


def _judge_speed(
    run: ProbeRun,
    bench: Any,
    catalog: Catalog | None,
    results: list[CheckResult],
    state: dict[str, Any] | None = None,
) -> Any:
    """Each measurement as a fraction of the GPU's datasheet peak, and the `speed` check with
    the causes it could observe."""
    from resolver.core.errors import UserError
    from resolver.verify import speed
    from resolver.verify.result import SKIP, CheckResult

    if not isinstance(bench, dict) or bench.get("error"):
        results.append(speed.judge(bench, None))
        return bench
    try:
        peaks = speed.load(speed.data_file(catalog.origin if catalog else None))
    except UserError as exc:  # a damaged peaks file: measured, not judged
        results.append(CheckResult("speed", "GPU speed", SKIP, str(exc)))
        return bench
    from resolver.verify import node_speed

    others = (run.data or {}).get("benchmark_others") or []
    benches = [bench, *(b for b in others if isinstance(b, dict))]
    annotated, check = node_speed.judge_node(run.data, benches, peaks, results, state)
    results.append(check)
    return annotated


def _load_catalog() -> tuple[Catalog | None, str | None]:
    """The database, or why not: verify still checks what needs no database."""
    from resolver import catalog as catalog_mod
    from resolver.core.errors import UserError

    try:
        return catalog_mod.load(), None
    except UserError as exc:
        return None, str(exc)


def _detect(catalog: Catalog | None) -> HostProfile | None:
    from resolver.host import detect

    def lookup(name: str) -> str | None:
        model = catalog.gpu_by_name(name) if catalog else None
        return f"{model.cc[0]}.{model.cc[1]}" if model else None

    try:
        profile = detect(lookup_cc=lookup)
    except Exception:  # detection never aborts verify: the checks say "host unknown"
        return None
    if not profile.driver_cuda and profile.driver and catalog is not None:
        profile.driver_cuda = catalog.driver_max_cuda(profile.driver, profile.driver_os)
    return profile


def report_json(
    interpreter: str,
    run: ProbeRun,
    results: list[CheckResult],
    host: HostProfile | None,
    catalog: Catalog | None,
    lock_file: str | None,
    bench: Any,
    elapsed: float,
) -> dict[str, Any]:
    from resolver.verify import result
    from resolver.verify.context import build_variant

    torch = (run.data or {}).get("torch") or {}
    return {
        "verify": VERIFY_JSON_VERSION,
        "status": result.overall(results),
        "summary": result.summary(results),
        "python": interpreter,
        "torch": torch.get("version"),
        "variant": build_variant(torch),
        "checks": [r.to_json() for r in results],
        "lock": lock_file,
        "benchmark": bench,
        "host": host.to_json() if host else None,
        "database": {"origin": catalog.origin, "updated": catalog.updated} if catalog else None,
        "probe": run.data,
        "probe_run": {
            "returncode": run.returncode,
            "signal": run.signal,
            "timed_out": run.timed_out,
            "stage": run.stage,
            "elapsed_s": run.elapsed_s,
            "stderr_tail": run.stderr_tail,
        },
        "elapsed_s": round(elapsed, 3),
    }


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
