"""Bounded reads of user-supplied files: every failure is one UserError naming the file.

A real `gpuresolve detect --json` is a few KB and a team spec a few hundred lines, so the caps are
generous for real input and small enough that `/dev/zero`, a 64 MB file, JSON nested 100,000 deep
or a YAML "billion laughs" cannot exhaust memory, the stack or the disk (a report rendered from an
alias bomb once grew to 39 MB from a 700-byte spec).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError

KIB = 1024
MIB = 1024 * KIB
HOST_FILE_LIMIT = 1 * MIB  # `detect --json`: a few KB even with 16 GPUs
SPEC_LIMIT = 1 * MIB  # a team spec
LOCK_LIMIT = 16 * MIB  # a lock file with hashes for a large closure
LOCK_MAX_NODES = 4_000_000
MAX_DEPTH = 64  # nesting of JSON/YAML containers
MAX_NODES = 200_000  # YAML nodes after alias expansion


def read_bytes(path: str | Path, *, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of ``path`` (a file, a pipe, a device); more is an error."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (expected {what})") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory (expected {what})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserError(f"{path}: larger than {_size(limit)}: not {what}")
    return data


def read_text(path: str | Path, *, limit: int, what: str) -> str:
    """The file as UTF-8 text (a BOM is dropped), bounded like :func:`read_bytes`."""
    data = read_bytes(path, limit=limit, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text (byte {exc.start}): not {what}; save it as UTF-8"
        ) from None


def read_optional_text(path: str | Path, *, limit: int, what: str) -> str | None:
    """Like :func:`read_text`, but None when there is no such file (an optional input)."""
    try:
        return read_text(path, limit=limit, what=what)
    except UserError:
        if not os.path.lexists(path):
            return None
        raise


def load_json(path: str | Path, *, limit: int, what: str) -> Any:
    """A JSON document, bounded in size and nesting."""
    text = read_text(path, limit=limit, what=what)
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise UserError(f"{path}: nested {depth} levels deep (at most {MAX_DEPTH}): not {what}")
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and integers past Python's digit limit
        raise UserError(f"{path}: not {what}: {_short(exc)}") from None


def json_depth(text: str) -> int:
    """How deeply ``[``/``{`` nest in JSON text, strings skipped; computed without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def load_yaml(text: str, origin: str | Path, *, max_nodes: int = MAX_NODES) -> Any:
    """YAML from an untrusted file: safe types only, no duplicate keys, bounded expansion.

    Aliases are allowed (they are handy in a fleet spec) as long as the document they expand to
    stays under ``max_nodes`` nodes and ``MAX_DEPTH`` levels.
    """
    import yaml

    deepest = yaml_depth(text, MAX_DEPTH)  # before composing: libyaml's composer recurses
    if deepest > MAX_DEPTH:
        raise UserError(f"{origin}: nested more than {MAX_DEPTH} levels deep: refused")
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, origin, max_nodes)
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise UserError(f"{origin}: line {exc.line}: key {exc.key!r} is given twice") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{origin}: {where}: invalid YAML: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer past Python's digit limit
        raise UserError(f"{origin}: invalid value: {_short(exc)}") from None
    except RecursionError:
        raise UserError(f"{origin}: nested too deeply") from None
    finally:
        loader.dispose()


def yaml_depth(text: str, limit: int) -> int:
    """How deeply YAML collections nest, from the event stream, stopping past ``limit``.

    Composing nodes recurses in libyaml's C code: a document nested 100,000 deep crashes the
    interpreter (a segmentation fault, no exception), so depth is measured from the parser's
    events, which come one at a time. Invalid YAML counts as shallow: the load reports it.
    """
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=base):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                deepest = max(deepest, depth)
                if deepest > limit:
                    break
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        pass
    return deepest


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.line = line


_LOADER: type[Any] | None = None


def _loader_class() -> type[Any]:
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last).

    Built on libyaml's parser where PyYAML has it (large conda-lock files parse ~10x faster).
    """
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                    except TypeError:  # an unhashable key: SafeLoader reports it itself
                        continue
                    if duplicate:
                        raise _DuplicateKey(key, key_node.start_mark.line + 1)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    _LOADER = StrictLoader
    return StrictLoader


def _check_expansion(root: Any, origin: str | Path, max_nodes: int) -> None:
    """Count the nodes the document expands to, following aliases, without recursion."""
    import yaml

    budget = max_nodes
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise UserError(
                f"{origin}: expands to more than {max_nodes:,} values (YAML aliases?): refused"
            )
        if depth > MAX_DEPTH:
            raise UserError(f"{origin}: nested more than {MAX_DEPTH} levels deep: refused")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n // KIB} KiB"


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split())
    if "integer string conversion" in text:  # Python's int-conversion limit
        return "a number far too long to be real"
    return text if len(text) <= limit else text[: limit - 1] + "…"
