"""Every release of the extension packages since torch 2.1.0, read cheaply from the indexes.

``extcollect`` reads the newest releases whole (their libraries' fat binaries). The history —
every release with a wheel uploaded on or after ``FLOOR`` that the database lacks — is read by
range reads of each wheel's cheap parts only: the central directory, METADATA (the torch pin and
Requires-Python), a build record the wheel carries (xformers' ``cpp_lib.json``: the torch and CUDA
it was built with and its ``TORCH_CUDA_ARCH_LIST``), and the head of each ELF library
(``wheels.elfhead``: the ``libcudart.so.N`` it links, its C++ ABI). One wheel a platform and
release is read (the newest CPython's: the others of one build are the same compile).

Incremental: each page is asked for with the ETag it last had (a 304 has no body) and its
``_last-serial`` is kept (an unchanged serial is an unchanged page), in ``State``; a release the
database holds is never read again. So a run with nothing new makes one request per page.
Reads run on ``WORKERS`` threads, each with its own client; each wheel has ``PER_WHEEL`` bytes.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from resolver.core.errors import unsafe_char
from resolver.core.platforms import PLATFORMS
from resolver.dbupdate.collect import Progress, no_progress
from resolver.dbupdate.extcollect import ANY, _python_rank, files_by_version

__all__ = ["ANY", "FLOOR", "HistRelease", "History", "PageState", "WheelFacts", "history"]
from resolver.dbupdate.metadata import MetadataError, parse_metadata
from resolver.io import ReadError
from resolver.io.http import Client, FetchError
from resolver.io.ranges import open_source
from resolver.io.zip import RemoteZip
from resolver.wheels import WheelError
from resolver.wheels.elfhead import read_head
from resolver.wheels.extwheel import MAX_LIBRARIES, MAX_METADATA, torch_requirement
from resolver.wheels.simple import JSON_TYPE, Link, parse_page

FLOOR = "2023-10-04"  # torch 2.1.0's release: the history starts there
WORKERS = 4  # wheels read at once (a considerate client of a shared index)
PER_WHEEL = 64 * 1024 * 1024  # bytes one wheel's cheap parts may take
MAX_BUILD_RECORD = 64 * 1024
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_ELF_LIB = (".so",)  # ELF libraries (Windows' .pyd/.dll are PE: not read here)


@dataclass
class PageState:
    """What a page was when last read: its ETag and ``_last-serial`` (either may be absent)."""

    etag: str | None = None
    serial: int | None = None
    # versions of the page the history read whole-heartedly (every wheel answered): what they
    # gave is in the database or was not enough (left out, said once); not read again
    read: tuple[str, ...] = ()


@dataclass
class LibFacts:
    cudart: int | None  # the CUDA major it links: libcudart's, else cuBLAS's... (None: none)
    cxx11_abi: bool | None
    complete: bool
    runtime: bool = True  # ``cudart`` is libcudart's own (DT_NEEDED libcudart.so.N)


@dataclass
class WheelFacts:
    """One wheel's cheap parts."""

    platform: str  # a gpuresolve platform name, or ANY
    filename: str
    sha256: str | None
    torch: str | None = None  # the Requires-Dist torch specifier
    python: str | None = None
    build: dict[str, str] = field(default_factory=dict)  # cpp_lib.json: torch, cuda, arch_list
    # (package version, torch version) pairs of an import-time table in its __init__.py
    # (torchao's ``torchao_pytorch_compatible_versions``: its kernels load only with those)
    import_table: list[tuple[str, str]] = field(default_factory=list)
    libraries: dict[str, LibFacts] = field(default_factory=dict)
    unread_libraries: list[str] = field(default_factory=list)  # PE, or over MAX_LIBRARIES
    bytes_read: int = 0
    error: str | None = None
    # read whole (``scan_whole``): each library's SASS/PTX from its loaded fat binaries
    fatbins: dict[str, dict[str, list[str]]] | None = None
    url: str = ""

    @property
    def cudart(self) -> list[int]:
        return sorted({lib.cudart for lib in self.libraries.values() if lib.cudart is not None})

    @property
    def cxx11_abi(self) -> bool | None:
        seen = {lib.cxx11_abi for lib in self.libraries.values() if lib.cxx11_abi is not None}
        return seen.pop() if len(seen) == 1 else None


