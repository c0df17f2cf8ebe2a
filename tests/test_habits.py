"""Habits users bring from pip, uv, ruff and conda: -V, -q/-v/-vv on every command, notes on
stderr, `completion`, a progress line only on a terminal, defaults from files (--no-config)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from cli_support import run_cli

from resolver import __version__
from resolver import catalog as catalog_mod
from resolver.cli import cli
from resolver.commands import ui

RTX4090 = ("--gpu", "RTX 4090", "--driver", "550.54.15", "--platform", "linux-x86_64")
NO_DRIVER = "No NVIDIA driver found"


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            sub = click.Context(command)
            for n in command.list_commands(sub):
                child = command.get_command(sub, n)
                assert child is not None
                out.append((f"{name} {n}", child))
        else:
            out.append((name, command))
    return out


def test_version_names_the_database_date(capsys: pytest.CaptureFixture[str]) -> None:
    updated = catalog_mod.load().updated
    for flag in ("-V", "--version"):
        code, out, err = run_cli(capsys, flag)
        assert code == 0 and err == ""
        assert out == f"gpuresolve {__version__} (database {updated})\n"


@pytest.mark.parametrize(("name", "command"), _commands(), ids=lambda v: str(v))
def test_every_command_has_quiet_verbose_and_no_config(name: str, command: click.Command) -> None:
    opts = {o for p in command.params for o in p.opts}
    assert {"-q", "--quiet", "-v", "--verbose", "--no-config"} <= opts, name


def _no_driver_here() -> bool:
    from resolver.host.detection import detect

    return detect().driver is None


needs_no_driver = pytest.mark.skipif(
    not _no_driver_here(), reason="the no-driver note needs a machine without an NVIDIA driver"
)


@needs_no_driver
def test_notes_go_to_stderr_and_quiet_drops_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "detect")
    assert code == 0 and "note:" not in out and f"note: {NO_DRIVER}" in err
    code, out, err = run_cli(capsys, "detect", "-q")
    assert code == 0 and "state: no-driver" in out and err == ""
    code, out, err = run_cli(capsys, "suggest", "--no-gpu", "-q")
    assert code == 0 and "pip install torch" in out and err == ""
    # -q never hides an error
    code, out, err = run_cli(capsys, "suggest", "-q", "--python", "3.1x")
    assert code == 2 and "3.1x" in err


@needs_no_driver
@pytest.mark.parametrize(
    "args",
    [("detect",), ("suggest",), ("verify", "--python", sys.executable), ("image",)],
    ids=lambda a: a[0],
)
def test_no_note_names_an_option_the_command_lacks(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    _, out, err = run_cli(capsys, *args)
    lines = [ln for ln in (out + err).splitlines() if re.match(r"\s*(note|fix|warning):", ln)]
    if args[0] != "verify":  # verify names the host's state in its checks instead
        assert any(NO_DRIVER in ln for ln in lines), lines
    command = cli.get_command(click.Context(cli), args[0])
    assert command is not None
    have = {o for p in command.params for o in p.opts}
    for line in lines:
        bare = re.sub(r"`[^`]*`", "", line)
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", bare))
        assert named <= have, (args[0], line)
    if "--driver" in have:  # the advice stays where it can be followed
        assert any("--driver and --gpu" in ln for ln in lines)


def test_verbose_levels(capsys: pytest.CaptureFixture[str]) -> None:
    _, plain, _ = run_cli(capsys, "suggest", *RTX4090)
    code, detail, _ = run_cli(capsys, "suggest", *RTX4090, "-v")
    assert code == 0 and len(detail.splitlines()) > len(plain.splitlines())  # alternatives
    assert "also fits" in detail and "also fits" not in plain
    _, _, err = run_cli(capsys, "suggest", *RTX4090, "-v")
    assert "debug:" not in err
    _, out, err = run_cli(capsys, "suggest", *RTX4090, "-vv")
    updated = catalog_mod.load().updated
    assert f"debug: database {updated} from " in err and "debug:" not in out


def test_completion_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("bash", "zsh", "fish"):
        code, out, err = run_cli(capsys, "completion", shell)
        assert code == 0 and err == ""
        assert "_GPURESOLVE_COMPLETE" in out and f"{shell}_complete" in out
    code, out, err = run_cli(capsys, "completion", "tcsh")
    assert code == 2 and out == ""


def test_completion_script_really_completes(tmp_path: Path) -> None:
    """bash sources the printed script and asks it, as a shell would on TAB."""
    bash = subprocess.run(["bash", "--version"], capture_output=True, check=False)
    if bash.returncode != 0:
        pytest.skip("no bash")
    root = Path(__file__).resolve().parent.parent
    shim = tmp_path / "gpuresolve"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m resolver "$@"\n')
    shim.chmod(0o755)
    script = (
        f'export PATH="{tmp_path}:$PATH" PYTHONPATH="{root}"\n'
        'eval "$(gpuresolve completion bash)"\n'
        "COMP_WORDS=(gpuresolve sch); COMP_CWORD=1\n"
        "_gpuresolve_completion gpuresolve\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["schema"], proc.stderr


# --- progress -----------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    """A stream that says it is a terminal (what `step` asks before drawing)."""

    def isatty(self) -> bool:
        return True


def _steps(monkeypatch: pytest.MonkeyPatch, seconds: float, *env: str) -> str:
    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.delenv("CI", raising=False)
    for var in env:
        monkeypatch.setenv(var, "true")
    with ui.step("resolving the closure"):
        time.sleep(seconds)
    return stream.getvalue()


@pytest.mark.slow
def test_progress_line_only_for_long_steps_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = _steps(monkeypatch, 1.6)
    assert "\rresolving the closure… 1s" in shown and shown.endswith("\r\033[K")  # erased
    assert _steps(monkeypatch, 0.2) == ""  # under a second: nothing
    assert _steps(monkeypatch, 1.4, "CI") == ""  # a CI log: nothing
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with ui.step("x"):  # not a terminal: nothing
        time.sleep(1.2)
    assert err.getvalue() == ""


@pytest.mark.slow
def test_quiet_stops_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui, "quiet", lambda: True)
    assert _steps(monkeypatch, 1.3) == ""


# --- defaults from files ------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (cwd is a subfolder of it) and a user config file."""
    user = tmp_path / "user" / "config.toml"
    user.parent.mkdir()
    user.write_text('python = "3.10"\npytorch-index = "https://user.example/whl"\n')
    monkeypatch.setenv("GPURESOLVE_CONFIG", str(user))
    monkeypatch.delenv("GPURESOLVE_PYTORCH_INDEX", raising=False)
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.gpuresolve.defaults]\npython = "3.11"\n'
    )
    monkeypatch.chdir(proj / "src")
    return proj


