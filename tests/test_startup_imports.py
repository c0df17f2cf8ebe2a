"""What `suggest` for a described machine imports (issue 29's start-up budget): click and what
the answer needs, nothing else. Modules are what start-up costs; timing lives in
bench/suggest_latency.py, this only holds the structure that keeps it fast."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from cli_support import run_child

ROOT = Path(__file__).resolve().parent.parent
# Never needed to answer for torch alone: YAML (the cache answers), HTTP, packaging (only for a
# specifier or an extension), TOML (no settings here), child processes, logging, temp files.
UNNEEDED = {
    "yaml",
    "requests",
    "urllib3",
    "packaging",
    "packaging.specifiers",
    "tomllib",
    "tomlkit",
    "subprocess",
    "logging",
    "tempfile",
    "resolver.db.extensions",
    "resolver.db.yamlfile",
    "resolver.core.hostprofile",  # only a probed or recorded host is one
}
CHILD = """
import json, sys
sys.argv = ["gpuresolve", *json.loads(sys.argv[1])]
from resolver.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


@pytest.mark.parametrize("fmt", [["--json"], []], ids=["json", "text"])
def test_suggest_imports_only_what_the_answer_needs(tmp_path: Path, fmt: list[str]) -> None:
    args = ["suggest", *fmt, "--driver", "570.124.06", "--gpu", "RTX 3090", "--python", "3.12"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("GPURESOLVE_DATA_DIR", None)
    for _ in range(2):  # the second run is the warm one: the catalog cache answers
        proc = run_child([sys.executable, "-c", CHILD, json.dumps(args)], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stderr.rsplit("MODULES ", 1)[1]))
    assert "resolver.solve.solver" in modules  # it did answer
    assert modules & UNNEEDED == set()
    assert "shutil" not in modules  # with bz2 and lzma: for --python NAME on PATH, or help


OPENS = """
import json, sys
opened = []
def hook(event, args):
    name = args[0].rsplit("/", 1)[-1] if event == "open" and isinstance(args[0], str) else ""
    if name in ("extensions.json", "extensions.yaml"):
        opened.append(name)
sys.addaudithook(hook)
sys.argv = ["gpuresolve", *json.loads(sys.argv[1])]
from resolver.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nOPENED " + json.dumps(opened) + "\\n")
"""


