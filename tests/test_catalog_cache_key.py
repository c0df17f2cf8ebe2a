"""The catalog cache holds plain data that is checked like the YAML, and its key covers the code.

The cache folder may be shared (a CI cache, `GPURESOLVE_CACHE_DIR`), so what is in it is input:
a planted file must never run code, and a cache of another layout must be a miss.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver import catalog as catalog_mod
from resolver.db import cache

SUGGEST = ("suggest", "--gpu", "8.6", "--driver", "570.00", "--platform", "linux-x86_64")


def test_the_cache_is_plain_json_and_yields_the_same_catalog() -> None:
    data = catalog_mod.shipped_data_dir()
    first = catalog_mod.load(data)
    path = catalog_mod._cache_file(data)
    assert path is not None and path.suffix == ".json"
    raw = json.loads(path.read_bytes())
    assert set(raw) >= set(catalog_mod.FILES)
    assert "packages" not in raw["extensions.yaml"]  # the history is read only when asked for
    again, fresh = catalog_mod.load(data), catalog_mod.from_raw(raw, origin=str(data))
    for cat in (again, first, fresh):  # their sources join the catalog's when they load
        assert len(cat.extensions) > 0
    assert again == first == fresh


def test_the_parser_is_in_the_key() -> None:
    names = {p.name for p in catalog_mod._CODE}
    assert {"catalog.py", "models.py", "parse.py", "observations.py"} <= names
    assert all(p.is_file() for p in catalog_mod._CODE)


def test_a_change_to_any_code_file_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = []
    for path in catalog_mod._CODE:
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        code.append(copy)
    monkeypatch.setattr(catalog_mod, "_CODE", tuple(code))
    data = catalog_mod.shipped_data_dir()
    seen = {catalog_mod._cache_file(data)}
    for i, path in enumerate(code):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000 * (i + 1)))
        seen.add(catalog_mod._cache_file(data))
    assert None not in seen and len(seen) == len(code) + 1


class _Plant:
    """Unpickling this creates ``marker``: the proof that a loader ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _the_cache() -> Path:
    path = catalog_mod._cache_file(catalog_mod.shipped_data_dir())
    assert path is not None
    return path


def test_a_planted_pickle_runs_no_code(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Plant(marker))
    pickle.loads(payload)  # the payload works: unpickling it does create the marker
    assert marker.exists()
    marker.unlink()
    target = _the_cache()
    target.parent.mkdir(parents=True, exist_ok=True)
    # under the name the cache of this very database would have, and under the old pickle names
    target.with_suffix(".pickle").write_bytes(payload)
    (target.parent / "catalog-0000000000000000.pickle").write_bytes(payload)
    target.write_bytes(payload)
    code, out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and err == "" and out
    assert not marker.exists()
    assert json.loads(target.read_bytes())  # rebuilt as JSON, silently


@pytest.mark.parametrize(
    "payload",
    [
        {"torch.yaml": {"$type": "os.system", "args": ["touch MARKER"]}},
        {"sources.yaml": "__import__('os').system('touch MARKER')"},
        [1, 2, 3],
        {"cuda.yaml": {"toolkits": [{"version": "99.0", "min_driver": "not a mapping"}]}},
    ],
    ids=["object-hook-shape", "code-as-text", "not-a-mapping", "wrong-shape"],
)
def test_a_planted_json_cache_runs_no_code_and_is_rebuilt(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    payload: object,
) -> None:
    monkeypatch.chdir(tmp_path)
    target = _the_cache()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload).replace("MARKER", str(tmp_path / "ran")))
    code, out, err = run_cli(capsys, *SUGGEST)
    assert code == 0 and err == "" and out
    assert not (tmp_path / "ran").exists() and not (tmp_path / "MARKER").exists()
    assert set(json.loads(target.read_bytes())) >= set(catalog_mod.FILES)  # rebuilt


