"""The shipped database parsed ahead of time, so that a fresh HOME skips the YAML parser.

A first run, a container or a CI job has no catalog cache yet, and parsing the YAML costs more
than the rest of `suggest`. ``data/catalog.json`` holds the shipped files as parsed data with
each file's size and CRC-32; it is used only while every file still matches (an edited file makes
it a miss: the YAML is parsed as without it), and what it holds goes through the same validation
(`from_raw`) as the YAML. It is read like the catalog cache (regular file, no link, plain JSON,
bounded). ``tools/gen_catalog_snapshot.py`` writes it; a test keeps it current.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from resolver.db import cache

__all__ = ["FILE", "SCHEMA", "read", "render", "stamp"]

FILE = "catalog.json"
SCHEMA = 1


def stamp(directory: Path, names: Iterable[str]) -> dict[str, str] | None:
    """``name -> "size:crc32"`` of each file of ``names`` present in ``directory`` (a checksum
    of the bytes, not times: a checkout or an unpacked wheel sets its own); None if unreadable."""
    out: dict[str, str] = {}
    for name in names:
        try:
            data = (directory / name).read_bytes()
        except FileNotFoundError:
            continue
        except OSError:
            return None
        out[name] = f"{len(data)}:{zlib.crc32(data):08x}"
    return out


def read(directory: Path, names: Iterable[str], file: str = FILE) -> dict[str, Any] | None:
    """The parsed files of ``directory``, where its snapshot (``file``) matches every one;
    else None."""
    doc = cache.read(directory / file)
    if doc is None or doc.get("schema") != SCHEMA:
        return None
    raw = doc.get("raw")
    if not isinstance(raw, dict) or doc.get("files") != stamp(directory, names):
        return None
    return raw


def render(directory: Path, names: Iterable[str], parse: Callable[[Path], Any]) -> str:
    """The snapshot of ``directory``: each present file of ``names`` parsed by ``parse``."""
    files = stamp(directory, names) or {}
    raw = {name: parse(directory / name) for name in files}
    doc = {"schema": SCHEMA, "files": files, "raw": raw}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
