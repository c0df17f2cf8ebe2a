"""The GPU compute check: the probe's matmul and conv2d (forward and backward) on every GPU model.

float32 results against the float64 CPU reference prove the kernels run and are right; the
convolution must have run in cuDNN, not a slow fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resolver.standalone.startup import MAX_REL_ERR, compute_failures, first_line
from resolver.verify.context import Context, skipped
from resolver.verify.result import FAIL, PASS, SKIP, Check, CheckResult


def check_gpu_compute(ctx: Context) -> CheckResult:
    skip = skipped(ctx, COMPUTE_CHECK)
    if skip is not None:
        return skip
    tests = ctx.probe.get("gpu_tests")
    if not tests:
        cuda = ctx.probe.get("cuda") or {}
        why = "CUDA is not available" if ctx.host_gpu else "no GPU on this host"
        if cuda.get("available"):
            why = "no device was tested"
        return COMPUTE_CHECK.result(SKIP, why)
    names = {d["index"]: d.get("name") for d in (ctx.probe.get("cuda") or {}).get("devices") or []}
    fails: list[str] = []
    lines: list[str] = []
    cudnn_used = False
    for t in tests:
        label = f"GPU {t.get('device')}" + (
            f" ({names[t['device']]})" if names.get(t.get("device")) else ""
        )
        fails += compute_failures(t, label)
        if t.get("error"):
            continue
        backend = str(t.get("conv_backend") or "")
        used = "cudnn" in backend.lower() if backend else bool(t.get("cudnn_libs_loaded"))
        cudnn_used = cudnn_used or (bool(t.get("cudnn_acceptable", True)) and used)
        lines.append(
            f"{label}: matmul rel. error {_err(t, 'matmul')}, conv2d fwd+bwd {_err(t, 'conv2d')}"
            + (f", conv backend {backend}" if backend else "")
        )
    if fails:
        return COMPUTE_CHECK.result(
            FAIL,
            "; ".join(fails[:2]),
            "see the checks above (kernels, driver, libraries); reinstall torch for this machine",
            tuple(lines),
        )
    if not cudnn_used:
        cudnn = ctx.probe.get("cudnn") or {}
        err = first_line(str((cudnn.get("error") or {}).get("message") or ""))
        why = (
            f"torch could not load cuDNN ({err})"
            if err
            else "this torch build has no cuDNN"
            if cudnn.get("compiled") is False
            else "torch.backends.cudnn.is_available() is False"
            if cudnn.get("available") is False
            else "slow fallback kernels"
        )
        return COMPUTE_CHECK.result(
            FAIL,
            f"results are right, but cuDNN did not run the convolution: {why}",
            "see the cuDNN and library checks above",
            tuple(lines),
        )
    return COMPUTE_CHECK.result(
        PASS,
        f"{len(tests)} GPU model{'s' if len(tests) != 1 else ''}: float32 results within "
        f"{MAX_REL_ERR:g} of float64 CPU; cuDNN ran the convolution",
        None,
        tuple(lines),
    )


def _err(t: Mapping[str, Any], op: str) -> str:
    v = (t.get(op) or {}).get("rel_err")
    return f"{float(v):.1e}" if v is not None else "?"


# The checks of this module (verify/checks.py orders every check in one tuple).
COMPUTE_CHECK = Check("compute", "GPU compute", check_gpu_compute)
