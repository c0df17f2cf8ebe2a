"""The one HTTP client: a session, one User-Agent, timeouts, bounded retries, bounded bodies.

Every failure ends in ``FetchError`` naming the URL and the cause (one line, exit 2). Retries
are bounded (``TRIES`` tries, sleeps of ``BACKOFF``, ``2*BACKOFF``, ...; the sleep function is
injectable, so tests never wait) and cover refused connections, timeouts and the statuses in
``RETRY_STATUS``. ``file:`` URLs of a local mirror are answered as a server would. Range reads
of big files go through ``resolver.io.ranges.HttpSource``, which streams ``open`` answers.

Every request has a deadline for the whole of it (``timeout``, the commands' ``--timeout``):
connecting, the answer and every retry. A per-read socket timeout cannot give that (a server
that sends one byte a second never lets a read time out), so a watchdog timer shuts the answer's
socket down when the deadline passes, however the bytes come; the read then fails at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from resolver import __version__
from resolver.core import secrets
from resolver.core.errors import unsafe_char
from resolver.io import ReadError, credentials
from resolver.io.bounded import open_regular

if TYPE_CHECKING:
    import requests

TRIES = 3
BACKOFF = 0.5  # seconds before the second try; doubled for each further one
TIMEOUT = 20.0  # seconds for a whole request (connect, answer, retries): `--timeout`'s default
MAX_BODY = 64 * 1024 * 1024  # bytes of one page or metadata file
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
USER_AGENT = f"gpuresolve/{__version__}"
_T = TypeVar("_T")


class FetchError(ReadError):
    """A URL could not be read (after the retries, where retrying made sense)."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        url, reason = secrets.redact(url), secrets.redact(reason)  # a login is never shown
        super().__init__(f"{url}: {reason}")
        self.url, self.reason, self.status = url, reason, status


class Deadline:
    """The end of one whole request. A timer started with it shuts down every socket the
    request opened (``track``) when it passes, so a read blocked on a trickling server, status
    line, headers or body, returns at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return self.end - time.monotonic()

    def reason(self) -> str:
        return f"timed out: no whole answer within {self.seconds:g} s (--timeout)"

    def track(self, sock: object) -> None:
        """A socket this request reads from: shut down at the deadline."""
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if self.expired:
                _shut(sock)
            elif sock not in self._sockets:
                self._sockets.append(sock)

    def watch(self, resp: Any) -> None:
        """``resp`` (a streamed answer) belongs to this request: its reads see the deadline
        (``iter_body``), and its socket is shut down at the deadline."""
        _DEADLINES[resp] = self
        fp = getattr(getattr(resp, "raw", None), "_fp", None)  # http.client.HTTPResponse
        raw = getattr(getattr(fp, "fp", None), "raw", None)  # socket.SocketIO
        self.track(getattr(raw, "_sock", None))

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._sockets.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing is waiting on it
        sock.shutdown(socket.SHUT_RDWR)


_DEADLINES: weakref.WeakKeyDictionary[Any, Deadline] = weakref.WeakKeyDictionary()
_CURRENT = threading.local()  # .deadline: the request this thread is sending


def _tracking_session() -> requests.Session:
    """A requests session whose connections hand their socket to the current request's
    ``Deadline`` as soon as the request is sent (before the status line is read)."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def tracked(conn: Any) -> None:
        deadline = getattr(_CURRENT, "deadline", None)
        if deadline is not None:
            deadline.track(getattr(conn, "sock", None))

    class Http(HTTPConnection):
        def request(self, *args: Any, **kwargs: Any) -> Any:
            done = super().request(*args, **kwargs)
            tracked(self)
            return done

    class Https(HTTPSConnection):
        def request(self, *args: Any, **kwargs: Any) -> Any:
            done = super().request(*args, **kwargs)
            tracked(self)
            return done

    class HttpPool(HTTPConnectionPool):
        ConnectionCls = Http

    class HttpsPool(HTTPSConnectionPool):
        ConnectionCls = Https

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": HttpPool, "https": HttpsPool}

    session = requests.Session()
    session.mount("http://", Adapter())
    session.mount("https://", Adapter())
    return session


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    body: bytes
    content_type: str
    etag: str | None = None  # the answer's ETag (a later ``get_if_changed`` sends it back)
    not_modified: bool = False  # a 304 to ``get_if_changed``: no body, the page is unchanged


