"""`gpuresolve db update / show / check` end to end, against a local index server on 127.0.0.1.

The server serves recorded-shape PyTorch index pages (tests/fixtures/pytorch_index): torch 2.12.0
(known) with a new cu128 build, a new 2.16.0 with a new variant cu136 whose wheel has no PEP 658
metadata (range-read from a real zip), companions, and a PEP 691 default index. Then it times
out, fails and answers garbage: the old database must stay byte for byte as it was.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_support import top_level
from packaging.specifiers import SpecifierSet
from pytorch_index import (
    RANGE_WHEEL,
    Behaviour,
    IndexServer,
    closed_port,
    fixture_routes,
    serve,
    siblings,
    tree_snapshot,
)
from target_support import written

from resolver import catalog as catalog_mod
from resolver.cli import main
from resolver.db.check import check as db_check
from resolver.db.yamlfile import dump_yaml
from resolver.io import http as fetch
from resolver.present import findings as words
from resolver.solve import Request, TargetGpu, solve

pytestmark = pytest.mark.usefixtures("dbupdate_hermetic")


@pytest.fixture
def synth_dir(tmp_path: Path, synth_raw: dict[str, Any]) -> Path:
    directory = tmp_path / "db" / "data"
    directory.mkdir(parents=True)
    for name in catalog_mod.FILES:
        (directory / name).write_text(dump_yaml(synth_raw[name]), encoding="utf-8")
    (directory / "SCHEMA.md").write_text("the schema\n")
    return directory


@pytest.fixture
def shipped_copy(tmp_path: Path) -> Path:
    shipped = catalog_mod.shipped_data_dir()
    try:
        catalog_mod.load(shipped)
    except catalog_mod.DataError as exc:  # the data engineer is still writing it
        pytest.skip(f"the shipped database does not load yet: {exc}")
    target = tmp_path / "shipped" / "data"
    shutil.copytree(shipped, target)
    return target


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(top_level(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def update_args(srv: IndexServer, *extra: str) -> list[str]:
    return ["db", "update", "--pytorch-index", srv.url + "/whl", *extra]


# --- a successful update ---------------------------------------------------------------------


def test_update_adds_a_release_a_variant_and_pins(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    code, out, err = run(
        capsys,
        *update_args(index, "--write-data", str(synth_dir), "--pypi-index", index.url + "/simple"),
    )
    assert code == 0, err
    assert "new releases:\n  torch 2.16.0 (cpu, cu126, cu130, cu136)" in out
    assert "torch 2.12.0 cu128: CUDA 12.8" in out
    assert re.search(r"torch 2.16 cu136: cuDNN 9.17.0.29, NCCL 2.29.1", out)
    assert "the default index's linux-x86_64 wheel is the cu130 build" in out
    assert f"updated {synth_dir}" in out
    assert "reading the PyTorch index" not in err  # progress only on a terminal, never a log

    cat = catalog_mod.load(synth_dir)
    assert db_check(cat) == []
    rel = cat.release("2.16.0")
    assert rel is not None
    assert (rel.torchvision, rel.torchaudio, rel.date) == ("0.31.0", None, "2026-11-18")
    assert tuple(map(str, rel.python["linux-x86_64"])) == ("3.11", "3.12", "3.13", "3.13t")
    assert tuple(map(str, rel.python["macos-arm64"])) == ("3.11", "3.12", "3.13")
    by_name = {v.name: v for v in rel.variants}
    assert set(by_name) == {"cpu", "cu126", "cu130", "cu136"}
    cu136 = by_name["cu136"]
    assert not cu136.prov.confirmed and cu136.platforms == {"linux-x86_64": None}
    assert cu136.cudnn is not None and cu136.cudnn.version == "9.17.0.29"
    assert by_name["cu130"].pypi == {"linux-x86_64", "linux-aarch64"}
    assert by_name["cpu"].pypi == {"windows-x86_64", "macos-arm64"}
    assert "13.6" in cat.toolkits and not cat.toolkits["13.6"].prov.confirmed
    old = cat.release("2.12.0")
    assert old is not None and "cu128" in [v.name for v in old.variants]
    keys = [k for k in cat.sources if k.startswith("PYTORCH_INDEX_")]
    assert len(keys) == 1 and cat.sources[keys[0]]["kind"] == "observed"
    assert index.url + "/whl" in cat.sources[keys[0]]["cite"]
    assert cat.updated is not None and cat.updated > "2026-01-01"
    assert (synth_dir / "SCHEMA.md").read_text() == "the schema\n"
    assert siblings(synth_dir) == ["data"]

    paths = index.paths()
    assert "/whl/cu92/torch/" not in paths  # older than anything the database knows
    assert "/whl/rocm6.4/torch/" not in paths and "/whl/xpu/torch/" not in paths
    ranges = [r for p, r in index.log if p == RANGE_WHEEL]
    assert (
        ranges[0] == "bytes=-65536" and len(ranges) == 2
    )  # EOCD + central directory, then METADATA
    assert not any(p.startswith("/whl/cpu/torch-") for p in paths)  # CPU builds pin nothing


def test_second_update_finds_the_database_current(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    assert run(capsys, *update_args(index, "--write-data", str(synth_dir)))[0] == 0
    before = tree_snapshot(synth_dir)
    index.log.clear()
    code, out, _err = run(capsys, *update_args(index, "--write-data", str(synth_dir)))
    assert code == 0 and "the database is current" in out
    assert tree_snapshot(synth_dir) == before
    assert not any(p.endswith((".metadata", ".whl")) for p in index.paths())


def test_unconfirmed_builds_are_a_last_resort_with_a_warning(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    assert run(capsys, *update_args(index, "--write-data", str(synth_dir)))[0] == 0
    cat = catalog_mod.load(synth_dir)
    gpu = (TargetGpu((8, 6)),)
    # Python 3.13: only 2.16.0 has wheels, and its arch lists are carried over, unconfirmed.
    dec = solve(cat, written("linux-x86_64", "3.13", "580.65.06", "linux", gpu, True), Request())
    assert dec.selection is not None
    assert (dec.selection.release.version, dec.selection.confirmed) == ("2.16.0", False)
    assert dec.selection.warnings
    assert "nothing documented fits" in words.warning(dec.selection.warnings[0])
    cu136 = [c for c in dec.rejected if c.variant.name == "cu136"]
    assert cu136 and [r.kind for r in cu136[0].reasons] == ["unknown"]
    # Python 3.12: the confirmed 2.12.0 build wins over the newer unconfirmed one.
    dec = solve(cat, written("linux-x86_64", "3.12", "580.65.06", "linux", gpu, True), Request())
    assert dec.selection is not None and dec.selection.release.version == "2.12.0"
    assert dec.selection.confirmed
    only_new = Request(torch=SpecifierSet("==2.16.0"), allow_unconfirmed=True)
    dec = solve(cat, written("linux-x86_64", "3.12", "580.65.06", "linux", gpu, True), only_new)
    assert dec.selection is not None and dec.selection.variant.name == "cu130"


def test_update_goes_to_the_user_data_dir_by_default(
    capsys: pytest.CaptureFixture[str],
    index: IndexServer,
    synth_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(catalog_mod.DATA_ENV, str(synth_dir))  # the database in use
    monkeypatch.setenv("GPURESOLVE_PYTORCH_INDEX", index.url + "/whl")
    before = tree_snapshot(synth_dir)
    code, out, err = run(capsys, "db", "update")
    assert code == 0, err
    user = catalog_mod.user_data_dir()
    assert f"updated {user}" in out and "still overrides it" in err
    assert "no default index is configured in pip" in err
    assert tree_snapshot(synth_dir) == before  # the database it started from is intact
    assert (user / "SCHEMA.md").read_text() == "the schema\n"  # all of it was carried over
    cat = catalog_mod.load(user)
    assert cat.release("2.16.0") is not None and db_check(cat) == []
    monkeypatch.delenv(catalog_mod.DATA_ENV)
    assert catalog_mod.data_dir() == user  # its updated: timestamp is newer than the shipped date


def test_root_listing_projects_only_falls_back_to_the_torch_page(
    capsys: pytest.CaptureFixture[str], synth_dir: Path
) -> None:
    """The real PyTorch root lists projects; its torch/ page links every variant's wheels."""
    routes = fixture_routes()
    routes["/whl/"] = (
        b'<!DOCTYPE html>\n<html><body>\n<a href="numpy/">numpy</a><br/>\n'
        b'<a href="torch/">torch</a><br/>\n</body></html>\n',
        "text/html",
    )
    anchors = b"".join(
        anchor
        for v in ("cpu", "cu118", "cu126", "cu128", "cu130", "cu136")
        for anchor in re.findall(rb"    <a href=.*?<br/>\n", routes[f"/whl/{v}/torch/"][0])
    )
    routes["/whl/torch/"] = (b"<html><body>\n" + anchors + b"</body></html>\n", "text/html")
    with serve(routes) as srv:
        code, out, err = run(capsys, *update_args(srv, "--write-data", str(synth_dir)))
        assert "/whl/torch/" in srv.paths() and "/whl/cu136/torch/" in srv.paths()
    assert code == 0, err
    assert "torch 2.16.0 cu136" in out