@dataclass
class HistRelease:
    package: str
    version: str
    folder: str  # "default" or a PyTorch variant folder
    date: str | None
    sdist: bool
    wheels: list[WheelFacts] = field(default_factory=list)


@dataclass
class History:
    releases: list[HistRelease] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pages: int = 0  # page requests made
    unchanged: int = 0  # of them, pages unchanged (304 or the same serial)
    wheels_read: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    state: dict[str, PageState] = field(default_factory=dict)  # page URL -> what it was
    links: dict[str, list[Link]] = field(default_factory=dict)  # page URL -> its links


def _serial(body: bytes) -> int | None:
    """A PEP 691 page's ``meta._last-serial`` (None: not served, or not an integer)."""
    try:
        meta = json.loads(body).get("meta")
    except (ValueError, AttributeError):
        return None
    value = meta.get("_last-serial") if isinstance(meta, dict) else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)  # the index serves it as a string
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_pages(
    client: Client, urls: Iterable[tuple[str, str, str]], state: Mapping[str, PageState]
) -> History:
    """Each ``(package, folder, url)`` page, asked for with its recorded ETag: its links where
    it changed; a page that is unchanged or absent (404) gets none. A PyTorch variant folder
    that cannot be read is recorded (a note names its index, once) and its index passed over;
    the default index failing fails the update (FetchError), as torch's pages do."""
    out = History()
    dead: set[str] = set()
    for package, folder, url in urls:
        root = url.rsplit("/", 3)[0]
        if root in dead:
            continue
        was = state.get(url, PageState())
        out.pages += 1
        try:
            page = client.get_if_changed(url, ACCEPT, was.etag)
        except FetchError as exc:
            if folder == "default":
                raise
            dead.add(root)
            out.notes.append(
                f"{root}/ could not be read ({exc}): the builds in its variant folders "
                f"({package}'s and the others') are not gathered (recorded: curate)"
            )
            continue
        if page is None:
            continue
        if page.not_modified:
            out.unchanged += 1
            out.state[url] = was
            continue
        serial = _serial(page.body)
        out.state[url] = PageState(page.etag, serial, was.read)
        if serial is not None and serial == was.serial:
            out.unchanged += 1
            continue
        out.links[url] = parse_page(page.body, page.content_type, page.url)
    return out


def releases_to_read(
    package: str,
    folder: str,
    links: list[Link],
    known: set[str],
    floor: str = FLOOR,
    sdist_only: bool = False,
) -> list[tuple[HistRelease, dict[str, Link]]]:
    """The releases ``known`` lacks (older than its newest) with a wheel uploaded on or after
    ``floor``, oldest first,
    with the one wheel a platform to read (the newest CPython's); with ``sdist_only`` (a package
    whose wheels are published elsewhere) a release of a source distribution alone too."""
    by_version = files_by_version(links, package, folder)
    # releases newer than the newest known are ``extcollect``'s (read whole, fat binaries too)
    newest = max((Version(v) for v in known), default=None)
    out = []
    for version in sorted(v for v in by_version if newest is None or v < newest):
        files = by_version[version]
        wheels = [(link, plat) for link, plat in files if plat is not None]
        uploads = [link.upload_time or "" for link, _p in (files if sdist_only else wheels)]
        if str(version) in known or not any(u[:10] >= floor for u in uploads):
            continue
        times = sorted(link.upload_time for link, _p in files if link.upload_time)
        rel = HistRelease(
            package,
            str(version),
            folder,
            times[0][:10] if times else None,
            any(plat is None for _l, plat in files),
        )
        chosen: dict[str, Link] = {}
        for plat in (*PLATFORMS, ANY):
            here = [link for link, p in wheels if p == plat]
            if here:
                chosen[plat] = max(here, key=lambda link: _python_rank(link.filename))
        out.append((rel, chosen))
    return out


