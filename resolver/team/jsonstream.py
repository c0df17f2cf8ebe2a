"""Read a large JSON list (`kubectl get nodes -o json`) one item at a time, within a size cap.

Why not ``json.load``: a real node list carries each node's ``status.images`` (the kubelet reports
up to 50 image references per node, tens of KB), so a few thousand nodes make hundreds of MB, and
``json.load`` would hold that text and the whole parsed tree at once. Here the text passes through
a window of about a megabyte; every ``"images"`` array of flat objects is emptied before the
decoder sees it (checked for shape, not parsed: nobody reads it); each item is decoded by the
standard library's C decoder and handed over, so the caller keeps only what it needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

from resolver.errors import UserError

CHUNK_CHARS = 1 << 20  # one read; the window holds about this much beyond the current item
_TAIL = 64  # characters held back, so that a key split between two reads is still recognised
_MAX_SKIP_CHARS = 64 << 20  # an "images" array longer than this is left to the decoder

_IMAGES_KEY = re.compile(r'"images"\s{0,16}:\s{0,16}\[')
_EMPTY_ARRAY = re.compile(r"\[\s*\]")
_OBJECTS_END = re.compile(r"\}\s*\]")  # where an array of objects closes
_BARE = " \t\r\n:,0123456789.eE+-aeflnrstu"  # whitespace, separators, numbers, true/false/null
_DROP_BARE = str.maketrans("", "", _BARE)
_FLAT_OBJECTS = re.compile(r"\[(?:\{(?:\[\])*\})*\]")  # [{..[..]..}, ...]: no deeper nesting


def _flat_objects(segment: str) -> bool:
    """Whether ``segment`` is exactly one array of flat objects (values: scalars, arrays of them).

    Without backslashes every quote delimits a string, so removing the strings leaves the
    structure; its brackets must nest as ``[{[]...}...]``, which proves the segment ends where the
    array ends (an early ``}]`` inside a string leaves an odd number of quotes).
    """
    if "\\" in segment:
        return False
    parts = segment.split('"')
    if not len(parts) % 2:
        return False
    return _FLAT_OBJECTS.fullmatch("".join(parts[0::2]).translate(_DROP_BARE)) is not None


class JsonStream:
    """A window over a text file: top-level keys are read one by one, list items one at a time."""

    def __init__(self, fh: IO[str], name: str, max_chars: int) -> None:
        self.fh = fh
        self.name = name
        self.max_chars = max_chars
        self.text = ""  # decoded, filtered text; self.pos indexes it
        self.pos = 0
        self.eof = False
        self.pending = ""  # read but not yet filtered
        self.prev = ""  # the last character moved from pending to text
        self.read_chars = 0
        self.line_base = 1  # the line number of text[0]
        self.dropped_arrays = 0
        self._decoder = json.JSONDecoder()

    # -- reading and filtering ---------------------------------------------------------------

    def _more(self, want: int = 0) -> bool:
        """Read (at least ``want`` more characters), filter, append; False once at the end."""
        if self.eof:
            return False
        chunk = self.fh.read(max(want, CHUNK_CHARS))
        if chunk:
            self.read_chars += len(chunk)
            if self.read_chars > self.max_chars:
                cap = (
                    f"{self.max_chars >> 20} MiB"
                    if self.max_chars >= 1 << 20
                    else f"{self.max_chars}-character"
                )
                raise UserError(f"{self.name}: larger than the {cap} cap on node lists")
            self.pending += chunk
        else:
            self.eof = True
        if self.pos > CHUNK_CHARS:  # drop what was consumed, keeping line numbers right
            self.line_base += self.text.count("\n", 0, self.pos)
            self.text = self.text[self.pos :]
            self.pos = 0
        self.text += self._filter()
        return True

    def _filter(self) -> str:
        """Move pending text into the window, each complete ``"images": [...]`` emptied."""
        p = self.pending
        out: list[str] = []
        start = search = 0
        keep = max(0, len(p) - _TAIL) if not self.eof else len(p)
        while True:
            m = _IMAGES_KEY.search(p, search)
            if m is None:
                break
            k = m.start()
            if (p[k - 1] if k else self.prev) == "\\":  # inside a string: "\"images\": ["
                search = k + 1
                continue
            a = m.end() - 1
            if _EMPTY_ARRAY.match(p, a):
                search = m.end()
                continue
            end = _OBJECTS_END.search(p, a, a + _MAX_SKIP_CHARS)
            if end is None:
                if self.eof or len(p) - a >= _MAX_SKIP_CHARS:
                    search = m.end()  # leave it to the decoder
                    continue
                keep = k  # wait for the rest of the array
                break
            segment = p[a : end.end()]
            if _flat_objects(segment):
                # The same number of newlines, so line numbers in messages stay right.
                out += [p[start:a], "[", "\n" * segment.count("\n"), "]"]
                start = search = end.end()
                self.dropped_arrays += 1
            else:
                search = m.end()
        keep = max(keep, start)
        out.append(p[start:keep])
        self.pending = p[keep:]
        text = "".join(out)
        if text:
            self.prev = text[-1]
        return text

    # -- tokens ----------------------------------------------------------------------------

    def fail(self, msg: str, pos: int | None = None) -> UserError:
        at = self.pos if pos is None else pos
        line = self.line_base + self.text.count("\n", 0, at)
        column = at - self.text.rfind("\n", 0, at)
        return UserError(f"{self.name}: line {line} column {column}: {msg}")

    def _ws(self) -> None:
        while True:
            n = len(self.text)
            while self.pos < n and self.text[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < n or not self._more():
                return

    def _peek(self) -> str:
        self._ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _expect(self, chars: str, what: str) -> str:
        c = self._peek()
        if not c or c not in chars:
            raise self.fail(f"not JSON: expected {what}")
        self.pos += 1
        return c

    def _parse(self, fn: Callable[[str, int], tuple[Any, int]]) -> Any:
        """``fn`` at the window's position, reading more until the value is complete."""
        while True:
            try:
                value, end = fn(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof and not self.pending:
                    raise self.fail(f"not JSON: {exc.msg}", exc.pos) from None
            except RecursionError:
                raise self.fail("JSON nested too deeply") from None
            except ValueError as exc:  # an integer of thousands of digits
                raise self.fail(f"not JSON: {exc}") from None
            else:
                # A number (or an item) ending exactly at the window's edge may go on.
                if end < len(self.text) or (self.eof and not self.pending):
                    self.pos = end
                    return value
            self._more(len(self.text) - self.pos)

    def value(self) -> Any:
        self._peek()
        return self._parse(self._decoder.raw_decode)

    def key(self) -> str:
        self._expect('"', "a key")
        self.pos -= 1
        return str(self.value())

    # -- structure -------------------------------------------------------------------------

    def object_keys(self) -> Iterator[str]:
        """The keys of the top-level object; the caller reads (or iterates) each value."""
        self._expect("{", "an object")
        if self._peek() == "}":
            self.pos += 1
            return
        while True:
            k = self.key()
            self._expect(":", "':'")
            yield k
            if self._expect(",}", "',' or '}'") == "}":
                return

    def array_items(self) -> Iterator[Any]:
        """The items of the array at the window's position, decoded one at a time."""
        self._expect("[", "a list")
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self._expect(",]", "',' or ']'") == "]":
                return

    def finish(self) -> None:
        if self._peek():
            raise self.fail("not JSON: extra data after the document")