def test_dry_run_writes_nothing(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    before = tree_snapshot(synth_dir)
    code, out, _err = run(capsys, *update_args(index, "--write-data", str(synth_dir), "--dry-run"))
    assert code == 0 and "torch 2.16.0" in out and "dry run: nothing written" in out
    assert tree_snapshot(synth_dir) == before


@pytest.mark.slow
def test_update_of_the_shipped_database(
    capsys: pytest.CaptureFixture[str], index: IndexServer, shipped_copy: Path
) -> None:
    code, out, err = run(
        capsys,
        *update_args(
            index, "--write-data", str(shipped_copy), "--pypi-index", index.url + "/simple"
        ),
    )
    assert code == 0, err
    assert "torch 2.16.0" in out
    cat = catalog_mod.load(shipped_copy)
    assert db_check(cat) == []
    assert cat.release("2.16.0") is not None
    # what was not touched is byte for byte the shipped file
    shipped = catalog_mod.shipped_data_dir()
    assert (shipped_copy / "gpus.yaml").read_bytes() == (shipped / "gpus.yaml").read_bytes()


# --- failures: the old database stays as it was ------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (Behaviour(mode="slow", delay=3.0), "timed out"),
        (Behaviour(mode="error"), "HTTP 500"),
        (Behaviour(mode="garbage"), "not an index page"),
        (Behaviour(mode="garbage", only=r"\.metadata$"), "sha256 does not match"),
        (Behaviour(mode="error", only=r"^/whl/cu130/torch/$"), "HTTP 500"),
        (Behaviour(mode="garbage", only=r"\.whl$"), "not a zip file"),
        (Behaviour(mode="error", only=r"^/simple/"), "HTTP 500"),
    ],
    ids=[
        "timeout",
        "errors",
        "garbage",
        "garbage-metadata",
        "one-page-fails",
        "garbage-wheel",
        "pypi",
    ],
)
def test_a_broken_index_keeps_the_old_database(
    capsys: pytest.CaptureFixture[str],
    synth_dir: Path,
    behaviour: Behaviour,
    message: str,
) -> None:
    before = tree_snapshot(synth_dir)
    with serve(fixture_routes(), behaviour) as srv:
        code, out, err = run(
            capsys,
            *update_args(
                srv,
                "--write-data",
                str(synth_dir),
                "--timeout",
                "0.3",
                "--pypi-index",
                srv.url + "/simple",
            ),
        )
        if behaviour.mode == "error" and behaviour.only is None:
            assert srv.paths() == ["/whl/"] * fetch.TRIES  # bounded retries, then stop
        if behaviour.mode == "slow" and behaviour.only is None:
            # --timeout is the whole request's deadline: spent on the first try, no retry
            assert srv.paths() == ["/whl/"] and "no whole answer within 0.3 s" in err
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("gpuresolve:")]
    assert len(lines) == 1 and message in lines[0] and "the database is unchanged" in lines[0]
    assert "Traceback" not in err and out == ""
    assert tree_snapshot(synth_dir) == before
    assert siblings(synth_dir) == ["data"]


