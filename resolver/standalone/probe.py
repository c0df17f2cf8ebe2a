"""gpuresolve's probe: runs inside the environment under test and prints one JSON document.

It is the only code of gpuresolve that imports torch, and it does so in the target interpreter,
in a child process: a crash inside a CUDA library kills the probe, never gpuresolve. Standard
library and torch only, Python 3.9 syntax (it runs in whatever interpreter the user names).
Launched as ``python -I -c <this source> [--want NAME]... [--benchmark]``; the JSON goes to the
original stdout, while anything torch or a library prints is sent to stderr, where a line
``@@gpuresolve-stage NAME`` also marks each stage (the last one names where a crash happened).
It reports facts only; judging them against the host and the database is gpuresolve's job.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import re
import sys
import threading
import time
import warnings
from typing import Any, Callable

PROBE_VERSION = 1
STAGE_PREFIX = "@@gpuresolve-stage "
# Libraries whose loaded copy matters: family -> file name prefix.
LIB_FAMILIES = {
    "cudnn": "libcudnn",
    "cudart": "libcudart.so",
    "cublas": "libcublas",
    "nccl": "libnccl.so",
}
_DIST_PREFIXES = ("nvidia-", "cuda-")
_DIST_NAMES = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")
_T0 = time.perf_counter()


def stage(result: dict[str, Any], name: str) -> None:
    """Mark the start of a stage on stderr (read back if the process dies) and in the result."""
    result["stage"] = name
    result["timings"][name] = round(time.perf_counter() - _T0, 4)
    sys.stderr.write(STAGE_PREFIX + name + "\n")
    sys.stderr.flush()


def error_of(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:2000]}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def markers() -> dict[str, str]:
    """The PEP 508 marker environment of this interpreter (as packaging computes it)."""
    import platform

    iv = sys.implementation.version
    impl = f"{iv.major}.{iv.minor}.{iv.micro}"
    if iv.releaselevel != "final":
        impl += iv.releaselevel[0] + str(iv.serial)
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": impl,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def site_dirs() -> list[str]:
    import site
    import sysconfig

    dirs = list(getattr(site, "getsitepackages", list)())  # old virtualenv's site.py lacks it
    paths = sysconfig.get_paths()
    dirs.extend(paths[key] for key in ("purelib", "platlib") if key in paths)
    out: list[str] = []
    for d in dirs:
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def distributions(wanted: set[str]) -> dict[str, dict[str, Any]]:
    """Installed distributions that matter, found by directory name before any METADATA is read.

    The first one on sys.path wins, as for import. Reading every METADATA of a large
    environment would cost more than the rest of the probe.
    """
    from importlib import metadata
    from pathlib import Path

    found: dict[str, dict[str, Any]] = {}
    for entry in sys.path:
        try:
            items = list(os.scandir(entry or "."))
        except OSError:
            continue
        for item in items:
            if not item.name.endswith((".dist-info", ".egg-info")):
                continue
            canon = canonical(item.name.rsplit(".", 1)[0].split("-", 1)[0])
            if canon in found:
                continue
            if not (canon in wanted or canon in _DIST_NAMES or canon.startswith(_DIST_PREFIXES)):
                continue
            try:
                dist = metadata.PathDistribution(Path(item.path))
                info: dict[str, Any] = {
                    "name": dist.metadata["Name"],
                    "version": dist.version,
                    "requires": list(dist.requires or []),
                    "location": entry,
                }
                installer = dist.read_text("INSTALLER")
                info["installer"] = installer.strip() if installer else None
            except Exception as exc:  # a broken dist-info is a fact to report, not a crash
                info = {"error": error_of(exc), "location": entry}
            found[canon] = info
    return found


def companion(name: str) -> dict[str, Any] | None:
    """A companion's version.py, read without importing it (importing costs and can fail)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    out: dict[str, Any] = {"location": next(iter(spec.submodule_search_locations))}
    path = os.path.join(out["location"], "version.py")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return out
    for key in ("__version__", "cuda", "git_version"):
        m = re.search(r"^" + key + r"\s*(?::\s*\S+\s*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
        out[key.strip("_")] = m.group(1) if m else None
    return out


def mapped_libraries() -> list[str] | None:
    """Shared objects this process has mapped (Linux), in first-mapped order; None elsewhere."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    seen: list[str] = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
            path = parts[5].strip()
            if path not in seen:
                seen.append(path)
    return seen


def family_of(path: str) -> str | None:
    base = os.path.basename(path)
    for fam, prefix in LIB_FAMILIES.items():
        if base.startswith(prefix):
            return fam
    return None


def env_copies(roots: list[str]) -> dict[str, list[str]]:
    """Copies of each library family shipped inside the environment (wheels, conda's lib/)."""
    patterns = [
        os.path.join(r, sub, f"{prefix}*")
        for r in roots
        for sub in ("nvidia/*/lib", "nvidia/*/*/lib", "nvidia/cu*/lib", "torch/lib", "lib")
        for prefix in ("libcudnn", "libcudart.so", "libcublas", "libnccl.so")
    ]
    out: dict[str, list[str]] = {}
    for pattern in patterns:
        for path in glob.glob(pattern):
            fam = family_of(path)
            if fam:
                real = os.path.realpath(path)
                if real not in out.setdefault(fam, []):
                    out[fam].append(real)
    return out


def rel_err(torch: Any, got: Any, ref: Any) -> float:
    scale = float(ref.abs().max()) or 1.0
    return float((got.double().cpu() - ref).abs().max()) / scale


def gpu_test(torch: Any, index: int) -> dict[str, Any]:
    """A matmul and a conv2d forward+backward on one GPU, against a float64 CPU reference.

    The two run in parallel threads: loading cuBLAS and loading cuDNN's engines are each a few
    hundred milliseconds of library start-up, and torch releases the GIL inside its operators.
    """
    out: dict[str, Any] = {"device": index}
    before = set(mapped_libraries() or [])
    conv: dict[str, Any] = {}
    thread = threading.Thread(target=conv_test, args=(torch, index, conv), daemon=True)
    thread.start()
    try:
        out["matmul"] = matmul_test(torch, index)
    finally:
        thread.join()
    out.update(conv)
    after = mapped_libraries() or []
    out["cudnn_libs_loaded"] = [p for p in after if family_of(p) == "cudnn" and p not in before]
    return out


def matmul_test(torch: Any, index: int) -> dict[str, Any]:
    dev = torch.device("cuda", index)
    gen = torch.Generator().manual_seed(1234)
    a = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    b = torch.randn(256, 256, generator=gen, dtype=torch.float64)
    matmul = torch.backends.cuda.matmul
    tf32 = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        got = a.float().to(dev) @ b.float().to(dev)
        torch.cuda.synchronize(dev)
        return {"rel_err": rel_err(torch, got, a @ b)}
    except Exception as exc:
        return {"error": error_of(exc)}
    finally:
        matmul.allow_tf32 = tf32


def conv_test(torch: Any, index: int, out: dict[str, Any]) -> None:
    """Fills ``out`` (it runs in a thread): conv2d, cudnn_acceptable, conv_backend."""
    try:
        dev = torch.device("cuda", index)
        gen = torch.Generator().manual_seed(4321)
        conv2d = torch.nn.functional.conv2d
        x = torch.randn(4, 8, 16, 16, generator=gen, dtype=torch.float64, requires_grad=True)
        w = torch.randn(16, 8, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
        y = conv2d(x, w, padding=1)
        gy = torch.randn(y.shape, generator=gen, dtype=torch.float64)
        y.backward(gy)
        xg = x.detach().float().to(dev).requires_grad_(True)
        wg = w.detach().float().to(dev).requires_grad_(True)
        flags = torch.backends.cudnn.flags
        with flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=False):
            out["cudnn_acceptable"] = bool(torch.backends.cudnn.is_acceptable(xg))
            out["conv_backend"] = conv_backend(torch, xg, wg)
            yg = conv2d(xg, wg, padding=1)
            yg.backward(gy.float().to(dev))
        torch.cuda.synchronize(dev)
        out["conv2d"] = {
            "rel_err": max(
                rel_err(torch, yg.detach(), y.detach()),
                rel_err(torch, xg.grad, x.grad),
                rel_err(torch, wg.grad, w.grad),
            )
        }
    except Exception as exc:
        out["conv2d"] = {"error": error_of(exc)}


def conv_backend(torch: Any, x: Any, w: Any) -> str | None:
    """The backend ATen picks for this convolution ("ConvBackend.Cudnn"), where torch says."""
    select = getattr(torch._C, "_select_conv_backend", None)
    if select is None:
        return None
    try:
        backend = select(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, None)
    except Exception:
        return None
    return str(backend)


def bench_time(torch: Any, fn: Callable[[], Any], seconds: float) -> float:
    """Seconds per call: two warm-ups, one timed call to size the batch, then the batch."""
    fn()
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t, 1e-6)
    n = int(min(max(seconds / one, 3), 500))
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n


def switches(torch: Any) -> dict[str, Any]:
    """torch's own speed switches as this interpreter set them (a sitecustomize may have)."""
    reads: dict[str, Callable[[], Any]] = {
        "matmul_allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": lambda: torch.get_float32_matmul_precision(),
        "cudnn_enabled": lambda: torch.backends.cudnn.enabled,
        "cudnn_benchmark": lambda: torch.backends.cudnn.benchmark,
        "cudnn_deterministic": lambda: torch.backends.cudnn.deterministic,
        "cudnn_allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "deterministic_algorithms": lambda: torch.are_deterministic_algorithms_enabled(),
    }
    out: dict[str, Any] = {}
    for key, read in reads.items():
        try:
            value = read()
            out[key] = value if isinstance(value, (bool, str)) else str(value)
        except Exception:
            out[key] = None
    return out


def conv_bench(torch: Any, seconds: float, index: int = 0) -> dict[str, Any]:
    """A ResNet-50 stage-3 3x3 convolution, big enough to be bound by arithmetic, in bf16 and
    TF32, channels_last, under this interpreter's own cuDNN switches (so a slow path is seen)."""
    dev = torch.device("cuda", index)
    n, c, hw = 256, 256, 14
    flop = 2.0 * n * c * c * hw * hw * 9
    out: dict[str, Any] = {}
    for label, dtype in (("conv2d_bf16", torch.bfloat16), ("conv2d_tf32", torch.float32)):
        if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            continue
        x = torch.randn(n, c, hw, hw, device=dev, dtype=dtype)
        w = torch.randn(c, c, 3, 3, device=dev, dtype=dtype)
        x = x.to(memory_format=torch.channels_last)
        w = w.to(memory_format=torch.channels_last)

        def conv(x: Any = x, w: Any = w) -> Any:
            return torch.nn.functional.conv2d(x, w, padding=1)

        s = bench_time(torch, conv, seconds)
        out[label] = {
            "ms": s * 1e3,
            "tflops": flop / s / 1e12,
            "backend": conv_backend(torch, x, w),
        }
    return out


def benchmark(torch: Any, seconds: float = 1.0, index: int = 0) -> dict[str, Any]:
    """conv2d with cuDNN on and off; a float32 matmul with TF32 on and off, on GPU ``index``,
    which the caller makes the current device (``synchronize()`` waits for that one only)."""
    dev = torch.device("cuda", index)
    out: dict[str, Any] = {"device": index}
    x = torch.randn(32, 64, 56, 56, device=dev)
    w = torch.randn(64, 64, 3, 3, device=dev)
    conv_flop = 2.0 * 32 * 64 * 56 * 56 * 64 * 9

    def conv() -> Any:
        return torch.nn.functional.conv2d(x, w, padding=1)

    with torch.no_grad():
        for label, enabled in (("conv2d_cudnn", True), ("conv2d_no_cudnn", False)):
            with torch.backends.cudnn.flags(enabled=enabled):
                s = bench_time(torch, conv, seconds)
            out[label] = {"ms": s * 1e3, "tflops": conv_flop / s / 1e12, "images_per_s": 32 / s}
        n = 4096
        a = torch.randn(n, n, device=dev)
        b = torch.randn(n, n, device=dev)
        matmul = torch.backends.cuda.matmul
        tf32 = matmul.allow_tf32
        try:
            for label, allow in (("matmul_tf32", True), ("matmul_fp32", False)):
                matmul.allow_tf32 = allow
                s = bench_time(torch, lambda: a @ b, seconds)
                out[label] = {"ms": s * 1e3, "tflops": 2.0 * n**3 / s / 1e12}
        finally:
            matmul.allow_tf32 = tf32
        if torch.cuda.is_bf16_supported():
            ah, bh = a.bfloat16(), b.bfloat16()
            s = bench_time(torch, lambda: ah @ bh, seconds)
            out["matmul_bf16"] = {"ms": s * 1e3, "tflops": 2.0 * n**3 / s / 1e12}
        out.update(conv_bench(torch, seconds, index))
    out["shapes"] = {
        "conv2d": "32x64x56x56 * 64x64x3x3 fp32",
        "conv2d_judged": "256x256x14x14 * 256x256x3x3 channels_last (bf16, fp32 as TF32)",
        "matmul": f"{n}x{n}x{n} fp32 (bf16 for matmul_bf16)",
    }
    return out


def pci_bus(p: Any) -> str | None:
    """ "0000:18:00" from the device properties, to match the GPU with NVML's record."""
    try:
        return f"{int(p.pci_domain_id):04x}:{int(p.pci_bus_id):02x}:{int(p.pci_device_id):02x}"
    except (AttributeError, TypeError, ValueError):
        return None


def cudnn_version_text(v: int) -> str:
    """91900 -> "9.19.0" (cuDNN 9: MMmmpp); 8907 -> "8.9.7" (cuDNN <= 8: Mmpp)."""
    if v >= 10000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def probe_torch(result: dict[str, Any], bench: bool) -> None:
    stage(result, "import-torch")
    info: dict[str, Any] = {"imported": False}
    result["torch"] = info
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch: Any = importlib.import_module("torch")
        except BaseException as exc:  # ImportError, OSError (a missing .so), even SystemExit
            info["error"] = error_of(exc)
            return
    info["imported"] = True
    info["import_warnings"] = [str(w.message)[:500] for w in caught]
    stage(result, "torch-info")
    version = getattr(torch, "version", None)
    info["version"] = str(torch.__version__)
    info["file"] = os.path.dirname(os.path.realpath(torch.__file__))
    info["cuda"] = getattr(version, "cuda", None)
    info["hip"] = getattr(version, "hip", None)
    info["git_version"] = getattr(version, "git_version", None)
    info["debug"] = bool(getattr(version, "debug", False))
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    arch = flags() if flags is not None else None
    info["arch_list"] = str(arch).split() if arch else []
    info["switches"] = switches(torch)

    stage(result, "cuda-init")
    cuda: dict[str, Any] = {"available": False, "devices": []}
    result["cuda"] = cuda
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cuda["available"] = bool(torch.cuda.is_available())
            if cuda["available"]:
                torch.cuda.init()
                cuda["device_count"] = int(torch.cuda.device_count())
                for i in range(cuda["device_count"]):
                    p = torch.cuda.get_device_properties(i)
                    cuda["devices"].append(
                        {
                            "index": i,
                            "name": p.name,
                            "cc": f"{p.major}.{p.minor}",
                            "memory_mib": int(p.total_memory) // (1024 * 1024),
                            "multiprocessors": int(p.multi_processor_count),
                            "pci_bus_id": pci_bus(p),
                        }
                    )
        except Exception as exc:
            cuda["error"] = error_of(exc)
    cuda["warnings"] = [str(w.message)[:500] for w in caught]

    stage(result, "cudnn")
    cudnn: dict[str, Any] = {}
    result["cudnn"] = cudnn
    try:
        backend = torch.backends.cudnn
        cudnn["compiled"] = bool(getattr(torch._C, "_has_cudnn", False))
        cudnn["enabled"] = bool(backend.enabled)
        cudnn["available"] = bool(backend.is_available())
        if cudnn["available"]:
            v = backend.version()
            cudnn["version"] = v
            cudnn["version_text"] = cudnn_version_text(int(v)) if v else None
    except Exception as exc:
        cudnn["available"] = False
        cudnn["error"] = error_of(exc)

    stage(result, "nccl")
    nccl: dict[str, Any] = {}
    result["nccl"] = nccl
    try:
        if info["cuda"] and hasattr(torch._C, "_nccl_version"):
            v = importlib.import_module("torch.cuda.nccl").version()
            if isinstance(v, tuple):
                nccl["version_text"] = ".".join(str(x) for x in v[:3])
            else:
                n = int(v)
                major = n // 10000 if n >= 10000 else n // 1000
                rest = n % 10000 if n >= 10000 else n % 1000
                nccl["version_text"] = f"{major}.{rest // 100}.{rest % 100}"
            nccl["available"] = True
        else:
            nccl["available"] = False
    except Exception as exc:
        nccl["available"] = False
        nccl["error"] = error_of(exc)

    if cuda["available"] and cuda["devices"]:
        stage(result, "gpu-tests")
        tests = []
        models: set[tuple[str, str]] = set()
        for d in cuda["devices"]:
            key = (d["name"], d["cc"])
            if key in models:
                continue  # one run per model: same kernels, same libraries
            models.add(key)
            try:
                tests.append(gpu_test(torch, d["index"]))
            except Exception as exc:
                tests.append({"device": d["index"], "error": error_of(exc)})
        result["gpu_tests"] = tests
        if bench:
            # every GPU, one at a time: in parallel they would share this process's launching
            # thread and the node's power and cooling, and disturb each other's figures
            runs: list[dict[str, Any]] = []
            for d in cuda["devices"]:
                stage(result, f"benchmark-{d['index']}" if runs else "benchmark")
                try:  # timed from GPU 0, GPU 1 read 3x its peak (launches, not work: 2 x H200)
                    with torch.cuda.device(d["index"]):
                        runs.append(benchmark(torch, index=d["index"]))
                except Exception as exc:
                    runs.append({"device": d["index"], "error": error_of(exc)})
            result["benchmark"], result["benchmark_others"] = runs[0], runs[1:]


def run(result: dict[str, Any], argv: list[str]) -> None:
    wanted = {canonical(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--want"}
    bench = "--benchmark" in argv
    stage(result, "start")
    result["python"] = {
        "executable": sys.executable,
        "version": ".".join(str(x) for x in sys.version_info[:3]),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "gil_disabled": not getattr(sys, "_is_gil_enabled", lambda: True)(),
    }
    result["markers"] = markers()
    result["env"] = {
        k: os.environ.get(k)
        for k in (
            "LD_LIBRARY_PATH",
            "LD_PRELOAD",
            "CUDA_VISIBLE_DEVICES",
            "CUDA_HOME",
            "NVIDIA_TF32_OVERRIDE",
            "CUDA_LAUNCH_BLOCKING",
            "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
            "CUBLAS_WORKSPACE_CONFIG",
            "CUDA_DEVICE_ORDER",
            "VIRTUAL_ENV",
            "CONDA_PREFIX",
        )
    }
    stage(result, "metadata")
    result["site_dirs"] = site_dirs()
    result["dists"] = distributions(wanted)
    result["companions"] = {n: companion(n) for n in ("torchvision", "torchaudio")}
    probe_torch(result, bench)
    stage(result, "libraries")
    roots = [os.path.realpath(sys.prefix)] + [os.path.realpath(d) for d in result["site_dirs"]]
    torch_dir = (result.get("torch") or {}).get("file")
    if torch_dir and os.path.dirname(torch_dir) not in roots:
        roots.append(os.path.dirname(torch_dir))  # torch's own site dir: where its wheels live
    maps = mapped_libraries()
    result["libraries"] = {
        "maps_readable": maps is not None,
        "roots": roots,
        "loaded": [{"family": family_of(p), "path": p} for p in maps or [] if family_of(p)],
        "driver": [p for p in maps or [] if os.path.basename(p).startswith("libcuda.so")],
        "env_copies": env_copies(roots),
    }


def main(argv: list[str]) -> None:
    out_fd = os.dup(1)
    os.dup2(2, 1)  # whatever torch or a library prints goes to stderr, not into the JSON
    result: dict[str, Any] = {"probe": PROBE_VERSION, "stage": None, "timings": {}}
    try:
        run(result, argv)
        stage(result, "done")
    except BaseException as exc:  # report, never a traceback: verify turns this into a FAIL
        result["error"] = error_of(exc)
    result["elapsed_s"] = round(time.perf_counter() - _T0, 4)
    data = json.dumps(result, default=str).encode("utf-8") + b"\n"
    while data:
        data = data[os.write(out_fd, data) :]
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: CUDA libraries' exit handlers are slow and sometimes crash.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
