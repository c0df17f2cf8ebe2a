"""The extension packages' part of the local test index: next releases of xformers,
bitsandbytes and torchao (and a source-only flash-attn) as real wheels built from the real
METADATA recorded in ``fixtures/extensions_index``, on pages shaped as pip's default index
(PEP 691 JSON) and the PyTorch index's variant folders (HTML) write them."""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import zipfile
from pathlib import Path

from pytorch_index import JSON_TYPE

FIXTURE = Path(__file__).parent / "fixtures" / "extensions_index"
UPLOAD = "2026-11-20T10:00:00.000000Z"


def fatbin(sass: list[int], ptx: list[int]) -> bytes:
    """A CUDA fat-binary container: one entry per sm (kind 2 SASS, 1 PTX), as cuobjdump lists."""
    entries = b""
    for kind, sms in ((2, sass), (1, ptx)):
        for sm in sms:
            payload = bytes([sm % 251]) * 97
            head = struct.pack("<HHIQ", kind, 0x0101, 64, len(payload))
            head += b"\0" * 12 + struct.pack("<I", sm)
            entries += head + b"\0" * (64 - len(head)) + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries


def library(sass: list[int], ptx: list[int]) -> bytes:
    """A shared-library-shaped blob holding one fat binary (torchao's sm 99 is no real CC)."""
    return b"\x7fELF\x02\x01\x01" + b"\0" * 200 + fatbin(sass, ptx) + b"\0" * 200


def metadata(recorded: str, version: str, torch: str | None = None) -> bytes:
    """A recorded METADATA with its ``Version:`` (and, given ``torch``, its torch requirement)
    replaced: the next release as its project would publish it."""
    text = (FIXTURE / f"{recorded}.METADATA").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^Version: .*$", f"Version: {version}", text)
    if torch is not None:
        text = re.sub(r"(?m)^Requires-Dist: torch[<>=!~].*$", f"Requires-Dist: torch{torch}", text)
    return text.encode("utf-8")


def wheel(name: str, version: str, meta: bytes, libs: dict[str, bytes]) -> bytes:
    dist = f"{name}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/__init__.py", f"__version__ = '{version}'\n")
        for member, data in libs.items():
            zf.writestr(member, data)
        zf.writestr(f"{dist}/METADATA", meta)
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        zf.writestr(f"{dist}/RECORD", "")
    return buf.getvalue()


# (package, file name, METADATA, libraries, PEP 658 served) of the default index
XFORMERS_META = metadata("xformers-0.0.35", "0.0.36", torch=">=2.11")
XFORMERS_LIB = {"xformers/_C.so": library([75, 80, 90, 100], [80])}
BNB_META = metadata("bitsandbytes-0.50.2", "0.50.3")
BNB_LIBS = {
    "bitsandbytes/libbitsandbytes_cuda128.so": library([70, 75, 80, 86, 89, 90, 100, 120], [120]),
    "bitsandbytes/libbitsandbytes_cuda130.so": library([75, 80, 86, 89, 90, 100, 120], [120]),
    "bitsandbytes/libbitsandbytes_cpu.so": b"\x7fELF no device code",
}
TORCHAO_META = metadata("torchao-0.18.0", "0.19.0")

DEFAULT_FILES: dict[str, list[tuple[str, bytes | None, bytes, bool]]] = {
    # package -> [(file name, METADATA (None: an sdist), file bytes, PEP 658 served)]
    "xformers": [
        (
            "xformers-0.0.36-py39-none-manylinux_2_28_x86_64.whl",
            XFORMERS_META,
            wheel("xformers", "0.0.36", XFORMERS_META, XFORMERS_LIB),
            True,
        ),
        (
            "xformers-0.0.36-py39-none-win_amd64.whl",
            XFORMERS_META,
            wheel(
                "xformers",
                "0.0.36",
                XFORMERS_META,
                {"xformers/_C.pyd": XFORMERS_LIB["xformers/_C.so"]},
            ),
            False,  # range-read
        ),
        ("xformers-0.0.36.tar.gz", None, b"sdist", False),
        ("xformers-0.0.34-py39-none-win_amd64.whl", None, b"known: never read", False),
        ("xformers-0.0.37rc1-py39-none-win_amd64.whl", None, b"a pre-release: never read", False),
    ],
    "bitsandbytes": [
        (
            "bitsandbytes-0.50.3-py3-none-manylinux_2_24_x86_64.whl",
            BNB_META,
            wheel("bitsandbytes", "0.50.3", BNB_META, BNB_LIBS),
            False,
        ),
    ],
    "torchao": [
        (
            "torchao-0.19.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
            TORCHAO_META,
            wheel(
                "torchao",
                "0.19.0",
                TORCHAO_META,
                {"torchao/_C_cutlass_90a.abi3.so": library([90, 99, 100], [120])},
            ),
            False,
        ),
        (
            "torchao-0.19.0-py3-none-any.whl",
            TORCHAO_META,
            wheel("torchao", "0.19.0", TORCHAO_META, {}),
            True,
        ),
    ],
    "flash-attn": [("flash_attn-2.8.4.tar.gz", None, b"sdist", False)],
}
CU130_XFORMERS = "xformers-0.0.36+cu130-py39-none-manylinux_2_28_x86_64.whl"


def extension_routes() -> dict[str, tuple[bytes, str]]:
    """URL path -> (body, content type): /simple/<package>/ pages and files, and
    /whl/cu130/xformers/ (a build in the PyTorch index's variant folder)."""
    routes: dict[str, tuple[bytes, str]] = {}
    for package, files in DEFAULT_FILES.items():
        entries = []
        for filename, meta, data, pep658 in files:
            path = f"/files/{package}/{filename}"
            routes[path] = (data, "application/octet-stream")
            entry: dict[str, object] = {
                "filename": filename,
                "url": path,
                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                "upload-time": UPLOAD,
            }
            if pep658 and meta is not None:
                routes[path + ".metadata"] = (meta, "application/octet-stream")
                entry["core-metadata"] = {"sha256": hashlib.sha256(meta).hexdigest()}
            entries.append(entry)
        page = {"meta": {"api-version": "1.1"}, "name": package, "files": entries}
        routes[f"/simple/{package}/"] = (json.dumps(page).encode(), JSON_TYPE)
    meta = metadata("xformers-0.0.35", "0.0.36+cu130", torch=">=2.11")
    data = wheel("xformers", "0.0.36+cu130", meta, {"xformers/_C.so": library([80, 90, 100], [])})
    path = f"/whl/cu130/{CU130_XFORMERS}"
    routes[path] = (data, "application/octet-stream")
    sha = hashlib.sha256(data).hexdigest()
    html = f'<!DOCTYPE html><html><body><a href="{path}#sha256={sha}">{CU130_XFORMERS}</a>'
    routes["/whl/cu130/xformers/"] = ((html + "</body></html>").encode(), "text/html")
    return routes
