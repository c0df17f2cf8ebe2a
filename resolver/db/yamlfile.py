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

from resolver.errors import DataError
from resolver.readers.bounded import yaml_depth

MAX_BYTES = 16 * 1024 * 1024  # the shipped files are well under 1 MiB together
MAX_DEPTH = 64  # the shipped files nest 8 deep
MAX_NODES = 2_000_000  # nodes after aliases are expanded (the shipped torch.yaml: ~60,000)

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is ~10x faster


class _Loader(_BASE):  # type: ignore[misc]
    """The safe loader, refusing an alias graph that expands beyond MAX_NODES (or loops)."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node)
        return node


def _expanded_size(root: yaml.Node) -> int:
    """Nodes in ``root`` with every alias expanded (shared nodes are measured once)."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise DataError("a YAML alias refers to a node that contains it")
        total = 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            active.add(key)
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [n for pair in node.value for n in pair]
            )
            for child in children:
                total += size(child)
                if total > MAX_NODES:
                    raise DataError(f"YAML aliases expand beyond {MAX_NODES:,} nodes")
            active.discard(key)
        sizes[key] = total
        return total

    return size(root)


def _check_depth(text: str, path: Path) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing (libyaml's composer recurses)."""
    if yaml_depth(text, MAX_DEPTH) > MAX_DEPTH:
        raise DataError(f"{path}: nested deeper than {MAX_DEPTH} levels")


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
    try:
        if bounded:
            _check_depth(text, path)
            return yaml.load(text, Loader=_Loader)
        return yaml.load(text, Loader=_BASE)
    except DataError as exc:
        message = str(exc)
        raise DataError(
            message if message.startswith(str(path)) else f"{path}: {message}"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise DataError(f"{path}:{line} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply") from None
