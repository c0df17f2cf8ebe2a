"""tests/fixtures/closure_index served on 127.0.0.1 as a PEP 503/691 index with PEP 658 metadata.

The folder holds real entries and METADATA of a real closure (torch 2.8.0 and torchvision 0.23.0
on macOS arm64, Python 3.11), fetched from the Python Package Index by
tools/fetch_closure_index.py (its docstring says how to refresh it). "whl/cpu" plays the PyTorch
index, "simple" the default index; filelock is on both, the newer version on "simple".

Like a real index, a project page answers JSON (PEP 691) to ``Accept:
application/vnd.pypi.simple.v1+json`` and HTML (PEP 503) otherwise; a missing project is 404.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from local_server import local_server

FIXTURE = Path(__file__).parent / "fixtures" / "closure_index"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class ClosureIndex:
    port: int = 0
    log: list[str] = field(default_factory=list)
    login: tuple[str, str] | None = None  # set: every request needs this Basic login, else 401
    denied: list[str] = field(default_factory=list)  # paths answered 401

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pytorch(self) -> str:
        """The mirror of the PyTorch index (`--pytorch-index`): variant pages under it."""
        return f"{self.url}/whl"

    @property
    def default(self) -> str:
        """The default index (`--default-index`)."""
        return f"{self.url}/simple"


def manifest() -> dict[str, Any]:
    return dict(json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8")))


def entry(folder: str, name: str) -> dict[str, Any]:
    """The one file a fixture project page lists (file name, sha256, ...)."""
    doc = json.loads((FIXTURE / folder / name / "index.json").read_text(encoding="utf-8"))
    return dict(doc["files"][0])


def _handler(state: ClosureIndex) -> type[BaseHTTPRequestHandler]:
    root = FIXTURE.resolve()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _answer(self, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            state.log.append(path)
            if state.login is not None:
                wanted = base64.b64encode(":".join(state.login).encode()).decode()
                if self.headers.get("Authorization") != f"Basic {wanted}":
                    state.denied.append(path)
                    self._send(
                        401, b"login needed", "text/plain", head, {"WWW-Authenticate": "Basic"}
                    )
                    return
            local = (root / path.lstrip("/")).resolve()
            if root not in local.parents and local != root:
                self._send(404, b"not found", "text/plain", head)
                return
            if path.endswith("/"):
                wants_json = JSON_TYPE in (self.headers.get("Accept") or "")
                page = local / ("index.json" if wants_json else "index.html")
                ctype = JSON_TYPE if wants_json else "text/html"
            else:
                page, ctype = local, "application/octet-stream"
            if not page.is_file() or page.name == "manifest.json":
                self._send(404, b"not found", "text/plain", head)
                return
            self._send(200, page.read_bytes(), ctype, head)

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def _send(
            self,
            status: int,
            body: bytes,
            ctype: str,
            head: bool,
            extra: dict[str, str] | None = None,
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if not head:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@contextmanager
def serve_closure_index(login: tuple[str, str] | None = None) -> Iterator[ClosureIndex]:
    """The fixture index on 127.0.0.1 for the duration of the block (``login``: a private
    index, answering 401 to a request without that Basic login)."""
    state = ClosureIndex(login=login)
    with local_server(_handler(state)) as port:
        state.port = port
        yield state
