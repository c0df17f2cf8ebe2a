"""A damaged user database never bricks the tool: which database wins, the fallback, db reset.

Every test works in temporary directories only (conftest points XDG_DATA_HOME and
XDG_CACHE_HOME into tmp_path).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_support import run_cli
from pytorch_index import IndexServer

from resolver import catalog as catalog_mod
from resolver.core.errors import DataError
from resolver.core.hostprofile import GpuInfo, HostProfile
from resolver.db import location, yamlfile

SUGGEST = ("suggest", "--gpu", "8.6", "--driver", "570.00", "--platform", "linux-x86_64")
pytestmark = pytest.mark.usefixtures("dbupdate_hermetic")


@pytest.fixture(autouse=True)
def _default_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache where a user's is (under XDG_CACHE_HOME, a temporary folder here)."""
    monkeypatch.delenv(location.CACHE_ENV, raising=False)


def _set_version(directory: Path, schema: str | None, updated: str) -> None:
    """Rewrite the `schema:` / `updated:` lines of a database's torch.yaml."""
    path = directory / "torch.yaml"
    lines = [
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if not line.startswith(("schema:", "updated:"))
    ]
    at = next(i for i, line in enumerate(lines) if line.startswith("index_url:")) + 1
    stamp = ([f"schema: {schema}\n"] if schema is not None else []) + [f'updated: "{updated}"\n']
    path.write_text("".join(lines[:at] + stamp + lines[at:]), encoding="utf-8")


@pytest.fixture
def user_db() -> Path:
    """A valid user database, a copy of the shipped one dated in the future (so it wins)."""
    user = location.user_data_dir()
    shutil.copytree(location.shipped_data_dir(), user)
    _set_version(user, "2", "2099-01-01T00:00:00Z")
    return user


def _warning_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning: ignoring the user database" in line]


# --- which database wins ---------------------------------------------------------------------


def test_no_user_database_means_the_shipped_one() -> None:
    assert location.choose() == location.Choice(location.shipped_data_dir(), "shipped")


def test_a_newer_user_database_of_the_same_schema_wins(user_db: Path) -> None:
    assert location.choose() == location.Choice(user_db, "user")
    assert catalog_mod.load().origin == str(user_db)


@pytest.mark.parametrize(
    ("schema", "updated", "wins"),
    [
        ("2", "2099-01-01T00:00:00Z", True),
        ("2", "2000-01-01T00:00:00Z", False),  # older
        (None, "2099-01-01", False),  # made by a gpuresolve before schema numbers
        ("1", "2099-01-01T00:00:00Z", False),  # an older schema, however recent
        ("2", "{shipped}T00:00:01Z", True),  # same day as the shipped date, later in it
        ("2", "{shipped}", False),  # exactly as old: the shipped one is kept
        ("2", "{shipped}T06:00:00+08:00", False),  # the day before, 22:00 UTC
    ],
)
def test_version_decides(user_db: Path, schema: str | None, updated: str, wins: bool) -> None:
    shipped = location.read_version(location.shipped_data_dir()).updated.date().isoformat()
    _set_version(user_db, schema, updated.format(shipped=shipped))
    assert (location.data_dir() == user_db) is wins


def test_shipped_database_carries_a_schema() -> None:
    version = location.read_version(location.shipped_data_dir())
    assert version.schema == location.SCHEMA


def test_date_only_values_stay_readable() -> None:
    assert location.parse_updated("2026-11-22") == location.parse_updated("2026-11-22T00:00:00Z")
    assert location.parse_updated("2026-11-24T09:30:00Z") > location.parse_updated("2026-11-24")
    with pytest.raises(ValueError):
        location.parse_updated("last tuesday")


def test_a_user_database_of_a_newer_schema_is_passed_over_with_a_warning(
    capsys: pytest.CaptureFixture[str], user_db: Path
) -> None:
    _set_version(user_db, "3", "2099-01-01T00:00:00Z")
    code, _out, err = run_cli(capsys, *SUGGEST)
    assert code == 0, err
    (line,) = _warning_lines(err)
    assert "newer gpuresolve (schema 3" in line


# --- a damaged user database: one warning, the shipped database ------------------------------


def _garbage(d: Path) -> None:
    (d / "torch.yaml").write_text(
        'schema: 2\nupdated: "2099-01-01T00:00:00Z"\nseries: [unclosed\n  : {', encoding="utf-8"
    )


