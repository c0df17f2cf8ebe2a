"""Extension packages (issue 32): the fat-binary reader, extensions.yaml and its checks."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path

import pytest

from resolver import catalog
from resolver.core.versions import cc_str
from resolver.db.check import check
from resolver.wheels.extwheel import FatbinScanner, inspect_extension, scan_fatbins

PACKAGES = ("xformers", "flash-attn", "bitsandbytes", "torchao", "vllm", "triton")


def _entry(kind: int, sm: int, payload: bytes) -> bytes:
    """One fat-binary entry as cuobjdump lists it: kind, version, header size, payload size,
    then the sm number at byte 28 of a 64-byte header."""
    head = struct.pack("<HHIQ", kind, 0x0101, 64, len(payload))
    head += b"\0" * 12 + struct.pack("<I", sm)
    return head + b"\0" * (64 - len(head)) + payload


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


LIB = (
    b"\x7fELF junk \x50\xed\x55\xba\x07\x00"  # a stray magic with a wrong version: skipped
    + _fatbin(_entry(2, 80, b"S" * 300), _entry(2, 90, b"T" * 17), _entry(1, 80, b"P" * 5))
    + b"between"
    + _fatbin(_entry(2, 120, b"\x50\xed\x55\xba" * 4))  # a magic inside a payload: skipped over
)


@pytest.mark.parametrize("size", [1, 3, 7, 64, 1 << 20])
def test_fatbin_scan_any_chunking(size: int) -> None:
    chunks = [LIB[i : i + size] for i in range(0, len(LIB), size)]
    assert scan_fatbins(chunks) == (["8.0", "9.0", "12.0"], ["8.0"])


def test_fatbin_scan_rejects_incoherent_headers() -> None:
    # an entry whose size passes the container's end is no header: nothing is taken from it
    bad = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 70) + _entry(2, 86, b"x" * 100)
    scanner = FatbinScanner()
    scanner.feed(bad)
    assert scanner.found == set()
    assert scan_fatbins([b"no device code here"]) == ([], [])


def _wheel(path: Path, requires: list[str]) -> Path:
    meta = "Metadata-Version: 2.1\nName: demo_ext\nVersion: 1.2.3\nRequires-Python: >=3.10\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo_ext/__init__.py", "")
        zf.writestr("demo_ext/_C.so", LIB)
        zf.writestr("demo_ext/pure.py", "x = 1\n")
        zf.writestr("demo_ext-1.2.3.dist-info/METADATA", meta)
    path.write_bytes(buf.getvalue())
    return path


def test_inspect_extension_wheel(tmp_path: Path) -> None:
    reqs = ["torch==2.9.1", "numpy", 'torch>=3; extra == "future"']
    wheel = _wheel(tmp_path / "demo_ext-1.2.3-py3-none-linux_x86_64.whl", reqs)
    report = inspect_extension(str(wheel))
    assert (report.name, report.version, report.requires_torch) == ("demo-ext", "1.2.3", "==2.9.1")
    assert report.requires_python == ">=3.10"
    assert report.libraries == {"demo_ext/_C.so": {"sass": ["8.0", "9.0", "12.0"], "ptx": ["8.0"]}}
    assert report.as_json()["device_code"] is True


def test_inspect_extension_without_torch_or_code(tmp_path: Path) -> None:
    meta = "Metadata-Version: 2.1\nName: pure\nVersion: 1\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("pure-1.dist-info/METADATA", meta)
        zf.writestr("pure/lib.so", b"\x7fELF nothing")
    path = tmp_path / "pure-1-py3-none-any.whl"
    path.write_bytes(buf.getvalue())
    report = inspect_extension(str(path))
    assert report.requires_torch is None and not report.device_code


def test_database_holds_three_releases_of_each_package() -> None:
    cat = catalog.load()
    for name in PACKAGES:
        pkg = cat.extensions[name]
        assert len(pkg.releases) >= 3, name
        assert [r.key for r in pkg.releases] == sorted((r.key for r in pkg.releases), reverse=True)
        for rel in pkg.releases:
            assert rel.builds or rel.sdist
            for b in rel.builds:
                assert b.prov.grade in ("observed", "build-config"), (name, rel.version)
    assert check(cat) == []


def test_recorded_facts_read_from_wheels() -> None:
    """Facts the reader took from the real wheels (see extensions.yaml's sources)."""
    cat = catalog.load()
    xf = cat.extensions["xformers"].releases[0]
    assert (xf.version, xf.builds[0].torch, xf.builds[0].cuda) == ("0.0.35", ">=2.10", "12.8")
    arch = xf.builds[0].platforms["linux-x86_64"]
    assert arch is not None and [cc_str(c) for c in arch.sass] == ["7.5", "8.0", "9.0"]
    assert "linux-aarch64" not in xf.builds[0].platforms
    vllm = cat.extensions["vllm"].releases[0]
    assert vllm.builds[0].torch == "==2.14.0" and vllm.builds[0].cuda_match == "default"
    fa = cat.extensions["flash-attn"]
    assert fa.releases[0].builds == () and fa.releases[0].sdist  # source only on the index
    assert {b.index for b in fa.releases[1].builds} == {"release-downloads"}
    bnb = cat.extensions["bitsandbytes"].releases[0]
    assert {b.cuda for b in bnb.builds} >= {"12.6", "12.8", "13.0"}
    assert not cat.extensions["torchao"].releases[0].builds[0].gate


def test_check_names_an_unknown_source(tmp_path: Path) -> None:
    import yaml

    data = Path(catalog.shipped_data_dir())
    raw = {n: yaml.safe_load((data / n).read_text()) for n in catalog.FILES}
    ext = yaml.safe_load((data / "extensions.yaml").read_text())
    ext["packages"][0]["releases"][0]["source"] = ["NO_SUCH_SOURCE"]
    cat = catalog.from_raw({**raw, "extensions.yaml": ext})
    found = [p for p in check(cat) if "NO_SUCH_SOURCE" in p]
    assert found == ["extensions.yaml xformers 0.0.35: unknown source key(s) NO_SUCH_SOURCE"]


@pytest.mark.network
@pytest.mark.skipif(
    os.environ.get("GPURESOLVE_NETWORK_TESTS") != "1", reason="GPURESOLVE_NETWORK_TESTS=1 not set"
)
def test_real_extension_wheel_matches_database() -> None:
    """The newest xformers Linux wheel (3 MiB) read from pip's index agrees with the database."""
    from resolver.io.http import Client
    from resolver.wheels.index import pip_default_index, project_url
    from resolver.wheels.simple import ACCEPT, parse_page

    index = pip_default_index()
    assert index, "pip has no index"
    rel = catalog.load().extensions["xformers"].releases[0]
    with Client() as client:
        page = client.get(project_url(index, "xformers"), accept=ACCEPT)
        link = next(
            link
            for link in parse_page(page.body, page.content_type, page.url)
            if link.filename.startswith(f"xformers-{rel.version}-")
            and link.filename.endswith("_x86_64.whl")
        )
        report = inspect_extension(f"{link.url}#sha256={link.sha256}", client=client)
    arch = rel.builds[0].platforms["linux-x86_64"]
    assert arch is not None
    assert report.requires_torch == rel.builds[0].torch
    assert report.sass == [cc_str(c) for c in arch.sass]
    assert report.ptx == [cc_str(c) for c in arch.ptx]
