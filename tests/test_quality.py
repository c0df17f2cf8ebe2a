"""The code stays typed, linted and formatted: ruff and mypy (strict) run as part of the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["resolver", "tests", "bench"]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    proc = _run(ruff, *args, "--no-cache", *PATHS)  # tests write nothing into the checkout
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    # files and strictness come from pyproject.toml; the cache goes to a temporary directory
    proc = _run(sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
