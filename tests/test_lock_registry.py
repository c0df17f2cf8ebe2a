"""A lock format is one module and one registry line (writers/lockformats.py): a format
registered here, and named in no other module, is a --format choice, writes its file, is named
by its format in --json and is read back by --check."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.writers import lockformats
from resolver.writers.formats.unit import LockFormatUnit, RenderContext

ASK = ("--no-gpu", "--python", "3.12", "--top-level")


def _render(ctx: RenderContext) -> Mapping[str, str]:
    """The selected build's pins, one a line (what a minimal format makes of the decision)."""
    cand = ctx.decision.selection
    assert cand is not None
    return {"pins.txt": "".join(f"{name}=={version}\n" for name, version in cand.packages)}


@pytest.fixture
def pins_format(monkeypatch: pytest.MonkeyPatch) -> LockFormatUnit:
    unit = LockFormatUnit("pins", ("pins.txt",), _render, needs_wheels=True)
    monkeypatch.setattr(lockformats, "FORMATS", (*lockformats.FORMATS, unit))
    return unit


def test_a_registered_format_is_offered_and_written(
    pins_format: LockFormatUnit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "lock", "--help")
    assert code == 0 and "pins" in out.split("--format", 1)[1].split("--", 1)[0]
    code, out, err = run_cli(
        capsys, "lock", *ASK, "--format", "pins", "-o", str(tmp_path), "--json"
    )
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pins.txt"]
    text = (tmp_path / "pins.txt").read_text(encoding="utf-8")
    record, body = text.split("\n", 1)  # the format's own text, stamped with the inputs
    assert record.startswith("# gpuresolve-inputs") and body.startswith("torch==")
    files = json.loads(out)["files"]
    assert [(Path(f["path"]).name, f["format"]) for f in files] == [("pins.txt", "pins")]
    code, out, err = run_cli(capsys, "lock", "--check", "-o", str(tmp_path))
    assert code == 0, (out, err)  # the record names the format; --check re-renders it


def test_an_unregistered_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "lock", *ASK, "--format", "pins", "-o", str(tmp_path))
    assert code == 2 and "pins" in err
    assert not any(tmp_path.iterdir())
