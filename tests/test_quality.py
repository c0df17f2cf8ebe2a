"""The code stays typed, linted and formatted: ruff and mypy (strict) run as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["resolver", "tests", "bench", "tools"]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    # the ruff of this interpreter's environment (the pinned one), not whatever is first on PATH;
    # --no-cache: tests write nothing into the checkout
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")
    proc = _run(sys.executable, "-m", "ruff", *args, "--no-cache", *PATHS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    # files and strictness come from pyproject.toml; the cache goes to a temporary directory
    proc = _run(sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_runs_the_readme_command_in_a_fresh_virtualenv() -> None:
    """CI must see what a user's new machine sees: the README's command, in a new virtualenv,
    and once exactly as the README says (the `readme` leg: the pip Python bundles, not
    upgraded)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    command = section.strip()
    assert "-n auto" in command  # parallel: CI stays well under 20 minutes on two cores
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run reads the command from the README itself: its awk program, run here, finds it
    program = ci.split("command=\"$(awk '", 1)[1].split("' README.md)\"", 1)[0]
    found = subprocess.run(
        ["awk", program, str(ROOT / "README.md")], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == command
    lines = [line.strip() for line in ci.splitlines()]
    assert '[ "$legs" = all ] && legs="readme newest lowest"' in lines  # all three by default
    venv_at = next(i for i, line in enumerate(lines) if "-m venv" in line)
    activate_at = next(i for i, line in enumerate(lines) if "/bin/activate" in line)
    upgrade_at = next(i for i, line in enumerate(lines) if "install -q --upgrade pip" in line)
    assert lines[upgrade_at].startswith('[ "$leg" = readme ] ||')  # readme: pip as bundled
    assert venv_at < activate_at < upgrade_at < lines.index('eval "$command"')
    assert "--resolution lowest-direct" in ci  # the lowest allowed versions


def test_lint_and_type_tools_are_pinned_exactly() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    test_extra = extras["optional-dependencies"]["test"]
    for tool in ("ruff", "mypy"):
        pins = [r for r in test_extra if r.split("=")[0].split(">")[0].strip() == tool]
        assert pins and pins[0].startswith(f"{tool}=="), pins
