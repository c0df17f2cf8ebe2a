"""Why a verdict came out as it did: the causes verify can see, each with the number showing it.

Pure functions of what was read: the probe's environment variables and torch switches, the
benchmark, the other checks' results and the GPU state NVML gave (`host.gpustate`). A cause
is named only when it was observed; the generic list of possibilities is kept for what could not
be told apart. ``state_json`` is the `state` object of `verify --json`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resolver.verify.result import FAIL, WARN, CheckResult

# Environment variables that change what the GPU is asked to do (all reported in `state.env`).
ENV_SWITCHES = (
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
)
ALL = frozenset({"*"})
TF32 = frozenset({"matmul_tf32", "conv2d_tf32"})
CONV = frozenset({"conv2d_bf16", "conv2d_tf32"})
MATMUL = frozenset({"matmul_tf32", "matmul_fp32", "matmul_bf16"})
# A TF32 matmul less than this many times faster than FP32 did not use TF32 (healthy: ~7x).
TF32_MIN_GAIN = 1.5
BUSY_BEFORE_PCT = 10  # utilisation before the benchmark that says someone else was computing


@dataclass(frozen=True)
class Cause:
    """One observed cause: the cases it slows, the sentence naming it, what to do."""

    cases: frozenset[str]
    text: str
    fix: str
    # `verify --json`'s benchmark.gpus[].cause: clocks, other_process, temperature, power,
    # pcie_link; None for causes of the software (switches, libraries, variables)
    kind: str | None = None

    def explains(self, case: str) -> bool:
        return self.cases is ALL or case in self.cases


def shown(value: Any, limit: int = 200) -> str:
    """A value read back from the probe (an environment variable), safe to print: printable
    ASCII, bounded."""
    text = re.sub(r"[^\x20-\x7e]", "?", str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _gib(mib: Any) -> str:
    return f"{mib / 1024:.1f} GiB" if isinstance(mib, (int, float)) else "? GiB"


def bus_key(bus: Any) -> tuple[int, int, int] | None:
    """ "00000000:18:00.0" (NVML) or "0000:18:00" (the probe) -> (domain, bus, device)."""
    m = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)", str(bus or ""))
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)) if m else None


def gpu_state(
    state: Mapping[str, Any] | None, probe: Mapping[str, Any] | None, device: Any
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """NVML's record of the probe's CUDA device ``device`` (matched by PCI bus, or the only GPU):
    its snapshot before the probe and its busy samples during the benchmark."""
    before = (state or {}).get("gpus") or []
    devices = ((probe or {}).get("cuda") or {}).get("devices") or []
    bus = next((bus_key(d.get("pci_bus_id")) for d in devices if d.get("index") == device), None)
    snap = next((g for g in before if bus and bus_key(g.get("pci_bus_id")) == bus), None)
    if snap is None and len(before) == 1 and len(devices) <= 1:
        snap = before[0]
    if snap is None:
        return None, None
    during = ((state or {}).get("during_benchmark") or {}).get("gpus") or []
    busy = next((g for g in during if g.get("index") == snap.get("index")), None)
    return snap, busy


def other_processes(
    snap: Mapping[str, Any] | None, busy: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Other compute processes: those on the GPU before the probe started, and those seen while
    it ran where NVML's pids are provably this namespace's (the probe's own pid was seen)."""
    procs = list((snap or {}).get("processes") or [])
    if busy and busy.get("own_process_seen"):
        pids = {p.get("pid") for p in procs}
        procs += [p for p in busy.get("processes") or [] if p.get("pid") not in pids]
    return procs