def _alias_bomb(d: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (d / "gpus.yaml").write_text("\n".join(levels) + "\n", encoding="utf-8")


def _huge(d: Path) -> None:
    with open(d / "sources.yaml", "wb") as fh:
        fh.truncate(100 * 1024 * 1024)  # sparse: 100 MB on paper, nothing on the disk


def _deep(d: Path) -> None:
    (d / "cuda.yaml").write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")


def _wrong_types(d: Path) -> None:
    text = (d / "torch.yaml").read_text(encoding="utf-8")
    (d / "torch.yaml").write_text(text.split("series:")[0] + "series: 42\n", encoding="utf-8")


def _wrong_types_inside(d: Path) -> None:
    (d / "cuda.yaml").write_text(
        "toolkits:\n  - {version: 12, min_driver: [1, 2], source: 3}\nminor_version_compat: []\n",
        encoding="utf-8",
    )


def _missing_file(d: Path) -> None:
    (d / "gpus.yaml").unlink()


def _only_torch(d: Path) -> None:
    for name in ("sources.yaml", "cuda.yaml", "gpus.yaml", "conda_forge.yaml"):
        (d / name).unlink()


def _not_utf8(d: Path) -> None:
    (d / "cuda.yaml").write_bytes(b"toolkits: ['\xff\xfe\x80']\n")


def _torch_not_utf8(d: Path) -> None:
    (d / "torch.yaml").write_bytes(b'schema: 2\nupdated: "2099-01-01"\n\xff\xfe\n')


def _unreadable(d: Path) -> None:
    (d / "gpus.yaml").unlink()
    (d / "gpus.yaml").mkdir()  # open() fails as it does on a file without read permission


def _bad_schema(d: Path) -> None:
    _set_version(d, '"two"', "2099-01-01T00:00:00Z")


def _bad_updated(d: Path) -> None:
    _set_version(d, "2", "soon")


def _binary(d: Path) -> None:
    (d / "sources.yaml").write_bytes(bytes(range(256)) * 64)


def _empty(d: Path) -> None:
    (d / "gpus.yaml").write_text("", encoding="utf-8")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage YAML": _garbage,
    "alias bomb": _alias_bomb,
    "100 MB file": _huge,
    "nested 200,000 deep": _deep,
    "wrong type at the top": _wrong_types,
    "wrong types in a record": _wrong_types_inside,
    "a file missing": _missing_file,
    "only torch.yaml": _only_torch,
    "not UTF-8": _not_utf8,
    "torch.yaml not UTF-8": _torch_not_utf8,
    "unreadable file": _unreadable,
    "schema not a number": _bad_schema,
    "updated not a time": _bad_updated,
    "binary garbage": _binary,
    "empty file": _empty,
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_user_database_falls_back_with_one_warning(
    capsys: pytest.CaptureFixture[str], user_db: Path, damage: str
) -> None:
    DAMAGE[damage](user_db)
    code, out, err = run_cli(capsys, *SUGGEST)
    assert code == 0, err
    assert "Traceback" not in err and "install: torch" in out
    (line,) = _warning_lines(err)
    assert str(user_db) in line and "gpuresolve db reset" in line
    assert len(line) < 600
    # the same answer as the shipped database gives
    code, json_out, _ = run_cli(capsys, *SUGGEST, "--json")
    assert json.loads(json_out)["database"]["origin"] == str(location.shipped_data_dir())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_permissions_fall_back(
    capsys: pytest.CaptureFixture[str], user_db: Path
) -> None:
    (user_db / "torch.yaml").chmod(0)
    try:
        code, _out, err = run_cli(capsys, *SUGGEST)
    finally:
        (user_db / "torch.yaml").chmod(0o644)
    assert code == 0 and len(_warning_lines(err)) == 1


def test_a_file_where_the_user_database_should_be(capsys: pytest.CaptureFixture[str]) -> None:
    user = location.user_data_dir()
    user.parent.mkdir(parents=True)
    user.write_text("not a directory")
    code, _out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and len(_warning_lines(err)) == 1


def test_an_empty_user_directory_is_no_database(capsys: pytest.CaptureFixture[str]) -> None:
    location.user_data_dir().mkdir(parents=True)
    code, _out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and err == ""


def test_the_warning_comes_once_per_command(
    capsys: pytest.CaptureFixture[str], user_db: Path
) -> None:
    _garbage(user_db)
    catalog_mod.load()
    catalog_mod.load()
    assert len(_warning_lines(capsys.readouterr().err)) == 1


def test_an_explicit_data_dir_is_an_error_not_a_fallback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(location.shipped_data_dir(), bad)
    _garbage(bad)
    monkeypatch.setenv(location.DATA_ENV, str(bad))
    code, out, err = run_cli(capsys, *SUGGEST)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"{location.DATA_ENV}={bad}" in err
    assert "Traceback" not in err


def test_db_check_on_a_damaged_directory_is_one_line(
    capsys: pytest.CaptureFixture[str], user_db: Path
) -> None:
    _alias_bomb(user_db)
    code, _out, err = run_cli(capsys, "db", "check", "--data", str(user_db))
    assert code == 2 and err.count("\n") == 1 and "expands to more than" in err


# --- bounded reading ---------------------------------------------------------------------------


def test_the_shipped_aliases_are_within_bounds() -> None:
    shipped = location.shipped_data_dir()
    for name in ("torch.yaml", "conda_forge.yaml"):
        bounded = yamlfile.read_yaml(shipped / name, bounded=True)
        assert bounded == yamlfile.read_yaml(shipped / name, bounded=False)


def test_a_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"loop\.yaml: nested more than 64 levels deep"):
        yamlfile.read_yaml(path)


