"""Bounded reads of user-supplied files: every failure is one UserError naming the file.

A real `gpuresolve detect --json` is a few KB and a team spec a few hundred lines, so the caps are
generous for real input and small enough that `/dev/zero`, a 64 MB file, JSON nested 100,000 deep
or a YAML "billion laughs" cannot exhaust memory, the stack or the disk (a report rendered from an
alias bomb once grew to 39 MB from a 700-byte spec).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from resolver.core.errors import UserError

KIB = 1024
MIB = 1024 * KIB
HOST_FILE_LIMIT = 1 * MIB  # `detect --json`: a few KB even with 16 GPUs
# A team spec: the README speaks of 50,000-machine fleets, and an inline spec of that many
# targets is ~8 MiB and ~1,000,000 YAML values; past these caps it fails before it is parsed.
SPEC_LIMIT = 16 * MIB
SPEC_MAX_NODES = 2_000_000
LOCK_LIMIT = 16 * MIB  # a lock file with hashes for a large closure
LOCK_MAX_NODES = 4_000_000
MAX_DEPTH = 64  # nesting of JSON/YAML containers
MAX_NODES = 200_000  # YAML nodes after alias expansion


def read_bytes(path: str | Path, *, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; more is an error, and so is a
    FIFO, a device or a socket (refused at once: one would hang the read or never end it)."""
    try:
        with open_regular(path, what=what) as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (expected {what})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserError(f"{path}: larger than {_size(limit)}: not {what}")
    return data


def open_regular(path: str | Path, *, what: str = "a file") -> BinaryIO:
    """``path`` opened for binary reading, if it is a regular file (links are followed).

    A FIFO, a device (a link to /dev/zero), a socket or a folder is refused with a UserError
    before anything is read: checked before opening (a device is not even opened), and again on
    the opened descriptor (no swap in between), which is opened non-blocking so that a FIFO
    never waits for a writer. Other failures are the OSError ``open`` raises.
    """
    refuse_special(os.stat(path).st_mode, path, what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        refuse_special(os.fstat(fd).st_mode, path, what)
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def refuse_special(mode: int, path: str | Path, what: str) -> None:
    """A UserError unless ``mode`` (from stat) is a regular file's."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: is a directory (expected {what})")
    kind = (
        "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a special file"
    )
    raise UserError(
        f"{path}: is {kind}, not a regular file: refused (expected {what}; "
        "gpuresolve reads only regular files)"
    )


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
    return parse_json(read_text(path, limit=limit, what=what), path, what=what)


def parse_json(text: str, origin: str | Path, *, what: str) -> Any:
    """JSON text read back (a file, a line a lock records), bounded in nesting: json's decoder
    recurses, and ``[`` 200,000 times ended in RecursionError (exit 70)."""
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise UserError(f"{origin}: nested {depth} levels deep (at most {MAX_DEPTH}): not {what}")
    import json  # here: `--version` reads a database's head through this module, and no JSON

    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and integers past Python's digit limit
        raise UserError(f"{origin}: not {what}: {problem(exc)}") from None


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
        said = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{origin}: {where}: invalid YAML: {said}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer past Python's digit limit
        raise UserError(f"{origin}: invalid value: {problem(exc)}") from None
    except RecursionError:
        raise UserError(f"{origin}: nested too deeply") from None
    finally:
        loader.dispose()


def yaml_depth(text: str, limit: int) -> int:
    """How deeply YAML collections nest, from the event stream, stopping past ``limit``.

    Composing nodes recurses in libyaml's C code: a document nested 100,000 deep crashes the
    interpreter (a segmentation fault, no exception), so depth is measured from the parser's
    events, which come one at a time. libyaml itself may stop deep nesting first, with an error
    of its own wording and limit (PyYAML 6.0.4's does): when the fast parser fails, the part of
    the document up to the failure is measured again with PyYAML's pure-Python parser, which has
    no nesting limit, so that what is refused and why is decided here, not by a library. Invalid
    YAML that is not too deep counts as shallow: the load reports it.
    """
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return _event_depth(text, limit, base)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if base is yaml.SafeLoader or mark is None:
            return 0
        fragment = _entry_before(text, mark.index)
    if len(fragment) > RESCAN_LIMIT:  # ~4 s/MiB in pure Python: only a bounded part
        return 0
    try:
        return _event_depth(fragment, limit, yaml.SafeLoader)
    except yaml.YAMLError:
        return 0


RESCAN_LIMIT = 256 * KIB


def _event_depth(text: str, limit: int, loader: Any) -> int:
    """The deepest nesting the parser's events reach, stopping past ``limit``."""
    import yaml

    depth = deepest = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return deepest


def _entry_before(text: str, index: int) -> str:
    """The top-level entry (a line starting at column 0) holding ``index``, to its line's end.

    Parsed on its own it nests as deeply as in the whole document, so the pure-Python parser
    needs to read only it, not everything before it.
    """
    end = text.find("\n", index)
    end = len(text) if end < 0 else end
    start = index
    while True:
        start = text.rfind("\n", 0, start) + 1
        if start == 0 or text[start : start + 1] not in ("", " ", "\t", "#", "\n"):
            break
        start -= 1
    return text[start:end]


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


def problem(exc: BaseException, limit: int = 160) -> str:
    """A parser's error as one short line: every reader of JSON, YAML or TOML words it here, so
    a number past Python's digit limit names itself instead of advising
    ``sys.set_int_max_str_digits()`` (a node list's 5,000-digit count did)."""
    text = " ".join(str(exc).split())
    if "integer string conversion" in text:  # Python's int-conversion limit
        return "a number far too long to be real"
    return text if len(text) <= limit else text[: limit - 1] + "…"
