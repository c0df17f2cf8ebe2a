"""The GPU's running state from NVML: clocks, limits, link, modes and the processes on it.

`verify` reads it beside the probe, in a thread of its own, so it never lengthens a plain run:
one snapshot before the probe touches the GPU (who else is on it, how busy it was), and with
--benchmark a few samples a second while the probe measures (what held the clocks back).
Like `nvml.collect`, every value is written down as a plain number, string or list, so recorded
states replay through `verify.diagnose` without a GPU; strings from the driver (process names)
are cleaned and bounded before anyone prints them.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

# NVML's clock-event ("throttle") reason bits, as nvml.h defines them -> the name we print.
REASONS: dict[int, str] = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown",
    0x100: "display clock setting",
}
SAMPLE_S = 0.25
MAX_SAMPLES = 600  # 150 s of samples: a probe that runs longer keeps only the first ones
_NAME_MAX = 64
_BAD = re.compile(r"[^\x20-\x7e]")


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def clean(text: Any) -> str | None:
    """A driver-given string made safe to print: printable ASCII only, bounded."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = _BAD.sub("?", str(text).strip())
    return out[:_NAME_MAX] or None


def _num(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def snapshot(module: Any, exclude_pids: Collection[int] = ()) -> dict[str, Any]:
    """Every GPU's state now (NVML must be initialised); unreadable values are None."""
    m = module
    gpus: list[dict[str, Any]] = []
    for index in range(_call(m, "nvmlDeviceGetCount") or 0):
        handle = _call(m, "nvmlDeviceGetHandleByIndex", index)
        if handle is not None:
            gpus.append(_device(m, index, handle, exclude_pids))
    return {"gpus": gpus}


def _call(m: Any, name: str, *args: Any) -> Any:
    try:
        return getattr(m, name)(*args)
    except Exception:  # NOT_SUPPORTED on this GPU, a function an old nvidia-ml-py lacks
        return None


def _mw(value: Any) -> float | None:
    return round(value / 1000, 1) if _num(value) is not None else None


def _device(m: Any, index: int, h: Any, exclude_pids: Collection[int]) -> dict[str, Any]:
    pci = _call(m, "nvmlDeviceGetPciInfo", h)
    util = _call(m, "nvmlDeviceGetUtilizationRates", h)
    mig = _call(m, "nvmlDeviceGetMigMode", h)
    ecc = _call(m, "nvmlDeviceGetEccMode", h)
    reasons = _call(m, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:  # its name before nvidia-ml-py 12.535
        reasons = _call(m, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    procs = _call(m, "nvmlDeviceGetComputeRunningProcesses", h) or []
    sm, mem = getattr(m, "NVML_CLOCK_SM", 1), getattr(m, "NVML_CLOCK_MEM", 2)
    return {
        "index": index,
        "name": clean(_call(m, "nvmlDeviceGetName", h)),
        "pci_bus_id": clean(pci.busId) if pci is not None else None,
        "clocks": {
            "sm_mhz": _num(_call(m, "nvmlDeviceGetClockInfo", h, sm)),
            "sm_max_mhz": _num(_call(m, "nvmlDeviceGetMaxClockInfo", h, sm)),
            "sm_applications_mhz": _num(_call(m, "nvmlDeviceGetApplicationsClock", h, sm)),
            "mem_mhz": _num(_call(m, "nvmlDeviceGetClockInfo", h, mem)),
        },
        "power": {
            "draw_w": _mw(_call(m, "nvmlDeviceGetPowerUsage", h)),
            "limit_w": _mw(_call(m, "nvmlDeviceGetPowerManagementLimit", h)),
            "default_limit_w": _mw(_call(m, "nvmlDeviceGetPowerManagementDefaultLimit", h)),
            "enforced_limit_w": _mw(_call(m, "nvmlDeviceGetEnforcedPowerLimit", h)),
        },
        "temperature_c": _num(_call(m, "nvmlDeviceGetTemperature", h, 0)),
        "utilization": ({"gpu": _num(util.gpu), "memory": _num(util.memory)} if util else None),
        "clock_event_reasons": reason_names(reasons) if _num(reasons) else [],
        "pcie": {
            "gen": _num(_call(m, "nvmlDeviceGetCurrPcieLinkGeneration", h)),
            "max_gen": _num(_call(m, "nvmlDeviceGetMaxPcieLinkGeneration", h)),
            "width": _num(_call(m, "nvmlDeviceGetCurrPcieLinkWidth", h)),
            "max_width": _num(_call(m, "nvmlDeviceGetMaxPcieLinkWidth", h)),
        },
        "mig": bool(mig[0]) if mig else None,
        "persistence": _flag(_call(m, "nvmlDeviceGetPersistenceMode", h)),
        "ecc": bool(ecc[0]) if ecc else None,
        "processes": [_process(m, p) for p in procs if _num(p.pid) not in exclude_pids],
        # the probe's own process seen by its pid: NVML's pids are this namespace's
        "own_process_seen": any(_num(p.pid) in exclude_pids for p in procs),
    }


def _flag(value: Any) -> bool | None:
    return bool(value) if _num(value) is not None else None


def _process(m: Any, p: Any) -> dict[str, Any]:
    used = _num(getattr(p, "usedGpuMemory", None))
    return {
        "pid": _num(p.pid),
        "name": clean(_call(m, "nvmlSystemGetProcessName", p.pid)),
        "used_mib": used // (1024 * 1024) if used is not None and used >= 0 else None,
    }


class Sampler:
    """NVML read in a thread beside the probe: a snapshot at the start, then (``sample``) the
    busy moments: the lowest SM clock, every clock-event reason and every other process."""

    def __init__(
        self,
        *,
        sample: bool,
        exclude_pids: Collection[int] = (),
        module: Any = None,
        interval_s: float = SAMPLE_S,
    ) -> None:
        self.sample = sample
        self.exclude = set(exclude_pids)
        self.module = module
        self.interval_s = interval_s
        # the shape of `verify --json`'s `state` (less env and torch, which the probe reports)
        self.result: dict[str, Any] = {"nvml": None, "gpus": None, "during_benchmark": None}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpustate", daemon=True)
        self._thread.start()

    def finish(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Stop sampling; the state read (``nvml`` is "ok", or why NVML could not answer)."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.result["nvml"] = "NVML did not answer in time"
        return self.result

    def _run(self) -> None:
        m = self.module
        try:
            if m is None:
                import pynvml

                m = pynvml
            m.nvmlInit()
        except Exception as exc:  # no pynvml, no driver: the state is simply unknown
            self.result["nvml"] = clean(f"{type(exc).__name__}: {exc}")
            return
        try:
            self.result["gpus"] = snapshot(m, self.exclude)["gpus"]
            self.result["nvml"] = "ok"
            if self.sample:
                self.result["during_benchmark"] = self._poll(m)
        except Exception as exc:
            self.result["nvml"] = clean(f"{type(exc).__name__}: {exc}")
        finally:
            with contextlib.suppress(Exception):
                m.nvmlShutdown()

    def _poll(self, m: Any) -> dict[str, Any]:
        during = Busy()
        while not self._stop.wait(self.interval_s) and during.samples < MAX_SAMPLES:
            during.add(snapshot(m, self.exclude))
        return during.to_json()


class Busy:
    """What samples taken while a GPU was busy add up to, per GPU (by NVML index)."""

    def __init__(self) -> None:
        self.samples = 0
        self.gpus: dict[int, dict[str, Any]] = {}

    def add(self, snap: Mapping[str, Any]) -> None:
        self.samples += 1
        for g in snap.get("gpus") or []:
            util = (g.get("utilization") or {}).get("gpu")
            if not util:  # an idle moment says nothing about the benchmark
                continue
            acc = self.gpus.setdefault(
                int(g["index"]),
                {
                    "index": int(g["index"]),
                    "busy_samples": 0,
                    "sm_mhz_min": None,
                    "sm_mhz_max": None,
                    "power_w_max": None,
                    "temperature_c_max": None,
                    "clock_event_reasons": [],
                    "processes": [],
                    "own_process_seen": False,
                },
            )
            acc["own_process_seen"] = acc["own_process_seen"] or bool(g.get("own_process_seen"))
            acc["busy_samples"] += 1
            clocks, power = g.get("clocks") or {}, g.get("power") or {}
            _fold(acc, "sm_mhz_min", clocks.get("sm_mhz"), min)
            _fold(acc, "sm_mhz_max", clocks.get("sm_mhz"), max)
            _fold(acc, "power_w_max", power.get("draw_w"), max)
            _fold(acc, "temperature_c_max", g.get("temperature_c"), max)
            for r in g.get("clock_event_reasons") or []:
                if r not in acc["clock_event_reasons"]:
                    acc["clock_event_reasons"].append(r)
            seen = {p.get("pid") for p in acc["processes"]}
            acc["processes"] += [p for p in g.get("processes") or [] if p.get("pid") not in seen]

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "gpus": [self.gpus[i] for i in sorted(self.gpus)]}


def _fold(acc: dict[str, Any], key: str, value: Any, pick: Callable[[Any, Any], Any]) -> None:
    if isinstance(value, (int, float)):
        acc[key] = value if acc[key] is None else pick(acc[key], value)
