"""The extension packages' history gather (issue 38), on recorded real responses.

``fixtures/ext_history`` holds what the Python Package Index answered: two projects' PEP 691
pages (trimmed to the releases below, file URLs made relative) and, for xformers 0.0.28.post1
and torchao 0.10.0, every byte range the history reader fetched from their wheels (recorded by
``tools/record_ext_wheels.py``: the directory, METADATA, cpp_lib.json, the heads of the ELF
libraries). The replay server serves exactly those ranges and refuses any other (416), so a
reader that asked for more than it did fails here.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from local_server import local_server

from resolver.db.yamlfile import read_yaml
from resolver.dbupdate.exthistmerge import merge_history, parse_arch_list
from resolver.dbupdate.exthistory import (
    ANY,
    History,
    HistRelease,
    LibFacts,
    PageState,
    WheelFacts,
    history,
    load_state,
    pages_for,
    read_state_file,
    releases_to_read,
    state_as_json,
    write_state_file,
)
from resolver.dbupdate.merge import Summary
from resolver.io.http import Client
from resolver.wheels.elfhead import code_start, parse_head

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "vllm_sdist_archs.py"

FIXTURES = Path(__file__).parent / "fixtures" / "ext_history"
PAGES = json.loads((FIXTURES / "pages.json").read_text(encoding="utf-8"))
WHEELS = {
    doc["file"]: doc
    for doc in (json.loads(p.read_text(encoding="utf-8")) for p in FIXTURES.glob("*.ranges.json"))
}
XFORMERS = "xformers-0.0.28.post1-cp312-cp312-manylinux_2_28_x86_64.whl"
TORCHAO = "torchao-0.10.0-cp39-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"


class Replay:
    """What the server was asked: every request's path and Range."""

    def __init__(self, etag: bool) -> None:
        self.etag = etag
        self.asked: list[tuple[str, str]] = []
        self.lock = threading.Lock()


def _handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            rng = self.headers.get("Range", "")
            with replay.lock:
                replay.asked.append((self.path, rng))
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[0] == "simple" and parts[1] in PAGES:
                tag = f'"{parts[1]}-1"'
                if replay.etag and self.headers.get("If-None-Match") == tag:
                    self._send(304, b"", {"ETag": tag})
                    return
                body = json.dumps(PAGES[parts[1]]).encode()
                headers = {"Content-Type": "application/vnd.pypi.simple.v1+json"}
                if replay.etag:
                    headers["ETag"] = tag
                self._send(200, body, headers)
                return
            if len(parts) == 3 and parts[0] == "simple" and parts[2] in WHEELS:
                self._range(WHEELS[parts[2]], rng)
                return
            self._send(404, b"not here", {})

        def _range(self, doc: dict[str, Any], rng: str) -> None:
            size = doc["size"]
            spec = rng.removeprefix("bytes=")
            if spec.startswith("-"):
                start, end = size - int(spec[1:]), size - 1
            else:
                a, b = spec.split("-")
                start, end = int(a), int(b)
            for offset, data in doc["ranges"]:
                raw = base64.b64decode(data)
                if offset <= start and end < offset + len(raw):
                    body = raw[start - offset : end - offset + 1]
                    headers = {"Content-Range": f"bytes {start}-{end}/{size}"}
                    self._send(206, body, headers)
                    return
            self._send(416, b"not recorded", {"Content-Range": f"bytes */{size}"})

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Replay]]:
    replay = Replay(etag=True)
    with local_server(_handler(replay)) as port:
        yield f"http://127.0.0.1:{port}/simple", replay


def _gather(index: str, known: dict[str, set[str]], state: dict[str, PageState]) -> History:
    pages = [(p, "default", f"{index}/{p}/") for p in ("torchao", "xformers")]
    with Client(timeout=10, tries=1) as client:
        return history(client, lambda: Client(timeout=10, tries=1), pages, known, state)


KNOWN = {"xformers": {"0.0.35"}, "torchao": {"0.18.0"}}


