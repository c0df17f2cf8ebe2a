"""What a CUDA extension wheel (xformers, bitsandbytes, vllm, torchao...) carries, from its bytes.

Unlike torch, an extension has no compiled-in arch string: its GPU code sits in CUDA *fat
binaries* inside each shared library (``.so``/``.pyd``). A fat binary is a container (magic
``0xBA55ED50``, version 1, a 16-byte header, then the size of its entries) of entries, each with
a header naming its kind (1 PTX, 2 ELF, i.e. SASS) and its ``sm`` number (at byte 28). The
libraries are streamed through the decompressor (``RemoteZip.chunks``) and scanned for those
headers; nothing is held whole, nothing is executed. Only the fat binaries of ``.nv_fatbin``
count (the image the CUDA runtime loads), not the relocatable copy in ``__nv_relfatbin`` kept
for device linking (``libsections`` finds the sections from the library's start and end). The entry
layout is the one ``cuobjdump`` lists, as read by open tools (ZLUDA's fatbin reader,
gpgpu-sim); a header that does not hold together (a stray magic in code) is skipped, never
taken for an architecture.

The torch requirement (``Requires-Dist: torch==2.9.0``) comes from the wheel's METADATA.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from resolver.io.http import Client
from resolver.io.ranges import Progress, open_source
from resolver.io.zip import RemoteZip
from resolver.wheels import WheelError
from resolver.wheels.libsections import FATBIN, Keeper

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY_HEAD = 32  # bytes of an entry header read: kind .. sm (offset 28)
MAX_LIBRARY = 2 * 1024 * 1024 * 1024  # inflated bytes of one library scanned at most
MAX_METADATA = 1024 * 1024
MAX_LIBRARIES = 64  # libraries of one wheel scanned at most
_LIBRARY = re.compile(r"\.(so(\.[0-9]+)*|pyd|dll)$")
_KIND = {1: "ptx", 2: "sass"}


class FatbinScanner:
    """Fed a library's bytes in order, collects (kind, sm) of every fat-binary entry in it, with
    the offset of the container each sits in, and keeps what ``libsections`` needs to say which
    containers lie in ``.nv_fatbin`` (the image the CUDA runtime loads)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.base = 0  # stream offset of buf[0]
        self.skip = 0  # bytes still to drop (an entry's payload)
        self.left = 0  # bytes of entries left in the current container (0: searching)
        self.at = 0  # stream offset of the current container
        self.found: set[tuple[str, int]] = set()
        self.placed: set[tuple[int, str, int]] = set()  # (container offset, kind, sm)
        self.containers = 0
        self.keeper = Keeper()

    def _drop(self, n: int) -> None:
        del self.buf[:n]
        self.base += n

    def feed(self, chunk: bytes) -> None:
        self.keeper.feed(chunk)
        self.buf += chunk
        while True:
            if self.skip:
                n = min(self.skip, len(self.buf))
                self._drop(n)
                self.skip -= n
                if self.skip:
                    return
            if self.left > 0:
                if len(self.buf) < _ENTRY_HEAD:
                    return
                self._entry()
                continue
            at = self.buf.find(FATBIN_MAGIC)
            if at < 0:
                self._drop(max(0, len(self.buf) - 3))
                return
            if len(self.buf) - at < _CONTAINER.size:
                self._drop(at)
                return
            _magic, version, head, size = _CONTAINER.unpack_from(self.buf, at)
            if version == 1 and head == _CONTAINER.size and 0 < size < MAX_LIBRARY:
                self.containers += 1
                self.left = size
                self.at = self.base + at
                self._drop(at + head)
            else:
                self._drop(at + 1)

    def _entry(self) -> None:
        kind, _ver, head, payload = struct.unpack_from("<HHIQ", self.buf, 0)
        (sm,) = struct.unpack_from("<I", self.buf, 28)
        total = head + payload
        if kind not in _KIND or not 32 <= head <= 1024 or total > self.left or not 10 <= sm < 1000:
            self.left = 0  # not a header after all: search again from here
            return
        self.found.add((_KIND[kind], sm))
        self.placed.add((self.at, _KIND[kind], sm))
        self.left -= total
        self.skip = total

    def loaded(self) -> tuple[set[tuple[str, int]], bool]:
        """The entries the CUDA runtime loads (those in ``.nv_fatbin``), and whether the scan
        could be narrowed to it (False: not an ELF or PE library it can read; every entry)."""
        secs = self.keeper.sections()
        if secs is None:
            return set(self.found), False
        spans = [(s.offset, s.offset + s.size) for s in secs if s.name in FATBIN]
        kept = {(k, sm) for at, k, sm in self.placed if any(lo <= at < hi for lo, hi in spans)}
        return kept, True


