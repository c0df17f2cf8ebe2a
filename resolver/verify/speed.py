"""`verify --benchmark`'s verdict: each measurement as a fraction of the GPU's datasheet peak.

The peaks and the fractions that count as too slow live in ``data/gpu_peaks.yaml`` (sourced,
graded); a GPU the file does not name is measured but not judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resolver.core.errors import DataError
from resolver.db.evidence import GRADES
from resolver.db.gpunames import name_words
from resolver.verify import diagnose
from resolver.verify.diagnose import Cause
from resolver.verify.result import FAIL, PASS, SKIP, WARN, CheckResult, Status

FILE = "gpu_peaks.yaml"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
# benchmark case -> (precision of the peak it is compared with, judged)
CASES = {
    "matmul_tf32": ("tf32", True),
    "matmul_fp32": ("fp32", True),
    "matmul_bf16": ("bf16", True),
    # ResNet-50 stage-3 3x3 convolution under the interpreter's own cuDNN switches: arithmetic-bound
    "conv2d_bf16": ("bf16", True),
    "conv2d_tf32": ("tf32", True),
    "conv2d_cudnn": ("tf32", False),  # cuDNN may use TF32 for float32 convolutions (torch default)
    "conv2d_no_cudnn": ("fp32", False),
}
CAUSES = (
    "cuBLAS or cuDNN not the wheel's own (see the loaded-libraries check)",
    "TF32 disabled (torch.backends.cuda.matmul.allow_tf32, NVIDIA_TF32_OVERRIDE=0)",
    "clocks or power capped (nvidia-smi -q -d CLOCK,POWER,PERFORMANCE)",
    "a MIG slice, not the whole GPU (nvidia-smi -L)",
    "a build that reaches this GPU only through PTX JIT (see the GPU-kernels check)",
    "another process on the GPU (nvidia-smi)",
)


@dataclass(frozen=True)
class GpuPeak:
    name: str
    names: tuple[str, ...]
    peak: Mapping[str, float | None]
    grade: str
    source: tuple[str, ...]


@dataclass(frozen=True)
class Peaks:
    gpus: tuple[GpuPeak, ...]
    warn: float
    fail: float
    sources: Mapping[str, Any]

    def for_device(self, device_name: str | None) -> GpuPeak | None:
        """The record whose names include this device's; a MIG slice gets its whole GPU's."""
        if not device_name:
            return None
        words = name_words(mig_parent(device_name) or device_name)
        return next((g for g in self.gpus if any(name_words(n) == words for n in g.names)), None)


def mig_parent(device_name: str) -> str | None:
    """ "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "NVIDIA A100-SXM4-40GB"; None for a whole GPU."""
    m = re.match(r"^(.*?)\s+MIG\s+\S+", device_name)
    return m.group(1) if m else None


def data_file(catalog_origin: str | None = None) -> Path:
    from resolver.catalog import shipped_data_dir

    if catalog_origin and (Path(catalog_origin) / FILE).is_file():
        return Path(catalog_origin) / FILE
    return shipped_data_dir() / FILE


def load(path: Path | None = None) -> Peaks:
    from resolver.db.yamlfile import read_yaml

    return from_raw(read_yaml(path or data_file()))


def from_raw(raw: Any) -> Peaks:
    if not isinstance(raw, dict):
        raise DataError(f"{FILE}: expected a mapping")
    sources = raw.get("sources") or {}
    verdict = raw.get("verdict") or {}
    warn_v, fail_v = verdict.get("warn"), verdict.get("fail")
    if not isinstance(warn_v, (int, float)) or not isinstance(fail_v, (int, float)):
        raise DataError(f"{FILE} verdict: warn and fail must be numbers")
    warn, fail = float(warn_v), float(fail_v)
    if not 0 < fail < warn < 1:
        raise DataError(f"{FILE} verdict: need 0 < fail < warn < 1")
    gpus = []
    for g in raw.get("gpus") or []:
        where = f"{FILE} gpu {g.get('name') if isinstance(g, dict) else g!r}"
        if not isinstance(g, dict) or not g.get("names"):
            raise DataError(f"{where}: needs name and names")
        peak = g.get("peak") or {}
        if set(peak) != set(PRECISIONS):
            raise DataError(f"{where}: peak needs exactly {', '.join(PRECISIONS)}")
        for p, v in peak.items():
            if v is not None and (not isinstance(v, (int, float)) or v <= 0):
                raise DataError(f"{where}: peak {p} must be a positive number or null")
        if g.get("grade") not in GRADES:
            raise DataError(f"{where}: grade must be one of {', '.join(GRADES)}")
        src = g.get("source") or []
        missing = [s for s in src if s not in sources]
        if not src or missing:
            raise DataError(f"{where}: unknown or missing source {', '.join(missing)}")
        gpus.append(
            GpuPeak(
                str(g["name"]),
                tuple(str(n) for n in g["names"]),
                {p: (float(v) if isinstance(v, (int, float)) else None) for p, v in peak.items()},
                str(g["grade"]),
                tuple(src),
            )
        )
    return Peaks(tuple(gpus), warn, fail, sources)