def test_history_reads_the_cheap_parts_of_each_wheel(server: tuple[str, Replay]) -> None:
    index, replay = server
    hist = _gather(index, KNOWN, {})
    got = {(r.package, r.version): r for r in hist.releases}
    assert set(got) == {("xformers", "0.0.28.post1"), ("torchao", "0.10.0")}  # 0.0.35 is known
    xf = got["xformers", "0.0.28.post1"]
    assert xf.sdist and xf.date == "2024-09-13"
    (w,) = xf.wheels
    assert (w.platform, w.error, w.torch, w.cudart) == ("linux-x86_64", None, "==2.4.1", [12])
    assert w.cxx11_abi is False  # torch 2.4's wheels on that index: the old ABI
    assert w.build == {
        "cuda": "12.1",
        "torch": "2.4.1+cu121",
        "arch_list": "6.0+PTX 7.0 7.5 8.0+PTX 9.0a",
    }
    (t,) = got["torchao", "0.10.0"].wheels
    assert (t.error, t.torch, t.cudart, t.cxx11_abi) == (None, None, [12], True)
    # every byte counted, a fraction of the files (16 and 5 MB), only ranges asked for
    assert hist.wheels_read == 2
    assert 0 < hist.bytes_read < 1_000_000
    assert all(rng.startswith("bytes=") for path, rng in replay.asked if path.endswith(".whl"))


def test_nothing_new_costs_one_request_per_page(server: tuple[str, Replay]) -> None:
    index, replay = server
    first = _gather(index, KNOWN, {})
    replay.asked.clear()
    again = _gather(index, KNOWN, first.state)
    assert len(replay.asked) == 2 and again.unchanged == 2  # the two pages: 304 each
    assert again.releases == [] and again.wheels_read == 0
    # without ETags an unchanged _last-serial says the same (the body is read, nothing else)
    replay.etag = False
    replay.asked.clear()
    serial_only = {url: PageState(None, s.serial) for url, s in first.state.items()}
    third = _gather(index, KNOWN, serial_only)
    assert len(replay.asked) == 2 and third.unchanged == 2 and third.wheels_read == 0


def test_the_state_survives_a_file_and_damage_is_only_a_miss(tmp_path: Path) -> None:
    state = {"http://i/simple/x/": PageState('"abc"', 42)}
    path = tmp_path / "ext-pages.json"
    write_state_file(path, state)
    assert read_state_file(path) == state
    path.write_text("{not json", encoding="utf-8")
    assert read_state_file(path) == {}
    assert load_state({"schema": 1, "pages": {"u": {"etag": 7, "serial": True}}}) == {
        "u": PageState(None, None)
    }
    assert json.loads(state_as_json(state))["pages"]["http://i/simple/x/"]["serial"] == 42


def test_an_unreachable_index_is_recorded_not_fatal() -> None:
    with local_server(_handler(Replay(etag=False))) as port:
        dead = f"http://127.0.0.1:{port}/whl"
    pages = [
        ("xformers", "cu121", f"{dead}/cu121/xformers/"),
        ("xformers", "cu124", f"{dead}/cu124/xformers/"),
    ]
    with Client(timeout=2, tries=1) as client:
        hist = history(client, lambda: Client(timeout=2, tries=1), pages, KNOWN, {})
    assert hist.pages == 1  # the second folder of a dead index is not tried
    assert len(hist.notes) == 1 and "could not be read" in hist.notes[0]


def test_elf_head_names_the_cuda_runtime_and_the_abi() -> None:
    head = b"\x00".join(
        [b"", b"_ZN3c105ErrorC2ENS_14SourceLocationESs", b"libcudart.so.12", b"libc10.so", b""]
    )
    got = parse_head("x/_C.so", head)
    assert got.cudart == 12 and got.cxx11_abi is False and "libc10.so" in got.linked
    new = parse_head("x/_C.so", b"\x00_ZNSt7__cxx1112basic_stringB\x00libcudart.so.13\x00")
    assert new.cudart == 13 and new.cxx11_abi is True
    assert code_start(b"not an elf") is None


def _raw(template: Any) -> dict[str, Any]:
    return {
        "extensions.yaml": {"schema": 1, "packages": [template], "sources": {}},
        "gpus.yaml": {
            "architectures": [{"cc": c} for c in ("6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0")]
        },
        "cuda.yaml": {"toolkits": [{"version": v} for v in ("11.8", "12.1", "12.4")]},
    }


