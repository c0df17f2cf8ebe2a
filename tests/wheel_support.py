"""Helpers for the wheel-reader tests: torch-shaped wheels, and a misbehaving range server.

Wheels are built with ``zipfile`` (and, for zip64, by hand: zipfile writes a zip64 end record
only past 65,535 entries or 4 GiB). The arch library member holds a region recorded from a
real wheel (``fixtures/wheels/real_wheels.json``) inside filler bytes, so the reader meets the
real layout: a NUL-terminated arch string, sometimes right after an unterminated literal.
"""

from __future__ import annotations

import io
import json
import random
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from local_server import local_server

REAL = Path(__file__).parent / "fixtures" / "wheels" / "real_wheels.json"


def real_wheels() -> dict[str, dict[str, Any]]:
    """The recorded bytes of real wheels, by file name."""
    doc = json.loads(REAL.read_text(encoding="utf-8"))
    return {e["file"]: e for e in doc["wheels"]}


def version_py(version: str, cuda: str | None, git: str = "0" * 40) -> str:
    """A torch/version.py in the shape of 2.8's (annotated assignments)."""
    cuda_lit = repr(cuda) if cuda is not None else "None"
    return (
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
        f"__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda_lit}\n"
        f"git_version = '{git}'\nhip: Optional[str] = None\nxpu: Optional[str] = None\n"
    )


def library(region: bytes, *, filler: int = 300_000, seed: int = 1, windows: bool = False) -> bytes:
    """A libtorch_python.so- (or .dll-) shaped blob: a header, filler, ``region``, filler."""
    rng = random.Random(seed)
    head = b"MZ\x90\x00" + b"\x00" * 60 if windows else b"\x7fELF\x02\x01\x01" + b"\x00" * 57
    # text-like filler that compresses (as .rodata does), with a few arch-like decoys that a
    # reader must not take: they are not NUL-terminated token runs of their own.
    words = [b"cudaGetDevice", b"invalid argument", b"/pytorch/torch/csrc", b"\x00\x00\x00"]
    decoys = b"kernel_sm_90a_tile\x01sm_80x\x00arch=compute_90,code=sm_90;\x02"
    body = bytearray(decoys)
    while len(body) < filler:
        body += rng.choice(words) + bytes([rng.randrange(256)])
    half = len(body) // 2
    return head + bytes(body[:half]) + region + bytes(body[half:])


def metadata(version: str, requires: list[str]) -> bytes:
    lines = ["Metadata-Version: 2.1", "Name: torch", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\nA long description.\n").encode()


def torch_wheel(
    version: str,
    cuda: str | None,
    region: bytes | None,
    *,
    windows: bool = False,
    requires: list[str] | None = None,
    pad: int = 0,
    version_text: str | None = None,
) -> bytes:
    """A torch wheel: version.py, METADATA, the arch library (when ``region``), ``pad`` bytes."""
    public = version.split("+")[0]
    dist = f"torch-{public}.dist-info"
    lib_name = "torch/lib/torch_python.dll" if windows else "torch/lib/libtorch_python.so"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/__init__.py", b"# not run\nraise SystemExit('never imported')\n")
        if pad:
            zf.writestr("torch/lib/libtorch_cuda.so", random.Random(7).randbytes(pad))
        if region is not None:
            zf.writestr(lib_name, library(region, windows=windows))
        zf.writestr("torch/version.py", version_text or version_py(version, cuda))
        zf.writestr(f"{dist}/METADATA", metadata(public, requires or []))
        zf.writestr(f"{dist}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        zf.writestr(f"{dist}/RECORD", b"")
    return buf.getvalue()


def zip64_wheel(members: dict[str, bytes]) -> bytes:
    """A zip in the zip64 form throughout (0xFFFFFFFF fields, zip64 extras, end record, locator).

    Written by hand after PKWARE's APPNOTE (4.3.14-4.3.16, 4.5.3) because zipfile only writes
    the zip64 end record for archives past its 32-bit limits.
    """
    out = bytearray()
    central = bytearray()
    for name, data in members.items():
        raw = name.encode()
        comp = zlib.compressobj(9, zlib.DEFLATED, -15)
        cdata = comp.compress(data) + comp.flush()
        crc = zlib.crc32(data)
        offset = len(out)
        local_extra = struct.pack("<HHQQ", 0x0001, 16, len(data), len(cdata))
        out += struct.pack(
            "<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 8, 0, 0, crc,
            0xFFFFFFFF, 0xFFFFFFFF, len(raw), len(local_extra),
        )  # fmt: skip
        out += raw + local_extra + cdata
        cd_extra = struct.pack("<HHQQQ", 0x0001, 24, len(data), len(cdata), offset)
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 8, 0, 0, crc,
            0xFFFFFFFF, 0xFFFFFFFF, len(raw), len(cd_extra), 0, 0, 0, 0, 0xFFFFFFFF,
        )  # fmt: skip
        central += raw + cd_extra
    cd_offset = len(out)
    out += central
    z64_offset = len(out)
    n = len(members)
    out += struct.pack(
        "<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(central), cd_offset
    )
    out += struct.pack("<4sIQI", b"PK\x06\x07", 0, z64_offset, 1)
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(out)


@dataclass
class WheelServer:
    """Files served on 127.0.0.1: ``mode`` says how Range requests are answered."""

    files: dict[str, bytes]
    mode: str = "range"  # range | norange | lie (announces more than it sends) | error
    port: int = 0
    log: list[tuple[str, str | None]] = field(default_factory=list)
    sent: int = 0

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


def _handler(state: WheelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            name = unquote(urlsplit(self.path).path).lstrip("/")
            spec = self.headers.get("Range")
            state.log.append((name, spec))
            if state.mode == "error":
                self._send(500, b"upstream broke", {})
                return
            body = state.files.get(name)
            if body is None:
                self._send(404, b"no such file", {})
                return
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", (spec or "").strip())
            if m is None or state.mode == "norange":
                self._send(200, body, {})
                return
            size = len(body)
            if m[1]:
                start, end = int(m[1]), min(int(m[2] or size - 1), size - 1)
            else:
                start, end = max(0, size - int(m[2])), size - 1
            self._send(206, body[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{size}"})

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            length = len(body)
            if state.mode == "lie" and status in (200, 206):
                length += 4096  # announce more than is sent, then close
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(length))
                self.send_header("Content-Type", "application/octet-stream")
                for key, value in headers.items():
                    self.send_header(key, value)
                if state.mode == "lie":
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                state.sent += len(body)
                if state.mode == "lie":
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@contextmanager
def serve_wheels(files: dict[str, bytes], mode: str = "range") -> Iterator[WheelServer]:
    state = WheelServer(files=files, mode=mode)
    with local_server(_handler(state)) as port:
        state.port = port
        yield state
