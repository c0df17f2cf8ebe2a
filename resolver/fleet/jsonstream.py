"""Read a large JSON list (`kubectl get nodes -o json`) one item at a time, within a size cap.

Why not ``json.load``: a real node list carries each node's ``status.images`` (the kubelet reports
50 image references per node by default, ``nodeStatusMaxImages``: tens of KB), so a few thousand
nodes make hundreds of MB, and ``json.load`` would hold that text and the whole parsed tree at
once. Here the bytes pass through a window of about a megabyte; every ``"images"`` array is
emptied before it is even decoded (its brackets checked, its content never parsed: nobody reads
it); each item is decoded by the standard library's C decoder and handed over, so the caller keeps
only what it needs.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

from resolver.core.errors import UserError
from resolver.io.bounded import problem

CHUNK_BYTES = 1 << 20  # one read; the window holds about this much beyond the current item
NEWLINE = b"\n"
_TAIL = 64  # bytes held back, so that a key split between two reads is still recognised
_MAX_SKIP_BYTES = 64 << 20  # a value longer than this is left to the decoder

# Skipped unread: the one big value of a node (other values cost less to decode than to check:
# a node's conditions, searched back from its images and emptied, saved no time).
_SKIP_KEY = re.compile(rb'"images"\s{0,16}:\s{0,16}\[')
_EMPTY = re.compile(rb"\[\s*\]")
_WS = re.compile(r"[ \t\r\n]*")
_COMMA = re.compile(r"[ \t\r\n]*,")
_OBJECTS_END = re.compile(rb"\}\s*\]")  # where an array of objects closes
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')  # deleted by translate
_MAX_DEPTH = 4  # deeper arrays are left to the decoder
_MAX_INDENT = 256  # an item indented deeper than this is read as another layout
_AHEAD = 64 << 10  # an item starting nearer than this to the window's end: read on first


def _plain(segment: bytes) -> bool:
    """Whether ``segment`` is exactly one array whose brackets close where it ends.

    Without backslashes every quote delimits a string. Keeping only quotes and brackets, a string
    without brackets shrinks to ``""`` and drops out; the brackets left must be balanced inside
    the outer pair (an image record nests three deep: ``[{[]}...]``), which proves the segment
    ends where the array ends. A string holding a bracket keeps a quote and fails the check, as
    does a segment cut inside a string (an odd quote).
    """
    if b"\\" in segment:
        return False
    shape = segment.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if shape[:1] != b"[" or shape[-1:] != b"]":
        return False
    inner = shape[1:-1]
    for _ in range(_MAX_DEPTH):
        if not inner:
            return True
        size = len(inner)
        inner = inner.replace(b"[]", b"").replace(b"{}", b"")
        if len(inner) == size:
            return False
    return not inner


class JsonStream:
    """A window over a JSON file: top-level keys one by one, list items one at a time."""

    def __init__(self, fh: IO[bytes], name: str, max_bytes: int) -> None:
        self.fh = fh
        self.name = name
        self.max_bytes = max_bytes
        self.text = ""  # decoded, filtered text; self.pos indexes it
        self.pos = 0
        self.base = 0  # how many characters of filtered text were discarded before text[0]
        # (filtered offset, file offset) where each decoded piece starts: errors name the line
        self.anchors: list[tuple[int, int]] = [(0, 0)]
        self.eof = False
        self.pending = b""  # read but not yet filtered
        self.prev = b""  # the last byte moved from pending to text
        self.read_bytes = 0
        self.dropped_values = 0
        self._closed_upto = 0  # items starting before this (filtered) offset are in the window
        self._decoder = json.JSONDecoder()

    # -- reading and filtering ---------------------------------------------------------------

    def _more(self, want: int = 0) -> bool:
        """Read (at least ``want`` more bytes), filter, append; False once at the end.

        What was consumed is dropped first, so the window is copied once per read: it holds the
        item in progress and what the read brings, never what came before."""
        if self.eof:
            return False
        chunk = self.fh.read(max(want, CHUNK_BYTES))
        if chunk:
            if not self.read_bytes:
                chunk = self._start(chunk)
            self.read_bytes += len(chunk)
            if self.read_bytes > self.max_bytes:
                cap = (
                    f"{self.max_bytes >> 20} MiB"
                    if self.max_bytes >= 1 << 20
                    else f"{self.max_bytes}-byte"
                )
                raise UserError(f"{self.name}: larger than the {cap} cap on node lists")
            self.pending = self.pending + chunk if self.pending else chunk
        else:
            self.eof = True
        if self.pos:  # drop what was consumed, anchored at the new start
            at, raw = self.anchors[
                bisect.bisect_right(self.anchors, (self.base + self.pos, 1 << 62)) - 1
            ]
            at -= self.base
            if self.text.isascii():  # one byte a character (a flag: no scan)
                raw += self.pos - at
            else:
                raw += len(self.text[at : self.pos].encode("utf-8"))
            self.base += self.pos
            self.anchors = [(self.base, raw), *(a for a in self.anchors if a[0] > self.base)]
        kept, self.pos = self.text[self.pos :], 0
        self.text = self._filter(kept)
        return True

    def _start(self, chunk: bytes) -> bytes:
        if chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise UserError(
                f"{self.name}: UTF-16 text (Windows PowerShell writes that): save it as UTF-8, "
                "e.g. `kubectl get nodes -o json | Out-File -Encoding utf8 nodes.json`"
            )
        if chunk.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark: skipped
            self.read_bytes = 3
            self.anchors = [(0, 3)]
            chunk = chunk[3:]
        return chunk

    def _filter(self, kept: str) -> str:
        """``kept`` and the pending bytes, decoded, each value nobody reads emptied."""
        p = self.pending
        view = memoryview(p)
        raw0 = self.read_bytes - len(p)  # the file offset of p[0]
        offset = self.base + len(kept)  # the filtered offset of what comes out next
        out = [kept]
        start = search = 0
        keep = max(0, len(p) - _TAIL) if not self.eof else len(p)
        while True:
            m = _SKIP_KEY.search(p, search)
            if m is None:
                break
            k = m.start()
            if (p[k - 1 : k] if k else self.prev) == b"\\":  # inside a string: "\"images\": ["
                search = k + 1
                continue
            a = m.end() - 1
            if _EMPTY.match(p, a):
                search = m.end()
                continue
            found = _OBJECTS_END.search(p, a, a + _MAX_SKIP_BYTES)  # "}]": objects end
            end = found.end() if found else -1
            if end < 0:
                if self.eof or len(p) - a >= _MAX_SKIP_BYTES:
                    search = m.end()  # leave it to the decoder
                    continue
                keep = k  # wait for the rest of the value
                break
            if _plain(p[a:end]):
                piece = str(view[start:a], "utf-8")
                out += (piece, "[]")
                offset += len(piece) + 2
                self.anchors.append((offset, raw0 + end))
                self.dropped_values += 1
                start = search = end
            else:
                search = m.end()
        keep = max(keep, start)
        while start < keep < len(p) and p[keep] & 0xC0 == 0x80:  # not inside a UTF-8 character
            keep -= 1
        out.append(str(view[start:keep], "utf-8"))
        self.pending = p[keep:]
        if keep:
            self.prev = p[keep - 1 : keep]
        return "".join(out)

    # -- tokens ----------------------------------------------------------------------------

    def fail(self, msg: str, pos: int | None = None) -> UserError:
        """An error naming the line and column in the file (read again: only errors need it)."""
        at = self.base + (self.pos if pos is None else pos)
        start, raw = self.anchors[bisect.bisect_right(self.anchors, (at, 1 << 62)) - 1]
        raw += len(self.text[max(start - self.base, 0) : at - self.base].encode("utf-8"))
        where = f"byte {raw + 1}"
        if self.fh.seekable():  # count the lines up to it, a chunk at a time
            self.fh.seek(0)
            lines, column, done = 1, 1, 0
            chars = codecs.getincrementaldecoder("utf-8")(errors="replace")  # across reads
            while done < raw:
                chunk = self.fh.read(min(CHUNK_BYTES, raw - done))
                if not chunk:
                    break
                done += len(chunk)
                lines += chunk.count(NEWLINE)
                cut = chunk.rfind(NEWLINE)
                if cut >= 0:
                    chars.reset()
                text = chars.decode(chunk[cut + 1 :])
                column = len(text) + 1 if cut >= 0 else column + len(text)
            where = f"line {lines} column {column}"
        return UserError(f"{self.name}: {where}: {msg}")

    def _ws(self) -> None:
        while True:
            self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.text) or not self._more():
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
                raise self.fail(f"not JSON: {problem(exc)}") from None
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
        decode = self._decoder.raw_decode
        while True:
            self._await_item()  # which looks past the whitespace before the item
            yield self._parse(decode)
            comma = _COMMA.match(self.text, self.pos)  # the usual case, within the window
            if comma is not None:
                self.pos = comma.end()
            elif self._expect(",]", "',' or ']'") == "]":
                return

    def _await_item(self) -> None:
        """Read on until the item's closing brace is in the window, where the layout shows it.

        Only an economy: a decode that fails at the window's edge is retried with more text
        anyway, but each failure costs a count over the whole window (the decoder's error
        message). Indented output (kubectl's, jq's) closes an item on a line indented like its
        opening brace.
        """
        if self._peek() != "{" or self.base + self.pos < self._closed_upto:
            return
        if not self.eof and len(self.text) - self.pos < min(_AHEAD, CHUNK_BYTES):
            self._more()  # near the edge: read on first (one-line JSON shows no item's end)
        # Only the last few bytes can be an indent: in one-line JSON (`kubectl get --raw`,
        # `jq -c`) there is no newline, and a search back through the whole window per item
        # made a compact node list quadratic.
        floor = max(0, self.pos - _MAX_INDENT - 1)
        line = self.text.rfind("\n", floor, self.pos) + 1
        if not line and floor:
            return  # no line starts near: another layout, just try
        indent = self.text[line : self.pos]
        if not indent or indent.strip(" "):
            return  # another layout: just try
        closing = "\n" + indent + "}"
        while True:
            # The last item closed in the window: every item before it is complete too.
            last = self.text.rfind(closing, self.pos)
            if last >= 0 or self.eof or len(self.text) - self.pos >= 4 * CHUNK_BYTES:
                self._closed_upto = self.base + last
                return
            self._more()

    def finish(self) -> None:
        if self._peek():
            raise self.fail("not JSON: extra data after the document")
