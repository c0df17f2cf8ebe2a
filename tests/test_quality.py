"""CI keeps the code typed, linted and formatted, and runs the README's test command as written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["resolver", "tests", "bench", "tools"]


def test_ci_runs_the_checks_beside_the_tests() -> None:
    """ruff, mypy and the distribution's own check run as CI steps, not inside pytest (they cost
    the suite a minute of its two cores): each leg of `.ci/run` runs them."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for step in (
        "-m ruff check",
        "-m ruff format --check",
        "-m mypy",
        "-m build --no-isolation",
        "-m twine check --strict",
    ):
        assert step in ci, step
    for path in PATHS:
        assert f" {path}" in ci  # every folder of Python is linted


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
    default = '[ "$legs" = all ] && legs="readme newest lowest docs"'
    assert default in lines  # all three legs by default, then the docs step
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


def test_mypy_checks_the_tests_as_strictly_as_the_code() -> None:
    """`.ci/run` runs mypy with no paths, so pyproject.toml's `files` decide what it checks: the
    tests too, with no override that loosens strict mode for them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["strict"] is True and {"resolver", "tests"} <= set(mypy["files"])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    [line] = [line.split() for line in ci.splitlines() if "-m mypy" in line]
    assert not set(PATHS) & set(line)  # a path given there would override `files`
    for override in mypy.get("overrides", []):
        assert set(override) <= {"module", "ignore_missing_imports"}, override  # untyped deps only
