"""`gpuresolve verify` for real, on a machine with an NVIDIA GPU and a CUDA torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi on PATH"),
]

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "tests" / "fixtures" / "verify" / "lock_torch215_cu132.txt"


def _verify(*args: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "verify", "--json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def report() -> dict[str, object]:
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0 or not probe.stdout.strip():
        pytest.skip("this interpreter has no CUDA build of torch")
    rc, data = _verify()
    assert rc == (1 if data["status"] == "fail" else 0)
    return data


def test_gpu_checks_pass(report: dict[str, object]) -> None:
    by_id = {c["id"]: c for c in report["checks"]}  # type: ignore[attr-defined]
    for key in ("import", "build", "driver", "cuda", "arch", "cudnn", "compute"):
        assert by_id[key]["status"] == "pass", by_id[key]


def test_lock_pinning_another_torch_fails() -> None:
    rc, data = _verify("--lock", str(LOCK))
    assert rc == 1
    (lock,) = [c for c in data["checks"] if c["id"] == "lock"]  # type: ignore[attr-defined]
    assert lock["status"] == "fail" and "torch==2.15.0+cu132" in lock["reason"]


def test_benchmark_judges_speed_in_time(report: dict[str, object]) -> None:
    import time

    t = time.monotonic()
    _, data = _verify("--benchmark")
    took = time.monotonic() - t
    assert took < 20, f"verify --benchmark took {took:.1f} s"
    (speed,) = [c for c in data["checks"] if c["id"] == "speed"]  # type: ignore[attr-defined]
    bench = data["benchmark"]
    assert isinstance(bench, dict) and bench["matmul_tf32"]["tflops"] > 0
    if bench.get("peak_gpu"):
        assert speed["status"] in ("pass", "warn", "fail")
        assert 0 < bench["matmul_tf32"]["fraction"] < 1.5
    else:
        assert speed["status"] == "skip"
