"""`verify --with PKG` (issue 32): the per-package probe and its judgement."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.verify import ext_checks
from resolver.verify.result import FAIL, PASS, SKIP

RECORDED = Path(__file__).parent / "fixtures" / "verify" / "ext_h200_venv_without_torch"
ON_H200 = Path(__file__).parent / "fixtures" / "verify" / "ext_h200_pythonpath"
TORCHAO_GATE = Path(__file__).parent / "fixtures" / "verify" / "ext_h200_torchao_gate"
PACKAGES = ("triton", "torchao", "bitsandbytes", "xformers")


def test_recorded_device_run_names_each_package() -> None:
    """Replayed from the H200 recording: a venv without torch, each package's check says so."""
    ran = [json.loads((RECORDED / f"probe_{p}.json").read_text()) for p in PACKAGES]
    check = ext_checks.judge(ran)
    assert check.status == FAIL
    assert check.details == (
        "triton: not installed: torch did not import: ModuleNotFoundError: No module named 'torch'",
        "torchao: 0.18.0: torch did not import: ModuleNotFoundError: No module named 'torch'",
        "bitsandbytes: 0.50.2: torch did not import: ModuleNotFoundError: No module named 'torch'",
        "xformers: 0.0.35: torch did not import: ModuleNotFoundError: No module named 'torch'",
    )
    doc = json.loads((RECORDED / "verify_with.json").read_text())
    (recorded,) = [c for c in doc["checks"] if c["id"] == "extensions"]
    assert recorded["status"] == "fail" and len(recorded["details"]) == 4


def test_recorded_h200_run_passes_three_and_names_the_mismatched_xformers() -> None:
    """Replayed from the H200 recording (torch 2.11.0+cu130, packages on PYTHONPATH): triton,
    torchao and bitsandbytes ran their operation; xformers 0.0.35, built for torch 2.10.0+cu128,
    is named by its own "built for" message before the operation it then could not run."""
    ran = [json.loads((ON_H200 / f"probe_{p}.json").read_text()) for p in PACKAGES]
    assert all(r["torch"] == "2.11.0+cu130" and r["pythonpath"][0] == "/tmp/ext" for r in ran)
    verdicts = {r["package"]: ext_checks.judge([r]).status for r in ran}
    assert verdicts == {"triton": PASS, "torchao": PASS, "bitsandbytes": PASS, "xformers": FAIL}
    check = ext_checks.judge(ran)
    assert check.status == FAIL
    assert check.reason == (
        "xformers: 0.0.35: its compiled library did not load: built for PyTorch 2.10.0+cu128 "
        "with CUDA 1208 (you have 2.11.0+cu130); then xformers.ops.memory_efficient_attention "
        "failed: NotImplementedError: No operator found for `memory_efficient_attention_forward` "
        "with inputs:"
    )
    ops = {
        "triton": "triton vector add",
        "torchao": "torchao.quantization.quantize_",
        "bitsandbytes": "bitsandbytes.nn.Linear8bitLt",
    }
    for line, (name, op) in zip(check.details[:3], ops.items(), strict=True):
        assert line.startswith(f"{name}: ") and f"{op}" in line and " ok (max rel. error" in line
    recorded = _extensions_check(ON_H200 / "verify_with.json")
    assert recorded["status"] == "fail" and recorded["reason"] == check.reason
    assert [d.split(" ok (")[0] for d in recorded["details"]] == [
        d.split(" ok (")[0] for d in check.details
    ]
    before = _extensions_check(ON_H200 / "verify_with_before_fix.json")
    assert before["reason"].startswith("xformers: 0.0.35: the operation failed: NotImplemented")


def test_recorded_torchao_import_gate_on_h200() -> None:
    """Replayed from the H200 recording (torch 2.11.0+cu130): torchao 0.16.0's own import
    skipped its C++ kernels (its table names torch 2.10.0 only) and still ran quantize_ in
    PyTorch, so verify passed it before; now the check FAILs naming the gate, from the database's
    import_gate; 0.18.0 (torch >= 2.11.0) loaded them and passes, before and after."""
    from resolver import catalog
    from resolver.flows.verify import import_gates

    gates = import_gates(catalog.load(), ["torchao"])
    assert gates[("torchao", "0.16.0")] == "==2.10.0"
    assert gates[("torchao", "0.18.0")] == ">=2.11.0"
    old = json.loads((TORCHAO_GATE / "probe_0.16.0.json").read_text())
    new = json.loads((TORCHAO_GATE / "probe_0.18.0.json").read_text())
    assert (old["native"], new["native"]) == (False, True)
    assert old["stage"] == new["stage"] == "done" and old["torch"] == "2.11.0+cu130"
    check = ext_checks.judge([old], gates)
    assert check.status == FAIL
    assert check.reason == (
        "torchao: 0.16.0 loads its kernels only with torch 2.10.0: this environment has 2.11.0"
    )
    assert ext_checks.judge([new], gates).status == PASS
    for version, status in (("0.16.0", "fail"), ("0.18.0", "pass")):
        after = _extensions_check(TORCHAO_GATE / f"verify_after_{version}.json")
        before = _extensions_check(TORCHAO_GATE / f"verify_before_{version}.json")
        assert (after["status"], before["status"]) == (status, "pass")
    recorded = _extensions_check(TORCHAO_GATE / "verify_after_0.16.0.json")
    assert recorded["reason"] == check.reason