def speed_causes(
    bench: Mapping[str, Any],
    probe: Mapping[str, Any] | None,
    state: Mapping[str, Any] | None,
    results: Sequence[CheckResult] = (),
) -> list[Cause]:
    """Every cause of slowness that was observed, most certain first."""
    env = (probe or {}).get("env") or {}
    sw = ((probe or {}).get("torch") or {}).get("switches") or {}
    snap, busy = gpu_state(state, probe, bench.get("device"))
    out: list[Cause] = []
    procs = other_processes(snap, busy)
    util = ((snap or {}).get("utilization") or {}).get("gpu")
    busy_note = f", {util}% utilisation before the benchmark" if isinstance(util, int) else ""
    if procs:
        who = ", ".join(
            f"pid {p.get('pid')} ({p.get('name') or '?'}, {_gib(p.get('used_mib'))})"
            for p in procs[:3]
        )
        many = "another process uses" if len(procs) == 1 else f"{len(procs)} other processes use"
        out.append(
            Cause(
                ALL,
                f"{many} this GPU: {who}{busy_note}",
                "stop it, or run on an idle GPU",
                "other_process",
            )
        )
    elif isinstance(util, int) and util >= BUSY_BEFORE_PCT:
        out.append(
            Cause(
                ALL,
                f"the GPU was {util}% busy before the benchmark (no process of it visible here: "
                "another container or VM?)",
                "run on an idle GPU (nvidia-smi on the host shows who uses it)",
                "other_process",
            )
        )
    if env.get("NVIDIA_TF32_OVERRIDE") == "0":
        out.append(
            Cause(
                TF32,
                "NVIDIA_TF32_OVERRIDE=0 is set in this environment: it disables TF32",
                "unset NVIDIA_TF32_OVERRIDE (it overrides torch's allow_tf32 for every library)",
            )
        )
    elif _tf32_gain(bench) is not None and (_tf32_gain(bench) or 0) < TF32_MIN_GAIN:
        out.append(
            Cause(
                TF32,
                "TF32 is not in effect although torch asked for it",
                "see the loaded-libraries check (a foreign cuBLAS?) and the environment",
            )
        )
    out += _switch_causes(sw, bench)
    for r in results:
        if r.id in ("libraries", "arch", "cudnn") and r.status in (FAIL, WARN):
            out.append(Cause(ALL, f"{r.title}: {r.reason}", r.fix or "see that check above"))
    if env.get("LD_PRELOAD"):
        out.append(
            Cause(
                ALL,
                f"LD_PRELOAD={shown(env['LD_PRELOAD'])} is set: its libraries come before "
                "the wheel's",
                "unset LD_PRELOAD",
            )
        )
    if env.get("CUDA_LAUNCH_BLOCKING") not in (None, "", "0"):
        out.append(
            Cause(
                ALL,
                f"CUDA_LAUNCH_BLOCKING={shown(env['CUDA_LAUNCH_BLOCKING'])} is set: every kernel "
                "launch waits for the GPU",
                "unset CUDA_LAUNCH_BLOCKING (a debugging switch)",
            )
        )
    if env.get("CUBLAS_WORKSPACE_CONFIG"):
        out.append(
            Cause(
                MATMUL,
                f"CUBLAS_WORKSPACE_CONFIG={shown(env['CUBLAS_WORKSPACE_CONFIG'])} limits cuBLAS's "
                "workspace (set for deterministic runs)",
                "unset CUBLAS_WORKSPACE_CONFIG unless determinism is needed",
            )
        )
    out += _state_causes(snap, busy)
    return out


def _tf32_gain(bench: Mapping[str, Any]) -> float | None:
    tf32, fp32 = bench.get("matmul_tf32") or {}, bench.get("matmul_fp32") or {}
    if not tf32.get("tflops") or not fp32.get("tflops"):
        return None
    return float(tf32["tflops"]) / float(fp32["tflops"])


def _switch_causes(sw: Mapping[str, Any], bench: Mapping[str, Any]) -> list[Cause]:
    out: list[Cause] = []
    backend = next((str(r.get("backend")) for k in CONV if isinstance(r := bench.get(k), dict)), "")
    picked = f" (ATen picked {backend.split('.')[-1]})" if backend else ""
    if sw.get("cudnn_enabled") is False:
        out.append(
            Cause(
                CONV,
                "torch.backends.cudnn.enabled is False in this interpreter: convolutions run "
                f"without cuDNN{picked}",
                "find what sets it (a sitecustomize, a .pth file, the training script) and drop it",
            )
        )
    elif backend and "cudnn" not in backend.lower():
        out.append(
            Cause(
                CONV,
                f"cuDNN did not run the convolution{picked}",
                "see the cuDNN and loaded-libraries checks",
            )
        )
    if sw.get("cudnn_deterministic") is True or sw.get("deterministic_algorithms") is True:
        which = (
            "torch.backends.cudnn.deterministic"
            if sw.get("cudnn_deterministic")
            else "torch.use_deterministic_algorithms"
        )
        out.append(
            Cause(
                CONV,
                f"{which} is True: cuDNN may use only its deterministic algorithms",
                "turn determinism off where speed matters",
            )
        )
    if sw.get("cudnn_allow_tf32") is False:
        out.append(
            Cause(
                frozenset({"conv2d_tf32"}),
                "torch.backends.cudnn.allow_tf32 is False: float32 convolutions run in full FP32",
                "leave torch.backends.cudnn.allow_tf32 at its default (True)",
            )
        )
    return out


