"""Reading a foreign JSON or YAML document key by key: a host record, a lock's record, a node
list, an index page, a fleet result. Strict readers (``Fields``) raise one line naming the key
path (``gpus[0].cc: expected a string like '8.6', got 8.6``) through the caller's ``fail`` (a
ValueError by default; a UserError or an index error naming the file); lenient reads of a
document that may lack a part (``dig``) give None. In core: the host profile (core) reads with
it, and every reader above may.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from resolver.core.errors import shown, unsafe_char

__all__ = ["Fields", "dig", "kind", "plain"]

Fail = Callable[[str], Exception]


def kind(value: Any) -> str:
    """A JSON value's kind, as the user wrote it."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "a list" if isinstance(value, list) else "an object"
    )


def plain(value: str, key: str, fail: Fail = ValueError) -> str:
    """A string refused (naming the key) when it holds a control or bidi character: it would
    reach the terminal and the files written raw."""
    ch = unsafe_char(value)
    if ch is not None:
        raise fail(f"{key}: holds the control or bidi character U+{ord(ch):04X}: refused")
    return value


def dig(doc: Any, *keys: str) -> Any:
    """``doc[k1][k2]...`` where each step is an object holding the key; None where not."""
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


class Fields:
    """One object of a document, read key by key; a wrong value is one ``fail`` naming its
    path below ``where`` (unknown keys are ignored: newer writers add keys)."""

    def __init__(self, data: Any, where: str = "", fail: Fail = ValueError) -> None:
        self.fail = fail
        if not isinstance(data, dict):
            what = f"{where}: expected an object" if where else "expected a JSON object"
            raise fail(f"{what}, got {kind(data)}")
        self.data: dict[str, Any] = data
        self.where = where

    def key(self, key: str) -> str:
        """The path of ``key`` in the document (``gpus[0].cc``)."""
        return f"{self.where}.{key}" if self.where else key

    def text(
        self, key: str, *, like: str | None = None, pattern: re.Pattern[str] | None = None
    ) -> str | None:
        """A string (None when absent or null), matching ``pattern`` when given."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            expected = f"expected a string like {like!r}" if like else "expected a string"
            raise self.fail(f"{self.key(key)}: {expected}, got {shown(value)}")
        return plain(value, self.key(key), self.fail)

    def need(
        self, key: str, *, like: str | None = None, pattern: re.Pattern[str] | None = None
    ) -> str:
        """A string that must be there."""
        value = self.text(key, like=like, pattern=pattern)
        if value is None:
            raise self.fail(f"{self.key(key)}: missing")
        return value

    def integer(self, key: str) -> int | None:
        """A whole number (not a boolean), None when absent."""
        value = self.data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.fail(f"{self.key(key)}: expected a whole number, got {value!r}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        """true or false (``default`` when absent)."""
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{self.key(key)}: expected true or false, got {value!r}")
        return value

    def items(self, key: str) -> list[Any]:
        """A list (empty when absent)."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{self.key(key)}: expected a list, got {kind(value)}")
        return value

    def objects(self, key: str) -> list[Fields]:
        """A list of objects, each read as ``key[i]``."""
        return [
            Fields(v, f"{self.key(key)}[{i}]", self.fail) for i, v in enumerate(self.items(key))
        ]

    def texts(self, key: str) -> list[str]:
        """A list of strings (empty when absent)."""
        values = self.items(key)
        if not all(isinstance(v, str) for v in values):
            raise self.fail(f"{self.key(key)}: expected a list of strings")
        return [plain(v, f"{self.key(key)}[{i}]", self.fail) for i, v in enumerate(values)]

    def strings(self, key: str) -> dict[str, str]:
        """An object of strings (empty when absent)."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail(f"{self.key(key)}: expected an object of strings")
        for k, v in value.items():
            plain(k, self.key(key), self.fail)
            plain(v, f"{self.key(key)}.{k}", self.fail)
        return dict(value)