def test_merge_shapes_xformers_from_its_build_record(server: tuple[str, Replay]) -> None:
    index, _replay = server
    hist = _gather(index, KNOWN, {})
    template: Any = {
        "name": "xformers",
        "releases": [
            {
                "version": "0.0.35",
                "builds": [{"index": "default", "cuda_match": "major", "device_code": True}],
            }
        ],
    }
    raw = _raw(template)
    summary = Summary()
    added = merge_history(raw, hist, "2026-12-02", summary, {})
    assert added == {"xformers": 1}
    rel = next(r for r in template["releases"] if r["version"] == "0.0.28.post1")
    (build,) = rel["builds"]
    assert (build["torch"], build["cuda"], build["cuda_match"]) == ("==2.4.1", "12.1", "major")
    arch = build["platforms"]["linux-x86_64"]
    assert (arch["sass"], arch["ptx"]) == (["6.0", "7.0", "7.5", "8.0", "9.0"], ["6.0", "8.0"])
    sources = raw["extensions.yaml"]["sources"]
    assert sources[arch["source"][0]]["kind"] == "build-config"
    assert sources[build["source"][0]]["kind"] == "observed"
    assert "libcudart.so.12" in sources[build["source"][0]]["cite"]


def _bnb(version: str, libs: list[str]) -> HistRelease:
    wheel = WheelFacts("linux-x86_64", f"bitsandbytes-{version}-py3-none-manylinux.whl", None)
    wheel.libraries = {
        f"bitsandbytes/{n}": LibFacts(12 if "cuda12" in n else 11, None, True) for n in libs
    }
    wheel.torch = ">=2.0"
    rel = HistRelease("bitsandbytes", version, "default", "2024-10-01", False, [wheel])
    return rel


def test_merge_takes_arch_lists_from_the_build_configuration() -> None:
    template: Any = {
        "name": "bitsandbytes",
        "releases": [
            {
                "version": "0.50.2",
                "builds": [{"index": "default", "cuda_match": "exact", "device_code": True}],
            }
        ],
    }
    configs = {
        "sources": {
            "BNB_X": {
                "cite": "repo .github/scripts/build-cuda.sh at tag 0.44.1",
                "kind": "build-config",
            }
        },
        "packages": {
            "bitsandbytes": [
                {
                    "versions": ">=0.44,<0.45",
                    "cuda": ["11.8"],
                    "arch_list": "7.5 8.0 8.6 8.9+PTX",
                    "source": ["BNB_X"],
                },
                {"versions": ">=0.44,<0.45", "arch_list": "7.5 8.0 9.0+PTX", "source": ["BNB_X"]},
            ]
        },
    }
    hist = History(
        releases=[
            _bnb("0.44.1", ["libbitsandbytes_cuda118.so", "libbitsandbytes_cuda124.so"]),
            _bnb("0.41.0", ["libbitsandbytes_cuda121.so"]),
        ]
    )
    raw = _raw(template)
    summary = Summary()
    assert merge_history(raw, hist, "2026-12-02", summary, configs) == {"bitsandbytes": 1}
    rel = next(r for r in template["releases"] if r["version"] == "0.44.1")
    by_cuda = {b["cuda"]: b["platforms"]["linux-x86_64"] for b in rel["builds"]}
    assert by_cuda["11.8"]["ptx"] == ["8.9"] and by_cuda["12.4"]["sass"] == ["7.5", "8.0", "9.0"]
    assert raw["extensions.yaml"]["sources"]["BNB_X"]["kind"] == "build-config"
    # 0.41.0 has no build configuration here: left out, and said
    assert any("0.41.0" in n and "left out" in n for n in summary.notes)


def test_release_choice_keeps_the_history_window() -> None:
    from resolver.wheels.simple import Link

    def link(name: str, when: str) -> Link:
        return Link(url=f"http://i/{name}", filename=name, upload_time=when)

    links = [
        link("xformers-0.0.22-cp310-cp310-manylinux2014_x86_64.whl", "2023-09-28T00:00:00Z"),
        link("xformers-0.0.23-cp310-cp310-manylinux2014_x86_64.whl", "2023-12-05T00:00:00Z"),
        link("xformers-0.0.23-cp311-cp311-manylinux2014_x86_64.whl", "2023-12-05T00:00:00Z"),
        link("xformers-0.0.24-cp311-cp311-win_amd64.whl", "2024-02-01T00:00:00Z"),
        link("xformers-0.0.40-cp311-cp311-win_amd64.whl", "2027-02-01T00:00:00Z"),
    ]
    got = releases_to_read("xformers", "default", links, {"0.0.24", "0.0.35"})
    assert [(r.version, sorted(c)) for r, c in got] == [("0.0.23", ["linux-x86_64"])]
    assert got[0][1]["linux-x86_64"].filename.startswith("xformers-0.0.23-cp311")  # newest CPython
    assert ANY == "any"


