"""Helpers the CLI tests share: run `gpuresolve` in-process, write a database to a directory."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from resolver.cli import main

# Options that say how much `lock` pins: a call that gives none of them is made top-level.
CLOSURE_CHOICES = ("--top-level", "--hashes", "--no-hashes", "--check")


def top_level(args: Sequence[str]) -> list[str]:
    """``args`` with ``--top-level`` after `lock` when they choose nothing about the closure.

    A full lock (the default) resolves the closure on the PyTorch index, which tests cannot
    reach; tests of the closure itself give ``--hashes``/``--no-hashes`` and a fixture index
    (tests/closure_index.py); `--check` re-resolves as the files record."""
    argv = list(args)
    if "lock" not in argv[:1] or any(a in CLOSURE_CHOICES for a in argv):
        return argv
    return [argv[0], "--top-level", *argv[1:]]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `gpuresolve ARGS`; main() always ends in SystemExit.
    `lock` without a closure choice is top-level (``top_level``)."""
    with pytest.raises(SystemExit) as exc:
        main(top_level(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def suggest_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    """``suggest ARGS --json``: the exit code and the document."""
    import json

    code, out, _err = run_cli(capsys, "suggest", *args, "--json")
    doc: dict[str, Any] = json.loads(out)
    return code, doc


def chosen(doc: dict[str, Any]) -> dict[str, str]:
    """What a ``suggest --json`` selection pins: torch with its variant, and each extension."""
    sel = doc["selection"]
    return {"torch": f"{sel['torch']}+{sel['variant']}"} | {
        e["package"]: e["version"] for e in sel["extensions"]
    }


def write_db(directory: Path, raw: dict[str, Any]) -> Path:
    """The parsed YAML documents of a database (file name -> document) as files."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, doc in raw.items():
        (directory / name).write_text(yaml.safe_dump(doc), encoding="utf-8")
    return directory


def assert_schema(name: str, document: Any) -> None:
    """``document`` is valid under the published schema ``name`` (jsonschema, draft 2020-12)."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")
    from resolver import schemas

    validator = jsonschema.Draft202012Validator(schemas.load(name))
    problems = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not problems, [f"{list(p.absolute_path)}: {p.message[:300]}" for p in problems[:5]]


def run_child(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """A child Python (or any program) run as the start-up and route tests run one: text out,
    in ``cwd``, two minutes at most, its status left to the caller."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, env=dict(env), cwd=cwd, timeout=120, check=False
    )