def test_import_gate_decides_where_the_probe_cannot_say() -> None:
    """A probe that did not say whether the kernels loaded: the database's gate decides; one
    that says they loaded is believed; a torch inside the gate is judged as any other."""
    gates = {("torchao", "0.16.0"): "==2.10.0"}
    ran: dict[str, Any] = {
        "package": "torchao",
        "version": "0.16.0",
        "stage": "done",
        "op": "quantize_",
    }
    ran |= {"max_rel_err": 0.01, "elapsed_s": 1.0}
    assert ext_checks.judge([ran | {"torch": "2.11.0+cu130"}], gates).status == FAIL
    assert ext_checks.judge([ran | {"torch": "2.10.0+cu128"}], gates).status == PASS
    said = ran | {"torch": "2.11.0+cu130", "native": True}
    assert ext_checks.judge([said], gates).status == PASS


def _extensions_check(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    assert doc["torch"] == "2.11.0+cu130"
    (check,) = [c for c in doc["checks"] if c["id"] == "extensions"]
    assert isinstance(check, dict)
    return check


def test_a_child_sees_packages_on_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child runs with -I, which drops PYTHONPATH; packages installed with pip --target and
    found through PYTHONPATH (the H200 run's set-up) are still seen, torch among them."""
    site = tmp_path / "site"
    (site / "triton").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text("raise ImportError('gpuresolve-test-marker')\n")
    (site / "torch.py").write_text("__version__ = '9.9.9-test'\nclass version:\n    cuda = None\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{tmp_path / 'absent'}")
    got = ext_checks.run_one(sys.executable, "triton", timeout_s=60)
    assert got["pythonpath"] == [str(site)]
    assert got["torch"] == "9.9.9-test" and got["stage"] == "import"
    assert got["error"] == {"type": "ImportError", "message": "gpuresolve-test-marker"}


def test_a_real_child_without_torch() -> None:
    """The probe really runs in a child of this interpreter (which has no torch)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("this interpreter has torch")
    got = ext_checks.run_one(sys.executable, "torchao", timeout_s=60)
    assert got["package"] == "torchao" and got["stage"] == "torch"
    assert got["error"]["type"] == "ModuleNotFoundError"


def _probe(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"package": "xformers", "version": "0.0.35", "torch": "2.11.0+cu130"}
    return base | kw


def test_mismatch_is_named_by_symbol_or_own_message() -> None:
    symbol = "/x/flash_attn_2_cuda.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs"
    ran = [
        _probe(
            package="flash-attn",
            version="2.8.3",
            stage="import",
            error={"type": "ImportError", "message": symbol},
        ),
        _probe(
            stage="done",
            native=False,
            native_error="xFormers was built for: PyTorch 2.10.0+cu128 with CUDA 1208 "
            "(you have 2.11.0+cu130)",
            max_rel_err=0.001,
            op="xformers.ops.memory_efficient_attention",
        ),
    ]
    check = ext_checks.judge(ran)
    assert check.status == FAIL
    assert check.details[0] == (
        "flash-attn: 2.8.3: import failed: undefined symbol _ZN3c105ErrorC2ENS_14SourceLocationESs "
        "(built for another torch than 2.11.0+cu130)"
    )
    assert (
        "its compiled library did not load: built for PyTorch 2.10.0+cu128 with CUDA 1208 "
        "(you have 2.11.0+cu130)" in (check.details[1])
    )


def test_pass_wrong_result_and_timeout() -> None:
    ok = _probe(
        package="triton",
        version="3.6.0",
        stage="done",
        op="triton vector add",
        max_rel_err=0.0,
        elapsed_s=1.5,
    )
    assert ext_checks.judge([ok]).status == PASS
    wrong = _probe(package="triton", stage="done", op="triton vector add", max_rel_err=0.5)
    assert "gave a wrong result" in ext_checks.judge([wrong]).reason
    hung = {"package": "vllm", "version": "0.33.0", "timed_out": 120.0}
    assert ext_checks.judge([hung]).reason == "vllm: 0.33.0: did not finish in 120 s"
    assert ext_checks.judge([]).status == SKIP


def test_probe_imports_only_the_standard_library() -> None:
    """ext_probe.py runs in the user's interpreter: nothing of gpuresolve, nothing third-party
    at module level (torch and the package are imported inside, by name)."""
    tree = ast.parse(Path(ext_checks.PROBE_FILE).read_text(encoding="utf-8"))
    top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    top |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    assert top <= set(sys.stdlib_module_names) | {"__future__"}


def test_verify_with_unknown_package_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "--with", "apex")
    assert code == 2 and "verify runs xformers, flash-attn" in err
