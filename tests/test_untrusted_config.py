"""A project file is input gpuresolve did not write (issue 36): its `[tool.gpuresolve.defaults]`
and a team spec name no program to run; -vv names where each value really came from;
$GPURESOLVE_CONFIG names a regular file or is refused; the small ones of the same run (lock -v's
index sentence, an unknown completion shell, a 5,000-digit TOML integer, a fleet.yaml alias
bomb, a record nested past the stack).

A planted program proves itself absent: it would create a marker file, and the marker is never
there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.core.errors import UserError
from resolver.fleet import report as fleet_report
from resolver.io.bounded import parse_json
from resolver.writers import recorded
from resolver.writers.formats.uvproject import read_inputs

RTX4090 = ("--gpu", "RTX 4090", "--driver", "550.54.15", "--platform", "linux-x86_64")
TABLE = "tool.gpuresolve.defaults"
ROOT = Path(__file__).resolve().parent.parent
needs_posix = pytest.mark.skipif(os.name != "posix", reason="a shell script and FIFOs")


def one_error(err: str) -> str:
    """The one error line of ``err`` (no traceback, nothing else said as an error)."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpuresolve: error:")]
    assert len(lines) == 1, err[-500:]
    return lines[0]


def _evil(folder: Path) -> tuple[Path, Path]:
    """A program that says it is Python 3.12 and leaves a marker when it runs."""
    marker = folder / "RAN"
    script = folder / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\necho 3.12\n", encoding="utf-8")
    script.chmod(0o755)
    return script, marker


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository gpuresolve runs in (cwd: a subfolder), its project file not yet written."""
    monkeypatch.delenv("GPURESOLVE_PYTORCH_INDEX", raising=False)
    monkeypatch.delenv("GPURESOLVE_CONFIG", raising=False)
    (tmp_path / "repo" / "src").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo" / "src")
    return tmp_path / "repo"


def _project(repo: Path, python: str) -> Path:
    path = repo / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\n[{TABLE}]\npython = "{python}"\n', encoding="utf-8")
    return path


# --- a project file's python is a version --------------------------------------------------------


@needs_posix
@pytest.mark.parametrize("command", ["suggest", "lock", "image"])
@pytest.mark.parametrize("spelling", ["relative", "absolute", "in-cwd"])
def test_a_project_file_never_names_an_interpreter(
    command: str,
    spelling: str,
    repo: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script, marker = _evil(repo if spelling != "in-cwd" else repo / "src")
    value = {"relative": "../evil.sh", "absolute": str(script), "in-cwd": "./evil.sh"}[spelling]
    pyproject = _project(repo, value)  # the parent folder's: found from src/
    argv = [command, *RTX4090] + (["-o", str(repo / "out")] if command == "lock" else [])
    code, out, err = run_cli(capsys, *argv)
    line = one_error(err)
    assert code == 2 and out == ""
    assert str(pyproject) in line and f"{TABLE}.python" in line and "version" in line
    assert not marker.exists()
    assert not (repo / "out").exists()


@pytest.mark.parametrize("python", ["3.12", "3.13t", " 3.11 "])
def test_a_project_file_still_names_a_version(
    python: str, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(repo, python)
    code, out, err = run_cli(capsys, "suggest", *RTX4090, "--json")
    assert code == 0, err
    assert json.loads(out)["target"]["python"] == python.strip()


@needs_posix
def test_the_user_file_and_the_option_may_name_an_interpreter(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user's own settings are theirs: an interpreter there (or on the command line) is run
    for its version, as before."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    user = tmp_path / "config.toml"
    user.write_text(f'python = "{Path(sys.executable).as_posix()}"\n', encoding="utf-8")
    monkeypatch.setenv("GPURESOLVE_CONFIG", str(user))
    code, out, err = run_cli(capsys, "suggest", *RTX4090, "--json")
    assert code == 0, err
    assert json.loads(out)["target"]["python"].rstrip("t") == mine
    code, out, err = run_cli(capsys, "suggest", *RTX4090, "--json", "--python", sys.executable)
    assert code == 0, err


@needs_posix
def test_image_runs_no_python_it_ignores(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`image` says --python is ignored (an image brings its own); it never runs one either,
    given on the command line or in the user file."""
    script, marker = _evil(tmp_path)
    code, _, err = run_cli(capsys, "image", *RTX4090, "--python", str(script))
    assert code in (0, 1), err
    assert "--python is ignored" in err
    user = tmp_path / "config.toml"
    user.write_text(f'python = "{script}"\n', encoding="utf-8")
    monkeypatch.setenv("GPURESOLVE_CONFIG", str(user))
    code, _, err = run_cli(capsys, "image", *RTX4090)
    assert code in (0, 1), err
    assert "--python" not in err  # not given: nothing to say it ignores
    assert not marker.exists()