def _build_record(raw: bytes) -> dict[str, str]:
    """xformers' cpp_lib.json: the torch and CUDA it was built with, its arch list."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    version: dict[str, Any] = doc["version"] if isinstance(doc.get("version"), dict) else {}
    env: dict[str, Any] = doc["env"] if isinstance(doc.get("env"), dict) else {}
    out: dict[str, str] = {}
    cuda = version.get("cuda")
    if isinstance(cuda, int) and not isinstance(cuda, bool) and 1000 <= cuda < 10000:
        out["cuda"] = f"{cuda // 100}.{cuda % 100}"  # 1201 -> 12.1 (major * 100 + minor)
    for key, value in (
        ("torch", version.get("torch")),
        ("arch_list", env.get("TORCH_CUDA_ARCH_LIST")),
    ):
        if isinstance(value, str) and 0 < len(value) <= 200 and unsafe_char(value) is None:
            out[key] = value
    return out


_PAIR = re.compile(
    r'\(\s*_parse_version\("([0-9A-Za-z.+]{1,40})"\)\s*,\s*_parse_version\("([0-9A-Za-z.+]{1,40})"\)\s*\)'
)


def import_table(source: bytes) -> list[tuple[str, str]]:
    """The (package, torch) version pairs of a compatibility table in ``__init__.py`` (torchao
    0.14.1 on: ``(_parse_version("0.14.1"), _parse_version("2.9.0"))``); read, never run."""
    text = source.decode("utf-8", errors="replace")
    if "compatible_versions" not in text:
        return []
    return [(m.group(1), m.group(2)) for m in _PAIR.finditer(text)][:200]


def read_wheel(client: Client, package: str, plat: str, link: Link) -> WheelFacts:
    """A wheel's cheap parts (see the module's docstring); an unreadable one gets ``error``."""
    facts = WheelFacts(plat, link.filename, link.sha256, url=link.url)
    try:
        with open_source(link.url, client=client, budget=PER_WHEEL) as source:
            try:
                wheel = RemoteZip(source)
                names = wheel.names()
                meta = [
                    n
                    for n in names
                    if n.count("/") == 1
                    and n.endswith(".dist-info/METADATA")
                    and canonicalize_name(n.split("-", 1)[0]) == package
                ]
                if len(meta) != 1:
                    raise WheelError(f"{link.filename}: not one *.dist-info/METADATA")
                text = wheel.read(meta[0], MAX_METADATA)
                parse_metadata(text, package, _version_of(link.filename))  # the wheel's own
                facts.torch = torch_requirement(text.decode("utf-8", errors="replace"))
                facts.python = _requires_python(text)
                record = [n for n in names if n.endswith("/cpp_lib.json") and n.count("/") == 1]
                if record:
                    facts.build = _build_record(wheel.read(record[0], MAX_BUILD_RECORD))
                init = f"{package.replace('-', '_')}/__init__.py"
                if init in names:
                    facts.import_table = import_table(wheel.read(init, MAX_BUILD_RECORD * 4))
                libs = sorted(n for n in names if n.endswith(_ELF_LIB) or ".so." in n)
                facts.unread_libraries = (
                    sorted(n for n in names if n.endswith((".pyd", ".dll"))) + libs[MAX_LIBRARIES:]
                )
                for lib in libs[:MAX_LIBRARIES]:
                    head = read_head(wheel, lib)
                    majors = head.cuda_majors  # libcudart's, else the CUDA library it links
                    major = majors.get("cudart", next(iter(sorted(majors.values())), None))
                    facts.libraries[lib] = LibFacts(
                        major, head.cxx11_abi, head.complete, "cudart" in majors
                    )
            finally:
                facts.bytes_read = source.bytes_read
    except (ReadError, WheelError, MetadataError) as exc:
        facts.error = " ".join(str(exc).split())[:200]
    return facts


def _requires_python(text: bytes) -> str | None:
    """Requires-Python, where it is a specifier (normalised)."""
    from email.parser import BytesHeaderParser

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    value = BytesHeaderParser().parsebytes(text).get("Requires-Python")
    if not value or len(value) > 200:
        return None
    try:
        return str(SpecifierSet(str(value).strip()))
    except InvalidSpecifier:
        return None


def _version_of(filename: str) -> str:
    return filename.split("-")[1]


def gather_history(
    make_client: Callable[[], Client],
    todo: list[tuple[HistRelease, dict[str, Link]]],
    *,
    workers: int = WORKERS,
    progress: Progress = no_progress,
) -> tuple[list[HistRelease], int, int]:
    """Read every chosen wheel of ``todo`` on ``workers`` threads (a client each): the
    releases with their wheels, the wheels read and the bytes fetched."""
    local = threading.local()
    made: list[Client] = []
    lock = threading.Lock()

    def client() -> Client:
        if getattr(local, "client", None) is None:
            local.client = make_client()
            with lock:
                made.append(local.client)
        c: Client = local.client
        return c

    jobs = [(rel, plat, link) for rel, chosen in todo for plat, link in chosen.items()]
    got: dict[int, WheelFacts] = {}
    try:
        with (
            progress("reading extension wheels (history)", len(jobs)) as bar,
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
        ):

            def one(job: tuple[HistRelease, str, Link]) -> WheelFacts:
                return read_wheel(client(), job[0].package, job[1], job[2])

            futures = {pool.submit(one, job): i for i, job in enumerate(jobs)}
            for future, i in futures.items():
                got[i] = future.result()
                bar.update(1)
    finally:
        for c in made:
            c.close()
    for i, (rel, _plat, _link) in enumerate(jobs):
        rel.wheels.append(got[i])
    total = sum(w.bytes_read for w in got.values())
    return [rel for rel, _c in todo], len(jobs), total


MAX_WHOLE = 1024 * 1024 * 1024  # bytes of the whole reads of one update at most


def scan_whole(
    client: Client,
    releases: list[HistRelease],
    wanted: Callable[[HistRelease], bool],
    budget: int = MAX_WHOLE,
) -> tuple[int, list[str]]:
    """Where the cheap parts do not answer (no arch list from a build record or a build
    configuration: ``wanted``), stream further: the newest such release of each CUDA runtime
    major its libraries link and torch minor it pins (a user pinning torch gets the release
    built for it), newest first, its Linux x86-64 wheel read whole for the fat binaries the
    runtime loads (``wheels.extwheel``), within ``budget`` bytes in all. Returns the bytes read
    and notes (what was not read, and why)."""
    from resolver.wheels.extwheel import inspect_extension

    newest: dict[tuple[str, int, str], HistRelease] = {}
    for rel in releases:
        for w in rel.wheels:
            if w.platform == "linux-x86_64" and w.error is None and w.cudart and wanted(rel):
                pin = re.match(r"==\s*([0-9]+\.[0-9]+)", w.torch or "")
                key = (rel.package, w.cudart[-1], pin.group(1) if pin else "")
                if key not in newest or Version(rel.version) > Version(newest[key].version):
                    newest[key] = rel
    spent, notes = 0, []
    order = sorted(newest.items(), key=lambda kv: Version(kv[1].version), reverse=True)
    for (package, major, _minor), rel in order:
        w = next(w for w in rel.wheels if w.platform == "linux-x86_64")
        try:
            report = inspect_extension(w.url, budget=budget - spent, client=client)
        except (ReadError, WheelError) as exc:
            detail = " ".join(str(exc).split())[:160]
            notes.append(f"{package} {rel.version} (CUDA {major}): not read whole ({detail})")
            continue
        spent += report.bytes_read
        w.bytes_read += report.bytes_read
        w.fatbins = report.libraries
    return spent, notes


def history(
    client: Client,
    make_client: Callable[[], Client],
    pages: Iterable[tuple[str, str, str]],
    known: Mapping[str, set[str]],
    state: Mapping[str, PageState],
    *,
    elsewhere: frozenset[str] = frozenset(),
    whole: Callable[[HistRelease], bool] | None = None,
    whole_budget: int = MAX_WHOLE,
    floor: str = FLOOR,
    workers: int = WORKERS,
    progress: Progress = no_progress,
) -> History:
    """The pages ``(package, folder, url)`` read (one request each), then every release they
    list that ``known`` lacks since ``floor`` read cheaply (for the packages ``elsewhere``,
    whose wheels are not on these indexes, their source-only releases too); ``whole`` names the
    releases whose arch lists nothing cheap gives (``scan_whole`` reads one a CUDA major whole)."""
    start = time.monotonic()
    listed = list(pages)
    out = read_pages(client, listed, state)
    todo: list[tuple[HistRelease, dict[str, Link]]] = []
    page_of: dict[int, str] = {}
    for package, folder, url in listed:
        if url in out.links:
            have = known.get(package, set()) | set(state.get(url, PageState()).read)
            before = len(todo)
            sdist_only = package in elsewhere
            todo += releases_to_read(package, folder, out.links[url], have, floor, sdist_only)
            page_of.update({id(rel): url for rel, _c in todo[before:]})
    out.releases, out.wheels_read, out.bytes_read = gather_history(
        make_client, todo, workers=workers, progress=progress
    )
    if whole is not None:
        spent, notes = scan_whole(client, out.releases, whole, whole_budget)
        out.bytes_read += spent
        out.notes += notes
    for rel in out.releases:
        for w in rel.wheels:
            if w.error:
                out.notes.append(f"{rel.package} {rel.version} {w.platform}: not read ({w.error})")
        page = page_of.get(id(rel))
        if page is not None and page in out.state and not any(w.error for w in rel.wheels):
            was = out.state[page]
            out.state[page] = PageState(was.etag, was.serial, (*was.read, rel.version))
    out.seconds = time.monotonic() - start
    return out


def pages_for(
    ext_doc: Mapping[str, Any],
    index: str | None,
    pytorch_index: str | None,
    variants: list[str],
) -> tuple[list[tuple[str, str, str]], frozenset[str]]:
    """The pages to read — ``(package, folder, url)``: each package's on the default index
    ``index``, and in the PyTorch index's CUDA ``variants`` folders for the packages built per
    CUDA — and the packages whose wheels are published elsewhere (their builds all come from
    release downloads: flash-attn)."""
    from resolver.dbupdate.extcollect import cuda_packages, known_versions
    from resolver.wheels.simple import variant_cuda

    by_cuda = cuda_packages(ext_doc)
    pages: list[tuple[str, str, str]] = []
    for package in sorted(known_versions(ext_doc)):
        if index:
            pages.append((package, "default", f"{index.rstrip('/')}/{package}/"))
        if pytorch_index and package in by_cuda:
            base = pytorch_index.rstrip("/")
            pages += [(package, v, f"{base}/{v}/{package}/") for v in variants if variant_cuda(v)]
    elsewhere = set()
    for pkg in ext_doc.get("packages") or []:
        if not isinstance(pkg, dict):
            continue
        idx = {
            b.get("index")
            for r in pkg.get("releases") or []
            if isinstance(r, dict)
            for b in r.get("builds") or []
            if isinstance(b, dict)
        }
        if idx == {"release-downloads"}:
            elsewhere.add(canonicalize_name(str(pkg.get("name"))))
    return pages, frozenset(elsewhere)


def state_as_json(state: Mapping[str, PageState]) -> str:
    """The pages' state as the JSON ``load_state`` reads."""
    doc = {
        url: {"etag": s.etag, "serial": s.serial, "read": sorted(set(s.read))}
        for url, s in sorted(state.items())
    }
    return json.dumps({"schema": 1, "pages": doc}, indent=1, sort_keys=True) + "\n"


