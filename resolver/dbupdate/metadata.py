"""A wheel's core metadata: parse it, and read it out of a remote wheel with a few range reads.

A CUDA torch wheel is 1–3 GB; its ``METADATA`` is a few kB near the end. Without PEP 658
``.metadata`` files we read the zip's end of central directory (ZIP64 included), the central
directory, then the one member's local header and data — never the whole wheel.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import BytesHeaderParser

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from resolver.core.errors import MetadataError
from resolver.core.platforms import marker_env
from resolver.markers import applicable

TAIL_BYTES = 64 * 1024  # one suffix read: the EOCD, usually the whole central directory too
MAX_CENTRAL_DIRECTORY = 64 * 1024 * 1024
MAX_METADATA = 8 * 1024 * 1024

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_CENTRAL_FMT = "<4s6H3L5H2L"  # 46 bytes
_LOCAL_FMT = "<4s5H3L2H"  # 30 bytes
_METADATA_RE = re.compile(r"^[^/]+\.dist-info/METADATA$")

# Requires-Dist names of the pins gpuresolve records ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
# or the suffix-less names CUDA 13 builds use).
_PIN_NAMES = {
    "cuda_runtime": re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$"),
    "cudnn": re.compile(r"^nvidia-cudnn(-cu\d+)?$"),
    "nccl": re.compile(r"^nvidia-nccl(-cu\d+)?$"),
    "torch": re.compile(r"^torch$"),
}


# Marker environments of the platforms gpuresolve covers (the wheel's Python is added).
@dataclass(frozen=True)
class CoreMetadata:
    name: str  # canonical
    version: str
    requires_dist: tuple[str, ...]

    def pins(self, platform: str, python: str) -> dict[str, str]:
        """The exact (``==``) pins gpuresolve records, for a wheel of this platform and Python.

        Keys: ``cuda_runtime``, ``cudnn``, ``nccl`` (torch) or ``torch`` (its companions);
        markers are evaluated for the wheel's own platform, never this machine's.
        """
        found: dict[str, str] = {}
        for req in applicable(self.requires_dist, marker_env(platform, python)):
            name = canonicalize_name(req.name)
            for key, pattern in _PIN_NAMES.items():
                if pattern.match(name):
                    exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
                    if exact and "*" not in exact[0]:
                        found[key] = _public(exact[0])
        return found


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def parse_metadata(data: bytes, name: str, version: str) -> CoreMetadata:
    """Parse a METADATA file and check that it describes this wheel (else: garbage)."""
    if not data.lstrip().lower().startswith(b"metadata-version:"):
        raise MetadataError("not a core metadata file (no Metadata-Version)")
    msg = BytesHeaderParser().parsebytes(data)
    got_name, got_version = msg.get("Name"), msg.get("Version")
    if not got_name or not got_version:
        raise MetadataError("core metadata without Name or Version")
    if canonicalize_name(got_name) != canonicalize_name(name):
        raise MetadataError(f"metadata names {got_name}, expected {name}")
    try:  # the local tag ("+cu126") may or may not be repeated in the metadata
        same = Version(got_version).public == Version(version).public
    except InvalidVersion:
        same = False
    if not same:
        raise MetadataError(f"metadata says version {got_version}, expected {version}")
    return CoreMetadata(
        name=canonicalize_name(got_name),
        version=str(got_version),
        requires_dist=tuple(str(r) for r in msg.get_all("Requires-Dist") or ()),
    )


# --- remote zip ------------------------------------------------------------------------------

# read(start, end) -> the bytes [start, end) of the remote file.
ReadRange = Callable[[int, int], bytes]


def metadata_from_zip(read: ReadRange, size: int, tail: bytes, name: str) -> bytes:
    """The ``*.dist-info/METADATA`` member of a zip of ``size`` bytes whose last bytes are ``tail``.

    ``name`` (the project) picks the dist-info directory when a wheel has more than one.
    """
    if not 22 <= len(tail) <= size:
        raise MetadataError(f"not a zip file ({size} bytes)")
    tail_start = size - len(tail)

    def read_exact(start: int, end: int) -> bytes:
        if start < 0 or end > size or start > end:
            raise MetadataError("zip structure points outside the file")
        if start >= tail_start:
            return tail[start - tail_start : end - tail_start]
        data = read(start, end)
        if len(data) != end - start:
            raise MetadataError("short range read")
        return data

    cd_offset, cd_size, entries = _end_of_central_directory(tail, tail_start, read_exact)
    if cd_size > MAX_CENTRAL_DIRECTORY:
        raise MetadataError(f"central directory of {cd_size} bytes is implausible")
    central = read_exact(cd_offset, cd_offset + cd_size)
    member = _find_metadata(central, entries, name)
    offset, comp_size, usize, method, crc, name_len, extra_len = member
    if usize > MAX_METADATA or comp_size > MAX_METADATA:
        raise MetadataError("METADATA member is implausibly large")
    # One read for the local header and the data (the local extra field usually equals the
    # central one; read again only when it does not).
    want_end = min(size, offset + 30 + name_len + extra_len + comp_size + 512)
    buf = read_exact(offset, want_end)
    if len(buf) < 30:
        raise MetadataError("truncated local header")
    sig, *_, local_name, local_extra = struct.unpack(_LOCAL_FMT, buf[:30])
    if sig != _LOCAL:
        raise MetadataError("bad local file header")
    start = 30 + local_name + local_extra
    if start + comp_size > len(buf):
        buf = read_exact(offset, offset + start + comp_size)
    raw = buf[start : start + comp_size]
    if method == 0:
        data = raw
    elif method == 8:
        try:
            inflater = zlib.decompressobj(-15)
            data = inflater.decompress(raw, MAX_METADATA + 1) + inflater.flush()
        except zlib.error as exc:
            raise MetadataError(f"METADATA does not inflate: {exc}") from None
    else:
        raise MetadataError(f"METADATA compressed with unsupported method {method}")
    if len(data) != usize or zlib.crc32(data) != crc:
        raise MetadataError("METADATA fails its CRC check")
    return data


def _end_of_central_directory(
    tail: bytes, tail_start: int, read_exact: ReadRange
) -> tuple[int, int, int]:
    """(offset, size, entry count) of the central directory, from the (ZIP64) EOCD."""
    pos = len(tail)
    while True:
        pos = tail.rfind(_EOCD, 0, pos)
        if pos < 0:
            raise MetadataError("no end of central directory record: not a zip file")
        if pos + 22 <= len(tail):
            (comment_len,) = struct.unpack("<H", tail[pos + 20 : pos + 22])
            if pos + 22 + comment_len == len(tail):
                break
    _sig, _disk, _cd_disk, _n_disk, entries, cd_size, cd_offset, _c = struct.unpack(
        "<4s4H2LH", tail[pos : pos + 22]
    )
    if entries != 0xFFFF and cd_size != 0xFFFFFFFF and cd_offset != 0xFFFFFFFF:
        return cd_offset, cd_size, entries
    loc = pos - 20
    if loc < 0 or tail[loc : loc + 4] != _ZIP64_LOCATOR:
        raise MetadataError("ZIP64 end of central directory locator missing")
    (_sig, _disk, z64_offset, _disks) = struct.unpack("<4sLQL", tail[loc : loc + 20])
    rec = read_exact(z64_offset, z64_offset + 56)
    if rec[:4] != _ZIP64_EOCD:
        raise MetadataError("bad ZIP64 end of central directory record")
    (_sig, _rsize, _made, _need, _disk, _cd_disk, _n_disk, n_total, size64, offset64) = (
        struct.unpack("<4sQ2H2L4Q", rec)
    )
    return offset64, size64, n_total


def _find_metadata(central: bytes, entries: int, project: str) -> tuple[int, ...]:
    """(local offset, compressed size, size, method, crc, name length, extra length)."""
    found: dict[str, tuple[int, ...]] = {}
    pos = 0
    for _ in range(entries):
        if central[pos : pos + 4] != _CENTRAL or pos + 46 > len(central):
            raise MetadataError("bad central directory entry")
        (_s, _vm, _vn, flags, method, _t, _d, crc, csize, usize, n, e, c, _ds, _ia, _ea, off) = (
            struct.unpack(_CENTRAL_FMT, central[pos : pos + 46])
        )
        raw_name = central[pos + 46 : pos + 46 + n]
        filename = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        extra = central[pos + 46 + n : pos + 46 + n + e]
        if _METADATA_RE.match(filename):
            usize, csize, off = _zip64_extra(extra, usize, csize, off)
            found[filename] = (off, csize, usize, method, crc, n, e)
        pos += 46 + n + e + c
    if not found:
        raise MetadataError("no *.dist-info/METADATA in the wheel")
    if len(found) == 1:
        return next(iter(found.values()))
    prefix = canonicalize_name(project).replace("-", "_") + "-"
    mine = [v for k, v in found.items() if k.lower().startswith(prefix)]
    if len(mine) != 1:
        raise MetadataError(f"several dist-info directories: {', '.join(sorted(found))}")
    return mine[0]


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Sizes and offset from the ZIP64 extra field where the 32-bit fields are saturated."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<2H", extra[pos : pos + 4])
        body = extra[pos + 4 : pos + 4 + length]
        if tag == 0x0001:
            values = [v[0] for v in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
            break
        pos += 4 + length
    if 0xFFFFFFFF in (usize, csize, offset):
        raise MetadataError("ZIP64 sizes missing from the extra field")
    return usize, csize, offset
