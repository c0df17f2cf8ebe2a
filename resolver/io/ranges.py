"""Random-access byte sources for a wheel: a local file, or HTTP range requests.

Every source counts the bytes it reads (``bytes_read``) and refuses to read past its ``budget``,
so a caller can promise "at most 16 MB for this wheel". An HTTP server that ignores ``Range``
(answers 200 with the whole body) is handled by streaming the body once into a temporary file —
the only way to read it at all — and the source says so in ``notes``; the whole file read also
yields its sha256. A server that sends fewer or more bytes than it announced, or a range that is
not the one asked for, is an error, never silently used.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from resolver.io import ReadError
from resolver.io.bounded import open_regular
from resolver.io.http import Client, discard, iter_body, local_path

if TYPE_CHECKING:
    import requests

CHUNK = 256 * 1024
DEFAULT_BUDGET = 64 * 1024 * 1024  # bytes one inspection may read unless told otherwise
_CONTENT_RANGE = re.compile(r"^bytes\s+([0-9]+)-([0-9]+)/([0-9]+|\*)$")

Progress = Callable[[int], None]  # called with the source's bytes_read so far


class BudgetError(ReadError):
    """Reading on would pass the read budget."""


class Source:
    """A wheel's bytes, read by offset. Subclasses implement ``_stream`` and set ``size``."""

    name: str
    size: int

    def __init__(self, budget: int | None, progress: Progress | None) -> None:
        self.budget = DEFAULT_BUDGET if budget is None else budget
        self.progress = progress
        self.bytes_read = 0
        self.notes: list[str] = []
        self.sha256: str | None = None  # known when the whole file was read (or given)

    # --- what subclasses provide ----------------------------------------------------------------
    def _stream(self, offset: int, length: int) -> Iterator[bytes]:
        raise NotImplementedError

    def close(self) -> None:
        """Release files and connections."""

    # --- reading ----------------------------------------------------------------------------------
    def _account(self, n: int) -> None:
        self.bytes_read += n
        if self.bytes_read > self.budget:
            raise BudgetError(
                f"{self.name}: read budget of {_mb(self.budget)} exceeded "
                f"({self.bytes_read} bytes read)"
            )
        if self.progress is not None:
            self.progress(self.bytes_read)

    def _check_span(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ReadError(
                f"{self.name}: truncated: bytes {offset}..{offset + length} lie past the end "
                f"of the file ({self.size} bytes)"
            )

    def stream(self, offset: int, length: int) -> Iterator[bytes]:
        """Exactly ``length`` bytes from ``offset``, in chunks (the budget counted as they come)."""
        self._check_span(offset, length)
        if length == 0:
            return
        if self.bytes_read + length > self.budget:
            raise BudgetError(
                f"{self.name}: reading {length} more bytes would pass the read budget of "
                f"{_mb(self.budget)} ({self.bytes_read} bytes read so far)"
            )
        got = 0
        for chunk in self._stream(offset, length):
            if got + len(chunk) > length:
                raise ReadError(f"{self.name}: the server sent more bytes than the range asked")
            got += len(chunk)
            self._account(len(chunk))
            yield chunk
        if got != length:
            raise ReadError(
                f"{self.name}: truncated answer: {got} of {length} bytes at offset {offset}"
            )

    def read(self, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes from ``offset``."""
        return b"".join(self.stream(offset, length))

    def tail(self, length: int) -> tuple[int, bytes]:
        """The last ``length`` bytes (fewer for a smaller file) and their offset."""
        length = min(length, self.size)
        return self.size - length, self.read(self.size - length, length)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileSource(Source):
    """A local file (or an open binary file object, for the streamed fallback)."""

    def __init__(
        self,
        path: Path | str,
        *,
        budget: int | None = None,
        progress: Progress | None = None,
        fh: IO[bytes] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(budget, progress)
        self.name = name or str(path)
        if fh is None:
            try:
                fh = open_regular(path)  # closed by close()
            except OSError as exc:
                raise ReadError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        self._fh = fh
        self._fh.seek(0, os.SEEK_END)
        self.size = self._fh.tell()

    def _stream(self, offset: int, length: int) -> Iterator[bytes]:
        self._fh.seek(offset)
        left = length
        while left:
            chunk = self._fh.read(min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk

    def close(self) -> None:
        self._fh.close()


class HttpSource(Source):
    """A file on an HTTP(S) server, read with ``Range`` requests through the one ``Client``.

    The first request asks for the file's tail (where a zip's directory lies) with a suffix
    range; its ``Content-Range`` gives the size. A 200 answer means the server ignores ranges:
    the body is then the whole file, streamed once into a temporary file (hashing it on the way,
    within the budget), and every later read is served from that file.
    """

    def __init__(
        self,
        url: str,
        *,
        client: Client | None = None,
        budget: int | None = None,
        progress: Progress | None = None,
        first_tail: int = 128 * 1024,
    ) -> None:
        super().__init__(budget, progress)
        self.url = url
        self.name = url.split("#", 1)[0]
        self._own_client = client is None
        self.client = client or Client()
        self._fallback: FileSource | None = None
        self._first_tail: tuple[int, bytes] | None = None
        self._open(first_tail)

    def _get(self, spec: str) -> tuple[requests.Response, tuple[int, int, int | None] | None]:
        """The answer to a range request, and its Content-Range (None for a whole-file 200)."""
        resp = self.client.open(self.name, {"Range": spec, "Accept-Encoding": "identity"})
        if resp.status_code == 200:
            return resp, None
        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", "").strip())
        start, end = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
        if not m or end < start:
            discard(resp)
            raise ReadError(f"{self.name}: a partial answer without a valid Content-Range")
        return resp, (start, end, None if m.group(3) == "*" else int(m.group(3)))

    def _open(self, first_tail: int) -> None:
        resp, span = self._get(f"bytes=-{first_tail}")
        if span is None:
            self._read_whole(resp)
            return
        start, end, total = span
        if total is None or end != total - 1:
            discard(resp)
            raise ReadError(f"{self.name}: the server's Content-Range does not end the file")
        self.size = total
        # the tail counts against the budget like any other read
        data = b"".join(self._checked(resp, start, end - start + 1))
        self._first_tail = (start, data)

    def _checked(self, resp: requests.Response, start: int, length: int) -> Iterator[bytes]:
        got = 0
        for chunk in iter_body(resp, self.name, CHUNK):
            got += len(chunk)
            if got > length:
                raise ReadError(f"{self.name}: the server sent more bytes than it announced")
            self._account(len(chunk))
            yield chunk
        if got != length:
            raise ReadError(
                f"{self.name}: truncated answer: {got} of {length} bytes at offset {start} "
                "(the server announced more than it sent)"
            )

    def _read_whole(self, resp: requests.Response) -> None:
        """The server ignored ``Range``: stream the whole body once into a temporary file."""
        declared = resp.headers.get("Content-Length")
        total = int(declared) if declared and declared.isascii() and declared.isdigit() else None
        if total is not None and total > self.budget - self.bytes_read:
            discard(resp)
            raise BudgetError(
                f"{self.name}: the server ignores range requests and the whole file "
                f"({_mb(total)}) is over the read budget of {_mb(self.budget)}"
            )
        self.notes.append("the server ignores range requests: the whole file was streamed once")
        digest = hashlib.sha256()
        tmp = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the fallback source
        try:
            got = 0
            for chunk in iter_body(resp, self.name, CHUNK):
                got += len(chunk)
                self._account(len(chunk))
                digest.update(chunk)
                tmp.write(chunk)
            if total is not None and got != total:
                raise ReadError(
                    f"{self.name}: truncated answer: {got} of {total} bytes (the server "
                    "announced more than it sent)"
                )
            tmp.flush()
        except BaseException:
            tmp.close()
            raise
        self.sha256 = digest.hexdigest()
        self._fallback = FileSource(self.name, fh=tmp, budget=None, name=self.name)
        self._fallback.budget = 1 << 62  # already counted here
        self.size = self._fallback.size

    # --- Source -----------------------------------------------------------------------------------
    def stream(self, offset: int, length: int) -> Iterator[bytes]:
        if self._fallback is not None:
            self._check_span(offset, length)
            yield from self._fallback.stream(offset, length)
            return
        if self._first_tail is not None:
            t_start, t_data = self._first_tail
            if offset >= t_start and offset + length <= t_start + len(t_data):
                self._check_span(offset, length)
                if length:
                    yield t_data[offset - t_start : offset - t_start + length]
                return
        yield from super().stream(offset, length)

    def _stream(self, offset: int, length: int) -> Iterator[bytes]:
        resp, span = self._get(f"bytes={offset}-{offset + length - 1}")
        if span is None:
            discard(resp)
            raise ReadError(f"{self.name}: the server stopped answering range requests")
        start, end, total = span
        if total is not None and total != self.size:
            discard(resp)
            raise ReadError(
                f"{self.name}: the server's Content-Range gives the file's size as {total}, "
                f"an earlier answer as {self.size}: refused (the file changed, or the server lies)"
            )
        if start != offset or end != offset + length - 1:
            discard(resp)
            raise ReadError(
                f"{self.name}: asked for bytes {offset}-{offset + length - 1}, "
                f"the server sent {start}-{end}"
            )
        yield from iter_body(resp, self.name, CHUNK)

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()
        if self._own_client:
            self.client.close()


def open_source(
    where: str,
    *,
    client: Client | None = None,
    budget: int | None = None,
    progress: Progress | None = None,
    first_tail: int = 128 * 1024,
) -> Source:
    """A source for a URL (http/https, through ``client`` or one of its own; ``file:``) or a
    local path."""
    if re.match(r"^https?://", where, re.IGNORECASE):
        return HttpSource(
            where, client=client, budget=budget, progress=progress, first_tail=first_tail
        )
    if where.lower().startswith("file:"):
        where = local_path(where.split("#", 1)[0])
    elif "://" in where:
        raise ReadError(f"{where}: only http(s) URLs and local files can be read")
    return FileSource(where, budget=budget, progress=progress)


def url_sha256(url: str) -> str | None:
    """The sha256 a simple index puts in a link's fragment (``#sha256=<hex>``), if any."""
    m = re.search(r"#sha256=([0-9a-fA-F]{64})$", url)
    return m.group(1).lower() if m else None


def sha256_file(path: Path | str) -> str:
    """The sha256 of a local file (read in chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"
