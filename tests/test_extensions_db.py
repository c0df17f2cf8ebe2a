"""Extension packages (issue 32): the fat-binary reader, extensions.yaml and its checks."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

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


@pytest.mark.slow
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


def _elf(sections: list[tuple[str, bytes]]) -> bytes:
    """A 64-bit little-endian ELF library: its header, the sections' bytes, the section-name
    table, then the section headers at the end (where a linker puts them)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _ in sections) + b".shstrtab\0"
    body, offsets = b"", []
    for _, data in sections:
        offsets.append(64 + len(body))
        body += data
    strtab_at = 64 + len(body)
    shoff = strtab_at + len(names)
    count = len(sections) + 2  # the null section, the sections, .shstrtab
    head = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    head += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, count, count - 1)
    table = b"\0" * 64
    at = 1
    for (name, data), offset in zip(sections, offsets, strict=True):
        table += struct.pack("<IIQQQQIIQQ", at, 1, 2, 0, offset, len(data), 0, 0, 8, 0)
        at += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", at, 3, 0, 0, strtab_at, len(names), 0, 0, 1, 0)
    return head + body + names + table


def _pe(sections: list[tuple[str, bytes]]) -> bytes:
    """A PE image: DOS stub, PE header, the section table (8-byte names), the sections."""
    pe_at, optional = 0x80, 240
    table_at = pe_at + 24 + optional
    data_at = table_at + 40 * len(sections)
    head = bytearray(b"MZ" + b"\0" * (pe_at - 2))
    struct.pack_into("<I", head, 0x3C, pe_at)
    head += b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, len(sections), 0, 0, 0, optional, 0)
    head += b"\0" * optional
    body = b""
    for name, data in sections:
        head += struct.pack("<8sIIII", name.encode()[:8], 0, 0, len(data), data_at + len(body))
        head += b"\0" * 16
        body += data
    return bytes(head) + body


LOADED = _fatbin(_entry(2, 80, b"S" * 40), _entry(2, 120, b"T" * 9))
RELOCATABLE = _fatbin(_entry(2, 80, b"s" * 40), _entry(1, 120, b"P" * 30))  # for -rdc only


@pytest.mark.parametrize("make", [_elf, _pe], ids=["elf", "pe"])
@pytest.mark.parametrize("size", [1, 5, 4096, 1 << 20])
def test_fatbin_scan_reads_only_the_loaded_image(make: Any, size: int) -> None:
    """SASS and PTX come from .nv_fatbin (.nv_fatb in a DLL), the image the CUDA runtime loads,
    never from __nv_relfatbin, the relocatable copy kept for device linking (bitsandbytes 0.50.2's
    libraries: PTX 12.0 there only)."""
    names = ["__nv_relfatbin", ".nv_fatbin"] if make is _elf else ["__nv_rel", ".nv_fatb"]
    lib = make([(".text", b"code" * 50), (names[0], RELOCATABLE), (names[1], LOADED)])
    chunks = [lib[i : i + size] for i in range(0, len(lib), size)]
    assert scan_fatbins(chunks) == (["8.0", "12.0"], [])
    scanner = FatbinScanner()
    for chunk in chunks:
        scanner.feed(chunk)
    assert ("ptx", 120) in scanner.found  # it was there, in the copy never loaded


def test_sections_laid_out_as_in_bitsandbytes() -> None:
    """bitsandbytes 0.50.2's libbitsandbytes_cuda128.so as readelf lists it: __nv_relfatbin at
    0x4c7c8 (0x4db1c8 bytes) before .nv_fatbin at 0x52aa90 (0x1408fa8 bytes); a container in
    the first is not loaded, one in the second is."""
    from resolver.wheels.libsections import sections

    layout = [("__nv_relfatbin", 0x4C7C8, 0x4DB1C8), (".nv_fatbin", 0x52AA90, 0x1408FA8)]
    names = b"\0__nv_relfatbin\0.nv_fatbin\0.shstrtab\0"
    shoff = 0x193F000
    head = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    head += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, shoff, 0, 64, 56, 0, 64, 4, 3)
    table = b"\0" * 64
    at = 1
    for name, offset, size in layout:
        table += struct.pack("<IIQQQQIIQQ", at, 1, 2, offset, offset, size, 0, 0, 8, 0)
        at += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", at, 3, 0, 0, shoff - len(names), len(names), 0, 0, 1, 0)
    got = sections(head, names + table, shoff - len(names))
    assert got is not None
    assert [(s.name, s.offset, s.size) for s in got[:2]] == layout
    assert sections(head, table, shoff) is None  # the name table not kept: cannot say