def annotate(bench: Mapping[str, Any], device_name: str | None, peaks: Peaks) -> dict[str, Any]:
    """The probe's benchmark with each case's peak and fraction of it, and the GPU's record."""
    out: dict[str, Any] = dict(bench)
    gpu = peaks.for_device(device_name)
    out["peak_gpu"] = (
        {"name": gpu.name, "grade": gpu.grade, "source": list(gpu.source)} if gpu else None
    )
    for case, (precision, judged) in CASES.items():
        row = bench.get(case)
        if not isinstance(row, dict) or "tflops" not in row:
            continue
        peak = gpu.peak.get(precision) if gpu else None
        row = dict(row)
        row["peak_precision"] = precision
        row["peak_tflops"] = peak
        row["fraction"] = round(float(row["tflops"]) / peak, 3) if peak else None
        row["judged"] = judged
        out[case] = row
    out["thresholds"] = {"warn": peaks.warn, "fail": peaks.fail}
    return out


def judge(
    annotated: Mapping[str, Any] | None,
    device_name: str | None,
    causes: Sequence[Cause] = (),
    generic: Sequence[str] = CAUSES,
) -> CheckResult:
    """The `speed` check: PASS, WARN or FAIL by the slowest judged case; SKIP without peaks.

    A slow verdict's first line names the first observed cause (``diagnose.speed_causes``) that
    explains its slowest case, with the figure; the ``generic`` list is only for no such cause.
    """
    title = "GPU speed"
    if not annotated or annotated.get("error"):
        why = (annotated or {}).get("error", {}).get("message") if annotated else None
        return CheckResult("speed", title, SKIP, f"no benchmark ({why or 'no CUDA device'})")
    gpu = annotated.get("peak_gpu")
    if not gpu:
        return CheckResult(
            "speed",
            title,
            SKIP,
            f"no datasheet peak for {device_name or 'this GPU'}: measured, not judged",
        )
    thresholds = annotated.get("thresholds") or {}
    warn, fail = float(thresholds.get("warn", 0.5)), float(thresholds.get("fail", 0.25))
    judged = [
        (case, row)
        for case in CASES
        if isinstance(row := annotated.get(case), dict)
        and row.get("judged")
        and row.get("fraction")
    ]
    if not judged:
        return CheckResult("speed", title, SKIP, f"no judged case has a peak for {gpu['name']}")
    worst_case, worst = min(judged, key=lambda cr: float(cr[1]["fraction"]))
    frac = float(worst["fraction"])
    details = tuple(
        f"{case}: {row['tflops']:.1f} of {row['peak_tflops']:g} TFLOP/s "
        f"({row['peak_precision']}) = {float(row['fraction']):.0%}"
        for case, row in judged
    )
    basis = f"datasheet peaks of the {gpu['name']} ({gpu['grade']})"
    status: Status
    if frac < fail:
        status = FAIL
    elif frac < warn:
        status = WARN
    else:
        status = PASS
    mig = mig_parent(device_name or "")
    if mig and status == FAIL:  # a slice has part of the SMs: slower than the whole GPU by design
        status = WARN
        basis += f"; {device_name} is a MIG slice, the peak is the whole GPU's"
    below = (
        f" (below {fail:.0%})"
        if status == FAIL
        else f" (below {warn:.0%})"
        if status == WARN
        else ""
    )
    figure = f"{worst_case} at {frac:.0%} of peak{below}"
    reason = f"slowest case {figure}; {basis}"
    fix = None
    if status != PASS:
        seen = [c for c in causes if c.explains(worst_case)]
        if seen:
            tflops = float(worst["tflops"])
            versus = ""
            if worst_case == "matmul_tf32" and isinstance(annotated.get("matmul_fp32"), dict):
                versus = f", no faster than FP32's {annotated['matmul_fp32']['tflops']:.1f}"
            reason = (
                f"{seen[0].text} ({worst_case} {tflops:.1f} TFLOP/s, {frac:.0%} of the "
                f"{worst['peak_tflops']:g} peak{versus})"
            )
            fix = seen[0].fix
            details = (*(f"also seen: {c.text}" for c in seen[1:]), *details, f"basis: {basis}")
        else:
            fix = "no cause seen; check: " + "; ".join(generic) if generic else None
            fix = fix or "no cause seen: switches, libraries, clocks and processes look normal"
    return CheckResult("speed", title, status, reason, fix, details)


def judge_run(
    probe: Mapping[str, Any] | None,
    bench: Mapping[str, Any],
    peaks: Peaks,
    results: Sequence[CheckResult] = (),
    state: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], CheckResult]:
    """A probe's benchmark annotated with peaks, and its `speed` check with the causes seen in
    the probe, the other checks' ``results`` and the GPU ``state`` (`verify --json`'s)."""
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    name = next((d.get("name") for d in devices if d.get("index") == bench.get("device")), None)
    annotated = annotate(bench, name, peaks)
    causes = diagnose.speed_causes(annotated, probe, state, results)
    generic = diagnose.generic_causes(CAUSES, state, results)
    return annotated, judge(annotated, name, causes, generic)