def test_an_index_without_torch_wheels_is_refused(
    capsys: pytest.CaptureFixture[str], synth_dir: Path
) -> None:
    """A mirror (or a wrong URL) answering empty pages must not pass for 'nothing new'."""
    empty = (b"<!DOCTYPE html>\n<html><body></body></html>\n", "text/html")
    routes = {path: empty for path in fixture_routes() if path.endswith("/")}
    with serve(routes) as srv:
        code, out, err = run(capsys, *update_args(srv, "--write-data", str(synth_dir)))
    assert code == 1 and out == ""
    assert "lists no torch wheel in any variant" in err


def test_offline_keeps_the_old_database(
    capsys: pytest.CaptureFixture[str], synth_dir: Path
) -> None:
    before = tree_snapshot(synth_dir)
    code, _out, err = run(
        capsys,
        "db",
        "update",
        "--write-data",
        str(synth_dir),
        "--pytorch-index",
        f"http://127.0.0.1:{closed_port()}/whl",
    )
    assert code == 1 and "cannot connect" in err and "the database is unchanged" in err
    assert tree_snapshot(synth_dir) == before


# --- show and check --------------------------------------------------------------------------


def test_show_and_check_on_the_synthetic_database(
    capsys: pytest.CaptureFixture[str], synth_dir: Path
) -> None:
    code, out, _err = run(capsys, "db", "show", "--data", str(synth_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"database: {synth_dir} (updated 2026-01-01)"
    assert lines[1].split()[:5] == ["torch", "date", "vision", "audio", "python"]
    row = next(line for line in lines if line.startswith("2.12.0"))
    assert "cu126? cu130*" in row  # unconfirmed arch list; the Python Package Index's build
    assert "facts:" in out and "unconfirmed" in out
    code, out, _err = run(capsys, "db", "show", "--data", str(synth_dir), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["updated"] == "2026-01-01"
    assert [r["version"] for r in doc["releases"]] == ["2.12.0", "2.8.0", "2.1.0"]
    counts = doc["counts"]
    assert counts["releases"] == 3 and counts["sourced"] == counts["facts"]
    assert counts["unconfirmed"] == 2  # two arch lists rest on the secondary source
    cu126 = doc["releases"][0]["variants"][1]
    assert cu126["name"] == "cu126" and cu126["platforms"]["linux-x86_64"]["confirmed"] is False
    code, out, _err = run(capsys, "db", "check", "--data", str(synth_dir))
    assert code == 0 and out.startswith("ok:")


def test_show_counts_unknown_arch_lists_after_an_update(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path
) -> None:
    assert run(capsys, *update_args(index, "--write-data", str(synth_dir)))[0] == 0
    code, out, _err = run(capsys, "db", "show", "--data", str(synth_dir), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["counts"]["unknown_arch"] == 2  # cu136; cu130 on linux-aarch64
    code, out, _err = run(capsys, "db", "show", "--data", str(synth_dir))
    assert code == 0 and "cu136!" in next(
        line for line in out.splitlines() if line.startswith("2.16.0")
    )


def test_check_finds_problems(
    capsys: pytest.CaptureFixture[str], synth_dir: Path, synth_raw: dict[str, Any]
) -> None:
    synth_raw["torch.yaml"]["series"][1]["variants"][2]["cuda"] = "12.6"  # cu128 says 12.6
    (synth_dir / "torch.yaml").write_text(dump_yaml(synth_raw["torch.yaml"]))
    code, out, err = run(capsys, "db", "check", "--data", str(synth_dir))
    assert code == 1 and "problem(s)" in err
    assert "a cu128 build must be CUDA 12.8" in out
    # A Python version is typed where the file is read: one that is none is refused there.
    synth_raw["torch.yaml"]["series"][1]["python"]["linux-x86_64"].append("py3")
    (synth_dir / "torch.yaml").write_text(dump_yaml(synth_raw["torch.yaml"]))
    code, out, err = run(capsys, "db", "check", "--data", str(synth_dir))
    assert code == 2 and out == ""
    assert "torch.yaml" in err and "not a Python version: 'py3'" in err
    assert len(err.strip().splitlines()) == 1


def test_show_and_check_on_the_shipped_database(
    capsys: pytest.CaptureFixture[str], shipped_copy: Path
) -> None:
    code, out, _err = run(capsys, "db", "check", "--data", str(shipped_copy))
    assert code == 0, out
    code, out, _err = run(capsys, "db", "show", "--data", str(shipped_copy), "--json")
    doc = json.loads(out)
    cat = catalog_mod.load(shipped_copy)
    assert code == 0 and len(doc["releases"]) == len(cat.releases)
    assert doc["counts"]["sourced"] == doc["counts"]["facts"]
    code, out, _err = run(capsys, "db", "show", "--data", str(shipped_copy))
    assert code == 0 and cat.releases[0].version in out.splitlines()[2]


def test_a_wheel_with_a_member_name_that_is_not_utf8_is_one_line_never_70(
    capsys: pytest.CaptureFixture[str], synth_dir: Path
) -> None:
    """A zip member flagged UTF-8 whose name is not: a failed read of the index (exit 1, as for
    any index that cannot be read), one line naming the wheel, never exit 70."""
    import zipfile

    from pytorch_index import build_wheel, metadata_text

    good = build_wheel("torch", "2.16.0+cu136", metadata_text("torch", "2.16.0+cu136", []))
    buf = __import__("io").BytesIO(good)
    with zipfile.ZipFile(buf, "a") as zf:
        zf.writestr("torch/\u00e9.bin", b"x")  # a non-ASCII name: zipfile sets the UTF-8 flag
    bad = buf.getvalue().replace("\u00e9".encode(), b"\xff\xfe")
    assert bad.count(b"\xff\xfe") == 2  # the local header and the central directory
    routes = fixture_routes()
    routes[RANGE_WHEEL] = (bad, "application/octet-stream")
    before = tree_snapshot(synth_dir)
    with serve(routes) as srv:
        code, _out, err = run(
            capsys, *update_args(srv, "--write-data", str(synth_dir), "--no-pypi")
        )
    assert code == 1, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("gpuresolve: db update failed:") and "torch-2.16.0" in lines[-1]
    assert "the database is unchanged" in lines[-1]
    assert "Traceback" not in err and "internal error" not in err
    assert tree_snapshot(synth_dir) == before


def test_the_next_update_removes_what_a_killed_one_left(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path, tmp_path: Path
) -> None:
    """A killed update leaves its ``.data.new-*`` folder (mkdtemp's name beside the database);
    the next run removes it under the database's lock, and nothing that is not provably its
    own: a link of that name, a file of that name, another name."""
    parent = synth_dir.parent
    left = parent / ".data.new-k1ll3d"
    (left / "sub").mkdir(parents=True)
    (left / "torch.yaml").write_text("half")
    old = parent / ".data.old-k1ll3d"
    old.mkdir()
    mine = tmp_path / "mine"
    mine.mkdir()
    (parent / ".data.new-link").symlink_to(mine, target_is_directory=True)
    (parent / ".data.new-file").write_text("a user's")
    (parent / ".datab.new-x").mkdir()
    assert run(capsys, *update_args(index, "--write-data", str(synth_dir)))[0] == 0
    assert not left.exists() and not old.exists()
    assert (parent / ".data.new-link").is_symlink() and mine.is_dir()
    assert (parent / ".data.new-file").read_text() == "a user's"
    assert (parent / ".datab.new-x").is_dir()
    # a second run that finds the database current cleans up as well
    left.mkdir()
    code, out, _err = run(capsys, *update_args(index, "--write-data", str(synth_dir)))
    assert code == 0 and "the database is current" in out and not left.exists()


def test_a_live_updates_folder_is_left_alone(synth_dir: Path) -> None:
    """While a run holds the database's lock, its temporary folder is in use: never removed."""
    from resolver.dbupdate.write import clean_leftovers
    from resolver.io.filelock import locked

    live = synth_dir.parent / ".data.new-l1ve"
    live.mkdir()
    with locked(synth_dir):
        assert clean_leftovers(synth_dir) == [] and live.is_dir()
    assert clean_leftovers(synth_dir) == [live] and not live.exists()


def test_an_update_to_a_full_disk_is_one_line_and_keeps_the_database(
    capsys: pytest.CaptureFixture[str], index: IndexServer, synth_dir: Path, tmp_path: Path
) -> None:
    from test_stores import _fill, _tmpfs

    with _tmpfs(tmp_path / "disk", "size=2m") as disk:
        target = disk / "data"
        shutil.copytree(synth_dir, target)
        before = tree_snapshot(target)
        _fill(disk)
        code, _out, err = run(capsys, *update_args(index, "--write-data", str(target)))
        lines = [line for line in err.splitlines() if line.startswith("gpuresolve:")]
        assert code == 2 and len(lines) == 1 and "full" in lines[0], err
        assert "Traceback" not in err
        assert tree_snapshot(target) == before
        assert [n for n in siblings(target) if n != "filler"] == ["data"]  # no .data.new-*