class Client:
    """Reads URLs; counts its requests (tests and the update's summary use the count)."""

    def __init__(
        self,
        *,
        timeout: float | None = None,
        tries: int | None = None,
        backoff: float | None = None,
        sleep: Callable[[float], None] | None = None,
        session: requests.Session | None = None,
    ) -> None:
        self.timeout = TIMEOUT if timeout is None else timeout
        self.tries = max(1, TRIES if tries is None else tries)
        self.backoff = BACKOFF if backoff is None else backoff
        self.sleep = sleep or time.sleep
        self.session = session or _tracking_session()
        self.session.headers["User-Agent"] = USER_AGENT
        self.requests = 0

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(
        self,
        url: str,
        accept: str | None = None,
        limit: int = MAX_BODY,
        etag: str | None = None,
    ) -> Page:
        """The body of a 200 answer (at most ``limit`` bytes); FetchError otherwise (status 304
        when ``etag`` is sent back and still current). A body that stalls or breaks off is asked
        for again, like a refused connection."""
        if url.lower().startswith("file:"):
            return _read_local(url, limit)
        headers = {"Accept": accept} if accept else {}
        if etag and len(etag) <= 200 and unsafe_char(etag) is None:
            headers["If-None-Match"] = etag
        deadline = Deadline(self.timeout)

        def once() -> Page:
            with self._open_once(url, headers, deadline) as resp:
                if resp.status_code != 200:
                    _forget(resp)
                    raise FetchError(url, f"HTTP {resp.status_code}", resp.status_code)
                try:
                    body = b"".join(_bounded(iter_body(resp, url), url, limit))
                except _Broken as exc:
                    if deadline.expired or deadline.left() <= 0:
                        raise
                    raise _Retry(exc.reason) from None
                tag = resp.headers.get("ETag")
                ctype = resp.headers.get("Content-Type", "")
                return Page(secrets.public(resp.url), body, ctype, tag)

        try:
            return self._retrying(url, once, deadline)
        finally:
            deadline.cancel()

    def get_optional(self, url: str, accept: str | None = None) -> Page | None:
        """Like ``get``, but None for 404/410 (a page the index does not have)."""
        try:
            return self.get(url, accept)
        except FetchError as exc:
            if exc.status in (404, 410):
                return None
            raise

    def get_if_changed(self, url: str, accept: str, etag: str | None) -> Page | None:
        """Like ``get_optional``, sending ``etag`` back: None for 404/410, and a ``Page``
        marked ``not_modified`` for a 304 (the page the ETag names has not changed)."""
        try:
            return self.get(url, accept, etag=etag)
        except FetchError as exc:
            if exc.status == 304:
                return Page(url, b"", "", etag, not_modified=True)
            if exc.status in (404, 410):
                return None
            raise

    def open(self, url: str, headers: dict[str, str]) -> requests.Response:
        """A streamed answer of status 200 or 206 (the caller reads it with ``iter_body``, or
        closes it), retried as above; the whole request, body included, has one deadline."""
        deadline = Deadline(self.timeout)
        try:  # the answer's reader (iter_body) or discard() ends the deadline
            return self._retrying(url, lambda: self._open_once(url, headers, deadline), deadline)
        except BaseException:
            deadline.cancel()
            raise

    def _retrying(self, url: str, attempt: Callable[[], _T], deadline: Deadline) -> _T:
        last, made = "no answer", 0
        for n in range(self.tries):
            if n:
                pause = self.backoff * 2 ** (n - 1)
                if pause >= deadline.left():
                    break  # no time for another try
                self.sleep(pause)
            if deadline.left() <= 0:
                break
            made += 1
            try:
                return attempt()
            except _Retry as exc:
                last = exc.reason
        if deadline.left() <= 0:
            raise FetchError(url, f"{deadline.reason()} ({last})")
        raise FetchError(url, f"{last} ({made} {'try' if made == 1 else 'tries'})")

    def _open_once(
        self, url: str, headers: dict[str, str], deadline: Deadline
    ) -> requests.Response:
        import requests

        self.requests += 1
        left = max(0.001, deadline.left())  # connect and each header read: within the deadline
        _CURRENT.deadline = deadline
        target = credentials.for_request(url)  # the login kept for this URL, ${VAR}s expanded
        try:
            resp = self.session.get(
                target, headers=headers, timeout=left, stream=True, allow_redirects=True
            )
            if resp.status_code == 401 and (keyed := credentials.from_keyring(target)):
                resp.close()  # pip's order: the URL's login, netrc, then a keyring on a 401
                left = max(0.001, deadline.left())
                resp = self.session.get(
                    keyed, headers=headers, timeout=left, stream=True, allow_redirects=True
                )
        except requests.Timeout:
            raise _Retry(f"timed out after {self.timeout:g} s") from None
        except requests.ConnectionError as exc:
            if deadline.expired:
                raise _Retry("the answer's status line and headers never came whole") from None
            unreachable = _unreachable(exc)
            if unreachable is not None:  # another try gets the same answer: fail fast
                raise FetchError(url, f"cannot connect ({unreachable}; not retried)") from None
            raise _Retry(f"cannot connect ({_root_cause(exc)})") from None
        except requests.RequestException as exc:
            raise _Retry(f"{type(exc).__name__}: {_root_cause(exc)}") from None
        finally:
            _CURRENT.deadline = None
        if resp.status_code in (200, 206):
            deadline.watch(resp)
            return resp
        resp.close()
        if resp.status_code not in RETRY_STATUS:
            raise FetchError(url, f"HTTP {resp.status_code}", resp.status_code)
        raise _Retry(f"HTTP {resp.status_code}")


