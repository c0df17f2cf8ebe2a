"""`--json` on db check, db update and install: stable keys other programs parse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import assert_schema, run_cli
from pytorch_index import IndexServer, closed_port, tree_snapshot

from resolver import catalog as catalog_mod
from resolver.db.yamlfile import dump_yaml

run = run_cli
pytestmark = pytest.mark.usefixtures("dbupdate_hermetic")


@pytest.fixture
def synth_dir(tmp_path: Path, synth_raw: dict[str, Any]) -> Path:
    directory = tmp_path / "db" / "data"
    directory.mkdir(parents=True)
    for name in catalog_mod.FILES:
        (directory / name).write_text(dump_yaml(synth_raw[name]), encoding="utf-8")
    return directory


def test_db_check_json(
    capsys: pytest.CaptureFixture[str], synth_dir: Path, synth_raw: dict[str, Any]
) -> None:
    code, out, _ = run(capsys, "db", "check", "--data", str(synth_dir), "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["problems"] == []
    assert data["updated"] == "2026-01-01" and data["counts"]["releases"] == 3
    assert_schema("db-check", data)
    synth_raw["torch.yaml"]["series"][1]["variants"][2]["cuda"] = "12.6"
    (synth_dir / "torch.yaml").write_text(dump_yaml(synth_raw["torch.yaml"]))
    code, out, _ = run(capsys, "db", "check", "--data", str(synth_dir), "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    assert any("a cu128 build must be CUDA 12.8" in p for p in data["problems"])


def test_db_update_json(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    args = ["db", "update", "--pytorch-index", f"{index.url}/whl", "--write-data", str(synth_dir)]
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    data = json.loads(out)  # stdout is the JSON document alone: no progress bar, no summary
    assert data["ok"] is True and data["changed"] is True and data["written"] is True
    assert data["changes"]["releases"][0].startswith("torch 2.16.0 (cpu, cu126, cu130, cu136)")
    assert data["target"] == str(synth_dir) and data["requests"] > 0
    assert_schema("db-update", data)
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0 and json.loads(out)["changed"] is False


def test_db_update_json_on_failure(capsys: pytest.CaptureFixture[str], synth_dir: Path) -> None:
    before = tree_snapshot(synth_dir)
    url = f"http://127.0.0.1:{closed_port()}/whl"
    args = ["db", "update", "--pytorch-index", url, "--write-data", str(synth_dir), "--json"]
    code, out, err = run(capsys, *args)
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and "cannot connect" in data["error"]
    assert_schema("db-update", data)
    assert "the database is unchanged" in err
    assert tree_snapshot(synth_dir) == before


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (
            ("lock", "--json", "--platform", "linux-x86_64", "--no-gpu", "--python", "3.1x"),
            2,
            "3.1x",
        ),
        (("suggest", "--json", "--no-such-option"), 2, "--no-such-option"),
        (("detect", "--json", "--no-such-option"), 2, "--no-such-option"),
        (("install", "--json", "--installer", "conda"), 2, "conda"),
    ],
)
def test_an_error_under_json_is_a_json_object_on_stdout_too(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], code: int, words: str
) -> None:
    got, out, err = run(capsys, *args)
    assert got == code
    (line,) = err.strip().splitlines()  # the one stderr line stays
    data = json.loads(out)
    assert list(data) == ["error"] and data["error"]["code"] == code
    assert_schema("error", data)
    assert words in data["error"]["message"] and line == f"gpuresolve: {data['error']['message']}"
    # Without --json, stdout stays empty.
    got, out, _ = run(capsys, *(a for a in args if a != "--json"))
    assert got == code and out == ""
