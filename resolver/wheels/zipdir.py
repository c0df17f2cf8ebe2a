"""The zip central directory and member reads, over a random-access ``Source``.

Written for the zip format's own structures (PKWARE APPNOTE 6.3: end of central directory,
zip64 end record and locator, central directory headers, the zip64 extended-information extra
field 0x0001, local file headers) because ``zipfile`` wants a seekable file and would pull
whole members into memory; here every read is a counted byte range, a member is decompressed
as it streams, and its size is capped before a byte is inflated.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from resolver.wheels import WheelError
from resolver.wheels.source import Source

EOCD_SIG = b"PK\x05\x06"
ZIP64_LOCATOR_SIG = b"PK\x06\x07"
ZIP64_EOCD_SIG = b"PK\x06\x06"
CD_SIG = b"PK\x01\x02"
LOCAL_SIG = b"PK\x03\x04"
EOCD_LEN = 22
ZIP64_LOCATOR_LEN = 20
ZIP64_EOCD_LEN = 56
TAIL_READ = 64 * 1024 + EOCD_LEN + ZIP64_LOCATOR_LEN  # the longest comment, the EOCD, a locator
MAX_DIRECTORY = 64 * 1024 * 1024  # a torch wheel's directory is ~2-3 MB
MAX_ENTRIES = 1_000_000
STORED, DEFLATED = 0, 8


@dataclass(frozen=True)
class Member:
    name: str
    method: int
    compressed_size: int
    size: int
    crc: int
    header_offset: int
    flags: int
    cd_extra_len: int


@dataclass(frozen=True)
class Directory:
    members: dict[str, Member]
    zip64: bool
    directory_offset: int


def read_directory(source: Source) -> Directory:
    """Every member of the zip, from its end records and central directory."""
    tail_start, tail = source.tail(TAIL_READ)
    pos = _find_eocd(tail)
    if pos < 0:
        raise WheelError(
            f"{source.name}: no zip end record: not a wheel (zip), or the file is truncated"
        )
    (_sig, disk, cd_disk, _n_disk, n_total, cd_size, cd_offset, _clen) = struct.unpack(
        "<4sHHHHIIH", tail[pos : pos + EOCD_LEN]
    )
    zip64 = False
    loc = pos - ZIP64_LOCATOR_LEN
    if loc >= 0 and tail[loc : loc + 4] == ZIP64_LOCATOR_SIG:
        zip64 = True
        _s, _d, z64_offset, _ndisks = struct.unpack("<4sIQI", tail[loc : loc + ZIP64_LOCATOR_LEN])
        rec = _slice_or_read(source, tail_start, tail, z64_offset, ZIP64_EOCD_LEN)
        if rec[:4] != ZIP64_EOCD_SIG:
            raise WheelError(f"{source.name}: damaged zip64 end record")
        (_s, _rsize, _vm, _vn, disk, cd_disk, _nd, n_total, cd_size, cd_offset) = struct.unpack(
            "<4sQHHIIQQQQ", rec
        )
    elif 0xFFFFFFFF in (cd_size, cd_offset) or n_total == 0xFFFF:
        raise WheelError(f"{source.name}: a zip64 archive without its zip64 locator")
    if disk != 0 or cd_disk != 0:
        raise WheelError(f"{source.name}: a multi-part (spanned) zip is not a wheel")
    if cd_size > MAX_DIRECTORY or n_total > MAX_ENTRIES:
        raise WheelError(
            f"{source.name}: the zip directory is implausibly large "
            f"({cd_size} bytes, {n_total} entries)"
        )
    if cd_offset + cd_size > source.size:
        raise WheelError(
            f"{source.name}: truncated: the zip directory lies past the end of the file"
        )
    data = _slice_or_read(source, tail_start, tail, cd_offset, cd_size)
    members = _parse_directory(source.name, data, n_total)
    return Directory(members=members, zip64=zip64, directory_offset=cd_offset)


def _find_eocd(tail: bytes) -> int:
    """The end record's position in ``tail``: the last signature whose comment fits exactly."""
    pos = tail.rfind(EOCD_SIG)
    while pos >= 0:
        if pos + EOCD_LEN <= len(tail):
            (comment_len,) = struct.unpack("<H", tail[pos + 20 : pos + 22])
            if pos + EOCD_LEN + comment_len == len(tail):
                return pos
        pos = tail.rfind(EOCD_SIG, 0, pos)
    return -1


def _slice_or_read(source: Source, tail_start: int, tail: bytes, offset: int, length: int) -> bytes:
    if offset >= tail_start and offset + length <= tail_start + len(tail):
        return tail[offset - tail_start : offset - tail_start + length]
    return source.read(offset, length)


