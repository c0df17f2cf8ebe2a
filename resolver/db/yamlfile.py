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
from resolver.io.bounded import load_yaml, open_regular

MAX_BYTES = 16 * 1024 * 1024  # the shipped files are well under 1 MiB together
MAX_DEPTH = 64  # the shipped files nest 8 deep
MAX_NODES = 2_000_000  # nodes after aliases are expanded (the shipped torch.yaml: ~60,000)

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is ~10x faster


def read_yaml(path: Path, *, bounded: bool = True) -> Any:
    """One YAML file as Python data; DataError (naming the file) for anything wrong with it."""
    try:
        with open_regular(path, what="a database file") as fh:
            data = fh.read(MAX_BYTES + 1) if bounded else fh.read()
    except FileNotFoundError:
        raise DataError(f"{path}: database file missing") from None
    except UserError as exc:  # a FIFO or a device
        raise DataError(str(exc)) from None
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


# --- writing: the data files' own style (db update and the observations store) ---
_STR = "tag:yaml.org,2002:str"
_SCALARS = (str, int, float, bool, type(None))


class _Dumper(yaml.SafeDumper):
    """The data files' style: every string value double-quoted (versions stay strings), keys
    plain, lists of scalars and small mappings of strings in flow style, no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # "key:\n  - item", as the curated files do


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR, value, style='"')


def _represent_list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    flow = all(isinstance(v, _SCALARS) for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _represent_dict(dumper: yaml.SafeDumper, value: dict[Any, Any]) -> yaml.MappingNode:
    values = list(value.values())
    flow = not value or (  # {} and min_driver: {linux: "570.26", windows: null}
        all(v is None or isinstance(v, str) for v in values)
        and (any(isinstance(v, str) for v in values) or set(value) <= {"linux", "windows"})
        and len(str(value)) <= 72
    )
    pairs = [
        (
            dumper.represent_scalar(_STR, k) if isinstance(k, str) else dumper.represent_data(k),
            dumper.represent_data(v),
        )
        for k, v in value.items()
    ]
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, flow_style=flow)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(dict, _represent_dict)


def dump_yaml(doc: Any) -> str:
    """One database file as text (key order kept, no line wrapping)."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, indent=2)