# --- the cache -------------------------------------------------------------------------------


def _cache_files() -> list[Path]:
    return sorted(location.cache_dir().glob("catalog-*.json"))


@pytest.mark.parametrize("content", [b"", b"garbage", b"\x80\x05K\x01.", b"\x80\x05\x95"])
def test_a_damaged_cache_is_a_silent_miss(
    capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    catalog_mod.load()
    (cache,) = _cache_files()
    cache.write_bytes(content)
    code, _out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and err == ""
    assert _cache_files() and _cache_files()[0].read_bytes() != content  # written afresh


def test_an_unwritable_cache_dir_never_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(location.CACHE_ENV, str(blocker / "cache"))  # cannot be created
    code, _out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and err == ""


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_cache_dir_never_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv(location.CACHE_ENV, str(ro))
    try:
        code, _out, err = run_cli(capsys, *SUGGEST)
    finally:
        ro.chmod(0o700)
    assert code == 0 and err == ""


# --- detect never needs the database -----------------------------------------------------------


def _fake_detect(lookup_cc: Callable[[str], str | None] | None = None) -> HostProfile:
    """A host whose probe gave a GPU name but no compute capability (the /proc probe)."""
    name = "NVIDIA GeForce RTX 4090"
    cc = lookup_cc(name) if lookup_cc else None
    gpu = GpuInfo(index=0, name=name, cc=cc, sources={"name": "procfs"})
    return HostProfile(
        platform="linux-x86_64",
        python="3.12",
        driver="570.86.15",
        state="ok",
        gpus=[gpu],
        sources={"driver": "procfs"},
    )


@pytest.fixture
def fake_host(monkeypatch: pytest.MonkeyPatch) -> None:
    import resolver.host

    monkeypatch.setattr(resolver.host, "detect", _fake_detect)


@pytest.mark.usefixtures("fake_host")
def test_detect_uses_the_database_when_it_can(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "detect", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["gpus"][0]["cc"] == "8.9" and doc["driver_cuda"]


@pytest.mark.usefixtures("fake_host")
def test_detect_without_a_readable_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(location.DATA_ENV, str(tmp_path / "nothing-here"))
    code, out, err = run_cli(capsys, "detect")
    assert code == 0, err
    assert "GPU 0: NVIDIA GeForce RTX 4090" in out and "driver: 570.86.15" in out
    assert "the database could not be read" in err  # a note: on stderr
    assert "Traceback" not in err


# --- db reset ----------------------------------------------------------------------------------


@pytest.fixture
def cluttered(user_db: Path) -> Iterator[Path]:
    """A user database with the user's own files in it, a cache, and an interrupted update."""
    (user_db / "my-notes.txt").write_text("mine")
    (user_db / "extra").mkdir()
    (user_db / "extra" / "torch.yaml").write_text("mine too")
    (user_db.parent / f".{user_db.name}.new-abc123").mkdir()
    catalog_mod.load()
    (location.cache_dir() / "rattler").mkdir()
    yield user_db


def test_reset_dry_run_removes_nothing(capsys: pytest.CaptureFixture[str], cluttered: Path) -> None:
    before = sorted(p for p in cluttered.parent.rglob("*"))
    code, out, err = run_cli(capsys, "db", "reset", "--dry-run")
    assert code == 0, err
    assert f"would remove {cluttered / 'torch.yaml'}" in out
    assert f"would remove {_cache_files()[0]}" in out
    assert f"kept {cluttered / 'my-notes.txt'}" in out
    assert sorted(p for p in cluttered.parent.rglob("*")) == before


def test_reset_removes_only_what_gpuresolve_wrote(
    capsys: pytest.CaptureFixture[str], cluttered: Path
) -> None:
    code, out, err = run_cli(capsys, "db", "reset", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"data_dir", "cache_dir", "dry_run", "removed", "kept", "failed"}
    assert doc["dry_run"] is False and doc["failed"] == []
    # observations.yaml holds what verify and db import recorded: the user's, kept
    assert sorted(p.name for p in cluttered.iterdir()) == [
        "extra",
        "my-notes.txt",
        "observations.yaml",
    ]
    assert (cluttered / "extra" / "torch.yaml").read_text() == "mine too"
    assert not list(cluttered.parent.glob(".data.*"))
    assert _cache_files() == [] and (location.cache_dir() / "rattler").is_dir()
    assert str(cluttered / "my-notes.txt") in doc["kept"]
    assert location.data_dir() == location.shipped_data_dir()


def test_reset_of_a_damaged_database_then_nothing_left(
    capsys: pytest.CaptureFixture[str], user_db: Path
) -> None:
    _garbage(user_db)
    code, _out, err = run_cli(capsys, "db", "reset")
    assert code == 0, err
    assert [p.name for p in user_db.iterdir()] == ["observations.yaml"]  # the user's own
    code, out, _err = run_cli(capsys, "db", "reset")
    assert code == 0 and "nothing to remove" in out


# --- db update repairs a damaged user database -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage YAML", "a file missing", "not UTF-8", "100 MB file"])
def test_update_repairs_a_damaged_user_database(
    capsys: pytest.CaptureFixture[str], user_db: Path, index: IndexServer, damage: str
) -> None:
    DAMAGE[damage](user_db)
    (user_db / "my-notes.txt").write_text("mine")
    code, out, err = run_cli(capsys, "db", "update", "--pytorch-index", index.url + "/whl")
    assert code == 0, err
    assert f"updated {user_db}" in out
    assert len(_warning_lines(err)) == 1  # said once, then not read again
    assert (user_db / "my-notes.txt").read_text() == "mine"
    version = location.read_version(user_db)
    assert version.schema == location.SCHEMA
    assert version > location.read_version(location.shipped_data_dir())
    assert location.choose() == location.Choice(user_db, "user")
    cat = catalog_mod.load()
    assert cat.origin == str(user_db) and cat.release("2.16.0") is not None


def test_update_stops_at_a_directory_in_the_way(
    capsys: pytest.CaptureFixture[str], user_db: Path, index: IndexServer
) -> None:
    _unreadable(user_db)  # gpus.yaml is a directory: not ours to remove
    code, _out, err = run_cli(capsys, "db", "update", "--pytorch-index", index.url + "/whl")
    assert code == 1 and "is a directory, in the way" in err and "Traceback" not in err
    assert (user_db / "gpus.yaml").is_dir()


def test_db_update_keeps_the_users_own_observations(tmp_path: Path) -> None:
    """Starting over from the shipped database must not drop what `verify` recorded."""
    from resolver.dbupdate.write import _merge_own_observations, _read_own_observations
    from resolver.observe import store

    own = tmp_path / "user"
    own.mkdir()
    seen = {
        "seen": "2026-11-24",
        "torch": "2.11.0",
        "version": "2.11.0+cu130",
        "variant": "cu130",
        "platform": "linux-x86_64",
    }
    store.record(own / store.FILE, seen, "runtime")
    text = _read_own_observations(own)
    assert text is not None
    shutil.copy(location.shipped_data_dir() / store.FILE, own / store.FILE)  # the copytree
    shipped = store.load(own / store.FILE)
    _merge_own_observations(own, text)
    merged = store.load(own / store.FILE)
    assert merged.wheels == shipped.wheels
    assert [(e["version"], e["platform"]) for e in merged.runtime] == [
        ("2.11.0+cu130", "linux-x86_64")
    ]


def test_the_cache_keeps_a_few_recent_entries(tmp_path: Path) -> None:
    """Two installed gpuresolves (or two databases) alternating do not evict each other."""
    import os

    from resolver.db import cache

    for i in range(cache.KEEP + 3):
        path = tmp_path / f"{cache.PREFIX}{i:02d}{cache.SUFFIX}"
        cache.write(path, {"n": i})
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # written in this order
    left = sorted(p.name for p in tmp_path.glob(f"{cache.PREFIX}*{cache.SUFFIX}"))
    newest = [f"{cache.PREFIX}{i:02d}{cache.SUFFIX}" for i in range(2, cache.KEEP + 3)]
    assert left == newest  # the new one and the KEEP written before it
    assert cache.read(tmp_path / newest[-1]) == {"n": cache.KEEP + 2}