def _pick(out: str) -> tuple[str, str]:
    python = re.search(r"Python (3\.\d+)", out)
    index = re.search(r"--index-url (\S+)/cu\d+", out)
    assert python and index, out
    return python.group(1), index.group(1)


def test_precedence_option_env_pyproject_user(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = run_cli(capsys, "suggest", *RTX4090)
    assert _pick(out) == ("3.11", "https://user.example/whl")  # pyproject over user file
    monkeypatch.setenv("GPURESOLVE_PYTORCH_INDEX", "https://env.example/whl")
    _, out, _ = run_cli(capsys, "suggest", *RTX4090)
    assert _pick(out) == ("3.11", "https://env.example/whl")  # the variable over the files
    argv = ("--python", "3.12", "--pytorch-index", "https://opt.example/whl")
    _, out, _ = run_cli(capsys, "suggest", *RTX4090, *argv)
    assert _pick(out) == ("3.12", "https://opt.example/whl")  # the option over everything
    monkeypatch.delenv("GPURESOLVE_PYTORCH_INDEX")
    _, out, err = run_cli(capsys, "suggest", *RTX4090, "--no-config", "--python", "3.12")
    assert _pick(out) == ("3.12", "https://download.pytorch.org/whl")
    _, _, err = run_cli(capsys, "suggest", *RTX4090, "-vv")
    assert f"debug: python = '3.11' from {project / 'pyproject.toml'}" in err


def test_bad_config_is_one_line(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.gpuresolve.defaults]\nindex = "x"\n')
    code, out, err = run_cli(capsys, "suggest", *RTX4090)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "tool.gpuresolve.defaults.index: unknown key" in line and "pyproject.toml" in line
    code, _, _ = run_cli(capsys, "suggest", *RTX4090, "--no-config")
    assert code == 0


def test_lock_records_config_and_check_reads_none(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    out = project / "locked"
    code, _, err = run_cli(capsys, "lock", *RTX4090, "-o", str(out))
    assert code == 0, err
    text = (out / "requirements.txt").read_text()
    assert "Python 3.11" in text and "https://user.example/whl/cu126" in text
    # the files change (even break): --check re-resolves from what the lock recorded
    (project / "pyproject.toml").write_text("this is [not toml\n")
    (project.parent / "user" / "config.toml").write_text('python = "3.13"\n')
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, err


def test_a_pyproject_without_our_table_is_not_parsed(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    """Another tool's broken pyproject.toml is not ours to refuse; a quoted key spelling our
    name with escapes is still read."""
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n[[[ broken\n')
    code, out, err = run_cli(capsys, "suggest", *RTX4090)
    assert code == 0, err
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool."\\u0067puresolve".defaults]\npython = "3.11"\n'
    )
    code, out, err = run_cli(capsys, "suggest", *RTX4090)
    assert code == 0 and _pick(out)[0] == "3.11", err
    (project / "pyproject.toml").write_text("[tool.gpuresolve.defaults]\n[[[ broken\n")
    code, out, err = run_cli(capsys, "suggest", *RTX4090)
    assert code == 2 and "not valid TOML" in err
