"""`gpuresolve verify`: prove an installed environment really runs on this machine's GPU."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, cast

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.params import SAFE_TEXT, Seconds, lazy_complete
from resolver.commands.ui import echo, note
from resolver.commands.verify_text import report_text
from resolver.flows import verify as verify_flow

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.core.documents.reports import VerifyDoc, VerifyHostJson
    from resolver.core.hostprofile import HostProfile
    from resolver.verify.result import CheckResult
    from resolver.verify.run import ProbeRun

VERIFY_JSON_VERSION = 1


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
    shell_complete=lazy_complete("complete_extension"),
)
@click.option(
    "--group",
    "group",
    metavar="NAME",
    type=SAFE_TEXT,
    envvar="GPURESOLVE_GROUP",
    help="The node group of a cluster lock this machine is in (its Job or sbatch script sets "
    "GPURESOLVE_GROUP): the GPUs and driver the group expects are checked (needs --lock).",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Do not record the build's facts (arch list, CUDA, cuDNN, NCCL) as an observation.",
)
@standard_options
def verify(
    python: str | None,
    lock_file: str | None,
    benchmark: bool,
    nccl: bool,
    as_json: bool,
    timeout: float,
    with_: tuple[str, ...],
    group: str | None,
    no_record: bool,
) -> None:
    """Check that torch in an environment imports, matches this host and really uses the GPU.

    Exit 0 when every check passes (warnings allowed), 1 when one fails, 2 when verify cannot
    run (no such interpreter, unreadable lock file).
    """
    from resolver.host.interpreter import resolve_python
    from resolver.verify.run import ProbeProcess

    packages = verify_flow.extension_names(with_)
    t0 = time.monotonic()
    interpreter = resolve_python(python)
    lock = None
    if lock_file:  # the probe must know the lock's packages: read it first
        from resolver.host import platform as host_platform
        from resolver.readers import lockfile

        lock = lockfile.read(lock_file, platform=host_platform.probe().platform)
    expects = verify_flow.group_expects(lock_file, group) if group else None
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

    catalog, catalog_error = verify_flow.load_catalog()
    host = verify_flow.detect(catalog)
    curated = None if no_record else verify_flow.curated_builds()  # still while torch imports
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
        expects=expects,
    )
    nccl_doc = (
        verify_flow.nccl_check(interpreter, run, results, timeout, state)
        if nccl or verify_flow.visible(run) > 1
        else None
    )
    if packages:  # after the probe: both use the GPU
        from resolver.verify import ext_checks

        ran = [ext_checks.run_one(interpreter, p, timeout) for p in packages]
        results.append(ext_checks.judge(ran, verify_flow.import_gates(catalog, packages)))
    bench = (run.data or {}).get("benchmark") if benchmark else None
    recorded = None if no_record else verify_flow.record(run.data, curated)
    if benchmark:
        bench = verify_flow.judge_speed(run, bench, catalog, results, state)
    status = result.overall(results)
    if as_json:
        data = report_json(
            interpreter, run, results, host, catalog, lock_file, bench, time.monotonic() - t0
        )
        data["observation"] = recorded.to_json() if recorded else None
        data["state"] = diagnose.state_json(run.data, state)
        data["nccl_check"] = nccl_doc
        verify_flow.identify(data, lock_file)
        emit_json(data)
    else:
        echo(report_text(interpreter, run, results, bench, benchmark, state))
        for line in recorded.lines if recorded else ():
            note(line)
    sys.exit(1 if status == result.FAIL else 0)


def report_json(
    interpreter: str,
    run: ProbeRun,
    results: list[CheckResult],
    host: HostProfile | None,
    catalog: Catalog | None,
    lock_file: str | None,
    bench: Any,
    elapsed: float,
) -> VerifyDoc:
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
        "host": _host(host),
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


def _host(host: HostProfile | None) -> VerifyHostJson | None:
    """The host's profile as verify reports it (the names `fleet report` uses are added later)."""
    if host is None:
        return None
    return cast("VerifyHostJson", host.to_json())  # a profile is that, less the two names
