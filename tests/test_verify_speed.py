"""`verify --benchmark`'s verdict: fractions of the datasheet peak, replayed on the H100 run."""

from __future__ import annotations

from typing import Any

import pytest

from resolver.core.errors import DataError
from resolver.verify import speed
from resolver.verify.result import FAIL, PASS, SKIP, WARN

H100 = "NVIDIA H100 80GB HBM3"


def recorded_h100() -> dict[str, Any]:
    """The figures of tests/fixtures/verify/h100_torch211_cu130/verify_benchmark.txt."""
    return {
        "device": 0,
        "conv2d_cudnn": {"ms": 0.089, "tflops": 83.0},
        "conv2d_no_cudnn": {"ms": 0.984, "tflops": 7.5},
        "matmul_tf32": {"ms": 0.388, "tflops": 353.8},
        "matmul_fp32": {"ms": 2.672, "tflops": 51.4},
        "matmul_bf16": {"ms": 0.181, "tflops": 759.7},
    }


@pytest.fixture(scope="module")
def peaks() -> speed.Peaks:
    return speed.load()


def test_recorded_h100_passes(peaks: speed.Peaks) -> None:
    fixture = "tests/fixtures/verify/h100_torch211_cu130/verify_benchmark.txt"
    with open(fixture, encoding="utf-8") as fh:
        text = fh.read()
    for figure in ("353.8", "51.4", "759.7"):  # the figures above are the recorded ones
        assert figure in text
    out = speed.annotate(recorded_h100(), H100, peaks)
    assert out["peak_gpu"]["name"] == "H100 SXM5"
    assert out["matmul_tf32"]["fraction"] == pytest.approx(353.8 / 494.7, abs=1e-3)
    assert out["matmul_fp32"]["fraction"] == pytest.approx(51.4 / 66.9, abs=1e-3)
    assert out["conv2d_cudnn"]["judged"] is False
    check = speed.judge(out, H100)
    assert check.status == PASS and check.fix is None
    assert any("matmul_tf32" in d and "72%" in d for d in check.details)


@pytest.mark.parametrize(("tflops", "status"), [(100.0, FAIL), (200.0, WARN), (300.0, PASS)])
def test_slow_matmul_verdicts(peaks: speed.Peaks, tflops: float, status: str) -> None:
    bench = recorded_h100()
    bench["matmul_tf32"] = {"ms": 1.0, "tflops": tflops}
    check = speed.judge(speed.annotate(bench, H100, peaks), H100)
    assert check.status == status
    if status == FAIL:
        assert check.fix is not None
        for cause in ("TF32", "MIG", "PTX", "clocks", "another process", "cuBLAS"):
            assert cause in check.fix


def test_unknown_gpu_is_measured_not_judged(peaks: speed.Peaks) -> None:
    out = speed.annotate(recorded_h100(), "NVIDIA Hypothetical X1", peaks)
    assert out["matmul_tf32"]["fraction"] is None
    assert speed.judge(out, "NVIDIA Hypothetical X1").status == SKIP


def test_names_match_whole_names_only(peaks: speed.Peaks) -> None:
    assert peaks.for_device("NVIDIA H100 PCIe").name == "H100 PCIe"  # type: ignore[union-attr]
    assert peaks.for_device("Tesla V100-SXM2-32GB").name == "V100 SXM2"  # type: ignore[union-attr]
    assert peaks.for_device("NVIDIA H200 NVL") is None  # another board, other peaks
    assert peaks.for_device(None) is None


def test_benchmark_error_is_skip() -> None:
    assert speed.judge({"error": {"message": "CUDA OOM"}}, H100).status == SKIP
    assert speed.judge(None, H100).status == SKIP


def test_no_tf32_unit_is_not_judged(peaks: speed.Peaks) -> None:
    bench = recorded_h100()
    bench["matmul_tf32"] = {"ms": 10.0, "tflops": 12.0}
    bench["matmul_fp32"] = {"ms": 10.0, "tflops": 13.0}
    out = speed.annotate(bench, "Tesla V100-SXM2-16GB", peaks)
    assert out["matmul_tf32"]["fraction"] is None
    assert speed.judge(out, "Tesla V100-SXM2-16GB").status == PASS  # 13 of 15.7


def test_peaks_file_is_checked() -> None:
    good = {
        "verdict": {"warn": 0.5, "fail": 0.25},
        "sources": {"S": {"cite": "x", "primary": True}},
        "gpus": [
            {
                "name": "G",
                "names": ["G"],
                "peak": {"fp32": 1.0, "tf32": None, "bf16": 2.0, "fp16": 2.0},
                "grade": "official",
                "source": ["S"],
            }
        ],
    }
    assert speed.from_raw(good).gpus[0].peak["tf32"] is None
    for path, bad in (
        (("verdict",), {"warn": 0.2, "fail": 0.5}),
        (("gpus", 0, "grade"), "rumour"),
        (("gpus", 0, "source"), ["T"]),
        (("gpus", 0, "peak"), {"fp32": -1.0, "tf32": None, "bf16": 2.0, "fp16": 2.0}),
    ):
        import copy

        raw: Any = copy.deepcopy(good)
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = bad
        with pytest.raises(DataError):
            speed.from_raw(raw)


def test_mig_slice_is_compared_with_its_gpu_and_only_warns(peaks: speed.Peaks) -> None:
    name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    bench = recorded_h100()
    bench["matmul_tf32"] = {"ms": 3.0, "tflops": 50.0}
    out = speed.annotate(bench, name, peaks)
    assert out["peak_gpu"]["name"] == "H100 SXM5"
    check = speed.judge(out, name)
    assert check.status == WARN and "MIG slice" in check.reason