@pytest.mark.slow
def test_extension_history_is_read_only_with_with(tmp_path: Path) -> None:
    """The history (extensions.json, else extensions.yaml) is most of the database's bytes:
    `suggest` without --with (or with a companion: torchvision) never opens it, warm or cold;
    `--with vllm` does (issue 38)."""
    args = ["suggest", "--json", "--driver", "570.124.06", "--gpu", "RTX 3090", "--python", "3.12"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("GPURESOLVE_DATA_DIR", None)

    def opened(argv: list[str]) -> list[str]:
        proc = run_child([sys.executable, "-c", OPENS, json.dumps(argv)], env, tmp_path)
        assert proc.returncode == 0, proc.stderr
        return list(json.loads(proc.stderr.rsplit("OPENED ", 1)[1]))

    assert opened(args) == []  # cold: the catalog is built from catalog.json's head
    assert opened(args) == []  # warm: the catalog cache answers
    assert opened([*args, "--with", "torchvision", "--with", "torchaudio"]) == []  # companions
    assert "extensions.json" in opened([*args, "--with", "vllm"])


# The console script's own route (resolver.start), its modules read at its last step: every way
# out of it is os._exit (the interpreter's teardown skipped), which this wraps.
SCRIPT = """
import os, sys
real_exit = os._exit
def spy(code):
    sys.stdout.flush()
    sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = spy
sys.argv = ["gpuresolve", *sys.argv[1:]]
from resolver.start import entry
entry()
"""


def _started(tmp_path: Path, args: list[str], **extra: str) -> tuple[int, str, set[str]]:
    """(exit code, stdout, modules imported) of the console script run with ``args``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("GPURESOLVE_DATA_DIR", None)
    env.pop("GPURESOLVE_CACHE_DIR", None)  # the cache under XDG_CACHE_HOME, this test's own
    env.update({"XDG_DATA_HOME": str(tmp_path / "data"), "COLUMNS": "100", **extra})
    proc = run_child([sys.executable, "-c", SCRIPT, *args], env, tmp_path)
    modules = set(proc.stderr.rsplit("MODULES ", 1)[1].split())
    return proc.returncode, proc.stdout, modules


# What answers no command's question: the database, the solver, any command's module.
NOT_FOR_HELP = {
    "resolver.catalog",
    "resolver.db.models",
    "resolver.solve",
    "resolver.commands.suggest",
    "resolver.commands.common",
    "resolver.flows.target",
    "json",
    *UNNEEDED,
}


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_reads_no_database_and_no_click(tmp_path: Path, flag: str) -> None:
    code, out, modules = _started(tmp_path, [flag])
    assert code == 0
    assert out.startswith("gpuresolve ") and "(database " in out
    assert "click" not in modules
    assert modules & NOT_FOR_HELP == set()


def test_version_names_the_chosen_databases_date(tmp_path: Path) -> None:
    """A user database newer than the shipped one is the one named (as `load` would pick)."""
    import shutil

    from resolver import catalog as catalog_mod

    user = tmp_path / "data" / "gpuresolve" / "data"
    shutil.copytree(catalog_mod.shipped_data_dir(), user)
    torch_yaml = user / "torch.yaml"
    text = torch_yaml.read_text(encoding="utf-8")
    dated = re.sub(r"(?m)^updated:.*$", 'updated: "2099-01-02T03:04:05Z"', text, count=1)
    assert dated != text
    torch_yaml.write_text(dated, encoding="utf-8")
    code, out, _ = _started(tmp_path, ["--version"])
    assert code == 0 and out.endswith("(database 2099-01-02T03:04:05Z)\n"), out
    assert catalog_mod.load(user).updated == "2099-01-02T03:04:05Z"


def test_version_answers_when_the_database_cannot_be_read(tmp_path: Path) -> None:
    code, out, _ = _started(tmp_path, ["--version"], GPURESOLVE_DATA_DIR=str(tmp_path / "none"))
    assert code == 0 and "(database unreadable: " in out and "torch.yaml" in out


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["help", "h", "none"])
def test_help_imports_no_command(tmp_path: Path, args: list[str]) -> None:
    code, out, modules = _started(tmp_path, args)
    assert code == 0 and "Commands:" in out
    assert modules & NOT_FOR_HELP == set()
    assert not {m for m in modules if m.startswith("resolver.commands.")} - {
        "resolver.commands.group",
        "resolver.commands.helpcache",  # the help kept for the next
    }


def test_help_lists_each_command_as_its_own_help_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list `--help` writes from SUMMARIES is the one click writes from the commands."""
    import click
    from cli_support import run_cli

    from resolver.cli import COMMANDS, SUMMARIES, cli

    ctx = click.Context(cli)
    for name in COMMANDS:  # every command imported: click summarises the real ones
        command = cli.get_command(ctx, name)
        assert command is not None and command.help is not None
        first = command.help.split("\n\n", 1)[0]
        assert " ".join(first.split()) == SUMMARIES[name], name
    monkeypatch.setenv("COLUMNS", "100")
    code, real, _ = run_cli(capsys, "--help")
    assert code == 0
    assert _started(tmp_path, ["--help"])[1] == real


@pytest.mark.parametrize("args", [["--help"], []], ids=["help", "none"])
def test_help_replayed_without_click(tmp_path: Path, args: list[str]) -> None:
    """The second `--help` prints the text click rendered for the first, importing no click."""
    code, first, modules = _started(tmp_path, args)
    assert code == 0 and "click" in modules
    code, again, modules = _started(tmp_path, args)
    assert code == 0 and again == first
    assert "click" not in modules
    assert modules & NOT_FOR_HELP == set()


def test_help_rendered_afresh_for_another_width(tmp_path: Path) -> None:
    """A width not stored is rendered by click (and kept); the text is click's at that width."""
    _started(tmp_path, ["--help"])
    code, narrow, modules = _started(tmp_path, ["--help"], COLUMNS="60")
    assert code == 0 and "click" in modules
    assert max(map(len, narrow.splitlines())) <= 60
    assert _started(tmp_path, ["--help"], COLUMNS="60")[1] == narrow
    assert [
        p.name.endswith("-60.txt") for p in (tmp_path / "cache" / "gpuresolve").glob("help-*")
    ] == [True]


def test_stored_help_is_escaped_and_bounded(tmp_path: Path) -> None:
    """What is read back is input: a control character is printed escaped; an oversized or
    unreadable file is ignored (click renders the help again)."""
    _started(tmp_path, ["--help"])
    (stored,) = (tmp_path / "cache" / "gpuresolve").glob("help-*.txt")
    stored.write_text("Usage: \x1b[31mred\n", encoding="utf-8")
    code, out, _ = _started(tmp_path, ["--help"])
    assert code == 0 and "\x1b" not in out and "red" in out
    stored.write_bytes(b"x" * (70 * 1024))
    code, out, modules = _started(tmp_path, ["--help"])
    assert code == 0 and "Commands:" in out and "click" in modules