def load_state(raw: Any) -> dict[str, PageState]:
    """``state_as_json``'s document, validated (anything else: no state, so a full read)."""
    pages = raw.get("pages") if isinstance(raw, dict) and raw.get("schema") == 1 else None
    out: dict[str, PageState] = {}
    if not isinstance(pages, dict):
        return out
    for url, value in list(pages.items())[:10_000]:
        if not isinstance(url, str) or not isinstance(value, dict):
            continue
        etag, serial, read = value.get("etag"), value.get("serial"), value.get("read")
        out[url] = PageState(
            etag if isinstance(etag, str) and len(etag) <= 200 else None,
            serial if isinstance(serial, int) and not isinstance(serial, bool) else None,
            tuple(v for v in read[:5000] if isinstance(v, str) and len(v) <= 64)
            if isinstance(read, list)
            else (),
        )
    return out


def read_state_file(path: Path) -> dict[str, PageState]:
    """The pages' state an earlier update left (a missing, damaged or oversized file: none,
    so every page is read whole)."""
    from resolver.db import cache

    doc = cache.read(path)
    return load_state(doc) if doc is not None else {}


def write_state_file(path: Path, state: Mapping[str, PageState]) -> None:
    """Keep the pages' state for the next update (a cache: a failure to write is no error)."""
    import contextlib

    from resolver.io.atomic import atomic_write

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, state_as_json(state))
