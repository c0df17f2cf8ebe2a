"""Helpers for the `db update` tests: a local index server on 127.0.0.1, real wheels (zipfile).

The server serves ``tests/fixtures/pytorch_index`` (recorded-shape PyTorch index pages, PEP 658
``.metadata`` files and a PEP 691 JSON project page) plus files the tests add (wheels), honours
HTTP range requests, and can misbehave on purpose: answer slowly, with errors, or with garbage.
It runs in a daemon thread and is stopped by the fixture that started it; a slow answer waits
on an event that the shutdown sets, so nothing outlives the test.
"""

from __future__ import annotations

import io
import os
import random
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

FIXTURE = Path(__file__).parent / "fixtures" / "pytorch_index"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
RANGE_WHEEL = "/whl/cu136/torch-2.16.0+cu136-cp313-cp313-manylinux_2_28_x86_64.whl"


@dataclass
class Behaviour:
    """How the server answers: per path, the first matching rule wins."""

    mode: str = "ok"  # ok | slow | error | garbage | flaky | norange (ignores Range headers)
    only: str | None = None  # a regex: misbehave only on matching paths
    delay: float = 2.0  # seconds, for "slow" (cut short when the server stops)
    flaky_failures: int = 2  # "flaky": this many 503 answers per path, then the file


@dataclass
class IndexServer:
    routes: dict[str, tuple[bytes, str]]
    behaviour: Behaviour = field(default_factory=Behaviour)
    log: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    port: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _hits: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [p for p, _ in self.log]