def test_arch_list_text() -> None:
    assert parse_arch_list("5.0+PTX 6.0;7.5 9.0a 10.0f") == (
        ["5.0", "6.0", "7.5", "9.0", "10.0"],
        ["5.0"],
    )


def test_pages_for_reads_variant_folders_only_for_cuda_packages() -> None:
    doc = {
        "packages": [
            {
                "name": "xformers",
                "releases": [
                    {"version": "1", "builds": [{"index": "default", "cuda_match": "major"}]}
                ],
            },
            {
                "name": "flash-attn",
                "releases": [
                    {
                        "version": "2",
                        "builds": [{"index": "release-downloads", "cuda_match": "major"}],
                    }
                ],
            },
            {
                "name": "torchao",
                "releases": [
                    {"version": "3", "builds": [{"index": "default", "cuda_match": "any"}]}
                ],
            },
        ]
    }
    pages, elsewhere = pages_for(doc, "http://d/simple", "http://p/whl", ["cu121", "cpu"])
    assert ("xformers", "cu121", "http://p/whl/cu121/xformers/") in pages
    assert not any(p == "torchao" and f != "default" for p, f, _u in pages)
    assert elsewhere == frozenset({"flash-attn"})


@pytest.mark.slow
def test_db_show_lists_a_package_s_history_only_with_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli_support import run_cli

    code, out, _err = run_cli(capsys, "db", "show")
    assert code == 0
    assert "db show --with xformers lists them" in out and "xformers 0.0.28.post1:" not in out
    code, out, _err = run_cli(capsys, "db", "show", "--with", "xformers")
    assert code == 0
    assert "  xformers 0.0.28.post1: torch ==2.4.1; CUDA 12.1; linux-x86_64" in out
    code, out, _err = run_cli(capsys, "db", "show", "--json", "--with", "xformers")
    packages = json.loads(out)["packages"]
    assert list(packages) == ["xformers"] and len(packages["xformers"]) > 20
    code, _out, err = run_cli(capsys, "db", "show", "--with", "no-such-package")
    assert code == 2 and "not an extension package" in err


# torchao-0.14.1's torchao/__init__.py, the table as the wheel has it (recorded)
TORCHAO_0141_TABLE = b"""
        torchao_pytorch_compatible_versions = [
        # Built against torch 2.8.0
        (_parse_version("0.13.0"), _parse_version("2.8.0")),
        (_parse_version("0.13.0"), _parse_version("2.9.0.dev")),
        (_parse_version("0.14.0"), _parse_version("2.8.0")),
        (_parse_version("0.14.0"), _parse_version("2.9.0.dev")),
        # Built against torch 2.9.0
        (_parse_version("0.14.1"), _parse_version("2.9.0")),
        (_parse_version("0.14.1"), _parse_version("2.10.0.dev")),
    ]
"""


def test_an_import_table_becomes_the_release_s_import_gate() -> None:
    from resolver.dbupdate.exthistory import import_table

    pairs = import_table(TORCHAO_0141_TABLE)
    assert ("0.14.1", "2.9.0") in pairs and len(pairs) == 6
    assert import_table(b'_parse_version("1"), _parse_version("2")') == []  # no table
    wheel = WheelFacts("linux-x86_64", "torchao-0.14.1-cp310-abi3-manylinux.whl", "ab" * 32)
    wheel.libraries = {"torchao/_C.abi3.so": LibFacts(12, True, True)}
    wheel.import_table = pairs
    template: Any = {
        "name": "torchao",
        "releases": [
            {
                "version": "0.18.0",
                "builds": [{"cuda_match": "any", "device_code": False, "gate": False}],
            }
        ],
    }
    raw = _raw(template)
    rel = HistRelease("torchao", "0.14.1", "default", "2025-10-24", False, [wheel])
    assert merge_history(raw, History(releases=[rel]), "2026-12-02", Summary(), {}) == {
        "torchao": 1
    }
    (build,) = next(r for r in template["releases"] if r["version"] == "0.14.1")["builds"]
    assert build["import_gate"]["torch"] == "==2.9.0" and build["gate"] is False
    cite = raw["extensions.yaml"]["sources"][build["import_gate"]["source"][0]]["cite"]
    assert "torchao/__init__.py of torchao-0.14.1" in cite


