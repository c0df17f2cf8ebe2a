"""`gpuresolve db update` refreshes extensions.yaml (issue 32), against a local index on 127.0.0.1.

The index is the PyTorch index fixture plus ``ext_index``: xformers 0.0.36 (a new torch
requirement and arch list; one wheel with PEP 658 metadata, one range-read; a build in the
PyTorch index's cu130 folder), bitsandbytes 0.50.3 (per-CUDA libraries, two of them), torchao
0.19.0 (a pure wheel and an abi3 one), and flash-attn 2.8.4 as a source distribution only.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli as run
from ext_index import CU130_XFORMERS, extension_routes
from pytorch_index import Behaviour, IndexServer, fixture_routes, serve, tree_snapshot

from resolver import catalog as catalog_mod
from resolver.core.versions import cc_str
from resolver.db.check import check as db_check

pytestmark = pytest.mark.usefixtures("dbupdate_hermetic")


@pytest.fixture
def index() -> Any:
    with serve({**fixture_routes(), **extension_routes()}) as srv:
        yield srv


@pytest.fixture
def shipped_copy(tmp_path: Path) -> Path:
    target = tmp_path / "shipped" / "data"
    shutil.copytree(catalog_mod.shipped_data_dir(), target)
    return target


def update(srv: IndexServer, data: Path, *extra: str) -> list[str]:
    return [
        "db",
        "update",
        "--pytorch-index",
        srv.url + "/whl",
        "--pypi-index",
        srv.url + "/simple",
        "--write-data",
        str(data),
        *extra,
    ]


def _releases(data: Path, package: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((data / "extensions.yaml").read_text(encoding="utf-8"))
    pkg = next(p for p in doc["packages"] if p["name"] == package)
    return list(pkg["releases"])


def _own_index(data: Path, srv: IndexServer) -> None:
    """Make the fixture index the database's own PyTorch index (not a mirror)."""
    torch = data / "torch.yaml"
    text = torch.read_text(encoding="utf-8")
    own = 'index_url: "https://download.pytorch.org/whl/{variant}"'
    assert own in text
    torch.write_text(text.replace(own, f'index_url: "{srv.url}/whl/{{variant}}"'), "utf-8")


@pytest.mark.slow
def test_update_adds_new_extension_releases(
    capsys: pytest.CaptureFixture[str], index: IndexServer, shipped_copy: Path
) -> None:
    _own_index(shipped_copy, index)
    curated = {p: _releases(shipped_copy, p) for p in ("xformers", "bitsandbytes", "torchao")}
    code, out, err = run(capsys, *update(index, shipped_copy, "--json"))
    assert code == 0, err
    doc = json.loads(out)
    changes = doc["changes"]["extensions"]
    assert (
        "xformers 0.0.36: new release (default: linux-x86_64, windows-x86_64; cu130: "
        "linux-x86_64)" in changes
    )
    assert "xformers 0.0.36: torch requirement >=2.11 (was >=2.10 in 0.0.35)" in changes
    assert (
        "xformers 0.0.36 default CUDA 12.8 linux-x86_64: arch list SASS 7.5 8.0 9.0 10.0, "
        "PTX 8.0 (was SASS 7.5 8.0 9.0, PTX 8.0 in 0.0.35)" in changes
    )
    assert "bitsandbytes 0.50.3: new release (default: linux-x86_64)" in changes
    assert any(
        c.startswith("bitsandbytes 0.50.3 (default): no build for CUDA 11.8") for c in changes
    )
    assert "torchao 0.19.0: new release (default: linux-x86_64, any)" in changes
    assert not any(c.startswith("torchao 0.19.0 default") for c in changes)  # same arch list
    notes = doc["changes"]["notes"]
    assert (
        "torchao 0.19.0 linux-x86_64: CC 9.9 not in gpus.yaml's architectures: left out "
        "(curate)" in notes
    )
    assert "flash-attn 2.8.4: new release (default: sdist)" in changes
    assert doc["extension_wheels_read"] == 6 and doc["extension_pages_read"] >= 4
    # the history gather found no older release to read here: its figures say so
    assert doc["extension_bytes_read"] == 0 and doc["extension_seconds"] >= 0

    cat = catalog_mod.load(shipped_copy)
    assert db_check(cat) == []
    xf = cat.extensions["xformers"].releases[0]
    assert xf.version == "0.0.36" and xf.sdist
    default = next(b for b in xf.builds if b.index == "default")
    assert default.torch == ">=2.11" and default.cuda == "12.8" and default.cuda_match == "major"
    assert default.python == ">=3.9" and default.prov.grade == "observed"
    arch = default.platforms["linux-x86_64"]
    assert arch is not None and [cc_str(c) for c in arch.sass] == ["7.5", "8.0", "9.0", "10.0"]
    cu130 = next(b for b in xf.builds if b.index == "pytorch")
    assert cu130.cuda == "13.0" and list(cu130.platforms) == ["linux-x86_64"]
    bnb = cat.extensions["bitsandbytes"].releases[0]
    assert bnb.version == "0.50.3" and [b.cuda for b in bnb.builds] == ["12.8", "13.0"]
    a128 = bnb.builds[0].platforms["linux-x86_64"]
    assert a128 is not None and [cc_str(c) for c in a128.sass][-1] == "12.0"
    fa = cat.extensions["flash-attn"].releases[0]
    assert fa.version == "2.8.4" and fa.sdist and fa.builds == ()
    ao = cat.extensions["torchao"].releases[0]
    assert ao.version == "0.19.0" and ao.builds[0].torch is None
    assert set(ao.builds[0].platforms) == {
        "linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64"
    }  # fmt: skip
    # the windows wheel had no PEP 658 file: its METADATA came by range reads, never whole
    paths = index.log
    win = "/files/xformers/xformers-0.0.36-py39-none-win_amd64.whl"
    assert any(p == win and rng for p, rng in paths) and not any(
        p == win and not r for p, r in paths
    )
    assert (
        "/files/xformers/xformers-0.0.36-py39-none-manylinux_2_28_x86_64.whl.metadata",
        None,
    ) in paths
    assert not any("0.0.34" in p or "0.0.37rc1" in p for p, _ in paths)
    assert any(p == f"/whl/cu130/{CU130_XFORMERS}" for p, _ in paths)
    # curated releases stay byte for byte; each new fact cites the wheel it was read from
    for package, before in curated.items():
        assert _releases(shipped_copy, package)[1:] == before
    text = (shipped_copy / "extensions.yaml").read_text(encoding="utf-8")
    assert "XFORMERS_0.0.36_linux-x86_64:" in text and "read from PEP 658" in text

    # a second run finds nothing new for the extensions
    code, out, err = run(capsys, *update(index, shipped_copy, "--json"))
    assert code == 0, err
    assert json.loads(out)["changes"]["extensions"] == []