def test_a_cache_that_fails_the_checks_is_a_miss() -> None:
    """A well-formed JSON cache whose data the parser refuses is parsed afresh, no warning."""
    data = catalog_mod.shipped_data_dir()
    good = catalog_mod.load(data)
    target = _the_cache()
    raw = json.loads(target.read_bytes())
    raw["gpus.yaml"]["architectures"][0]["cc"] = "not a cc"
    target.write_text(json.dumps(raw))
    assert catalog_mod.load(data) == good


@pytest.mark.skipif(os.name != "posix", reason="links and FIFOs")
def test_a_linked_or_non_regular_cache_is_refused(tmp_path: Path) -> None:
    data = catalog_mod.shipped_data_dir()
    catalog_mod.load(data)
    target = _the_cache()
    elsewhere = tmp_path / "elsewhere.json"
    shutil.copyfile(target, elsewhere)
    target.unlink()
    target.symlink_to(elsewhere)
    assert cache.read(target) is None
    catalog_mod.load(data)  # rebuilt: the link replaced by a file of ours, the target untouched
    assert not target.is_symlink() and elsewhere.read_bytes() == target.read_bytes()
    target.unlink()
    os.mkfifo(target)
    assert cache.read(target) is None  # at once, never blocking on the FIFO
    target.unlink()


def test_a_deep_or_oversized_cache_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"{cache.PREFIX}x{cache.SUFFIX}"
    path.write_text('{"a":' * 100 + "1" + "}" * 100)
    assert cache.read(path) is None
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    assert cache.read(path) is None
    path.write_text('{"a": 1}')
    assert cache.read(path) == {"a": 1}
    monkeypatch.setattr(cache, "MAX_BYTES", 4)
    assert cache.read(path) is None


# --- the user's observations ride in the cache ----------------------------------------------


def _user_observation(sass: list[str]) -> None:
    from wheel_support import real_wheels

    from resolver.observe import store

    wheel = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    entry = {
        "wheel": wheel, "sha256": real_wheels()[wheel]["sha256"], "read": "2026-11-24",
        "torch": "2.8.0", "variant": "cu128", "platform": "linux-x86_64", "sass": sass, "ptx": [],
    }  # fmt: skip
    path = catalog_mod.user_data_dir() / store.FILE
    if path.exists():
        path.unlink()
    store.record(path, entry, "observations")


def _sass_280(cat: catalog_mod.Catalog) -> tuple[tuple[int, int], ...]:
    rel = cat.release("2.8.0")
    assert rel is not None
    var = next(v for v in rel.variants if v.name == "cu128")
    arches = var.platforms["linux-x86_64"]
    assert arches is not None
    return arches.sass


def test_user_observations_are_cached_and_no_yaml_is_read_once_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _user_observation(["7.0", "8.0", "9.0"])
    first = catalog_mod.load()  # parses observations.yaml, writes the cache with it
    assert _sass_280(first) == ((7, 0), (8, 0), (9, 0))

    def no_yaml(*_a: object, **_k: object) -> None:
        raise AssertionError("YAML parsed on a warm start")

    monkeypatch.setattr(catalog_mod, "_read_yaml", no_yaml)
    assert catalog_mod.load() == first


def test_a_changed_observations_file_is_a_miss() -> None:
    _user_observation(["7.0", "8.0", "9.0"])
    catalog_mod.load()
    _user_observation(["8.0", "9.0", "10.0", "12.0"])
    assert _sass_280(catalog_mod.load()) == ((8, 0), (9, 0), (10, 0), (12, 0))


