"""A zip over a counted range ``Source``: the standard library's ``zipfile`` does the parsing.

``RangeFile`` gives ``zipfile`` the seekable file it wants. Reads inside the source's first tail
read (the end records, often the whole directory) cost nothing; a member is read as one span —
its local header, name, extra field and compressed data — streamed through one range request
as ``zipfile`` inflates it, so a wheel costs a tail read, the directory and one read per member.
Member sizes are capped before a byte is inflated; ``zipfile`` checks the CRC. Whatever is wrong
with the archive (damage, encryption, a method other than stored/deflate, a bad member name) is
one ``ReadError`` naming the file.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from resolver.io import ReadError
from resolver.io.ranges import Source

MAX_MEMBERS = 1_000_000
# Bytes of one structure zipfile reads at once (the central directory, in one read): a size the
# archive claims past it (a ZIP64 end record claiming a 40 GB directory) is refused before a
# byte is allocated. A torch wheel's directory is under 1 MiB.
MAX_STRUCTURE = 64 * 1024 * 1024
_SLACK = 64  # a local extra field may be a little longer than the directory's
_SMALL = 256 * 1024  # compressed bytes up to which a member's span takes the slack too
# What zipfile raises on a damaged or unsupported archive (ours, ReadError, passes through).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    UnicodeDecodeError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    struct.error,
    OSError,
)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over ``source``; see the module's docstring for the reads."""

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        self.pos = 0
        self._span: tuple[int, int] | None = None  # [start, end) read as one stream
        self._stream: Iterator[bytes] | None = None
        self._buf, self._buf_at = b"", 0  # bytes of the stream already fetched, and their offset

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.source.size}[whence]
        if base + offset < 0:
            raise OSError("seek before the start of the file")
        self.pos = base + offset
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        """As io's ``read``, but a size past ``MAX_STRUCTURE`` is refused before io allocates
        a buffer for it (a claimed size is hostile input)."""
        if size is not None and size > MAX_STRUCTURE:
            raise ReadError(
                f"{self.source.name}: the zip claims a {size}-byte structure at offset "
                f"{self.pos}, over the {MAX_STRUCTURE}-byte bound: refused"
            )
        return super().read(-1 if size is None else size) or b""

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), max(0, self.source.size - self.pos))
        data = self._read(self.pos, n) if n else b""
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def span(self, start: int, end: int) -> None:
        """Read [start, end) as one stream when asked for bytes in it (a member's span)."""
        self.drain()
        self._span = (start, min(end, self.source.size))

    def drain(self) -> None:
        """Read out the current span (so that what the server sent is what was counted)."""
        if self._stream is not None:
            for _chunk in self._stream:
                pass
        self._span, self._stream, self._buf = None, None, b""

    def _read(self, at: int, n: int) -> bytes:
        span = self._span
        if span is None or not span[0] <= at < span[1]:
            return self.source.read(at, n)  # the tail, or a small structure read on its own
        if self._stream is None or not self._buf_at <= at <= self._buf_at + len(self._buf):
            self.drain()
            self._span = (at, span[1])
            self._stream, self._buf, self._buf_at = self.source.stream(at, span[1] - at), b"", at
        while self._buf_at + len(self._buf) < at + n:
            piece = next(self._stream, b"")
            if not piece:
                break
            self._buf = self._buf[at - self._buf_at :] + piece
            self._buf_at = at
        out = self._buf[at - self._buf_at : at - self._buf_at + n]
        if len(out) < n and at + len(out) < self.source.size:
            out += self.source.read(at + len(out), n - len(out))  # past the span: on its own
        return out


class RemoteZip:
    """The members of a zip read through a ``RangeFile`` (directory read once, on opening)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.file = RangeFile(source)
        with _one_line(source.name, "not a zip file, or a truncated or damaged one"):
            self.zip = zipfile.ZipFile(self.file)
        if len(self.zip.infolist()) > MAX_MEMBERS:
            raise ReadError(f"{source.name}: a zip of more than {MAX_MEMBERS} members")

    def names(self) -> list[str]:
        return self.zip.namelist()

    def info(self, name: str) -> zipfile.ZipInfo | None:
        try:
            return self.zip.getinfo(name)
        except KeyError:
            return None

    def chunks(self, name: str, cap: int) -> Iterator[bytes]:
        """The member's uncompressed bytes, streamed; at most ``cap`` of them, CRC checked."""
        info = self.zip.getinfo(name)
        if info.file_size > cap:
            raise ReadError(
                f"{self.source.name}: {name} is {info.file_size} bytes uncompressed, over the "
                f"{cap}-byte cap for it"
            )
        if info.header_offset + info.compress_size > self.source.size:
            raise ReadError(f"{self.source.name}: truncated: {name} lies past the end of the file")
        # the local extra field is usually the directory's; a small member reads a few bytes more
        # in case it is longer, a big one reads any rest of its data on its own
        slack = _SLACK if info.compress_size <= _SMALL else 0
        head = 30 + len(info.orig_filename.encode("utf-8")) + len(info.extra) + slack
        self.file.span(info.header_offset, info.header_offset + head + info.compress_size)
        try:
            with _one_line(self.source.name, f"{name} is damaged"), self.zip.open(info) as fh:
                while piece := fh.read(1 << 20):
                    yield piece
        finally:
            self.file.drain()

    def read(self, name: str, cap: int) -> bytes:
        """A (small) member's whole uncompressed content."""
        return b"".join(self.chunks(name, cap))

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> RemoteZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _one_line(name: str, what: str) -> Iterator[None]:
    try:
        yield
    except ReadError:
        raise
    except _ZIP_ERRORS as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ReadError(f"{name}: {what} ({detail})") from None
