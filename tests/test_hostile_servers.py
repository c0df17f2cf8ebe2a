"""Nothing a server does can hang or steer gpuresolve: slow, lying and redirecting servers.

Every server here is a real HTTP server (the standard library's) on 127.0.0.1, started and
stopped by the test that uses it; an answer that trickles also stops by itself after
``TRICKLE_CAP_S``, so no thread outlives a failing test for long. The measured bounds are the
request deadline (`--timeout`), the sizes a server or an archive claims, and the schemes a
page's links may lead to.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import struct
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli
from local_server import local_server
from pytorch_index import build_wheel, fixture_routes, metadata_text, serve

from resolver.io import ReadError
from resolver.io.http import Client, FetchError
from resolver.io.ranges import HttpSource
from resolver.io.zip import MAX_STRUCTURE
from resolver.wheels.simple import parse_page

TRICKLE_CAP_S = 30.0  # a trickling answer ends by itself after this, whatever the client does
GIB = 1024**3
Handler = Callable[[BaseHTTPRequestHandler, threading.Event], None]


@contextmanager
def server(handle: Handler) -> Iterator[str]:
    """A local HTTP/1.1 server whose GET answers come from ``handle``; its base URL."""
    stop = threading.Event()

    class Answer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            # the client hanging up is what it should do
            with contextlib.suppress(BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                handle(self, stop)
            self.close_connection = True

    with local_server(Answer) as port:
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop.set()  # before the server's shutdown: a trickling answer stops at once


def trickle(
    h: BaseHTTPRequestHandler,
    stop: threading.Event,
    status: int = 200,
    headers: dict[str, str] | None = None,
    length: int = 10_000_000,
) -> None:
    """Announce ``length`` bytes, then send one byte every 0.1 s (until stopped or capped)."""
    h.send_response(status)
    h.send_header("Content-Length", str(length))
    for key, value in (headers or {}).items():
        h.send_header(key, value)
    h.end_headers()
    end = time.monotonic() + TRICKLE_CAP_S
    while not stop.is_set() and time.monotonic() < end:
        h.wfile.write(b"<")
        h.wfile.flush()
        stop.wait(0.1)


def ranged(h: BaseHTTPRequestHandler, size: int, tail: bytes) -> tuple[int, int] | None:
    """The span a Range header asks of a ``size``-byte file, or None when there is none."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", (h.headers.get("Range") or "").strip())
    if not m:
        return None
    if not m[1]:
        return max(0, size - int(m[2])), size - 1
    return int(m[1]), min(int(m[2] or size - 1), size - 1)


def send_span(
    h: BaseHTTPRequestHandler, start: int, end: int, total: int, body: bytes, ctype: str = "x"
) -> None:
    h.send_response(206)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Content-Range", f"bytes {start}-{end}/{total}")
    h.end_headers()
    h.wfile.write(body)


# --- a deadline for the whole request -----------------------------------------------------------


