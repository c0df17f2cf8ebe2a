"""NVML probe: NVIDIA's management library through nvidia-ml-py, the first and best source.

Split in two so recorded values test the parsing without a GPU or pynvml: `collect` calls NVML
and writes down plain values (numbers, strings, error names) in a dict that JSON can hold;
`parse` turns such a dict into facts.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from resolver.core.errors import escaped
from resolver.core.hostprofile import (
    LOST_BUS_UNKNOWN,
    MAX_LOST_ERROR,
    SOURCE_NVML,
    STATE_MISMATCH,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_OK,
    GpuInfo,
    LostGpu,
)
from resolver.host.probe import ProbeResult, gpu, pci_device_hex

# NVML errors that say something about the machine, not about this probe.
_NO_DRIVER = {"NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED"}
_MISMATCH = {"NVML_ERROR_LIB_RM_VERSION_MISMATCH"}
_NO_GPU = {"NVML_ERROR_NO_PERMISSION", "NVML_ERROR_GPU_NOT_FOUND"}


def collect(module: Any = None, *, preload: Sequence[str] = ()) -> dict[str, Any]:
    """Ask NVML for everything detection needs; return the raw answers, errors by name.

    ``module`` stands in for ``pynvml`` (tests); ``preload`` lists library paths to load before
    retrying when ``libnvidia-ml.so.1`` is not on the loader path (WSL2's /usr/lib/wsl/lib).
    """
    if module is None:
        if os.name != "nt" and not _library_loads(preload):
            # what pynvml's nvmlInit answers then, without importing it (15 ms, a bare
            # interpreter's start: most of `detect` on a machine without the driver)
            return {"init_error": "NVML_ERROR_LIBRARY_NOT_FOUND"}
        try:
            import pynvml
        except ImportError as exc:
            return {"import_error": str(exc)}
        module = pynvml
    names = _error_names(module)
    raw: dict[str, Any] = {}

    def call(key: str, fn: Callable[[], Any], errors: dict[str, str]) -> Any:
        try:
            return fn()
        except AttributeError:  # an nvidia-ml-py too old to wrap this function
            errors[key] = "NVML_ERROR_FUNCTION_NOT_FOUND"
        except Exception as exc:
            errors[key] = _error_name(exc, names)
        return None

    init_errors: dict[str, str] = {}
    call("init", lambda: module.nvmlInit(), init_errors)
    if init_errors.get("init") == "NVML_ERROR_LIBRARY_NOT_FOUND" and _preload(preload):
        init_errors.clear()
        call("init", lambda: module.nvmlInit(), init_errors)
    if init_errors:
        return {"init_error": init_errors["init"]}
    try:
        errors: dict[str, str] = {}
        raw["errors"] = errors
        raw["driver_version"] = _text(
            call("driver_version", lambda: module.nvmlSystemGetDriverVersion(), errors)
        )
        raw["cuda_driver_version"] = call(
            "cuda_driver_version", lambda: module.nvmlSystemGetCudaDriverVersion_v2(), errors
        )
        # R560+ drivers name their branch; older ones answer FUNCTION_NOT_FOUND (recorded).
        branch = call("driver_branch", lambda: module.nvmlSystemGetDriverBranch(), errors)
        raw["driver_branch"] = _text(getattr(branch, "branch", None))
        count = call("device_count", lambda: module.nvmlDeviceGetCount(), errors)
        raw["device_count"] = count
        raw["devices"] = [_collect_device(module, i, call) for i in range(count or 0)]
    finally:
        with contextlib.suppress(Exception):  # courtesy only: the answers are in hand
            module.nvmlShutdown()
    return raw


def _collect_device(
    module: Any, index: int, call: Callable[[str, Callable[[], Any], dict[str, str]], Any]
) -> dict[str, Any]:
    errors: dict[str, str] = {}
    dev: dict[str, Any] = {"index": index, "errors": errors}
    handle = call("handle", lambda: module.nvmlDeviceGetHandleByIndex(index), errors)
    if handle is None:
        return dev
    dev["name"] = _text(call("name", lambda: module.nvmlDeviceGetName(handle), errors))
    cc = call(
        "cuda_compute_capability", lambda: module.nvmlDeviceGetCudaComputeCapability(handle), errors
    )
    dev["cuda_compute_capability"] = list(cc) if cc is not None else None
    mem = call("memory_total", lambda: module.nvmlDeviceGetMemoryInfo(handle), errors)
    dev["memory_total"] = int(mem.total) if mem is not None else None
    pci = call("pci_info", lambda: module.nvmlDeviceGetPciInfo(handle), errors)
    dev["pci_device_id"] = int(pci.pciDeviceId) if pci is not None else None
    dev["pci_bus_id"] = _text(pci.busId) if pci is not None else None
    mig = call("mig_mode", lambda: module.nvmlDeviceGetMigMode(handle), errors)
    dev["mig_mode"] = list(mig) if mig is not None else None
    return dev


def _library_loads(preload: Sequence[str]) -> bool:
    """Whether the library pynvml loads on Linux (``libnvidia-ml.so.1``, by the loader's search)
    or one of ``preload`` loads here."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return _preload(preload)
    return True


def _preload(paths: Sequence[str]) -> bool:
    """Load the first existing library in ``paths``, so dlopen("libnvidia-ml.so.1") finds it.

    glibc matches an already loaded object by its soname, so pynvml's own load then succeeds.
    """
    import ctypes

    for path in paths:
        if os.path.exists(path):
            try:
                ctypes.CDLL(path)
            except OSError:
                continue
            return True
    return False


def _error_names(module: Any) -> dict[int, str]:
    return {
        getattr(module, n): n
        for n in dir(module)
        if n.startswith("NVML_ERROR_") and isinstance(getattr(module, n), int)
    }


def _error_name(exc: Exception, names: Mapping[int, str]) -> str:
    value = getattr(exc, "value", None)
    if isinstance(value, int):
        return names.get(value, f"NVML_ERROR_{value}")
    return f"{type(exc).__name__}: {exc}"


def _text(value: Any) -> str | None:
    """Old nvidia-ml-py releases return bytes; newer ones str."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip()
    return str(value).strip()


def cuda_version_str(value: int | None) -> str | None:
    """NVML's integer CUDA version -> "major.minor": 13000 -> "13.0", 12080 -> "12.8"."""
    if not value or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


_BUILD_BRANCH_RE = re.compile(r"^[rR]?[0-9]{3,4}(?:[._][0-9]{1,4}){0,3}$")


def branch_str(value: Any) -> str | None:
    """NVML's build-branch text ("r582_49"), validated; anything else is dropped.

    It names the branch the driver was built from, not its release branch: on the device machine
    Linux 580.159.04 (release branch R580) answers "r582_49" (recorded 2026-11-24). So it is shown
    and recorded, never used to decide which GPUs a driver drives.
    """
    if not isinstance(value, str) or len(value) > 32 or not value.isascii():
        return None
    value = value.strip()
    return value if _BUILD_BRANCH_RE.match(value) else None


def parse(raw: Mapping[str, Any]) -> ProbeResult:
    """Turn what `collect` recorded into facts and a detection state."""
    result = ProbeResult(source=SOURCE_NVML)
    if "import_error" in raw:
        result.status = "not installed (pip install nvidia-ml-py)"
        return result
    init_error = raw.get("init_error")
    if init_error:
        result.status = str(init_error)
        result.detail = str(init_error)
        if init_error in _NO_DRIVER:
            result.state = STATE_NO_DRIVER
        elif init_error in _MISMATCH:
            result.state = STATE_MISMATCH
        elif init_error in _NO_GPU:
            result.state = STATE_NO_GPU
        return result
    errors: Mapping[str, str] = raw.get("errors") or {}
    result.driver = raw.get("driver_version") or None
    if result.driver:
        result.sources["driver"] = SOURCE_NVML
    result.driver_cuda = cuda_version_str(raw.get("cuda_driver_version"))
    result.driver_build_branch = branch_str(raw.get("driver_branch"))
    if result.driver_build_branch:
        result.sources["driver_build_branch"] = SOURCE_NVML
    if result.driver_cuda:
        result.sources["driver_cuda"] = SOURCE_NVML
    if "device_count" in errors:
        result.status = f"device count: {errors['device_count']}"
        result.state = STATE_MISMATCH if errors["device_count"] in _MISMATCH else None
        return result
    devices = raw.get("devices") or []
    # A device NVML counts but cannot open is lost, as nvidia-smi's "Unable to determine the
    # device handle" says of the same failure: never a GPU of unknown model to build for. With
    # no handle NVML cannot say its PCI bus; nvidia-smi (run since this answer is incomplete)
    # names it, and `detection` prefers that entry.
    opened = [d for d in devices if "handle" not in (d.get("errors") or {})]
    result.gpus = [_parse_device(d) for d in opened]
    result.lost = [
        LostGpu(LOST_BUS_UNKNOWN, _lost_reason(d), SOURCE_NVML) for d in devices if d not in opened
    ]
    result.state = STATE_OK if result.gpus else STATE_NO_GPU
    problems = sorted({e for d in opened for e in (d.get("errors") or {}).values()})
    problems = [p for p in problems if p != "NVML_ERROR_NOT_SUPPORTED"]
    result.status = "ok" if not problems else "ok, with errors: " + ", ".join(problems)
    if result.lost:
        result.status = f"{len(result.gpus)} GPU(s) answered, {len(result.lost)} lost"
    return result


def _lost_reason(dev: Mapping[str, Any]) -> str:
    """ "GPU index 3: NVML_ERROR_GPU_IS_LOST", escaped and bounded (an exception's own text)."""
    reason = escaped(" ".join(str(dev["errors"]["handle"]).split())[:100])
    return f"GPU index {dev['index']}: {reason}"[:MAX_LOST_ERROR]


def _parse_device(dev: Mapping[str, Any]) -> GpuInfo:
    cc = dev.get("cuda_compute_capability")
    mig = dev.get("mig_mode")
    memory = dev.get("memory_total")
    return gpu(
        int(dev["index"]),
        SOURCE_NVML,
        name=dev.get("name") or None,
        cc=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_mib=int(memory) // (1024 * 1024) if memory else None,
        pci_device_id=pci_device_hex(dev.get("pci_device_id")),
        mig=None if not mig else ("enabled" if mig[0] else "disabled"),
    )
