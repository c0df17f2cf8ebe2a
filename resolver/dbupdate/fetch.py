"""HTTP for the update: one session, timeouts, a few retries with backoff, bounded bodies.

Every failure ends in ``FetchError`` naming the URL and the cause, so the command can print one
line and keep the old database. Retries are bounded (``TRIES`` tries, sleeps of ``BACKOFF``,
``2*BACKOFF``, ...) and the sleep function is injectable, so tests never wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resolver import __version__
from resolver.core.errors import FetchError

if TYPE_CHECKING:
    import requests

TRIES = 3
BACKOFF = 0.5  # seconds before the second try; doubled for each further one
TIMEOUT = 20.0  # seconds to connect, and between bytes of an answer
DEADLINE = 120.0  # seconds for a whole answer (a server trickling bytes cannot hold us)
MAX_BODY = 64 * 1024 * 1024
RANGE_SLACK = 1024 * 1024  # a range answer may be this much longer (a small file sent whole)
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    body: bytes
    content_type: str


class Fetcher:
    """Reads URLs for the update; counts its requests (tests and the summary use the count)."""

    def __init__(
        self,
        *,
        timeout: float | None = None,
        tries: int | None = None,
        backoff: float | None = None,
        sleep: Callable[[float], None] | None = None,
        session: requests.Session | None = None,
    ) -> None:
        import requests

        self.timeout = TIMEOUT if timeout is None else timeout
        self.tries = max(1, TRIES if tries is None else tries)
        self.backoff = BACKOFF if backoff is None else backoff
        self.sleep = sleep or time.sleep
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = f"gpuresolve/{__version__} (db update)"
        self.requests = 0

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public --------------------------------------------------------------------------------
    def get(self, url: str, accept: str | None = None) -> Page:
        """The body of a 200 answer; FetchError otherwise (status 404 included)."""
        headers = {"Accept": accept} if accept else {}
        status, body, final_url, ctype, _headers = self._request(url, headers, MAX_BODY)
        if status != 200:
            raise FetchError(url, f"HTTP {status}", status)
        return Page(final_url, body, ctype)

    def get_optional(self, url: str, accept: str | None = None) -> Page | None:
        """Like ``get``, but None for 404/410 (a page the index does not have)."""
        try:
            return self.get(url, accept)
        except FetchError as exc:
            if exc.status in (404, 410):
                return None
            raise

    def read_range(self, url: str, start: int | None, end: int) -> tuple[bytes, int]:
        """Bytes [start, end) of a file, or its last ``end`` bytes when ``start`` is None.

        Returns (data, total size). A server that ignores ranges may answer the whole file,
        which is accepted only when small (then the data is the whole file).
        """
        spec = f"bytes=-{end}" if start is None else f"bytes={start}-{end - 1}"
        # A server that ignores ranges answers the whole file: give up early on a big one.
        limit = (end if start is None else end - start) + RANGE_SLACK
        status, body, _u, _c, headers = self._request(url, {"Range": spec}, limit)
        if status == 206:
            total = _content_range_total(headers.get("Content-Range", ""))
            if total is None:
                raise FetchError(url, "206 answer without a usable Content-Range")
            return body, total
        if status == 200:  # the whole file (small: _request bounds it)
            return (body if start is None else body[start:end]), len(body)
        if status == 416 and start is None:
            raise FetchError(url, "empty file", status)
        raise FetchError(url, f"HTTP {status} to a range request", status)

    # --- the one place that talks HTTP ---------------------------------------------------------
    def _request(
        self, url: str, headers: dict[str, str], limit: int
    ) -> tuple[int, bytes, str, str, dict[str, str]]:
        if url.lower().startswith("file:"):
            return _read_local(url, headers, limit)
        import requests

        last = "no answer"
        for attempt in range(self.tries):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests += 1
            try:
                with self.session.get(
                    url, headers=headers, timeout=self.timeout, stream=True, allow_redirects=True
                ) as resp:
                    if resp.status_code in RETRY_STATUS:
                        last = f"HTTP {resp.status_code}"
                        continue
                    body = _read_body(resp, url, limit)
                    return (
                        resp.status_code,
                        body,
                        resp.url,
                        resp.headers.get("Content-Type", ""),
                        dict(resp.headers),
                    )
            except requests.Timeout:
                last = f"timed out after {self.timeout:g} s"
            except requests.ConnectionError as exc:
                last = f"cannot connect ({_root_cause(exc)})"
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {_root_cause(exc)}"
        raise FetchError(url, f"{last} ({self.tries} tries)")


def _read_local(
    url: str, headers: dict[str, str], limit: int
) -> tuple[int, bytes, str, str, dict[str, str]]:
    """A ``file:`` URL of a local mirror, answered as an HTTP server would (pip's rule: a
    directory stands for its ``index.html``); a ``Range`` header gets a 206 slice."""
    import os
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    path = url2pathname(urlsplit(url).path)
    if os.path.isdir(path):
        path = os.path.join(path, "index.html")
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            rng = _parse_range(headers.get("Range", ""), size)
            if rng is None:
                if size > limit:
                    raise FetchError(url, f"file larger than {limit} bytes")
                body = fh.read(limit + 1)
                status, extra = 200, {}
            else:
                start, end = rng
                fh.seek(start)
                body = fh.read(min(end - start, limit))
                status, extra = 206, {"Content-Range": f"bytes {start}-{end - 1}/{size}"}
    except (FileNotFoundError, NotADirectoryError):
        return 404, b"", url, "", {}
    except OSError as exc:
        raise FetchError(url, f"cannot read: {exc.strerror or exc}") from None
    ctype = "text/html" if path.endswith((".html", ".htm")) else "application/octet-stream"
    if path.endswith(".json"):
        ctype = "application/json"
    return status, body, url, ctype, {"Content-Type": ctype, **extra}


def _parse_range(spec: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b`` or ``bytes=-n`` as [start, end) within a file of ``size`` bytes."""
    if not spec.startswith("bytes="):
        return None
    first, _, last = spec[len("bytes=") :].partition("-")
    if not first and last.isdigit():
        return max(0, size - int(last)), size
    if first.isdigit():
        end = int(last) + 1 if last.isdigit() else size
        return int(first), min(end, size)
    return None


def _read_body(resp: Any, url: str, limit: int) -> bytes:
    started = time.monotonic()
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_content(chunk_size=65536):
        size += len(chunk)
        if size > limit:
            raise FetchError(url, f"answer larger than {limit} bytes (ranges not honoured?)")
        if time.monotonic() - started > DEADLINE:
            raise FetchError(url, f"answer took longer than {DEADLINE:g} s")
        chunks.append(chunk)
    return b"".join(chunks)


def _content_range_total(value: str) -> int | None:
    """ "bytes 100-199/2000" → 2000."""
    _, _, total = value.rpartition("/")
    return int(total) if total.strip().isdigit() else None


def _root_cause(exc: BaseException) -> str:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    text = str(seen) or type(seen).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text.split("] ", 1)[-1][:200]