def sm_cc(sm: int) -> str:
    """``86`` -> ``8.6``, ``120`` -> ``12.0``: the database's notation."""
    return f"{sm // 10}.{sm % 10}"


def scan_fatbins(chunks: Iterable[bytes]) -> tuple[list[str], list[str]]:
    """SASS and PTX compute capabilities the CUDA runtime loads from a streamed library: its
    ``.nv_fatbin`` section's fat binaries (every one found, where its sections cannot be read)."""
    sass, ptx, _narrowed = scan_library(chunks)
    return sass, ptx


def scan_library(chunks: Iterable[bytes]) -> tuple[list[str], list[str], bool]:
    """``scan_fatbins``, and whether the scan was narrowed to the loaded image."""
    scanner = FatbinScanner()
    for chunk in chunks:
        scanner.feed(chunk)
    found, narrowed = scanner.loaded()
    return _ccs(found, "sass"), _ccs(found, "ptx"), narrowed


def _ccs(found: set[tuple[str, int]], kind: str) -> list[str]:
    return [sm_cc(sm) for k, sm in sorted(found, key=lambda f: f[1]) if k == kind]


@dataclass
class ExtensionReport:
    """One extension wheel's facts. ``as_json`` is ``db inspect-wheel --json``'s form for it."""

    file: str
    name: str
    version: str
    requires_torch: str | None  # the specifier ("==2.9.0", ">=2.5"); None: no torch requirement
    requires_python: str | None
    libraries: dict[str, dict[str, list[str]]]  # member -> {"sass": [...], "ptx": [...]}
    bytes_read: int
    size: int
    notes: list[str] = field(default_factory=list)

    @property
    def sass(self) -> list[str]:
        return _union(lib["sass"] for lib in self.libraries.values())

    @property
    def ptx(self) -> list[str]:
        return _union(lib["ptx"] for lib in self.libraries.values())

    @property
    def device_code(self) -> bool:
        return bool(self.sass or self.ptx)

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "version": self.version,
            "requires_torch": self.requires_torch,
            "requires_python": self.requires_python,
            "device_code": self.device_code,
            "sass": self.sass,
            "ptx": self.ptx,
            "libraries": self.libraries,
            "bytes_read": self.bytes_read,
            "size": self.size,
            "notes": self.notes,
        }


def _union(lists: Iterable[list[str]]) -> list[str]:
    out = {cc for lst in lists for cc in lst}
    return sorted(out, key=lambda cc: tuple(int(p) for p in cc.split(".")))


def torch_requirement(metadata: str) -> str | None:
    """The specifier of the wheel's unconditional ``Requires-Dist: torch`` (None: none)."""
    from email.parser import HeaderParser

    msg = HeaderParser().parsestr(metadata, headersonly=True)
    specs: list[str] = []
    for line in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(line))
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and (
            req.marker is None or "extra" not in str(req.marker)
        ):
            specs.append(str(req.specifier) or "*")
    return ",".join(specs) if specs else None


def inspect_extension(
    where: str,
    *,
    budget: int | None = None,
    client: Client | None = None,
    progress: Progress | None = None,
) -> ExtensionReport:
    """Read an extension wheel at a URL or path: METADATA, then every library's fat binaries."""
    from email.parser import HeaderParser

    with open_source(where, client=client, budget=budget, progress=progress) as source:
        file = where.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        wheel = RemoteZip(source)
        meta = [
            n
            for n in wheel.names()
            if n.count("/") == 1
            and n.split("/")[0].endswith(".dist-info")
            and n.endswith("/METADATA")
        ]
        if len(meta) != 1:
            raise WheelError(f"{file}: not one *.dist-info/METADATA in the wheel")
        text = wheel.read(meta[0], MAX_METADATA).decode("utf-8", errors="replace")
        msg = HeaderParser().parsestr(text, headersonly=True)
        libs = [n for n in wheel.names() if _LIBRARY.search(n)]
        if len(libs) > MAX_LIBRARIES:
            raise WheelError(f"{file}: more than {MAX_LIBRARIES} libraries")
        found: dict[str, dict[str, list[str]]] = {}
        unread: list[str] = []  # libraries whose sections could not be read
        for lib in libs:
            sass, ptx, narrowed = scan_library(wheel.chunks(lib, MAX_LIBRARY))
            if sass or ptx:
                found[lib] = {"sass": sass, "ptx": ptx}
                if not narrowed:
                    unread.append(f"{lib}: sections not read; every fat binary in it counted")
        return ExtensionReport(
            file=file,
            name=canonicalize_name(msg.get("Name") or ""),
            version=str(msg.get("Version") or ""),
            requires_torch=torch_requirement(text),
            requires_python=msg.get("Requires-Python"),
            libraries=found,
            bytes_read=source.bytes_read,
            size=source.size,
            notes=[*source.notes, *unread],
        )
