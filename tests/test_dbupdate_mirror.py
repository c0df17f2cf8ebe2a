"""`db update --pytorch-index MIRROR` records which index a release came from: a plain `suggest`
offers only releases the database's own index lists (or curated ones); `--pytorch-index MIRROR`
the mirror's too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli
from pytorch_index import IndexServer

from resolver import catalog as catalog_mod
from resolver.db.yamlfile import dump_yaml

pytestmark = pytest.mark.usefixtures("dbupdate_hermetic")

WANT = ["--torch", "==2.16.0", "--gpu", "8.6", "--driver", "580.65.06", "--python", "3.12"]
WANT += ["--platform", "linux-x86_64", "--evidence", "any"]


def _database(tmp_path: Path, raw: dict[str, Any], index_url: str | None = None) -> Path:
    directory = tmp_path / "db" / "data"
    directory.mkdir(parents=True)
    if index_url is not None:
        raw = {**raw, "torch.yaml": {**raw["torch.yaml"], "index_url": index_url}}
    for name in catalog_mod.FILES:
        (directory / name).write_text(dump_yaml(raw[name]), encoding="utf-8")
    return directory


def _release(directory: Path, version: str) -> dict[str, Any]:
    doc = yaml.safe_load((directory / "torch.yaml").read_text(encoding="utf-8"))
    found = [r for s in doc["series"] for r in s["releases"] if r["version"] == version]
    assert len(found) == 1
    release: dict[str, Any] = found[0]
    return release


def test_a_mirrors_release_is_offered_only_with_that_mirror(
    tmp_path: Path,
    index: IndexServer,
    synth_raw: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _database(tmp_path, synth_raw)  # its own index: download.pytorch.org
    mirror = index.url + "/whl"
    code, _, err = run_cli(
        capsys, "db", "update", "--pytorch-index", mirror, "--write-data", str(data)
    )
    assert code == 0, err
    assert _release(data, "2.16.0")["index"] == mirror  # new, and read from the mirror
    assert "index" not in _release(data, "2.12.0")  # curated: everyone's
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(data))

    code, out, _ = run_cli(capsys, "suggest", "--json", *WANT)
    assert code == 1 and json.loads(out)["selection"] is None  # the default index lacks it
    code, out, err = run_cli(capsys, "suggest", "--json", *WANT, "--pytorch-index", mirror)
    assert code == 0, err
    assert json.loads(out)["selection"]["torch"] == "2.16.0"
    code, out, _ = run_cli(capsys, "suggest", "--json", *WANT, "--pytorch-index", mirror + "/")
    assert code == 0  # the same mirror, spelled with a slash
    code, out, _ = run_cli(capsys, "suggest", "--json", *WANT, "--pytorch-index", mirror + "x")
    assert code == 1  # another mirror does not list it either


def test_a_release_the_default_index_lists_is_everyones(
    tmp_path: Path,
    index: IndexServer,
    synth_raw: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _database(tmp_path, synth_raw, index.url + "/whl/{variant}")  # this is its own index
    code, _, err = run_cli(
        capsys, "db", "update", "--pytorch-index", index.url + "/whl", "--write-data", str(data)
    )
    assert code == 0, err
    assert "index" not in _release(data, "2.16.0")


def test_a_damaged_index_key_is_refused(tmp_path: Path, synth_raw: dict[str, Any]) -> None:
    raw = json.loads(json.dumps(synth_raw))
    raw["torch.yaml"]["series"][0]["releases"][0]["index"] = "javascript:alert(1)"
    with pytest.raises(catalog_mod.DataError, match="index"):
        catalog_mod.from_raw(raw)