@needs_posix
def test_a_team_spec_never_names_an_interpreter(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, marker = _evil(repo)
    spec = repo / "team.yaml"
    spec.write_text(
        f'name: t\npython: "{script}"\ntargets:\n  - {{name: x, no_gpu: true}}\n', encoding="utf-8"
    )
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(repo / "out"))
    line = one_error(err)
    assert code == 2 and str(spec) in line and "python" in line
    assert not marker.exists()
    assert not (repo / "out").exists()


# --- -vv names the real source -------------------------------------------------------------------


def test_debug_names_the_source_that_won(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = _project(repo, "3.11")
    with pyproject.open("a", encoding="utf-8") as fh:
        fh.write('pytorch-index = "https://file.example/whl"\n')
    code, _, err = run_cli(capsys, "suggest", *RTX4090, "-vv")
    assert code == 0, err
    assert f"debug: python = '3.11' from {pyproject} ({TABLE}.python)" in err
    assert f"pytorch-index = 'https://file.example/whl' from {pyproject}" in err

    monkeypatch.setenv("GPURESOLVE_PYTORCH_INDEX", "https://env.example/whl")
    code, _, err = run_cli(capsys, "suggest", *RTX4090, "-vv", "--python", "3.12")
    assert code == 0, err
    assert "debug: python = '3.12' from --python" in err
    assert "debug: pytorch-index = 'https://env.example/whl' from GPURESOLVE_PYTORCH_INDEX" in err
    assert "3.11" not in err and "file.example" not in err  # the overridden values: not named

    argv = ("--pytorch-index", "https://opt.example/whl")
    code, _, err = run_cli(capsys, "suggest", *RTX4090, "-vv", *argv)
    assert "debug: pytorch-index = 'https://opt.example/whl' from --pytorch-index" in err


def test_a_bad_value_from_a_file_names_the_file(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "pyproject.toml").write_text(
        f'[{TABLE}]\npytorch-index = "ftp://mirror.example/whl"\n', encoding="utf-8"
    )
    code, _, err = run_cli(capsys, "suggest", *RTX4090)
    line = one_error(err)
    assert code == 2 and str(repo / "pyproject.toml") in line and "pytorch-index" in line


# --- GPURESOLVE_CONFIG ---------------------------------------------------------------------------


@needs_posix
@pytest.mark.parametrize("kind", ["missing", "folder", "fifo"])
def test_a_config_variable_naming_no_file_is_refused(kind: str, tmp_path: Path) -> None:
    """Refused by stat alone: a FIFO is never opened (the child's timeout guards a hang)."""
    named = tmp_path / "config.toml"
    if kind == "folder":
        named.mkdir()
    elif kind == "fifo":
        os.mkfifo(named)
    env = {**os.environ, "GPURESOLVE_CONFIG": str(named)}
    env.pop("GPURESOLVE_PYTORCH_INDEX", None)
    for argv in (["suggest", *RTX4090], ["detect"]):
        proc = subprocess.run(
            [sys.executable, "-m", "resolver", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        line = one_error(proc.stderr)
        assert proc.returncode == 2 and proc.stdout == ""
        assert f"GPURESOLVE_CONFIG={named}" in line
    ok = subprocess.run(
        [sys.executable, "-m", "resolver", "suggest", *RTX4090, "--no-config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr  # --no-config reads no file, named or not


# --- the small ones ------------------------------------------------------------------------------


def test_lock_verbose_says_which_index_serves_other_packages(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GPURESOLVE_DEFAULT_INDEX", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    code, _, err = run_cli(capsys, "lock", *RTX4090, "-v", "-o", str(repo / "out"))
    assert code == 0, err
    (line,) = [ln for ln in err.splitlines() if "packages outside the PyTorch index" in ln]
    assert line.endswith(
        "(none is set by --default-index, GPURESOLVE_DEFAULT_INDEX or pip's configuration)"
    )


@pytest.mark.parametrize("value", ["tcsh_source", "bash_bogus", "zsh_complete"])
def test_an_unknown_completion_request_is_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shell Click has no completion for (Click: exit 1, nothing said), or `_complete`
    without the COMP_WORDS/COMP_CWORD its script sets (a KeyError: exit 70)."""
    monkeypatch.delenv("COMP_WORDS", raising=False)
    monkeypatch.delenv("COMP_CWORD", raising=False)
    monkeypatch.setenv("_GPURESOLVE_COMPLETE", value)
    code, out, err = run_cli(capsys)
    assert code == 2 and out == ""
    assert value in one_error(err)
    monkeypatch.delenv("_GPURESOLVE_COMPLETE")
    code, _, err = run_cli(capsys, "completion", "tcsh")
    assert code == 2
    one_error(err)


def test_a_completion_request_is_answered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("_GPURESOLVE_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", "gpuresolve sugg")
    monkeypatch.setenv("COMP_CWORD", "1")
    code, out, err = run_cli(capsys)
    assert code == 0 and out.split() == ["plain,suggest"], err


@pytest.mark.parametrize("where", ["project", "user"])
def test_a_toml_number_past_pythons_limit_names_its_key(
    where: str,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    digits = "9" * 5000
    if where == "project":
        path = repo / "pyproject.toml"
        path.write_text(f'[{TABLE}]\npython = "3.12"\n[tool.gpuresolve.x]\nn = {digits}\n')
        key = "line 4: tool.gpuresolve.x.n"
    else:
        path = tmp_path / "config.toml"
        path.write_text(f"channel = {digits}\n")
        monkeypatch.setenv("GPURESOLVE_CONFIG", str(path))
        key = "line 1: channel"
    code, out, err = run_cli(capsys, "suggest", *RTX4090)
    line = one_error(err)
    assert code == 2 and out == ""
    assert str(path) in line and key in line
    assert "set_int_max_str_digits" not in err and len(line) < 300


def test_a_fleet_plan_alias_bomb_is_refused_at_the_node_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 437-byte fleet.yaml expanding to 9^9 values: refused at the plan's node cap (it was the
    byte cap, 64 M values walked one by one), one line."""
    lines = ["fleet: 1", "a0: &a0 [x,x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    lines.append("groups: [{group: g, nodes: *a8}]")
    (tmp_path / fleet_report.PLAN_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = ROOT / "tests" / "fixtures" / "verify" / "h100_diag" / "healthy.json"
    code, out, err = run_cli(capsys, "fleet", "report", str(result), "--expect", str(tmp_path))
    line = one_error(err)
    assert code == 2 and out == ""
    assert f"more than {fleet_report.MAX_PLAN_NODES:,} values" in line
    assert fleet_report.MAX_PLAN_NODES < fleet_report.MAX_PLAN


def test_a_record_nested_past_the_stack_is_no_record() -> None:
    """A lock's inputs line (or a uv project's record) of 200,000 '[' read back: none recorded,
    never a RecursionError (it was exit 70)."""
    deep = "[" * 200_000 + "]" * 200_000
    text = f"torch==2.9.0\n# gpuresolve-inputs: {deep}\n"
    assert recorded.read("requirements.txt", text) is None
    assert read_inputs(f"[tool.gpuresolve]\ninputs = '{deep}'\n") is None
    with pytest.raises(UserError, match="nested 200000 levels deep"):
        parse_json(deep, "x.json", what="a record")
