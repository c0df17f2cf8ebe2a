"""gpuresolve's extension probe: import one extension package and run one small real operation.

Runs inside the environment under test, one child process per package (``python -I -c <this
source> PACKAGE``), so a package that crashes or hangs costs only its own check. Standard library,
torch and the package only, Python 3.9 syntax; it prints one JSON line with what happened:
the package's version, torch's, whether the import and the operation worked, the largest error
against a plain-torch reference, the exception (type and message) and the warnings raised.
Judging is gpuresolve's job (resolver/verify/ext_checks.py).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

MODULES = {
    "xformers": "xformers",
    "flash-attn": "flash_attn",
    "bitsandbytes": "bitsandbytes",
    "torchao": "torchao",
    "vllm": "vllm",
    "triton": "triton",
}


def rel_err(torch: Any, got: Any, ref: Any) -> float:
    got, ref = got.float(), ref.float()
    return float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6))


def attention_inputs(torch: Any) -> tuple[Any, Any, Any, Any]:
    """q, k, v as (batch, seq, heads, dim) in fp16 on the GPU, and torch's own attention."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 256, 4, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ref = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    return q, k, v, ref


def op_xformers(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    out["op"] = "xformers.ops.memory_efficient_attention"
    out["native"] = getattr(mod, "_has_cpp_library", None)  # its C++/CUDA library loaded
    if out["native"] is False:  # why not, in xformers' words ("built for PyTorch ...")
        lib = importlib.import_module("xformers._cpp_lib")
        why = getattr(lib, "_cpp_library_load_exception", None)
        out["native_error"] = str(why)[:1000] if why is not None else None
    xops = importlib.import_module("xformers.ops")

    q, k, v, ref = attention_inputs(torch)
    return rel_err(torch, xops.memory_efficient_attention(q, k, v), ref)


def op_flash_attn(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    out["op"] = "flash_attn.flash_attn_func"
    q, k, v, ref = attention_inputs(torch)
    return rel_err(torch, mod.flash_attn_func(q, k, v), ref)


def op_bitsandbytes(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    out["op"] = "bitsandbytes.nn.Linear8bitLt (int8 matmul)"
    torch.manual_seed(0)
    weight = torch.randn(64, 64) * 0.1
    layer = mod.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False, threshold=0.0)
    layer.weight = mod.nn.Int8Params(weight.half(), requires_grad=False, has_fp16_weights=False)
    layer = layer.cuda()  # quantizes the weight to int8 on the GPU
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    return rel_err(torch, layer(x), x @ weight.half().cuda().t())


def op_torchao(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    out["op"] = "torchao.quantization.quantize_ (int8 weight-only) of a Linear, then forward"
    skipped = getattr(mod, "skip_loading_so_files", None)  # its __init__'s own torch check
    if isinstance(skipped, bool):
        out["native"] = not skipped  # whether it loaded its C++ kernels
        if skipped:
            why = getattr(mod, "_skip_reason", None)  # 0.17 on; 0.16 only logs it
            out["native_error"] = str(why or "torchao skipped loading its C++ kernels")[:1000]
    quant = importlib.import_module("torchao.quantization")
    config = getattr(quant, "Int8WeightOnlyConfig", None)
    cfg = config() if config is not None else quant.int8_weight_only()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128)).cuda().to(torch.bfloat16)
    x = torch.randn(16, 128, device="cuda", dtype=torch.bfloat16)
    ref = model(x)
    quant.quantize_(model, cfg)
    return rel_err(torch, model(x), ref)


def op_vllm(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    out["op"] = "vllm custom op torch.ops._C.silu_and_mul"
    importlib.import_module("vllm._custom_ops")  # loads and registers vllm's _C operators
    torch.manual_seed(0)
    x = torch.randn(16, 256, device="cuda", dtype=torch.float16)
    got = torch.empty(16, 128, device="cuda", dtype=torch.float16)
    torch.ops._C.silu_and_mul(got, x)
    ref = torch.nn.functional.silu(x[:, :128]) * x[:, 128:]
    return rel_err(torch, got, ref)


TRITON_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)
"""


def op_triton(torch: Any, mod: Any, out: dict[str, Any]) -> float:
    """triton.jit reads a kernel's source from its file: the kernel is written to a temporary
    module (removed afterwards) and compiled for this GPU."""
    import importlib.util

    out["op"] = "triton vector add (a @triton.jit kernel compiled for this GPU)"
    folder = tempfile.mkdtemp(prefix="gpuresolve-triton-")
    try:
        path = os.path.join(folder, "gpuresolve_add.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(TRITON_KERNEL)
        spec = importlib.util.spec_from_file_location("gpuresolve_add", path)
        assert spec is not None and spec.loader is not None
        kernel = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kernel)
        n = 98432
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        got = torch.empty_like(x)
        kernel.add_kernel[((n + 1023) // 1024,)](x, y, got, n, BLOCK=1024)
        torch.cuda.synchronize()
        return rel_err(torch, got, x + y)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


OPS: dict[str, Callable[[Any, Any, dict[str, Any]], float]] = {
    "xformers": op_xformers,
    "flash-attn": op_flash_attn,
    "bitsandbytes": op_bitsandbytes,
    "torchao": op_torchao,
    "vllm": op_vllm,
    "triton": op_triton,
}


def error_of(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:2000]}


def version_of(package: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(package)
    except Exception:  # not installed, or broken metadata: the import says the rest
        return None


def honour_pythonpath() -> list[str]:
    """The child runs with ``-I`` (no current folder, no user site), which also drops PYTHONPATH;
    packages installed with ``pip install --target DIR`` and found through PYTHONPATH are part of
    the environment under test, so its folders go first on sys.path as Python would put them."""
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    entries = [os.path.abspath(p) for p in entries[:64] if os.path.isdir(p)]
    sys.path[0:0] = [p for p in entries if p not in sys.path]
    return entries


def run(package: str) -> dict[str, Any]:
    added = honour_pythonpath()
    out: dict[str, Any] = {"package": package, "version": version_of(package), "stage": "torch"}
    if added:
        out["pythonpath"] = added
    t0 = time.perf_counter()
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            torch = importlib.import_module("torch")

            out["torch"] = torch.__version__
            out["torch_cuda"] = torch.version.cuda
            out["stage"] = "import"
            mod = importlib.import_module(MODULES[package])
            out["stage"] = "op"
            out["max_rel_err"] = OPS[package](torch, mod, out)
            torch.cuda.synchronize()
            out["stage"] = "done"
        except BaseException as exc:  # report it: the parent judges
            out["error"] = error_of(exc)
        said = [str(w.message).splitlines()[0][:500] for w in seen if str(w.message).strip()]
        caught = list(dict.fromkeys(said))  # one of each: a warning per call repeats itself
    out["warnings"] = caught[:10]
    out["elapsed_s"] = round(time.perf_counter() - t0, 3)
    return out


def main(argv: list[str]) -> None:
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # whatever the package prints goes to stderr
    package = argv[0] if argv else ""
    if package not in OPS:
        what = {"type": "UsageError", "message": "unknown package"}
        result: dict[str, Any] = {"package": package, "error": what}
    else:
        result = run(package)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