def _parse_directory(name: str, data: bytes, n_total: int) -> dict[str, Member]:
    members: dict[str, Member] = {}
    pos = 0
    for _ in range(n_total):
        if data[pos : pos + 4] != CD_SIG or pos + 46 > len(data):
            raise WheelError(f"{name}: damaged zip directory (entry {len(members) + 1})")
        (
            flags,
            method,
            crc,
            csize,
            usize,
            nlen,
            elen,
            clen,
            _disk,
            offset,
        ) = _cd_fields(data, pos)
        end = pos + 46 + nlen + elen + clen
        if end > len(data):
            raise WheelError(f"{name}: damaged zip directory (entry {len(members) + 1})")
        raw_name = data[pos + 46 : pos + 46 + nlen]
        extra = data[pos + 46 + nlen : pos + 46 + nlen + elen]
        usize, csize, offset = _zip64_extra(name, extra, usize, csize, offset)
        member_name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        members[member_name] = Member(
            name=member_name,
            method=method,
            compressed_size=csize,
            size=usize,
            crc=crc,
            header_offset=offset,
            flags=flags,
            cd_extra_len=elen,
        )
        pos = end
    return members


def _cd_fields(data: bytes, pos: int) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    (
        _sig,
        _made,
        _need,
        flags,
        method,
        _time,
        _date,
        crc,
        csize,
        usize,
        nlen,
        elen,
        clen,
        disk,
        _iattr,
        _eattr,
        offset,
    ) = struct.unpack("<4sHHHHHHIIIHHHHHII", data[pos : pos + 46])
    return flags, method, crc, csize, usize, nlen, elen, clen, disk, offset


def _zip64_extra(
    name: str, extra: bytes, usize: int, csize: int, offset: int
) -> tuple[int, int, int]:
    """Sizes and offset from the zip64 extra field where the 32-bit fields say 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[pos : pos + 4])
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 0x0001:
            values = list(struct.unpack(f"<{len(body) // 8}Q", body[: len(body) // 8 * 8]))
            try:
                if usize == 0xFFFFFFFF:
                    usize = values.pop(0)
                if csize == 0xFFFFFFFF:
                    csize = values.pop(0)
                if offset == 0xFFFFFFFF:
                    offset = values.pop(0)
            except IndexError:
                raise WheelError(f"{name}: damaged zip64 extra field") from None
            return usize, csize, offset
        pos += 4 + size
    if 0xFFFFFFFF in (usize, csize, offset):
        raise WheelError(f"{name}: a zip64 size without its zip64 extra field")
    return usize, csize, offset


def member_data(source: Source, member: Member, cap: int) -> Iterator[bytes]:
    """The member's uncompressed bytes, streamed; at most ``cap`` of them, CRC checked."""
    if member.size > cap:
        raise WheelError(
            f"{source.name}: {member.name} is {member.size} bytes uncompressed, over the "
            f"{cap}-byte cap for it"
        )
    if member.flags & 0x1:
        raise WheelError(f"{source.name}: {member.name} is encrypted")
    if member.method not in (STORED, DEFLATED):
        raise WheelError(
            f"{source.name}: {member.name} uses compression method {member.method} "
            "(a wheel uses stored or deflate)"
        )
    head_len = 30 + len(member.name.encode("utf-8")) + member.cd_extra_len + 64
    small = member.compressed_size <= 256 * 1024
    want = head_len + (member.compressed_size if small else 0)
    want = min(want, source.size - member.header_offset)
    if want < 30:
        raise WheelError(f"{source.name}: truncated: {member.name} lies past the end of the file")
    first = source.read(member.header_offset, want)
    if first[:4] != LOCAL_SIG:
        raise WheelError(f"{source.name}: damaged zip: no local header for {member.name}")
    nlen, elen = struct.unpack("<HH", first[26:30])
    data_start = member.header_offset + 30 + nlen + elen
    have = first[30 + nlen + elen :]
    chunks: Iterator[bytes]
    if len(have) >= member.compressed_size:
        chunks = iter([have[: member.compressed_size]])
    else:
        rest = source.stream(data_start + len(have), member.compressed_size - len(have))
        chunks = _chain(have, rest)
    return _inflate(source.name, member, chunks, cap)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _inflate(name: str, member: Member, chunks: Iterator[bytes], cap: int) -> Iterator[bytes]:
    crc = 0
    out = 0
    inflater = zlib.decompressobj(-15) if member.method == DEFLATED else None
    for chunk in chunks:
        if inflater is None:
            pieces = [chunk]
        else:
            pieces = []
            buf = chunk
            while buf:
                try:
                    piece = inflater.decompress(buf, 1 << 20)
                except zlib.error as exc:
                    raise WheelError(f"{name}: {member.name} is damaged ({exc})") from None
                pieces.append(piece)
                buf = inflater.unconsumed_tail
                if out + sum(map(len, pieces)) > cap:
                    break
        for piece in pieces:
            out += len(piece)
            if out > member.size or out > cap:
                raise WheelError(
                    f"{name}: {member.name} inflates past its declared size ({member.size} bytes)"
                )
            crc = zlib.crc32(piece, crc)
            if piece:
                yield piece
    if inflater is not None:
        tail = inflater.flush()
        out += len(tail)
        crc = zlib.crc32(tail, crc)
        if tail:
            yield tail
    if out != member.size or (crc & 0xFFFFFFFF) != member.crc:
        raise WheelError(
            f"{name}: {member.name} is damaged (size {out} of {member.size}, CRC mismatch)"
            if out == member.size
            else f"{name}: {member.name} is damaged ({out} of {member.size} bytes)"
        )


def read_member(source: Source, member: Member, cap: int) -> bytes:
    """A (small) member's whole uncompressed content."""
    return b"".join(member_data(source, member, cap))