def load_routes(root: Path = FIXTURE) -> dict[str, tuple[bytes, str]]:
    """URL path -> (body, content type) for every file of a fixture tree."""
    routes: dict[str, tuple[bytes, str]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = "/" + path.relative_to(root).as_posix()
        if path.name == "index.html":
            routes[rel[: -len("index.html")]] = (path.read_bytes(), "text/html")
        elif path.name == "index.json":
            routes[rel[: -len("index.json")]] = (path.read_bytes(), JSON_TYPE)
        else:
            routes[rel] = (path.read_bytes(), "application/octet-stream")
    return routes


def _handler(server: IndexServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            server.log.append((path, self.headers.get("Range")))
            rule = server.behaviour
            applies = rule.only is None or re.search(rule.only, path) is not None
            mode = rule.mode if applies else "ok"
            if mode == "slow":
                server.stop.wait(rule.delay)
                mode = "ok"
            if mode == "flaky":
                count = server._hits.get(path, 0)
                server._hits[path] = count + 1
                mode = "error" if count < rule.flaky_failures else "ok"
            if mode == "error":
                self._send(503 if rule.mode == "flaky" else 500, b"server error", "text/plain")
                return
            if mode == "garbage":
                junk = random.Random(path).randbytes(4096)
                self._send(200, junk, "text/html")
                return
            if path not in server.routes:
                self._send(404, b"not found", "text/plain")
                return
            body, ctype = server.routes[path]
            spec = self.headers.get("Range")
            if spec and mode != "norange":
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", spec.strip())
                if m and (m[1] or m[2]):
                    size = len(body)
                    if m[1]:
                        start, end = int(m[1]), min(int(m[2] or size - 1), size - 1)
                    else:
                        start, end = max(0, size - int(m[2])), size - 1
                    self._send(
                        206,
                        body[start : end + 1],
                        ctype,
                        {"Content-Range": f"bytes {start}-{end}/{size}"},
                    )
                    return
            self._send(200, body, ctype)

        def do_HEAD(self) -> None:  # uv asks for a wheel's size before range-reading it
            path = unquote(urlsplit(self.path).path)
            if path not in server.routes:
                self._send(404, b"not found", "text/plain", head=True)
                return
            body, ctype = server.routes[path]
            self._send(200, body, ctype, head=True)

        def _send(
            self,
            status: int,
            body: bytes,
            ctype: str,
            extra: dict[str, str] | None = None,
            head: bool = False,
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

    return Handler


@contextmanager
def serve(
    routes: dict[str, tuple[bytes, str]], behaviour: Behaviour | None = None
) -> Iterator[IndexServer]:
    """Run an index server on 127.0.0.1 for the duration of the block."""
    state = IndexServer(routes=routes, behaviour=behaviour or Behaviour())
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    httpd.block_on_close = False
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def metadata_text(name: str, version: str, requires: list[str]) -> bytes:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\n").encode()


def build_wheel(
    name: str,
    version: str,
    metadata: bytes,
    *,
    pad: int = 0,
    metadata_first: bool = False,
    compression: int = zipfile.ZIP_DEFLATED,
    extra_dist_info: str | None = None,
) -> bytes:
    """A real wheel (zip) whose dist-info holds ``metadata``; ``pad`` random bytes of payload.

    ``metadata_first`` puts METADATA before the payload, far from the end of the file, so a
    reader must range-read it separately from the central directory.
    """
    dist_info = f"{name}-{version}.dist-info"
    buf = io.BytesIO()
    payload = random.Random(version).randbytes(pad) if pad else b""
    with zipfile.ZipFile(buf, "w") as zf:

        def add_meta() -> None:
            zf.writestr(f"{dist_info}/METADATA", metadata, compress_type=compression)

        if metadata_first:
            add_meta()
        zf.writestr(f"{name}/__init__.py", b"__version__ = '" + version.encode() + b"'\n")
        if payload:
            zf.writestr(f"{name}/lib/payload.bin", payload, compress_type=zipfile.ZIP_STORED)
        if not metadata_first:
            add_meta()
        zf.writestr(f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        if extra_dist_info:
            zf.writestr(f"{extra_dist_info}/METADATA", metadata_text("other", "1.0", []))
        zf.writestr(f"{dist_info}/RECORD", b"")
    return buf.getvalue()


def cu136_wheel() -> bytes:
    """The cu136 wheel the fixture index lists without PEP 658 metadata (range-read)."""
    requires = [
        "filelock",
        'nvidia-cuda-runtime==13.6.20; platform_system == "Linux"',
        'nvidia-cudnn-cu13==9.17.0.29; platform_system == "Linux"',
        'nvidia-nccl-cu13==2.29.1; platform_system == "Linux"',
    ]
    meta = metadata_text("torch", "2.16.0+cu136", requires)
    return build_wheel("torch", "2.16.0+cu136", meta, pad=200_000, metadata_first=True)


def fixture_routes() -> dict[str, tuple[bytes, str]]:
    routes = with_wheels(load_routes())
    routes[RANGE_WHEEL] = (cu136_wheel(), "application/octet-stream")
    return routes


_LINK = re.compile(r'href="([^"#]+\.whl)#sha256=([0-9a-f]{64})"')


def with_wheels(routes: dict[str, tuple[bytes, str]]) -> dict[str, tuple[bytes, str]]:
    """The routes plus, as a real index has, the wheel itself for every recorded ``.metadata``:
    a real wheel (zip) holding that metadata, and the pages' ``#sha256=`` of its links changed to
    the served file's, so an installer that downloads the wheel (pip before 25.3 does, even for
    ``--dry-run --report``) gets a file that matches its link. The recorded pages name the
    real wheels' hashes, which no fixture can match."""
    import hashlib

    out = dict(routes)
    new_hash: dict[str, str] = {}
    for path, (body, _ctype) in routes.items():
        if not path.endswith(".whl.metadata"):
            continue
        wheel = path.removesuffix(".metadata")
        name, version = wheel.rsplit("/", 1)[1].split("-")[:2]
        data = build_wheel(name, version, body)
        out[wheel] = (data, "application/octet-stream")
        new_hash[wheel] = hashlib.sha256(data).hexdigest()
    pages = {p: b.decode("utf-8") for p, (b, c) in routes.items() if c in ("text/html", JSON_TYPE)}
    swap = {  # recorded hash -> the served wheel's (the JSON pages name the same hashes)
        old: new_hash[unquote(urlsplit(href).path)]
        for text in pages.values()
        for href, old in _LINK.findall(text)
        if unquote(urlsplit(href).path) in new_hash
    }
    for path, text in pages.items():
        for old, new in swap.items():
            text = text.replace(old, new)
        out[path] = (text.encode("utf-8"), routes[path][1])
    return out


def closed_port() -> int:
    """A local port nothing listens on (for the offline case)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under a directory, for 'nothing changed' assertions."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def siblings(directory: Path) -> list[str]:
    """What lies next to a directory (temporary directories must not be left there)."""
    return sorted(os.listdir(directory.parent))