def _state_causes(snap: Mapping[str, Any] | None, busy: Mapping[str, Any] | None) -> list[Cause]:
    if not snap:
        return []
    out: list[Cause] = []
    power = snap.get("power") or {}
    clocks = snap.get("clocks") or {}
    limit, default = power.get("limit_w"), power.get("default_limit_w")
    if isinstance(limit, (int, float)) and isinstance(default, (int, float)) and limit < default:
        out.append(
            Cause(
                ALL,
                f"the power limit is {limit:g} W, below the default {default:g} W",
                "nvidia-smi -q -d POWER; an administrator set it (nvidia-smi -pl)",
                "power",
            )
        )
    if snap.get("mig"):
        out.append(Cause(ALL, "MIG mode is on: this is a slice of the GPU", "nvidia-smi -L"))
    app, top = clocks.get("sm_applications_mhz"), clocks.get("sm_max_mhz")
    if isinstance(app, int) and isinstance(top, int) and app < top:
        out.append(
            Cause(
                ALL,
                f"applications clocks are set to {app} of {top} MHz",
                "nvidia-smi -q -d CLOCK; an administrator set them (nvidia-smi -ac / -rac)",
                "clocks",
            )
        )
    reasons = [r for r in (busy or {}).get("clock_event_reasons") or [] if r != "GPU idle"]
    low = (busy or {}).get("sm_mhz_min")
    at = f"SM clock down to {low} of {top} MHz" if low and top else "clocks lowered"
    hot = (busy or {}).get("temperature_c_max")
    severe = [r for r in reasons if "thermal" in r or "HW" in r]
    if severe:
        out.append(
            Cause(
                ALL,
                f"the GPU slowed itself during the benchmark: {', '.join(severe)} ({at}"
                + (f", {hot} °C" if hot else "")
                + ")",
                "check cooling and power delivery (nvidia-smi -q -d PERFORMANCE,TEMPERATURE)",
                "temperature" if any("thermal" in r for r in severe) else "power",
            )
        )
    if "SW power cap" in reasons:
        drew = (busy or {}).get("power_w_max")
        out.append(
            Cause(
                ALL,
                f"the GPU ran at its power cap during the benchmark ({at}"
                + (f", {drew:g} of {limit:g} W" if drew and limit else "")
                + ")",
                "normal under full load at the default limit; below it, see the power limit",
                "power",
            )
        )
    return out


def generic_causes(
    causes_all: Iterable[str], state: Mapping[str, Any] | None, results: Sequence[CheckResult]
) -> list[str]:
    """The generic list less what was checked and seen normal."""
    seen = {r.id: r.status for r in results}
    out = []
    for text in causes_all:
        if text.startswith("cuBLAS") and seen.get("libraries") == "pass":
            continue
        if text.startswith("a build") and seen.get("arch") == "pass":
            continue
        if state and state.get("gpus") and text.startswith(("clocks", "a MIG", "another")):
            continue
        out.append(text)
    return out


def cuda_visible_cause(env: Mapping[str, Any], host_gpus: Sequence[str]) -> str | None:
    """Why torch sees no GPU, when CUDA_VISIBLE_DEVICES says it: empty, or naming none."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    has = f" (the host has {len(host_gpus)}: {', '.join(host_gpus)})" if host_gpus else ""
    first = str(value).split(",")[0].strip()
    if not first:
        return f"CUDA_VISIBLE_DEVICES is set to an empty value: torch sees no GPU{has}"
    if re.fullmatch(r"-?[0-9]+", first) and host_gpus and not 0 <= int(first) < len(host_gpus):
        return f"CUDA_VISIBLE_DEVICES={shown(value)} names no GPU of this host{has}"
    return None


def state_json(probe: Mapping[str, Any] | None, state: Mapping[str, Any] | None) -> dict[str, Any]:
    """`verify --json`'s `state`: NVML's GPUs and benchmark samples (``host.gpustate``), with the
    environment variables and torch switches the probe reported."""
    env = (probe or {}).get("env") or {}
    sw = ((probe or {}).get("torch") or {}).get("switches")
    st = state or {}
    return {
        "nvml": st.get("nvml"),
        "env": {k: env.get(k) for k in ENV_SWITCHES},
        "torch": dict(sw) if isinstance(sw, dict) else None,
        "gpus": st.get("gpus"),
        "during_benchmark": st.get("during_benchmark"),
    }
