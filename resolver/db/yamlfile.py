"""Reading one database file: bounded, so a damaged or hostile file costs an error, not memory.

The shipped files are ours and read as they are; any other database (the user's, a
``$GPURESOLVE_DATA_DIR``) is read with caps on its size, its nesting (libyaml's composer
recurses, and a deep enough file crashes the interpreter) and on how far its aliases expand (a
few hundred bytes of nested aliases make billions of nodes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from resolver.core.errors import DataError, UserError
from resolver.readers.bounded import load_yaml

MAX_BYTES = 16 * 1024 * 1024  # the shipped files are well under 1 MiB together
MAX_DEPTH = 64  # the shipped files nest 8 deep
MAX_NODES = 2_000_000  # nodes after aliases are expanded (the shipped torch.yaml: ~60,000)

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is ~10x faster


def read_yaml(path: Path, *, bounded: bool = True) -> Any:
    """One YAML file as Python data; DataError (naming the file) for anything wrong with it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1) if bounded else fh.read()
    except FileNotFoundError:
        raise DataError(f"{path}: database file missing") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES and bounded:
        raise DataError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if bounded:  # the shared reader: nesting, duplicate keys and alias expansion capped
        try:
            return load_yaml(text, path, max_nodes=MAX_NODES)
        except DataError:
            raise
        except UserError as exc:
            raise DataError(str(exc)) from None
    try:
        return yaml.load(text, Loader=_BASE)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise DataError(f"{path}:{line} invalid YAML: {getattr(exc, 'problem', exc)}") from None
