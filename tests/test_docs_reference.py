"""The generated command reference (mkdocs-click over the click definitions, through
tools/mkdocs_hooks.py) shows each option's real default or nothing, never click's marker."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "tools" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def _reference(monkeypatch: pytest.MonkeyPatch) -> str:
    """The command reference's markdown, as docs/reference/commands.md asks for it."""
    docs = pytest.importorskip("mkdocs_click._docs", reason="mkdocs-click is in the docs extra")
    from resolver.cli import cli

    monkeypatch.setattr(docs, "_format_table_option_row", docs._format_table_option_row)
    _hooks().on_config({})  # the build's own hook: its row for mkdocs-click's table
    lines = docs.make_command_docs(
        prog_name="gpuresolve", command=cli, depth=1, style="table", list_subcommands=True
    )
    return "\n".join(lines)


def _row(reference: str, option: str) -> list[str]:
    row = next(ln for ln in reference.splitlines() if ln.startswith(f"| `{option}`"))
    return [cell.strip() for cell in row.strip("|").split(" | ")]


def test_the_reference_holds_no_sentinel_and_the_real_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference = _reference(monkeypatch)
    assert "Sentinel" not in reference
    assert "| Default |" in reference  # the table style the page asks for
    assert _row(reference, "--driver-policy")[-1] == "`compat`"
    assert _row(reference, "--evidence")[-1] == "`documented`"
    assert _row(reference, "--json")[-1] == ""  # a flag declared without a default
    assert _row(reference, "--gpu")[-1] == ""  # repeatable, none given


def test_the_page_in_use_asks_for_the_reference() -> None:
    page = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    assert "::: mkdocs-click" in page
    assert ":style: table" in page


def test_a_page_with_the_marker_fails_the_build() -> None:
    errors = pytest.importorskip("mkdocs.exceptions", reason="mkdocs is in the docs extra")
    source = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    page = SimpleNamespace(file=SimpleNamespace(src_path="reference/commands.md"), markdown=source)
    hooks = _hooks()
    assert hooks.on_page_content("<td>`compat`</td>", page=page) == "<td>`compat`</td>"
    with pytest.raises(errors.PluginError, match=r"reference/commands\.md"):
        hooks.on_page_content("<td><code>Sentinel.UNSET</code></td>", page=page)
    changelog = SimpleNamespace(file=SimpleNamespace(src_path="changelog.md"), markdown="x")
    text = "<li>not <code>Sentinel.UNSET</code></li>"  # a page that names the marker: kept
    assert hooks.on_page_content(text, page=changelog) == text


def test_no_page_shows_an_escaped_pipe() -> None:
    """In a code span `\\|` is shown as typed (a reader copies the backslash): a pipe in a table's
    code is written ``<code>a &#124; b</code>`` instead."""
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    found = [
        f"{page.relative_to(ROOT)}:{n}"
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if "\\|" in line
    ]
    assert found == []


def test_long_console_lines_wrap_on_the_page() -> None:
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    sheets = [ROOT / "docs" / name for name in config["extra_css"]]
    css = "".join(sheet.read_text(encoding="utf-8") for sheet in sheets)
    rule = css[css.index(".md-typeset pre > code") :]
    assert "white-space: pre-wrap" in rule[: rule.index("}")]


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    """Every ``GPURESOLVE`` and ``GPURESOLVE_*`` name in the package (read by gpuresolve, or by a
    script or file it writes: an sbatch script, a Dockerfile, a Job) has a row in
    docs/reference/environment.md."""
    import re

    names: set[str] = set()
    for module in (ROOT / "resolver").rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        names |= set(re.findall(r"(?<![A-Za-z0-9])_?GPURESOLVE(?:_[A-Z0-9]+)*(?![a-z0-9])", text))
    assert {"GPURESOLVE", "GPURESOLVE_NODE_NAME", "GPURESOLVE_DEBUG"} <= names  # the scan works
    page = (ROOT / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(_?GPURESOLVE[A-Z0-9_]*)` \|", page, re.M))
    missing = sorted(n for n in names if n not in documented and f"_{n}" not in documented)
    assert missing == []


def test_every_team_spec_key_has_a_row() -> None:
    """docs/reference/team-spec.md names every key the spec reader accepts (it refuses others)."""
    import re

    from resolver.team.spec import PACKAGE_KEYS, TARGET_KEYS, TOP_KEYS

    page = (ROOT / "docs" / "reference" / "team-spec.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_.]+)`", page, re.M))
    wanted = TOP_KEYS | TARGET_KEYS | {f"packages.{key}" for key in PACKAGE_KEYS}
    assert sorted(wanted - rows - {"packages"}) == []


def test_the_network_page_names_every_command() -> None:
    """docs/reference/network.md says of each command whether it reaches the network."""
    import re

    from resolver.cli import COMMANDS
    from resolver.commands.db import db
    from resolver.commands.fleet import fleet

    page = (ROOT / "docs" / "reference" / "network.md").read_text(encoding="utf-8")
    first = " ".join(re.findall(r"^\| ([^|]+) \|", page, re.M))
    named = set(re.findall(r"`([a-z][a-z -]*?)(?: [A-Z]+)?`", first))
    commands = {c for c in COMMANDS if c not in ("db", "fleet")}
    commands |= {f"db {c}" for c in db.commands} | {f"fleet {c}" for c in fleet.commands}
    assert sorted(c for c in commands if not any(n.startswith(c) for n in named)) == []
