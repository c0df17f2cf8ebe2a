"""`db update`'s parts, each alone: page and wheel-name parsing, the remote-zip reader, metadata
pins, HTTP retries, pip's configuration, the pure merge, the YAML writer and the atomic write."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import zipfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytorch_index import (
    FIXTURE,
    Behaviour,
    build_wheel,
    closed_port,
    metadata_text,
    serve,
    siblings,
    tree_snapshot,
)

from resolver import catalog as catalog_mod
from resolver.core.errors import IndexFormatError
from resolver.db.check import check as db_check
from resolver.db.yamlfile import dump_yaml
from resolver.dbupdate import UpdateError
from resolver.dbupdate.facts import BuildFacts, IndexFacts, ReleaseFacts
from resolver.dbupdate.merge import merge
from resolver.dbupdate.metadata import (
    MetadataError,
    metadata_from_zip,
    parse_metadata,
    remote_metadata,
)
from resolver.dbupdate.write import write_database
from resolver.host.pipconfig import pip_index_url
from resolver.io import ReadError
from resolver.io.http import Client, FetchError
from resolver.io.ranges import BudgetError, FileSource, HttpSource
from resolver.wheels.simple import (
    Link,
    parse_page,
    parse_wheel,
    variant_cuda,
    variant_links,
    variants_in_hrefs,
)

PAGE_URL = "https://index.example/whl/cu126/torch/"


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # the test servers are local


# --- pages and wheel names ------------------------------------------------------------------


def test_html_page_links_hashes_and_pep658() -> None:
    body = (FIXTURE / "whl" / "cu126" / "torch" / "index.html").read_bytes()
    links = parse_page(body, "text/html", PAGE_URL)
    assert len(links) == 9
    first = links[0]
    assert first.url == (
        "https://index.example/whl/cu126/torch-2.12.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert first.filename == "torch-2.12.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert first.sha256 is not None and len(first.sha256) == 64
    meta = (FIXTURE / "whl" / "cu126" / (first.filename + ".metadata")).read_bytes()
    assert first.metadata and first.metadata_sha256 == hashlib.sha256(meta).hexdigest()
    windows = [link for link in links if link.filename.endswith("win_amd64.whl")]
    assert windows and not any(link.metadata for link in windows)


def test_json_page_files_metadata_and_upload_time() -> None:
    body = (FIXTURE / "simple" / "torch" / "index.json").read_bytes()
    links = parse_page(body, "application/vnd.pypi.simple.v1+json", "http://h/simple/torch/")
    assert {link.url.rsplit("/", 1)[0] for link in links} == {"http://h/simple/torch"}
    assert all(link.metadata and link.metadata_sha256 for link in links)
    assert links[0].upload_time == "2026-11-18T17:01:02.123456Z"


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (bytes(range(256)) * 4, "text/html"),
        (b"just some text, not a page", "text/plain"),
        (b"{not json", "application/vnd.pypi.simple.v1+json"),
        (b'{"files": []}', "application/vnd.pypi.simple.v1+json"),
    ],
)
def test_garbage_pages_are_errors(body: bytes, ctype: str) -> None:
    with pytest.raises(IndexFormatError):
        parse_page(body, ctype, PAGE_URL)


def test_empty_html_page_is_not_an_error() -> None:
    body = b"<!DOCTYPE html>\n<html><body><h1>Links for torch</h1></body></html>"
    assert parse_page(body, "text/html", PAGE_URL) == []


def _wheel(name: str) -> Any:
    return parse_wheel(Link(url=f"https://h/whl/x/{name}", filename=name))


def test_wheel_names() -> None:
    w = _wheel("torch-2.16.0+cu126-cp313-cp313t-manylinux_2_28_x86_64.whl")
    assert (w.name, w.public, w.local) == ("torch", "2.16.0", "cu126")
    assert w.platforms == {"linux-x86_64"} and w.pythons == {"3.13t"}
    mac = _wheel("torch-2.16.0-cp312-none-macosx_11_0_arm64.whl")
    assert mac.local is None and mac.platforms == {"macos-arm64"} and mac.pythons == {"3.12"}
    win = _wheel("torch-2.16.0+cpu-cp311-cp311-win_amd64.whl")
    assert win.platforms == {"windows-x86_64"}
    assert _wheel("torch-2.16.0-cp312-cp312-musllinux_1_2_x86_64.whl") is None
    assert _wheel("torch-2.16.0-cp312-cp312-macosx_10_9_x86_64.whl") is None
    assert _wheel("torch-2.16.0.tar.gz") is None
    assert _wheel("not a wheel.whl") is None
    yanked = Link(url="u", filename="torch-2.1.0-cp311-cp311-win_amd64.whl", yanked=True)
    assert parse_wheel(yanked) is None


def test_variant_names() -> None:
    root = parse_page((FIXTURE / "whl" / "index.html").read_bytes(), "text/html", "http://h/whl/")
    assert variant_links(root) == {"cpu", "cu92", "cu118", "cu126", "cu128", "cu130", "cu136"}
    page = parse_page(
        (FIXTURE / "whl" / "cu126" / "torch" / "index.html").read_bytes(), "text/html", PAGE_URL
    )
    assert variants_in_hrefs(page) == {"cu126"}
    assert [variant_cuda(n) for n in ("cu118", "cu126", "cu130", "cpu")] == [
        "11.8",
        "12.6",
        "13.0",
        None,
    ]


# --- metadata: parsing, pins, and the remote zip --------------------------------------------


def test_pins_evaluate_markers_for_the_wheels_platform() -> None:
    meta = parse_metadata(
        metadata_text(
            "torch",
            "2.16.0+cu126",
            [
                'nvidia-cuda-runtime-cu12==12.6.77; platform_system == "Linux"',
                'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and '
                'platform_machine == "x86_64"',
                "nvidia-nccl-cu12>=2.27",  # not an exact pin
                'triton==3.8.0; platform_system == "Linux"',
            ],
        ),
        "torch",
        "2.16.0+cu126",
    )
    assert meta.pins("linux-x86_64", "3.12") == {"cuda_runtime": "12.6.77", "cudnn": "9.10.2.21"}
    assert meta.pins("linux-aarch64", "3.12") == {"cuda_runtime": "12.6.77"}
    assert meta.pins("windows-x86_64", "3.12") == {}
    cu13 = parse_metadata(
        metadata_text(
            "torch", "2.16.0", ["nvidia-cuda-runtime==13.0.96", "nvidia-nccl-cu13==2.28.9"]
        ),
        "torch",
        "2.16.0",
    )
    assert cu13.pins("linux-x86_64", "3.13t") == {"cuda_runtime": "13.0.96", "nccl": "2.28.9"}
    tv = parse_metadata(
        metadata_text("torchvision", "0.31.0+cu126", ["torch==2.16.0+cu126"]),
        "torchvision",
        "0.31.0",
    )
    assert tv.pins("linux-x86_64", "3.12") == {"torch": "2.16.0"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"<html>error page</html>", "no Metadata-Version"),
        (metadata_text("torchvision", "2.16.0", []), "names 'torchvision'"),
        (metadata_text("torch", "2.15.0", []), "version '2.15.0'"),
        (b"Metadata-Version: 2.1\nSummary: x\n\n", "without Name"),
    ],
)
def test_metadata_that_is_not_the_wheels_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        parse_metadata(data, "torch", "2.16.0")


class _Remote(FileSource):
    """A remote file read the way the updater reads it: a suffix, then ranges (counted)."""

    def __init__(self, blob: bytes, tail: int = 65536) -> None:
        super().__init__("remote.whl", fh=BytesIO(blob))
        self.reads: list[tuple[int, int]] = []
        self.tail_at = max(0, len(blob) - tail)
        self.tail_data = blob[self.tail_at :]

    def stream(self, offset: int, length: int) -> Iterator[bytes]:
        if offset >= self.tail_at:  # inside the first (suffix) read: no request
            yield self.tail_data[offset - self.tail_at : offset - self.tail_at + length]
            return
        self.reads.append((offset, offset + length))
        yield from super().stream(offset, length)

    def metadata(self, name: str = "torch") -> bytes:
        return metadata_from_zip(self, name)


META = metadata_text("torch", "2.16.0+cu136", ["nvidia-cudnn-cu13==9.17.0.29"])


def test_small_wheel_is_read_from_the_tail_alone() -> None:
    remote = _Remote(build_wheel("torch", "2.16.0+cu136", META))
    assert remote.metadata() == META
    assert remote.reads == []  # the whole file was in the suffix read


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_metadata_far_from_the_end_takes_one_more_range(compression: int) -> None:
    blob = build_wheel(
        "torch", "2.16.0+cu136", META, pad=300_000, metadata_first=True, compression=compression
    )
    remote = _Remote(blob)
    assert remote.metadata() == META
    assert len(remote.reads) == 1 and remote.reads[0][0] < 1024  # the local header, at the start


def test_central_directory_outside_the_tail_is_read_by_range() -> None:
    blob = build_wheel("torch", "2.16.0+cu136", META, pad=300_000, metadata_first=True)
    remote = _Remote(blob, tail=64)  # only the end of central directory record
    assert remote.metadata() == META
    assert len(remote.reads) == 2


def test_zip64_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make zipfile write ZIP64 records (EOCD64, locator, ZIP64 extra fields) for a small file.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
    blob = build_wheel("torch", "2.16.0+cu136", META, pad=5000, metadata_first=False)
    monkeypatch.undo()
    assert b"PK\x06\x06" in blob[-200:]  # really a ZIP64 end record
    assert _Remote(blob).metadata() == META
    assert _Remote(blob, tail=30).metadata() == META  # EOCD64 read by range too


def test_two_dist_info_directories_pick_the_projects() -> None:
    blob = build_wheel("torch", "2.16.0", META, extra_dist_info="other-1.0.dist-info")
    assert _Remote(blob).metadata("torch") == META


@pytest.mark.parametrize("damage", ["not-a-zip", "crc", "no-metadata"])
def test_broken_zips_are_refused(damage: str) -> None:
    blob = build_wheel("torch", "2.16.0", META, compression=zipfile.ZIP_STORED)
    if damage == "not-a-zip":
        blob = b"\x00" * 4096
    elif damage == "crc":
        at = blob.index(b"nvidia-cudnn")
        blob = blob[:at] + b"X" + blob[at + 1 :]
    else:
        blob = blob.replace(b".dist-info/METADATA", b".dist-info/METADATX")
    with pytest.raises(ReadError):  # a MetadataError, or the zip reader's one line
        _Remote(blob).metadata()


# --- HTTP ------------------------------------------------------------------------------------


def test_retries_with_backoff_then_succeeds() -> None:
    routes = {"/page/": (b"<html></html>", "text/html")}
    sleeps: list[float] = []
    with serve(routes, Behaviour(mode="flaky", flaky_failures=2)) as srv:
        fetcher = Client(tries=3, backoff=0.5, sleep=sleeps.append, timeout=5)
        page = fetcher.get(srv.url + "/page/")
    assert page.body == b"<html></html>"
    assert sleeps == [0.5, 1.0] and fetcher.requests == 3


def test_retries_are_bounded_and_404_is_not_retried() -> None:
    sleeps: list[float] = []
    with serve({}, Behaviour(mode="error")) as srv:
        fetcher = Client(tries=3, backoff=0.1, sleep=sleeps.append, timeout=5)
        with pytest.raises(FetchError, match=r"HTTP 500 \(3 tries\)"):
            fetcher.get(srv.url + "/x/")
        assert len(srv.log) == 3
    with serve({}) as srv:
        fetcher = Client(tries=3, sleep=sleeps.append, timeout=5)
        assert fetcher.get_optional(srv.url + "/missing/") is None
        assert len(srv.log) == 1


def test_timeouts_and_refused_connections_end_in_fetch_errors() -> None:
    with serve({"/": (b"<html></html>", "text/html")}, Behaviour(mode="slow", delay=3)) as srv:
        fetcher = Client(tries=2, sleep=lambda s: None, timeout=0.2)
        with pytest.raises(FetchError, match="timed out"):
            fetcher.get(srv.url + "/")
    fetcher = Client(tries=2, sleep=lambda s: None, timeout=2)
    with pytest.raises(FetchError, match="cannot connect"):
        fetcher.get(f"http://127.0.0.1:{closed_port()}/")


def test_range_reads() -> None:
    blob = bytes(range(256)) * 1000
    with serve({"/f.whl": (blob, "application/octet-stream")}) as srv:
        client = Client(sleep=lambda s: None, timeout=5)
        with HttpSource(srv.url + "/f.whl", client=client, first_tail=100) as src:
            assert src.size == len(blob) and src.read(len(blob) - 100, 100) == blob[-100:]
            assert src.read(10, 20) == blob[10:30] and src.bytes_read == 120
        assert client.requests == 2


def test_a_server_ignoring_ranges_is_not_downloaded_whole() -> None:
    small, big = bytes(range(256)) * 10, bytes(3 * 1024 * 1024)
    routes = {"/s.whl": (small, "application/zip"), "/b.whl": (big, "application/zip")}
    with serve(routes, Behaviour(mode="norange")) as srv:
        client = Client(sleep=lambda s: None, timeout=5)
        with HttpSource(srv.url + "/s.whl", client=client, first_tail=100) as src:
            assert src.read(10, 20) == small[10:30] and src.sha256
        with pytest.raises(BudgetError, match="ignores range requests"):
            HttpSource(srv.url + "/b.whl", client=client, budget=1024 * 1024)


# --- pip's configuration ---------------------------------------------------------------------


def test_pip_index_from_environment_and_config_file(tmp_path: Path) -> None:
    """The file order itself is checked against pip in tests/test_lock_inputs_alone.py."""
    assert pip_index_url({"PIP_INDEX_URL": "https://mirror.example/simple"}) == (
        "https://mirror.example/simple"
    )
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nextra-index-url = file:///opt/x/simple\nindex-url = https://g.example/simple\n"
        "[install]\nindex-url = https://install.example/simple\n"
    )
    env = {"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}
    assert pip_index_url(env) == "https://install.example/simple"
    conf.write_text("[global]\nextra-index-url = file:///opt/x/simple\n")
    assert pip_index_url(env) is None


# --- merge (pure) ----------------------------------------------------------------------------

READ_AT = "2026-12-01T10:00:00Z"
KEY = "PYTORCH_INDEX_2026-12-01"


def _facts(*releases: ReleaseFacts) -> IndexFacts:
    return IndexFacts(
        index_url="https://index.example/whl",
        read_at=READ_AT,
        releases={r.version: r for r in releases},
    )


def _build(variant: str, pythons: dict[str, list[str]], **pins: str) -> BuildFacts:
    return BuildFacts(
        variant=variant,
        python={p: set(v) for p, v in pythons.items()},
        metadata_read=bool(pins),
        **pins,
    )


LINUX = {"linux-x86_64": ["3.12", "3.13"]}


def test_merge_adds_a_new_series_with_sources(synth_raw: dict[str, Any]) -> None:
    rel = ReleaseFacts(
        "2.16.0",
        builds={
            "cpu": _build("cpu", {**LINUX, "macos-arm64": ["3.12"]}),
            "cu126": _build("cu126", LINUX, cudnn="9.10.2.21", nccl="2.28.3"),
            "cu136": _build("cu136", LINUX, cudnn="9.17.0.29"),
        },
        torchvision="0.31.0",
        pypi={"linux-x86_64": "cu126", "macos-arm64": "cpu"},
    )
    new, summary = merge(synth_raw, _facts(rel))
    assert synth_raw == copy.deepcopy(synth_raw) and "2.16" not in json.dumps(synth_raw)
    cat = catalog_mod.from_raw(new)
    assert db_check(cat) == []
    r = cat.release("2.16.0")
    assert r is not None and [v.name for v in r.variants] == ["cpu", "cu126", "cu136"]
    said = {k: tuple(map(str, v)) for k, v in r.python.items()}
    assert said == {"linux-x86_64": ("3.12", "3.13"), "macos-arm64": ("3.12",)}
    cpu, cu126, cu136 = r.variants
    assert cpu.pypi == {"macos-arm64"} and cu126.pypi == {"linux-x86_64"}
    arch = cu126.platforms["linux-x86_64"]
    assert arch is not None and not arch.prov.confirmed  # carried from 2.12, unconfirmed
    assert cu126.cudnn is not None and cu126.cudnn.version == "9.10.2.21"
    assert cu126.prov.confirmed and not cu136.prov.confirmed
    assert cu136.platforms == {"linux-x86_64": None}
    assert cat.toolkits["13.6"].min_driver == {"linux": None, "windows": None}
    assert not cat.toolkits["13.6"].prov.confirmed
    assert cat.sources[KEY]["kind"] == "observed"
    assert cat.updated == READ_AT
    assert summary.changed and any("2.16.0" in line for line in summary.releases)
    assert any("cu136" in line and "unknown" in line for line in summary.variants)
    # merging the same facts again changes nothing
    again, summary2 = merge(new, _facts(rel))
    assert again == new and not summary2.changed


def test_merge_adds_a_build_to_an_existing_release(synth_raw: dict[str, Any]) -> None:
    rel = ReleaseFacts(
        "2.12.0",
        builds={
            "cpu": _build("cpu", LINUX),
            "cu126": _build("cu126", LINUX),
            "cu130": _build("cu130", LINUX),
            "cu128": _build("cu128", {"linux-x86_64": ["3.12"]}, cudnn="9.10.2.21"),
        },
        torchvision="0.27.0",
    )
    new, summary = merge(synth_raw, _facts(rel))
    cat = catalog_mod.from_raw(new)
    assert db_check(cat) == []
    r = cat.release("2.12.0")
    assert r is not None and "cu128" in [v.name for v in r.variants]
    series = next(s for s in new["torch.yaml"]["series"] if s["minor"] == "2.12")
    assert "variants" not in series["releases"][0]  # every variant of the series: no list
    assert [line for line in summary.variants if "2.12.0 cu128" in line]
    assert summary.releases == [] and summary.companions == []


def test_merge_never_overwrites_curated_values(synth_raw: dict[str, Any]) -> None:
    rel = ReleaseFacts(
        "2.8.0",
        builds={"cu128": _build("cu128", LINUX, cudnn="9.99.0.1")},
        torchvision="0.23.9",
    )
    # cu128 already belongs to 2.8.0: nothing new, a differing pairing is only a note
    new, summary = merge(synth_raw, _facts(rel))
    assert new == synth_raw and not summary.changed
    assert any("torchvision 0.23.9" in note for note in summary.notes)


def test_merge_keeps_old_releases_off_a_new_variant(synth_raw: dict[str, Any]) -> None:
    # 2.8.1 is built for cpu, cu128 and a new cu129: 2.8.0 must not gain cu129
    rel = ReleaseFacts(
        "2.8.1",
        builds={
            "cpu": _build("cpu", LINUX),
            "cu128": _build("cu128", LINUX, cudnn="9.10.2.22"),
            "cu129": _build("cu129", LINUX, cudnn="9.10.2.21"),
        },
        torchvision="0.23.1",
        torchaudio="2.8.1",
    )
    synth_raw["cuda.yaml"]["toolkits"].append(
        {
            "version": "12.9",
            "min_driver": {"linux": "575.51.03", "windows": None},
            "source": ["PRIM"],
        }
    )
    new, summary = merge(synth_raw, _facts(rel))
    cat = catalog_mod.from_raw(new)
    assert db_check(cat) == []
    old, patch = cat.release("2.8.0"), cat.release("2.8.1")
    assert old is not None and patch is not None
    assert [v.name for v in old.variants] == ["cpu", "cu126", "cu128"]
    assert [v.name for v in patch.variants] == ["cpu", "cu128", "cu129"]
    assert any("9.10.2.22" in note and "kept" in note for note in summary.notes)
    assert tuple(map(str, patch.python["linux-x86_64"])) == (
        "3.12",
        "3.13",
    )  # its own, not the series'
    # its cpu record claims Windows (series-wide) but 2.8.1 has no Windows wheel: said, and
    # the series' Python versions stand in so that the record stays consistent
    assert tuple(map(str, patch.python["windows-x86_64"])) == ("3.10", "3.11", "3.12")
    assert any("no wheels for windows-x86_64" in note for note in summary.notes)


def test_merge_adds_python_versions_for_a_new_platform(synth_raw: dict[str, Any]) -> None:
    builds = {
        "cu128": _build("cu128", {"linux-x86_64": ["3.12"], "windows-x86_64": ["3.12"]}),
    }
    rel = ReleaseFacts("2.12.0", builds=builds, torchvision="0.27.0")
    new, summary = merge(synth_raw, _facts(rel))
    cat = catalog_mod.from_raw(new)
    assert db_check(cat) == []
    r = cat.release("2.12.0")
    assert r is not None and tuple(map(str, r.python["windows-x86_64"])) == ("3.12",)
    assert tuple(map(str, r.python["linux-x86_64"])) == ("3.11", "3.12")
    assert any("windows-x86_64 added" in note for note in summary.notes)


def test_merge_skips_a_release_without_companions(synth_raw: dict[str, Any]) -> None:
    rel = ReleaseFacts("2.16.0", builds={"cpu": _build("cpu", LINUX)})
    new, summary = merge(synth_raw, _facts(rel))
    assert new == synth_raw and not summary.changed
    assert any("no torchvision" in note for note in summary.notes)
    old = ReleaseFacts("2.9.0", builds={"cpu": _build("cpu", LINUX)}, torchvision="0.24.0")
    new, summary = merge(synth_raw, _facts(old))
    assert new == synth_raw and any("no torchaudio" in note for note in summary.notes)


# --- writing ---------------------------------------------------------------------------------


def test_yaml_round_trip_keeps_versions_strings(synth_raw: dict[str, Any]) -> None:
    text = dump_yaml(synth_raw["torch.yaml"])
    assert yaml.safe_load(text) == synth_raw["torch.yaml"]
    assert 'minor: "2.1"' in text and 'sass: ["6.0", "7.0"' in text


@pytest.mark.slow
def test_yaml_writer_reproduces_the_shipped_files() -> None:
    shipped = catalog_mod.shipped_data_dir()
    if not (shipped / "torch.yaml").is_file():
        pytest.skip("the shipped database is not there yet")
    from resolver.dbupdate.run import read_raw
    from resolver.dbupdate.write import leading_comments

    raw = read_raw(shipped)
    for name in catalog_mod.FILES:
        text = leading_comments(shipped / name) + dump_yaml(raw[name])
        assert yaml.safe_load(text) == raw[name]


def _write_synth(directory: Path, raw: dict[str, Any]) -> None:
    directory.mkdir(parents=True)
    for name in catalog_mod.FILES:
        (directory / name).write_text(dump_yaml(raw[name]), encoding="utf-8")


def test_write_refuses_a_database_that_fails_its_check(
    tmp_path: Path, synth_raw: dict[str, Any]
) -> None:
    target = tmp_path / "data"
    _write_synth(target, synth_raw)
    (target / "SCHEMA.md").write_text("kept")
    before = tree_snapshot(target)
    broken = copy.deepcopy(synth_raw)
    broken["torch.yaml"]["series"][0]["releases"][0]["source"] = ["NOWHERE"]
    with pytest.raises(UpdateError, match="fails its check"):
        write_database(target, broken, base=target, changed=["torch.yaml"], stamp=READ_AT)
    assert tree_snapshot(target) == before
    assert siblings(target) == ["data"]


def test_write_replaces_the_directory_keeping_other_files(
    tmp_path: Path, synth_raw: dict[str, Any]
) -> None:
    target = tmp_path / "data"
    _write_synth(target, synth_raw)
    (target / "SCHEMA.md").write_text("kept")
    changed = copy.deepcopy(synth_raw)
    changed["torch.yaml"]["updated"] = READ_AT
    write_database(target, changed, base=target, changed=["torch.yaml"], stamp=READ_AT)
    assert (target / "SCHEMA.md").read_text() == "kept"
    assert catalog_mod.load(target).updated == READ_AT
    assert siblings(target) == ["data"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_write_gives_a_new_database_the_umask_mode(
    tmp_path: Path, synth_raw: dict[str, Any]
) -> None:
    """Not mkdtemp's 0700, nor the base's (0755): what mkdir would give under this umask; an
    existing database keeps its own mode."""
    source = tmp_path / "shipped"
    _write_synth(source, synth_raw)
    source.chmod(0o755)
    old = os.umask(0o027)
    try:
        write_database(tmp_path / "new", synth_raw, base=source, changed=[], stamp=READ_AT)
        (tmp_path / "new").chmod(0o700)
        write_database(tmp_path / "new", synth_raw, base=source, changed=[], stamp=READ_AT)
        assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
        write_database(tmp_path / "other", synth_raw, base=source, changed=[], stamp=READ_AT)
    finally:
        os.umask(old)
    assert (tmp_path / "other").stat().st_mode & 0o777 == 0o750
    assert catalog_mod.load(tmp_path / "other").releases


def test_fetch_error_names_the_url() -> None:
    err = FetchError("http://h/x/", "HTTP 500 (3 tries)", 500)
    assert str(err) == "http://h/x/: HTTP 500 (3 tries)" and err.status == 500


def test_metadata_of_a_wheel_in_a_local_mirror(tmp_path: Path) -> None:
    """A file: URL (a local mirror without PEP 658 files) is read like a server's wheel."""
    path = tmp_path / "torch-2.16.0+cu136-cp312-cp312-linux_x86_64.whl"
    path.write_bytes(build_wheel("torch", "2.16.0+cu136", META, pad=100_000))
    with Client(sleep=lambda s: None, timeout=5) as client:
        assert remote_metadata(client, path.as_uri(), "torch") == META
        with pytest.raises(ReadError, match="cannot read"):
            remote_metadata(client, (tmp_path / "missing.whl").as_uri(), "torch")
        assert client.requests == 0


def test_a_body_that_breaks_off_is_asked_for_again() -> None:
    from wheel_support import serve_wheels

    sleeps: list[float] = []
    with serve_wheels({"page": b"<html></html>"}, mode="lie") as server:
        client = Client(tries=3, backoff=0.1, sleep=sleeps.append, timeout=5)
        with pytest.raises(FetchError, match=r"broke off.*\(3 tries\)"):
            client.get(server.url("page"))
    assert len(server.log) == 3 and sleeps == [0.1, 0.2]
