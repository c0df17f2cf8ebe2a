"""The byte ranges of a shared library's sections: ELF (Linux) and PE (Windows) headers read.

A CUDA library holds fat binaries in two places: ``.nv_fatbin``, the image the CUDA runtime
registers and loads, and ``__nv_relfatbin``, a relocatable copy kept for device linking (``-rdc``)
that the runtime never loads. Only the first says what runs on a GPU, so the fat-binary scan is
narrowed to it (a PE image names it ``.nv_fatb``: its section names are 8 bytes). The library is
streamed once: an ELF header is at its start, its section headers and their name table
(``.shstrtab``) at its end, so the reader keeps the first bytes and a bounded tail; a PE image's
section table follows its headers at the start. Only 64-bit little-endian ELF and PE are read
(every CUDA target); anything else answers None and the caller scans every fat binary. Parsed
with the standard library's ``struct``; every offset is checked against what was kept.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEAD = 8192  # bytes kept from a library's start: the ELF header, a PE image's section table
TAIL = 1 << 20  # bytes kept from a library's end: its section headers and .shstrtab
_EHDR = struct.Struct("<HHIQQQIHHHHHH")  # after e_ident: type .. shstrndx
_SHDR = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, ...
_PE_SHDR = struct.Struct("<8sIIII")  # name, virtual size and address, raw size and offset
_MAX_SECTIONS = 4096
_SHT_NOBITS = 8


class Section(NamedTuple):
    name: str
    offset: int
    size: int


FATBIN = (".nv_fatbin", ".nv_fatb")  # the loaded image's section: ELF, PE


def sections(head: bytes, tail: bytes, tail_at: int) -> list[Section] | None:
    """The named sections of a library whose first bytes are ``head`` and whose bytes from
    offset ``tail_at`` on are ``tail`` (its end); None where they cannot be read from those."""
    if head[:2] == b"MZ":
        return _pe_sections(head)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None  # not ELF, or not 64-bit little-endian
    fields = _EHDR.unpack_from(head, 16)
    shoff, shentsize, shnum, shstrndx = fields[5], fields[10], fields[11], fields[12]
    if shentsize != _SHDR.size or not 0 < shnum <= _MAX_SECTIONS or shstrndx >= shnum:
        return None
    table = _slice(tail, tail_at, shoff, shnum * shentsize)
    if table is None:
        return None
    raw = [_SHDR.unpack_from(table, i * shentsize) for i in range(shnum)]
    names = raw[shstrndx]
    strtab = _slice(tail, tail_at, names[4], names[5])
    if strtab is None:
        return None
    out: list[Section] = []
    for name_at, kind, _flags, _addr, offset, size, *_ in raw:
        if kind in (0, _SHT_NOBITS) or not 0 <= name_at < len(strtab):  # null, no bytes
            continue
        end = strtab.find(b"\0", name_at)
        name = strtab[name_at : end if end >= 0 else len(strtab)].decode("ascii", "replace")
        out.append(Section(name, offset, size))
    return out


def _pe_sections(head: bytes) -> list[Section] | None:
    """A PE image's sections, from its section table (after the PE and optional headers)."""
    if len(head) < 0x40:
        return None
    (pe,) = struct.unpack_from("<I", head, 0x3C)
    if pe + 24 > len(head) or head[pe : pe + 4] != b"PE\0\0":
        return None
    count, optional = (
        struct.unpack_from("<H", head, pe + 6)[0],
        struct.unpack_from("<H", head, pe + 20)[0],
    )
    table = pe + 24 + optional
    if not 0 < count <= _MAX_SECTIONS or table + 40 * count > len(head):
        return None
    out: list[Section] = []
    for i in range(count):
        name, _vsize, _vaddr, size, offset = _PE_SHDR.unpack_from(head, table + 40 * i)
        out.append(Section(name.rstrip(b"\0").decode("ascii", "replace"), offset, size))
    return out


def _slice(tail: bytes, tail_at: int, offset: int, size: int) -> bytes | None:
    """``size`` bytes at file ``offset``, where the kept tail holds them whole."""
    start = offset - tail_at
    if start < 0 or size < 0 or start + size > len(tail):
        return None
    return tail[start : start + size]


class Keeper:
    """Keeps a streamed library's first ``HEAD`` bytes and its last ``TAIL`` bytes."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.seen = 0  # bytes fed so far

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < HEAD:
            self.head += chunk[: HEAD - len(self.head)]
        self.tail += chunk[-TAIL:]
        if len(self.tail) > TAIL:
            del self.tail[: len(self.tail) - TAIL]
        self.seen += len(chunk)

    def sections(self) -> list[Section] | None:
        return sections(bytes(self.head), bytes(self.tail), self.seen - len(self.tail))