def test_where_nothing_cheap_answers_one_release_a_cuda_major_is_read_whole(
    tmp_path: Path,
) -> None:
    """The newest release of each CUDA runtime major whose arch list no cheap part gives is read
    whole (its fat binaries); older ones of that major are not (their cost is the point)."""
    from ext_index import library, metadata, wheel

    from resolver.dbupdate.exthistory import read_wheel, scan_whole
    from resolver.wheels.simple import Link

    # an ELF-shaped library whose .dynstr names libcudart.so.12, holding one fat binary
    lib = b"\x7fELF\x02\x01\x01" + b"\0" * 57 + b"\0libcudart.so.12\0" + library([80, 90], [90])
    rels = []
    with Client(timeout=5, tries=1) as client:
        for version in ("0.0.30", "0.0.31"):
            path = tmp_path / f"xformers-{version}-cp39-abi3-manylinux_2_28_x86_64.whl"
            meta = metadata("xformers-0.0.35", version)
            path.write_bytes(wheel("xformers", version, meta, {"xformers/_C.so": lib}))
            link = Link(url=path.as_uri(), filename=path.name)
            got = read_wheel(client, "xformers", "linux-x86_64", link)
            rels.append(HistRelease("xformers", version, "default", None, False, [got]))
        assert [r.wheels[0].cudart for r in rels] == [[12], [12]]
        spent, notes = scan_whole(client, rels, lambda rel: True)
    assert spent > 0 and notes == []
    assert rels[0].wheels[0].fatbins is None  # the older of the same major: not read whole
    assert rels[1].wheels[0].fatbins == {"xformers/_C.so": {"sass": ["8.0", "9.0"], "ptx": ["9.0"]}}


def test_a_changed_page_does_not_read_again_what_was_read(server: tuple[str, Replay]) -> None:
    """A release read before (added, or left out for want of an arch list) is not read again
    when its page changes for another release: the state keeps what each page gave."""
    index, replay = server
    first = _gather(index, KNOWN, {})
    assert {v for s in first.state.values() for v in s.read} == {"0.0.28.post1", "0.10.0"}
    changed = {url: PageState(None, None, s.read) for url, s in first.state.items()}
    replay.etag = False
    replay.asked.clear()
    again = _gather(index, KNOWN, changed)
    assert again.wheels_read == 0 and len(replay.asked) == 2
    assert {u: s.read for u, s in again.state.items()} == {
        u: s.read for u, s in first.state.items()
    }


def test_bitsandbytes_0_41_and_0_42_arch_lists_from_their_makefile() -> None:
    """The shipped build configuration places 0.42.0 (its wheels carry no build record): the
    Makefile at its tag, a library per CUDA and its _nocublaslt twin for CC below 7.5."""
    configs = read_yaml(ROOT / "data" / "ext_build_configs.yaml")
    template: Any = {
        "name": "bitsandbytes",
        "releases": [
            {
                "version": "0.50.2",
                "builds": [{"index": "default", "cuda_match": "exact", "device_code": True}],
            }
        ],
    }
    libs = ["libbitsandbytes_cuda118.so", "libbitsandbytes_cuda121.so"]
    raw = _raw(template)
    summary = Summary()
    assert merge_history(
        raw, History(releases=[_bnb("0.42.0", libs)]), "2026-12-02", summary, configs
    )
    rel = next(r for r in template["releases"] if r["version"] == "0.42.0")
    by_cuda = {b["cuda"]: b["platforms"]["linux-x86_64"] for b in rel["builds"]}
    assert by_cuda["12.1"]["sass"][-2:] == ["8.9", "9.0"] and "7.0" in by_cuda["12.1"]["sass"]
    assert by_cuda["11.8"]["sass"] == by_cuda["12.1"]["sass"] and by_cuda["12.1"]["ptx"] == []
    assert by_cuda["12.1"]["source"] == ["BNB_BUILD_MAKE_0.42.0"]
    # 0.41.3: the same Makefile at the commit that set its version
    template["releases"] = template["releases"][:1]
    hist = History(releases=[_bnb("0.41.3", libs)])
    assert merge_history(_raw(template), hist, "2026-12-02", Summary(), configs)
    rel = next(r for r in template["releases"] if r["version"] == "0.41.3")
    assert {b["cuda"]: b["platforms"]["linux-x86_64"]["source"] for b in rel["builds"]} == {
        "11.8": ["BNB_BUILD_MAKE_0.41.x"],
        "12.1": ["BNB_BUILD_MAKE_0.41.x"],
    }


