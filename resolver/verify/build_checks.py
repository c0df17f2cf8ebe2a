"""The checks on the build and the host: the probe ran, torch imports, the build fits the host.

A CUDA build on a GPU host, a driver new enough for its CUDA version, CUDA available, and kernels
for every GPU: judged by the solver's own rules (`solve.kernel_coverage`, `solve.driver_need`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from resolver.catalog import ArchList, Provenance
from resolver.core.hostprofile import HostProfile
from resolver.core.versions import CC, CudaVersion, cc_sm, driver_key, parse_cc
from resolver.present.findings import driver_why, reach
from resolver.solve import driver_need, kernel_coverage
from resolver.standalone.startup import first_line
from resolver.verify.context import Context, build_variant, skipped
from resolver.verify.diagnose import cuda_visible_cause
from resolver.verify.package_checks import missing_lib_fix
from resolver.verify.result import FAIL, PASS, SKIP, WARN, Check, CheckResult, Status


def probe_failed(
    probe: Mapping[str, Any] | None, failure: str, stderr_tail: Sequence[str]
) -> CheckResult:
    stage = (probe or {}).get("stage") if probe else None
    if "crashed" in failure or "signal" in failure:
        fix = (
            "a library crashed the interpreter: check LD_LIBRARY_PATH / LD_PRELOAD, then reinstall "
            "torch in a clean environment (`gpuresolve suggest` gives the command)"
        )
    elif "did not finish" in failure:
        fix = (
            "something blocked (a GPU held by a stuck process, a driver problem?): check "
            "`nvidia-smi`, then run again (or raise --timeout)"
        )
    else:
        fix = "run the interpreter by hand (`python -c 'import torch'`) to see the error"
    details = tuple(f"stderr: {line}" for line in stderr_tail[-5:])
    if stage:
        details = (f"last stage: {stage}", *details)
    return PROBE_CHECK.result(FAIL, failure, fix, details)


def check_probe(ctx: Context) -> CheckResult:
    elapsed = ctx.probe.get("elapsed_s")
    took = f" in {elapsed:.1f} s" if isinstance(elapsed, int | float) else ""
    return PROBE_CHECK.result(PASS, f"the probe finished{took}")


def check_environment(ctx: Context) -> CheckResult:
    py = ctx.probe.get("python") or {}
    where = py.get("executable") or "?"
    prefix = py.get("prefix")
    elapsed = ctx.probe.get("elapsed_s")
    took = f", probe took {elapsed:.1f} s" if isinstance(elapsed, int | float) else ""
    reason = f"Python {py.get('version', '?')} at {where}{took}"
    details = (f"prefix: {prefix}",) if prefix else ()
    return ENVIRONMENT_CHECK.result(PASS, reason, None, details)


def check_import(ctx: Context) -> CheckResult:
    t = ctx.torch
    if t.get("imported"):
        return IMPORT_CHECK.result(PASS, f"torch {t.get('version')} from {t.get('file')}", None)
    err = t.get("error") or {}
    etype, message = str(err.get("type", "")), str(err.get("message", ""))
    if etype == "ModuleNotFoundError" and "'torch'" in message:
        return IMPORT_CHECK.result(
            FAIL,
            "torch is not installed in this environment",
            "install the build for this machine: `gpuresolve suggest` prints the pip command",
        )
    missing = re.search(r"(lib[\w.+-]+?\.so(?:\.[0-9]+)*): cannot open shared object file", message)
    if missing:
        lib = missing.group(1)
        return IMPORT_CHECK.result(
            FAIL,
            f"torch cannot load {lib}: not found",
            missing_lib_fix(ctx, lib),
            (f"{etype}: {first_line(message)}",),
        )
    undefined = re.search(r"undefined symbol: (\S+)", message)
    if undefined:
        ld = (ctx.probe.get("env") or {}).get("LD_LIBRARY_PATH")
        fix = (
            f"a library from LD_LIBRARY_PATH ({ld}) shadows the one torch was built with: unset it"
            if ld
            else "a library torch loads does not match it: reinstall torch with its dependencies"
        )
        return IMPORT_CHECK.result(
            FAIL,
            f"a library torch loaded does not match it (undefined symbol {undefined.group(1)})",
            fix,
            (f"{etype}: {first_line(message)}",),
        )
    return IMPORT_CHECK.result(
        FAIL,
        f"import torch failed: {etype}: {first_line(message)}",
        "reinstall torch (`gpuresolve suggest` prints the command for this machine)",
    )


def check_build(ctx: Context) -> CheckResult:
    skip = skipped(ctx, BUILD_CHECK, cuda=False)
    if skip is not None:
        return skip
    t = ctx.torch
    variant = build_variant(t) or "?"
    gpus = _host_gpu_text(ctx.host)
    if t.get("hip"):
        status: Status = FAIL if ctx.host_gpu else PASS
        fix = "install a CUDA build: `gpuresolve suggest`" if ctx.host_gpu else None
        return BUILD_CHECK.result(status, f"ROCm build ({variant}); host: {gpus}", fix)
    if not t.get("cuda"):
        if ctx.host_gpu:
            return BUILD_CHECK.result(
                FAIL,
                f"CPU build ({variant}) on a host with {gpus}: torch will not use the GPU",
                "install a CUDA build: `gpuresolve suggest` prints the command for this machine",
            )
        return BUILD_CHECK.result(PASS, "CPU build on a host without an NVIDIA GPU")
    if ctx.host_gpu:
        return BUILD_CHECK.result(PASS, f"CUDA {t['cuda']} build ({variant}) on a host with {gpus}")
    note = (ctx.host.messages[0] if ctx.host and ctx.host.messages else "") or ""
    return BUILD_CHECK.result(
        WARN,
        f"CUDA {t['cuda']} build ({variant}) on a host without a usable NVIDIA GPU: CPU only",
        first_line(note) or "the CPU build is much smaller: `gpuresolve suggest`",
    )


def _host_gpu_text(host: HostProfile | None) -> str:
    if host is None:
        return "unknown host"
    if not host.gpus:
        return "an NVIDIA driver but no usable GPU" if host.driver else "no NVIDIA GPU"
    names = sorted({g.name or f"CC {g.cc}" for g in host.gpus})
    count = len(host.gpus)
    return f"{count} NVIDIA GPU{'s' if count > 1 else ''} ({', '.join(names)})"


def _gpus(ctx: Context) -> list[tuple[str, str]]:
    """(label, CC) of every visible GPU: torch's view when it has one, else the host's."""
    devices = (ctx.probe.get("cuda") or {}).get("devices") or []
    if devices:
        return [(f"GPU {d['index']} {d.get('name') or ''}".strip(), str(d["cc"])) for d in devices]
    if ctx.host is None:
        return []
    return [(f"GPU {g.index} {g.name or ''}".strip(), g.cc) for g in ctx.host.gpus if g.cc]


def _arch_list(ctx: Context) -> ArchList | None:
    names = ctx.torch.get("arch_list") or []
    sass: list[CC] = []
    ptx: list[CC] = []
    for name in names:
        try:
            cc = parse_cc(str(name))
        except Exception:
            continue
        (ptx if str(name).startswith("compute_") else sass).append(cc)
    if not sass and not ptx:
        return None
    return ArchList(tuple(sorted(set(sass))), tuple(sorted(set(ptx))), Provenance(("torch",)))


def _coverage(ctx: Context) -> tuple[list[str], list[str], bool]:
    """Per GPU: covered lines, uncovered lines, and whether any GPU needs the PTX JIT."""
    arch = _arch_list(ctx)
    covered: list[str] = []
    missing: list[str] = []
    jit = False
    if arch is None:
        return covered, missing, jit
    for label, cc_text in _gpus(ctx):
        cc = parse_cc(cc_text)
        how = kernel_coverage(ctx.db, arch, cc)
        if how is None:
            missing.append(f"{cc_sm(cc)} ({label})")
        else:
            jit = jit or how.ptx
            covered.append(f"{cc_sm(cc)} ({label}): {reach(how)}")
    return covered, missing, jit


def check_driver(ctx: Context) -> CheckResult:
    skip = skipped(ctx, DRIVER_CHECK)
    if skip is not None:
        return skip
    host = ctx.host
    cuda = CudaVersion.parse(str(ctx.torch["cuda"]))
    if host is None or not host.driver:
        if not ctx.host_gpu:
            return DRIVER_CHECK.result(SKIP, "no NVIDIA driver on this host")
        return DRIVER_CHECK.result(WARN, "the host's driver version is unknown")
    _, _, jit = _coverage(ctx)
    need, why = driver_need(ctx.db, cuda, host.driver_os, needs_jit=jit)
    if need is None:
        return DRIVER_CHECK.result(
            WARN,
            f"the minimum {host.driver_os} driver for CUDA {cuda} is unknown ({ctx.db_note()})",
            "update the database: `gpuresolve db update`",
        )
    if driver_key(host.driver) < need.key:
        return DRIVER_CHECK.result(
            FAIL,
            f"CUDA {cuda} build needs driver >= {need} ({driver_why(why)}); "
            f"this host has {host.driver}",
            f"upgrade the NVIDIA driver to >= {need}, or install a build this driver runs "
            "(`gpuresolve suggest`)",
        )
    why_said = driver_why(why)
    return DRIVER_CHECK.result(PASS, f"driver {host.driver} >= {need} ({why_said}) for CUDA {cuda}")


def check_cuda_available(ctx: Context) -> CheckResult:
    skip = skipped(ctx, CUDA_CHECK)
    if skip is not None:
        return skip
    cuda = ctx.probe.get("cuda") or {}
    lost = ctx.host.lost_gpus if ctx.host is not None else []
    if lost:  # torch may run on the others; this machine is not the one the lock was made for
        n = cuda.get("device_count", len(cuda.get("devices") or [])) if cuda.get("available") else 0
        which = ", ".join(f"{g.pci_bus_id} ({g.source}: {g.error})" for g in lost)
        return CUDA_CHECK.result(
            FAIL,
            f"{len(lost)} GPU{'s' if len(lost) > 1 else ''} lost: {which}; torch sees {n} device"
            f"{'s' if n != 1 else ''}",
            "the driver lists the GPU but cannot open it: the kernel log (dmesg) says why; "
            "reboot (or reseat the GPU), then run `gpuresolve verify` again",
        )
    if cuda.get("available") and not cuda.get("error"):
        n = cuda.get("device_count", len(cuda.get("devices") or []))
        return CUDA_CHECK.result(PASS, f"True, {n} device{'s' if n != 1 else ''}")
    if not ctx.host_gpu:
        return CUDA_CHECK.result(SKIP, "no usable NVIDIA GPU on this host")
    said = [str((cuda.get("error") or {}).get("message") or ""), *(cuda.get("warnings") or [])]
    why = next((first_line(s) for s in said if s.strip()), "")
    reason = "False" + (f": {why}" if why else " although the host has an NVIDIA GPU")
    env = ctx.probe.get("env") or {}
    names = [g.name or f"GPU {g.index}" for g in (ctx.host.gpus if ctx.host else [])]
    cause = cuda_visible_cause(env, names)
    if cause:  # the cause first, torch's own words after it
        reason = f"False: {cause}" + (f"; torch: {why}" if why else "")
        fix = f"CUDA_VISIBLE_DEVICES is {env.get('CUDA_VISIBLE_DEVICES')!r}: unset it or name a GPU"
    elif "too old" in why.lower() or "driver" in why.lower():
        fix = "the driver cannot run this build: upgrade the driver or `gpuresolve suggest`"
    else:
        fix = "`gpuresolve detect` shows what the host has; see the driver check above"
    return CUDA_CHECK.result(FAIL, reason, fix)


def check_arch(ctx: Context) -> CheckResult:
    skip = skipped(ctx, ARCH_CHECK)
    if skip is not None:
        return skip
    gpus = _gpus(ctx)
    if not gpus:
        return ARCH_CHECK.result(SKIP, "no GPU to check")
    if _arch_list(ctx) is None:
        return ARCH_CHECK.result(WARN, "torch reports no compiled architecture list")
    covered, missing, _ = _coverage(ctx)
    listed = " ".join(ctx.torch.get("arch_list") or [])
    if missing:
        return ARCH_CHECK.result(
            FAIL,
            f"no kernels for {', '.join(missing)}: the build has {listed}",
            "install a build with kernels for this GPU: `gpuresolve suggest`",
            tuple(covered),
        )
    return ARCH_CHECK.result(PASS, "; ".join(covered), None, (f"build: {listed}",))


# The checks of this module (verify/checks.py orders every check in one tuple).
PROBE_CHECK = Check("probe", "probe ran", check_probe)
ENVIRONMENT_CHECK = Check("environment", "environment", check_environment)
IMPORT_CHECK = Check("import", "torch imports", check_import)
BUILD_CHECK = Check("build", "build vs host", check_build)
DRIVER_CHECK = Check("driver", "driver", check_driver)
CUDA_CHECK = Check("cuda", "CUDA available", check_cuda_available)
ARCH_CHECK = Check("arch", "GPU kernels", check_arch)
