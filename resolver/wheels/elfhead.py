"""What a library in a wheel links, from the first bytes of its ELF file: the cheap read.

A fat-binary scan inflates a whole library (300 MiB of vllm's). What it links — the CUDA runtime
(``libcudart.so.12``), torch's libraries — is named in ``.dynstr``, which a linker places in the
file's first, read-only segment, before the code. So only that head is inflated: the member's
compressed bytes are fetched by range reads in growing windows (``HEAD_WINDOW`` first) until
the inflated bytes reach the first executable segment (read from the program headers) or hold
the version names that end ``.dynstr``, or ``MAX_HEAD``. The ``Source`` counts every byte fetched.

Read from those strings, never executed: the shared objects it names (``lib*.so[.N]``, so the CUDA
majors of ``libcudart``/``libcublas``/...) and the C++ ABI its torch symbols use (``__cxx11``
names: the C++11 ABI; ``std::string`` mangled as ``Ss`` with no ``__cxx11``: the old one).
Windows' PE libraries name their DLLs at the end of the file: they are not read here.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field

from resolver.io import ReadError
from resolver.io.zip import RemoteZip

HEAD_WINDOW = 256 * 1024  # compressed bytes of the first read of a library's head
MAX_HEAD = 16 * 1024 * 1024  # inflated bytes of one library's head read at most
# .dynstr ends with the version names a library needs (after the libraries it names): a head
# holding libc's and a GLIBC version string has passed them (a layout whose first segment is
# also its code has no earlier stop).
_PASSED = (b"\x00libc.so.6\x00", b"\x00GLIBC_2.")
_LOCAL = struct.Struct("<IHHHHHIIIHH")  # a zip local file header (30 bytes)
_LOCAL_MAGIC = 0x04034B50
_ELF64_LE = b"\x7fELF\x02\x01"
_PHDR = struct.Struct("<IIQQQQQQ")  # type, flags, offset, vaddr, paddr, filesz, memsz, align
_PT_LOAD, _PF_X = 1, 1
_SONAME = re.compile(rb"\x00(lib[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*\.so(?:\.[0-9]+)*)(?=\x00)")
_CUDA_LIB = re.compile(r"lib(cudart|cublas|cublasLt|cusparse|cufft|curand|nvrtc)\.so\.([0-9]+)")


@dataclass
class LibraryHead:
    """What one library's head says (``read``: the strings were reached)."""

    member: str
    linked: list[str] = field(default_factory=list)  # the shared objects named, sorted
    cxx11_abi: bool | None = None  # None: no C++ standard-library string in its symbols
    head_bytes: int = 0  # inflated bytes looked at
    complete: bool = True  # False: MAX_HEAD reached before the first executable segment

    @property
    def cuda_majors(self) -> dict[str, int]:
        """``{"cudart": 12, ...}``: the CUDA libraries it links and their majors."""
        out: dict[str, int] = {}
        for name in self.linked:
            m = _CUDA_LIB.fullmatch(name)
            if m:
                out[m.group(1)] = int(m.group(2))
        return out

    @property
    def cudart(self) -> int | None:
        return self.cuda_majors.get("cudart")


def code_start(head: bytes) -> int | None:
    """Where an ELF64 little-endian file's first executable segment starts (None: not such a
    file, or its program headers lie past ``head``)."""
    if not head.startswith(_ELF64_LE) or len(head) < 64:
        return None
    (phoff,) = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    if phentsize != _PHDR.size or not 0 < phnum <= 64 or phoff + phnum * phentsize > len(head):
        return None
    starts = []
    for i in range(phnum):
        p_type, flags, offset, *_rest = _PHDR.unpack_from(head, phoff + i * phentsize)
        if p_type == _PT_LOAD and flags & _PF_X and offset > 0:
            starts.append(offset)
    return min(starts) if starts else None


def parse_head(member: str, head: bytes, complete: bool = True) -> LibraryHead:
    """The shared objects and the C++ ABI named in a library's first bytes."""
    names = sorted({m.group(1).decode("ascii") for m in _SONAME.finditer(head)})
    abi: bool | None = None
    if b"__cxx11" in head:
        abi = True
    elif re.search(rb"_ZN[0-9A-Za-z_]*Ss", head) or b"_ZNSs" in head:
        abi = False
    return LibraryHead(member, names, abi, len(head), complete)


def read_head(wheel: RemoteZip, member: str, *, limit: int = MAX_HEAD) -> LibraryHead:
    """Inflate ``member``'s head by range reads (see the module's docstring) and parse it."""
    info = wheel.info(member)
    if info is None:
        raise ReadError(f"{wheel.source.name}: no member {member}")
    source = wheel.source
    local = source.read(info.header_offset, _LOCAL.size)
    fields = _LOCAL.unpack(local)
    if fields[0] != _LOCAL_MAGIC:
        raise ReadError(f"{source.name}: {member}: no local header where the directory says")
    method, name_len, extra_len = fields[3], fields[9], fields[10]
    start = info.header_offset + _LOCAL.size + name_len + extra_len
    end = min(start + info.compress_size, source.size)
    if method not in (0, 8):
        raise ReadError(f"{source.name}: {member}: compression method {method} not read")
    inflate = zlib.decompressobj(-15) if method == 8 else None
    head = bytearray()
    want = limit
    at, window = start, HEAD_WINDOW
    while at < end and len(head) < want:
        n = min(window, end - at)
        raw = source.read(at, n)
        at += n
        window *= 4
        try:
            head += inflate.decompress(raw, want - len(head)) if inflate else raw
        except zlib.error as exc:
            raise ReadError(f"{source.name}: {member} is damaged ({exc})") from None
        if inflate is not None and inflate.unconsumed_tail:
            break  # ``want`` reached inside this window
        if want == limit:
            stop = code_start(bytes(head[:65536]))
            if stop is not None:
                want = min(limit, stop)
        if all(mark in head for mark in _PASSED):
            want = len(head)
            break
    complete = len(head) >= min(want, info.file_size) or at >= end
    return parse_head(member, bytes(head[:want]), complete)