def _sdist_tool() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_sdist_archs", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vllm_arch_lists_follow_their_sdists_recorded_lines() -> None:
    """The lines recorded from a few vllm sdists (CMake's CUDA_SUPPORTED_ARCHS, the release
    pipeline's wheel steps and TORCH_CUDA_ARCH_LIST, the default wheel's CUDA), put back at
    their line numbers, give through tools/vllm_sdist_archs.py exactly the arch list
    ext_build_configs.yaml records for each platform, citing the sdist's name and sha256."""
    arch_lists = _sdist_tool().arch_lists
    configs = read_yaml(ROOT / "data" / "ext_build_configs.yaml")
    excerpts = json.loads((FIXTURES / "vllm_sdist_excerpts.json").read_text(encoding="utf-8"))
    entries = configs["packages"]["vllm"]
    checked = 0
    for version, rel in excerpts["releases"].items():
        recorded: dict[str, dict[int, str]] = {}
        for seen in rel["platforms"].values():
            for path, lines in seen["lines"].items():
                recorded.setdefault(path, {}).update({int(n): t for n, t in lines.items()})
        files = {
            path: "\n".join(lines.get(n, "") for n in range(1, max(lines) + 1))
            for path, lines in recorded.items()
        }
        found = arch_lists(files)
        for plat in rel["platforms"]:
            (entry,) = [
                e for e in entries if e["versions"] == f"=={version}" and plat in e["platforms"]
            ]
            assert " ".join(found[plat][0]) == entry["arch_list"], (version, plat)
            source = configs["sources"][entry["source"][0]]
            assert rel["sdist"] in source["cite"] and rel["sha256"] in source["cite"]
            assert source["kind"] == "build-config"
            checked += 1
    assert checked == 7
    # 0.10.2's default wheel is its CUDA 12.9 build ('7.0 7.5 8.0 8.9 9.0+PTX'): no Blackwell
    (x86,) = [
        e for e in entries if e["versions"] == "==0.10.2" and "linux-x86_64" in e["platforms"]
    ]
    assert x86["arch_list"] == "7.0 7.5 8.0 8.9 9.0"
    # releases with no sdist on the index (or no said nvcc) get no arch list: left out, not guessed
    for version in ("0.2.1.post1", "0.3.2", "0.4.0", "0.15.0", "0.15.1"):
        assert not [e for e in entries if e["versions"] == f"=={version}"]


def test_merge_places_vllm_from_its_sdist_build_configuration() -> None:
    """vllm 0.19.0's wheels carry no build record; the shipped configuration gives each
    platform's arch list (SASS, no PTX) from its sdist, graded build-config."""
    configs = read_yaml(ROOT / "data" / "ext_build_configs.yaml")
    template: Any = {
        "name": "vllm",
        "releases": [
            {
                "version": "0.19.1",
                "builds": [{"index": "default", "cuda_match": "default", "device_code": True}],
            }
        ],
    }
    wheels = []
    for plat in ("linux-x86_64", "linux-aarch64"):
        wheel = WheelFacts(plat, f"vllm-0.19.0-cp38-abi3-manylinux_2_31_{plat[6:]}.whl", None)
        wheel.libraries = {"vllm/_C.abi3.so": LibFacts(12, True, True)}
        wheel.torch = "==2.10.0"
        wheels.append(wheel)
    raw = _raw(template)
    raw["gpus.yaml"]["architectures"] += [{"cc": c} for c in ("8.7", "10.0", "12.0")]
    hist = History(releases=[HistRelease("vllm", "0.19.0", "default", "2026-04-03", True, wheels)])
    assert merge_history(raw, hist, "2026-12-02", Summary(), configs) == {"vllm": 1}
    rel = next(r for r in template["releases"] if r["version"] == "0.19.0")
    (build,) = rel["builds"]
    assert build["cudart"] == 12 and build["torch"] == "==2.10.0"
    assert build["platforms"]["linux-x86_64"] == {
        "sass": ["7.0", "7.5", "8.0", "8.9", "9.0", "10.0", "12.0"],
        "ptx": [],
        "source": ["VLLM_SDIST_0.19.0"],
    }
    assert build["platforms"]["linux-aarch64"]["sass"] == ["8.7", "8.9", "9.0", "10.0", "12.0"]
    sources = raw["extensions.yaml"]["sources"]
    assert sources["VLLM_SDIST_0.19.0"]["kind"] == "build-config"
