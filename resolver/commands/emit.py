"""How a command prints a published JSON document (``--json``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from resolver.core import secrets

if TYPE_CHECKING:
    from resolver.core.documents import Document


def emit_json(data: Document) -> None:
    """A published document (mypy checks its keys), in pieces of ``PIPE_BUF`` bytes: json.dump
    writes each token apart, which unbuffered (``PYTHONUNBUFFERED=1``, common in containers and
    CI) is one system call per token. Not in one write: unbuffered, a write to a pipe whose
    reader left can be cut short and Python's text layer drops the rest silently (exit 0 for a
    truncated document), while a pipe write of at most ``PIPE_BUF`` bytes is all or nothing.
    ASCII only (``ensure_ascii``), so characters are bytes.

    Indented on a terminal, for a reader; one line elsewhere, for a program (a pipe, a file, a
    pod's log, where one line per document is what `kubectl logs` and `fleet report` want):
    json indents in pure Python, ~3 ms of a `suggest --json`, its C encoder writes one line
    in a sixth of that. `jq .` indents a line."""
    import select  # built in: costs nothing

    try:
        terminal = sys.stdout.isatty()
    except (ValueError, OSError):  # closed or detached: nobody reads it as a person
        terminal = False
    if terminal:
        text = json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    else:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=True) + "\n"
    text = secrets.redact(text)  # the one rule: no URL's login in any output
    size = getattr(select, "PIPE_BUF", 512)  # POSIX's least
    for start in range(0, len(text), size):
        sys.stdout.write(text[start : start + size])