class _Retry(Exception):
    """One try failed in a way worth another (a refused connection, a 503, a stalled body)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Broken(FetchError):
    """The answer's body stalled or broke off."""


def iter_body(resp: Any, url: str, chunk: int = 256 * 1024) -> Iterator[bytes]:
    """An answer's bytes; FetchError when the connection breaks off or stalls, or the
    request's deadline passes (then closed)."""
    import requests

    deadline = _DEADLINES.get(resp)

    def late() -> bool:
        return deadline is not None and (deadline.expired or deadline.left() <= 0)

    try:
        for piece in resp.iter_content(chunk_size=chunk):
            if late():
                break
            if piece:
                yield piece
        if late():
            assert deadline is not None
            raise _Broken(url, deadline.reason())
    except requests.Timeout:
        raise _Broken(url, "the answer stalled (timed out)") from None
    except (requests.RequestException, OSError) as exc:
        if late():
            assert deadline is not None
            raise _Broken(url, deadline.reason()) from None
        raise _Broken(url, f"the answer broke off ({_root_cause(exc)})") from None
    finally:
        _forget(resp)
        resp.close()


def discard(resp: Any) -> None:
    """Close an answer that will not be read, and its watchdog with it."""
    _forget(resp)
    resp.close()


def _forget(resp: Any) -> None:
    deadline = _DEADLINES.pop(resp, None)
    if deadline is not None:
        deadline.cancel()


def _bounded(chunks: Iterator[bytes], url: str, limit: int) -> Iterator[bytes]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise FetchError(url, f"answer larger than {limit} bytes")
        yield chunk


def local_path(url: str) -> str:
    """The path of a ``file:`` URL (pip's rule: a directory stands for its ``index.html``)."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    path = url2pathname(urlsplit(url).path)
    return os.path.join(path, "index.html") if os.path.isdir(path) else path


def _read_local(url: str, limit: int) -> Page:
    path = local_path(url)
    try:
        with open_regular(path) as fh:
            body = fh.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise FetchError(url, "HTTP 404 (no such file)", 404) from None
    except OSError as exc:
        raise FetchError(url, f"cannot read: {exc.strerror or exc}") from None
    if len(body) > limit:
        raise FetchError(url, f"file larger than {limit} bytes")
    ctype = "text/html" if path.endswith((".html", ".htm")) else "application/octet-stream"
    return Page(url, body, "application/json" if path.endswith(".json") else ctype)


def unreachable(url: str, timeout: float = 5.0) -> str | None:
    """``URL (why)`` when ``url``'s host cannot be reached at all (see `_unreachable`), asked with
    one connection before a child that retries on its own (uv) is started; None when it can be,
    when the answer is slow (the child may fare better), or when a proxy stands in between. The
    URL is named without its credentials."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        return None
    if getproxies().get(parts.scheme) and not proxy_bypass(host):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        why = _unreachable(exc)
        shown = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"
        return None if why is None else f"{shown} ({why})"


def _unreachable(exc: BaseException) -> str | None:
    """Why the host cannot be reached, where the first answer is final: its name does not resolve
    (no DNS, offline), no route to it, or nothing listens on the port; None for a failure a
    retry may cure (a reset, a timeout). Read from the exception chain (requests wraps urllib3,
    which wraps the socket's error)."""
    import errno

    seen: BaseException | None = exc
    for _ in range(16):  # a chain is a few links deep; bound it all the same
        if seen is None:
            break
        if isinstance(seen, socket.gaierror) or type(seen).__name__ == "NameResolutionError":
            return "the host name does not resolve: offline, or no DNS"
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, OSError) and seen.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "no route to the host: offline"
        reason = getattr(seen, "reason", None)  # urllib3's MaxRetryError and NewConnectionError
        nested = reason if isinstance(reason, BaseException) else None
        seen = seen.__cause__ or nested or seen.__context__
    return None


def _root_cause(exc: BaseException) -> str:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    text = secrets.redact(str(seen) or type(seen).__name__)
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text.split("] ", 1)[-1][:200]