@pytest.mark.slow
def test_a_mirror_s_variant_folders_are_not_recorded(
    capsys: pytest.CaptureFixture[str], index: IndexServer, shipped_copy: Path
) -> None:
    """From a mirror of the PyTorch index only the default index's builds are recorded: a
    build with index "pytorch" would be offered to users of the real index, which may lack it."""
    before = tree_snapshot(shipped_copy)
    code, out, err = run(capsys, *update(index, shipped_copy, "--dry-run"))
    assert code == 0, err
    assert "extension packages:\n  xformers 0.0.36: new release (default: linux-x86_64, " in out
    assert "cu130" not in out.split("extension packages:")[1].split("notes:")[0]
    assert "is a mirror: the extension packages' builds in its variant folders" in out
    assert not any("/xformers/" in p and p.startswith("/whl/") for p in index.paths())
    assert tree_snapshot(shipped_copy) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (Behaviour(mode="slow", delay=3.0, only=r"win_amd64\.whl$"), "timed out"),
        (Behaviour(mode="garbage", only=r"win_amd64\.whl$"), "not a zip file"),
        (Behaviour(mode="garbage", only=r"\.whl\.metadata$"), "sha256 does not match"),
        (Behaviour(mode="error", only=r"^/simple/xformers/$"), "HTTP 500"),
    ],
    ids=["timeout", "garbage-wheel", "garbage-metadata", "page-fails"],
)
def test_a_broken_extension_read_keeps_the_old_database(
    capsys: pytest.CaptureFixture[str],
    shipped_copy: Path,
    behaviour: Behaviour,
    message: str,
) -> None:
    before = tree_snapshot(shipped_copy)
    with serve({**fixture_routes(), **extension_routes()}, behaviour) as srv:
        code, _out, err = run(capsys, *update(srv, shipped_copy, "--timeout", "1"))
    assert code == 1
    assert message in err and "the database is unchanged" in err
    assert tree_snapshot(shipped_copy) == before