def trickled_headers(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    """The status line and headers, one byte every 0.1 s (until stopped or capped)."""
    end = time.monotonic() + TRICKLE_CAP_S
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 10_000:
        if stop.is_set() or time.monotonic() > end:
            return
        h.wfile.write(bytes([byte]))
        stop.wait(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("handle", [trickle, trickled_headers], ids=["body", "headers"])
def test_a_trickling_answer_ends_at_the_deadline(handle: Handler) -> None:
    """One byte every 0.1 s never lets a socket read time out; the deadline still holds, for
    the body and for the status line and headers alike, and a request out of time is not
    tried again."""
    with server(handle) as url:
        client = Client(timeout=1.5, tries=3, sleep=lambda s: None)
        start = time.monotonic()
        with pytest.raises(FetchError, match=r"no whole answer within 1\.5 s"):
            client.get(url + "/whl/cu126/torch/")
        assert time.monotonic() - start < 4.0
        assert client.requests == 1


def _wheel() -> bytes:
    """A torch-shaped wheel whose torch/version.py lies 400 kB before the directory, so reading
    it takes a range request of its own after the tail."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("torch/version.py", "__version__ = '2.16.0+cu126'\n")
        zf.writestr("torch/lib/pad.bin", random.Random(1).randbytes(400_000))
        meta = metadata_text("torch", "2.16.0+cu126", [])
        zf.writestr("torch-2.16.0+cu126.dist-info/METADATA", meta)
        zf.writestr("torch-2.16.0+cu126.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("torch-2.16.0+cu126.dist-info/RECORD", "")
    return buf.getvalue()


@pytest.mark.slow
def test_a_trickling_range_answer_ends_at_the_deadline() -> None:
    """The range reader: the tail comes at once, the next span trickles."""
    blob = _wheel()

    def handle(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        span = ranged(h, len(blob), blob)
        assert span is not None
        start, end = span
        if end == len(blob) - 1:
            send_span(h, start, end, len(blob), blob[start : end + 1])
        else:
            headers = {"Content-Range": f"bytes {start}-{end}/{len(blob)}"}
            trickle(h, stop, 206, headers, end - start + 1)

    with server(handle) as url:
        client = Client(timeout=1.5, sleep=lambda s: None)
        with HttpSource(url + "/t.whl", client=client, first_tail=1000) as src:
            begin = time.monotonic()
            with pytest.raises(ReadError, match=r"no whole answer within 1\.5 s"):
                src.read(0, 5000)
            assert time.monotonic() - begin < 4.0


@pytest.mark.slow
def test_db_inspect_wheel_keeps_its_timeout_against_a_trickling_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    blob = _wheel()

    def handle(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        span = ranged(h, len(blob), blob)
        if span is not None and span[1] == len(blob) - 1:
            send_span(h, span[0], span[1], len(blob), blob[span[0] : span[1] + 1])
        elif span is not None:
            headers = {"Content-Range": f"bytes {span[0]}-{span[1]}/{len(blob)}"}
            trickle(h, stop, 206, headers, span[1] - span[0] + 1)
        else:
            trickle(h, stop)

    with server(handle) as url:
        start = time.monotonic()
        code, _out, err = run_cli(
            capsys, "db", "inspect-wheel", "--timeout", "2", url + "/torch-2.16.0.whl"
        )
        took = time.monotonic() - start
    assert code == 2, err
    assert "no whole answer within 2 s" in err and "Traceback" not in err
    assert took < 8.0


@pytest.mark.slow
@pytest.mark.usefixtures("dbupdate_hermetic")
def test_db_update_keeps_its_timeout_against_a_trickling_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with server(trickle) as url:
        start = time.monotonic()
        code, out, err = run_cli(
            capsys, "db", "update", "--dry-run", "--timeout", "1", "--pytorch-index", url + "/whl"
        )
        took = time.monotonic() - start
    assert code == 1, out + err  # the index cannot be read: documented as exit 1
    assert "no whole answer within 1 s" in err and "Traceback" not in err
    assert took < 10.0


# --- claimed sizes -----------------------------------------------------------------------------


def zip64_tail(file_size: int, claimed_directory: int) -> bytes:
    """The last 98 bytes of a ``file_size``-byte zip whose ZIP64 end record claims a central
    directory of ``claimed_directory`` bytes, ending just before the records."""
    records_at = file_size - 98
    offset = records_at - claimed_directory
    zip64_end = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, claimed_directory, offset
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, records_at, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    assert len(zip64_end + locator + end) == 98
    return zip64_end + locator + end


def test_a_zip64_record_claiming_a_40_gb_directory_is_refused_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sparse 40 GB file (no disk used) whose end record claims a 35 GB central directory:
    refused as input (exit 2), never a MemoryError (exit 70)."""
    size = 40 * GIB
    wheel = tmp_path / "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with wheel.open("wb") as fh:
        fh.truncate(size - 98)
        fh.seek(size - 98)
        fh.write(zip64_tail(size, 35 * GIB))
    code, _out, err = run_cli(capsys, "db", "inspect-wheel", str(wheel))
    assert code == 2, err
    assert f"over the {MAX_STRUCTURE}-byte bound" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_server_claiming_a_100_gb_file_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    """The server says the file is 100 GB (Content-Range) and its zip claims a 38 GB directory;
    only the tail is ever asked for."""
    size = 100 * GIB
    tail = zip64_tail(size, 38 * GIB)
    asked: list[str] = []

    def handle(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        asked.append(h.headers.get("Range") or "")
        span = ranged(h, size, tail)
        assert span is not None and span[1] - span[0] < 1024 * 1024
        start, end = span
        body = bytes(max(0, (size - len(tail)) - start)) + tail
        send_span(h, start, end, size, body[-(end - start + 1) :])

    with server(handle) as url:
        code, _out, err = run_cli(capsys, "db", "inspect-wheel", url + "/torch-2.16.0.whl")
    assert code == 2, err
    assert f"over the {MAX_STRUCTURE}-byte bound" in err and "Traceback" not in err
    assert all(r.startswith("bytes=") for r in asked) and len(asked) <= 3


def test_a_content_range_total_that_changes_is_refused() -> None:
    blob = _wheel()
    answers: list[int] = []

    def handle(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        span = ranged(h, len(blob), blob)
        assert span is not None
        start, end = span
        total = len(blob) + (1000 if answers else 0)  # another size from the second answer on
        answers.append(total)
        send_span(h, start, end, total, blob[start : end + 1])

    with server(handle) as url:
        client = Client(timeout=5, sleep=lambda s: None)
        src = HttpSource(url + "/t.whl", client=client, first_tail=1000)
        with src, pytest.raises(ReadError, match="Content-Range gives the file's size"):
            src.read(0, 100)
    assert len(answers) == 2


# --- links stay on the web ---------------------------------------------------------------------


def test_a_remote_page_links_only_http_and_https() -> None:
    page = (
        b"<html><body>"
        b'<a href="file:///etc/torch-2.99.0+cu126-cp312-cp312-linux_x86_64.whl">a</a>'
        b'<a href="ftp://h/torch-2.98.0-cp312-cp312-linux_x86_64.whl">b</a>'
        b'<a href="/whl/cu126/torch-2.12.0%2Bcu126-cp312-cp312-linux_x86_64.whl">c</a>'
        b'<a href="https://cdn.example/torch-2.13.0-cp312-cp312-linux_x86_64.whl">d</a>'
        b"</body></html>"
    )
    for base in ("http://127.0.0.1:1/whl/cu126/torch/", "https://mirror.example/whl/t/"):
        names = [link.filename for link in parse_page(page, "text/html", base)]
        assert names == [
            "torch-2.12.0+cu126-cp312-cp312-linux_x86_64.whl",
            "torch-2.13.0-cp312-cp312-linux_x86_64.whl",
        ]
    pep691 = (
        b'{"meta": {"api-version": "1.0"}, "name": "torch", "files": ['
        b'{"filename": "a.whl", "url": "file:///etc/a.whl", "hashes": {}},'
        b'{"filename": "b.whl", "url": "b.whl", "hashes": {}}]}'
    )
    base = "http://127.0.0.1:1/whl/cu126/torch/"
    links = parse_page(pep691, "application/vnd.pypi.simple.v1+json", base)
    assert [link.url for link in links] == [base + "b.whl"]
    # a local mirror (file:) may link its own files
    local = parse_page(page, "text/html", "file:///srv/mirror/whl/cu126/torch/")
    assert any(link.url.startswith("file:///etc/") for link in local)


@pytest.mark.usefixtures("dbupdate_hermetic")
def test_db_update_never_reads_a_local_file_an_http_page_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An http index page linking a ``file://`` wheel (with a metadata file beside it) cannot
    make `db update` read it or record what it says."""
    name = "torch-2.99.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
    meta = metadata_text("torch", "2.99.0+cu126", ['nvidia-cudnn-cu12==9.99.0.1; "linux"'])
    (tmp_path / name).write_bytes(build_wheel("torch", "2.99.0+cu126", meta))
    (tmp_path / f"{name}.metadata").write_bytes(meta)
    routes: dict[str, Any] = fixture_routes()
    page, ctype = routes["/whl/cu126/torch/"]
    link = f'<a href="file://{tmp_path}/{name}" data-dist-info-metadata="true">{name}</a><br/>'
    routes["/whl/cu126/torch/"] = (page.replace(b"</body>", link.encode() + b"</body>"), ctype)
    with serve(routes) as srv:
        code, out, err = run_cli(
            capsys, "db", "update", "--dry-run", "--no-pypi", "--pytorch-index", srv.url + "/whl"
        )
    assert code == 0, err
    assert "2.99" not in out + err