def test_a_planted_overlay_in_the_cache_is_validated_like_the_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _user_observation(["7.0", "8.0", "9.0"])
    catalog_mod.load()
    path = catalog_mod.user_data_dir() / "observations.yaml"
    cache_path = catalog_mod._cache_file(catalog_mod.shipped_data_dir(), path)
    assert cache_path is not None
    raw = json.loads(cache_path.read_bytes())
    assert raw[catalog_mod.OVERLAY_KEY]["observations"][0]["torch"] == "2.8.0"
    # an entry the file could not hold (no sha256) is skipped, as it would be from the YAML
    raw[catalog_mod.OVERLAY_KEY]["observations"][0].pop("sha256")
    cache_path.write_text(json.dumps(raw))
    assert _sass_280(catalog_mod.load()) == _sass_280(
        catalog_mod.load(catalog_mod.shipped_data_dir())
    )
    # a document of the wrong shape is the warning the file would give
    raw[catalog_mod.OVERLAY_KEY] = {"observations": "planted"}
    cache_path.write_text(json.dumps(raw))
    catalog_mod._warned.clear()
    catalog_mod.load()
    assert "observations" in capsys.readouterr().err


def test_lenient_observations_skip_bad_entries_and_apply_the_rest() -> None:
    """The user's file is checked entry by entry (the catalog is built once after them all):
    what a strict load of the good entries gives, whatever bad entries sit between them."""
    from wheel_support import real_wheels

    from resolver.db.observations import apply_observations

    shipped = catalog_mod.load(catalog_mod.shipped_data_dir())
    wheel = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    sha = real_wheels()[wheel]["sha256"]
    good = {"wheel": wheel, "sha256": sha, "torch": "2.8.0", "variant": "cu128", "sass": ["9.0"]}
    also = {**good, "variant": "cu126", "sass": ["8.0"]}
    bad = [
        "not a mapping",
        {**good, "torch": "1.0.0"},  # a release this database lacks
        {**good, "sha256": "nothex"},
        {**good, "variant": "cu999"},  # a build this database lacks
    ]
    lenient = apply_observations(shipped, {"observations": [good, *bad, also]}, lenient=True)
    strict = apply_observations(shipped, {"observations": [good, also]})
    assert lenient == strict != shipped
    assert _sass_280(lenient) == ((9, 0),)


# --- the shipped database parsed ahead (data/catalog.json) -------------------------------------


def test_the_shipped_snapshot_is_current() -> None:
    """Regenerate it with `python tools/gen_catalog_snapshot.py` after editing data/."""
    from resolver.db import snapshot

    data = catalog_mod.shipped_data_dir()
    wanted = snapshot.render(data, catalog_mod.SNAPSHOT_FILES, catalog_mod.parse_shipped)
    assert (data / snapshot.FILE).read_text(encoding="utf-8") == wanted


def test_a_fresh_home_reads_the_snapshot_not_the_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPURESOLVE_CACHE_DIR", str(tmp_path / "empty-cache"))
    parsed: list[Path] = []
    real = catalog_mod._read_yaml

    def counted(p: Path, **kw: Any) -> Any:
        parsed.append(p)
        return real(p, **kw)

    monkeypatch.setattr(catalog_mod, "_read_yaml", counted)
    data = catalog_mod.shipped_data_dir()
    from_snapshot = catalog_mod.load(data)
    assert parsed == []
    raw = {n: real(data / n) for n in catalog_mod.SNAPSHOT_FILES if (data / n).is_file()}
    assert from_snapshot == catalog_mod.from_raw(raw, origin=str(data))


def test_an_edited_file_makes_the_snapshot_a_miss(tmp_path: Path) -> None:
    from resolver.db import snapshot

    data = catalog_mod.shipped_data_dir()
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    assert snapshot.read(copy, catalog_mod.SNAPSHOT_FILES) is not None
    torch = copy / "torch.yaml"
    torch.write_text(torch.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert snapshot.read(copy, catalog_mod.SNAPSHOT_FILES) is None
    (copy / "torch.yaml").unlink()
    shutil.copyfile(data / "torch.yaml", copy / "torch.yaml")
    (copy / snapshot.FILE).write_text('{"schema": 1, "files": {}, "raw": []}', encoding="utf-8")
    assert snapshot.read(copy, catalog_mod.SNAPSHOT_FILES) is None  # damaged: a miss
