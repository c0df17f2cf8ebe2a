"""Helpers the CLI tests share: run `gpuresolve` in-process, write a database to a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from resolver.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `gpuresolve ARGS`; main() always ends in SystemExit."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def write_db(directory: Path, raw: dict[str, Any]) -> Path:
    """The parsed YAML documents of a database (file name -> document) as files."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, doc in raw.items():
        (directory / name).write_text(yaml.safe_dump(doc), encoding="utf-8")
    return directory
