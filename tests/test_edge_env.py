"""The shell's edges: control characters in path options, relative XDG variables, an ASCII-only
output encoding, Ctrl-C while gpuresolve starts."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli
from conftest import default_action, scrubbed_env

from resolver.db import location

ROOT = Path(__file__).resolve().parent.parent
BAD = ["out\x07bel", "out\x1b]0;x\x07", "out\u202egnp"]


def _env(**extra: str) -> dict[str, str]:
    return scrubbed_env(PYTHONPATH=str(ROOT), **extra)


def _argvs(tmp: Path, bad: str) -> list[list[str]]:
    p = str(tmp / bad)
    return [
        ["lock", "--no-gpu", "-o", p],
        ["lock", p],
        ["suggest", "--host", p],
        ["suggest", "--python", p],
        ["install", "--lock", p, "--dry-run"],
        ["verify", "--lock", p],
        ["verify", "--python", p],
        ["db", "check", "--data", p],
        ["db", "update", "--dry-run", "--write-data", p],
        ["db", "inspect-wheel", p],
        ["db", "import", p],
        ["db", "export-observations", p],
    ]


@pytest.mark.parametrize("bad", BAD, ids=["bel", "osc", "bidi"])
def test_path_options_refuse_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    for argv in _argvs(tmp_path, bad):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert "control or bidi character" in err, (argv, err)
        assert bad not in out + err and "\x07" not in out + err and "\x1b" not in out + err
        assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_a_relative_xdg_directory_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The XDG Base Directory specification: a relative path is invalid and ignored."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(location.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "rel-data")
    monkeypatch.setenv("XDG_CACHE_HOME", "rel-cache")
    monkeypatch.setenv("XDG_CONFIG_HOME", "rel-config")
    monkeypatch.delenv("GPURESOLVE_CONFIG", raising=False)
    monkeypatch.chdir(cwd)
    (cwd / "rel-config" / "gpuresolve").mkdir(parents=True)  # never read: the path is relative
    (cwd / "rel-config" / "gpuresolve" / "config.toml").write_text("[[[ not toml\n")
    assert location.user_data_dir() == home / ".local" / "share" / "gpuresolve" / "data"
    assert location.cache_dir() == home / ".cache" / "gpuresolve"
    code, _, err = run_cli(capsys, "suggest", "--no-gpu", "--python", "3.12")
    assert code == 0, err
    assert [p.name for p in cwd.iterdir()] == ["rel-config"]  # nothing else where it ran
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "abs"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "abs-cache"))
    assert location.user_data_dir() == tmp_path / "abs" / "gpuresolve" / "data"
    assert location.cache_dir() == tmp_path / "abs-cache" / "gpuresolve"


def test_an_ascii_terminal_gets_the_diff_escaped_not_exit_70(tmp_path: Path) -> None:
    out = tmp_path / "lock"
    argv = [sys.executable, "-m", "resolver", "lock", "--top-level", "--no-gpu", "--python", "3.12"]
    made = subprocess.run([*argv, "-o", str(out)], capture_output=True, env=_env(), timeout=120)
    assert made.returncode == 0, made.stderr
    path = out / "requirements.txt"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\ntorch==", "\n# café ‮ \ntorch==", 1), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "resolver", "lock", "--check", "-o", str(out)],
        capture_output=True,
        env=_env(PYTHONIOENCODING="ascii"),
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert b"internal error" not in proc.stderr and b"(drift): requirements.txt" in proc.stderr
    assert b"-# caf\\xe9" in proc.stdout  # escaped: the terminal's encoding has no "e acute"
    proc.stdout.decode("ascii")  # nothing but ASCII reached the terminal


_INTERRUPT_AT_IMPORT = """
import runpy, sys
MODULE = sys.argv[1]
def hook(event, args):
    if event == "import" and args[0] == MODULE:
        raise KeyboardInterrupt  # Ctrl-C exactly while that module loads
sys.addaudithook(hook)
sys.argv = ["gpuresolve", "suggest", "--no-gpu"]
runpy.run_module("resolver", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["click", "resolver.cli", "resolver.commands.common"])
def test_ctrl_c_while_starting_is_one_line_and_130(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AT_IMPORT, module],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        preexec_fn=default_action(signal.SIGINT),
    )
    assert proc.returncode == 130, proc.stderr
    # (click ends the terminal's "^C" line first, once a command is loading)
    assert proc.stderr.strip() == "gpuresolve: aborted" and "Traceback" not in proc.stderr