@pytest.mark.network
@pytest.mark.skipif(
    os.environ.get("GPURESOLVE_NETWORK_TESTS") != "1", reason="GPURESOLVE_NETWORK_TESTS=1 not set"
)
def test_real_index_reproduces_the_curated_releases() -> None:
    """With the newest xformers and torchao releases taken out, reading pip's default index
    puts them back with the torch requirement and arch lists the curated records hold."""
    import copy

    from resolver.dbupdate.extcollect import collect_extensions
    from resolver.dbupdate.extmerge import merge_extensions
    from resolver.dbupdate.merge import Summary
    from resolver.dbupdate.run import read_raw
    from resolver.io.http import Client
    from resolver.wheels.index import pip_default_index

    index = pip_default_index()
    assert index, "pip has no index"
    raw = read_raw(catalog_mod.shipped_data_dir())
    doc = raw["extensions.yaml"]
    curated = {}
    for pkg in doc["packages"]:
        if pkg["name"] in ("xformers", "torchao"):
            curated[pkg["name"]] = pkg["releases"][0]
        else:
            pkg["releases"] = []  # known to nobody: only xformers and torchao are read
    trimmed = copy.deepcopy(raw)
    for pkg in trimmed["extensions.yaml"]["packages"]:
        if pkg["name"] in curated:
            pkg["releases"] = pkg["releases"][1:]
        else:
            pkg["releases"] = [{"version": "999"}]  # nothing newer: not read
    with Client(timeout=60) as client:
        facts = collect_extensions(client, trimmed["extensions.yaml"], index, None, [])
    summary = Summary()
    merge_extensions(trimmed, facts, "2026-11-26", summary)
    for pkg in trimmed["extensions.yaml"]["packages"]:
        if pkg["name"] not in curated:
            continue
        read = next(r for r in pkg["releases"] if r["version"] == curated[pkg["name"]]["version"])
        for got, want in zip(read["builds"], curated[pkg["name"]]["builds"], strict=True):
            assert got["torch"] == want["torch"]
            for plat, arch in want["platforms"].items():
                assert got["platforms"][plat].get("sass") == arch.get("sass"), plat
                assert got["platforms"][plat].get("ptx") == arch.get("ptx"), plat


def test_extension_facts_that_fail_the_check_are_left_out() -> None:
    """A new release the check refuses (here: a source key missing) is undone, with a note;
    torch's part of the update goes on."""
    import copy

    from resolver.db.check import check
    from resolver.dbupdate.merge import Summary
    from resolver.dbupdate.run import _keep_extensions_sound, read_raw

    raw = read_raw(catalog_mod.shipped_data_dir())
    known = check(catalog_mod.load(catalog_mod.shipped_data_dir()))
    new_raw = copy.deepcopy(raw)
    release = copy.deepcopy(new_raw["extensions.yaml"]["packages"][0]["releases"][0])
    release.update(version="0.0.99", source=["NOT_A_SOURCE"])
    new_raw["extensions.yaml"]["packages"][0]["releases"].insert(0, release)
    summary = Summary(extensions=["xformers 0.0.99: new release (default: linux-x86_64)"])
    _keep_extensions_sound(raw, new_raw, summary, known)
    assert new_raw["extensions.yaml"] == raw["extensions.yaml"]
    assert summary.extensions == []
    assert summary.notes == [
        "the extension packages' new releases were left out: extensions.yaml xformers 0.0.99: "
        "unknown source key(s) NOT_A_SOURCE (curate)"
    ]


@pytest.mark.slow
def test_an_update_with_only_extension_news_stamps_the_database(
    capsys: pytest.CaptureFixture[str], shipped_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database's version is torch.yaml's ``updated:``: a database whose only news is an
    extension release must be stamped too, or the loader would keep the shipped one."""
    from resolver.db.location import read_version
    from resolver.dbupdate import collect

    with serve(fixture_routes()) as srv:  # torch's news first, no extension page
        code, _out, err = run(capsys, *update(srv, shipped_copy))
    assert code == 0, err
    first = read_version(shipped_copy)
    monkeypatch.setattr(collect, "now_utc", lambda: "2099-01-01T00:00:00Z")
    with serve({**fixture_routes(), **extension_routes()}) as srv:
        code, out, err = run(capsys, *update(srv, shipped_copy))
    assert code == 0, err
    assert "extension packages:" in out and "new releases:" not in out
    assert read_version(shipped_copy) > first
    assert catalog_mod.load(shipped_copy).extensions["xformers"].releases[0].version == "0.0.36"


@pytest.mark.slow
def test_the_read_budget_leaves_wheels_unread_and_says_so(
    capsys: pytest.CaptureFixture[str],
    index: IndexServer,
    shipped_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the update's byte budget for extension wheels no library is scanned: the release
    is not recorded (never as source-only while its wheels exist), and the notes say why."""
    from resolver.dbupdate import extcollect

    monkeypatch.setattr(extcollect, "MAX_TOTAL", 0)
    before = (shipped_copy / "extensions.yaml").read_text(encoding="utf-8")
    code, out, err = run(capsys, *update(index, shipped_copy, "--json"))
    assert code == 0, err
    changes = json.loads(out)["changes"]
    text = (shipped_copy / "extensions.yaml").read_text(encoding="utf-8")
    # no source left uncited: none added for xformers, one for torchao's new release
    assert text.count("XFORMERS_FILES_") == before.count("XFORMERS_FILES_")
    assert text.count("TORCHAO_FILES_") > before.count("TORCHAO_FILES_")
    assert not any(c.startswith(("xformers", "bitsandbytes")) for c in changes["extensions"])
    assert (
        "xformers 0.0.36: its linux-x86_64, windows-x86_64 wheels were not read: not added"
        in (changes["notes"])
    )
    assert any("MiB for extension wheels is spent" in n for n in changes["notes"])
    # torchao's pure wheel needs no scan: its release stands on it alone
    assert "torchao 0.19.0: new release (default: linux-x86_64, any)" in changes["extensions"]
