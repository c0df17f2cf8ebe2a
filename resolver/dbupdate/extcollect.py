"""Read new releases of the extension packages (extensions.yaml) from the indexes.

Only what the database lacks is read: each package's page on the default index (pip's), and
its page in each of the PyTorch index's CUDA variant folders the database knows (where the
index serves one), then, for each release newer than the newest the database holds (at most
``MAX_NEW`` a package), one wheel per platform and folder (``MAX_WHEEL`` bytes each,
``MAX_TOTAL`` in all): its METADATA (PEP 658 ``.metadata``
when the index serves it, else range reads of the wheel) for the torch requirement and
Requires-Python, and its libraries' fat binaries (``wheels.extwheel``, streamed, never held
whole) for the GPU architectures. A wheel over ``MAX_WHEEL`` bytes, or one that cannot be read
within its budget, is not scanned: the note says so and the merge leaves that platform out.
Every request goes through the one client, so ``--timeout`` bounds each whole request.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from resolver.core.platforms import PLATFORMS, PythonVersion, is_free_threaded, of_wheel_tag
from resolver.dbupdate.collect import Progress, no_progress
from resolver.dbupdate.metadata import MetadataError, parse_metadata, remote_metadata
from resolver.io import ReadError
from resolver.io.http import Client
from resolver.wheels import WheelError
from resolver.wheels.extwheel import inspect_extension, torch_requirement
from resolver.wheels.simple import ACCEPT, Link, parse_page, python_of, variant_cuda

MAX_NEW = 3  # new releases read per package and folder, newest first
MAX_WHEEL = 768 * 1024 * 1024  # bytes of one wheel read at most (vllm's are ~400 MiB)
MAX_TOTAL = 2 * 1024 * 1024 * 1024  # bytes of all extension wheels of one update read at most
_SAFE_NAME = re.compile(r"[A-Za-z0-9._+!-]{1,200}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
ANY = "any"  # a pure-Python wheel (py3-none-any): every platform, no device code


@dataclass
class ExtWheel:
    """One wheel read: which platform, what it requires, what its libraries carry."""

    platform: str  # a gpuresolve platform name, or ANY
    filename: str
    sha256: str | None
    torch: str | None  # the Requires-Dist torch specifier (None: none)
    python: str | None  # Requires-Python
    metadata_from: str  # "PEP 658" | "range reads"
    scanned: bool = False  # the libraries were read (False: too large or unreadable)
    libraries: dict[str, dict[str, list[str]]] = field(default_factory=dict)


@dataclass
class ExtReleaseFacts:
    package: str  # canonical
    version: str
    folder: str  # "default" (pip's index) or a PyTorch variant ("cu128")
    date: str | None = None
    sdist: bool = False
    wheels: list[ExtWheel] = field(default_factory=list)

    @property
    def cuda(self) -> str | None:
        return variant_cuda(self.folder)


@dataclass
class ExtFacts:
    releases: list[ExtReleaseFacts] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pages: int = 0  # package pages read
    wheels_read: int = 0


def known_versions(ext_doc: Mapping[str, Any]) -> dict[str, set[str]]:
    """package -> the versions extensions.yaml holds."""
    out: dict[str, set[str]] = {}
    for pkg in ext_doc.get("packages") or []:
        if isinstance(pkg, dict) and isinstance(pkg.get("name"), str):
            out[canonicalize_name(pkg["name"])] = {
                str(r.get("version"))
                for r in pkg.get("releases") or []
                if isinstance(r, dict) and r.get("version") is not None
            }
    return out


def cuda_packages(ext_doc: Mapping[str, Any]) -> set[str]:
    """Packages whose builds are per CUDA build of torch (the only ones the PyTorch index's
    variant folders are read for: a package with no CUDA code of its own is the same wheel
    in every folder)."""
    return {
        canonicalize_name(str(pkg.get("name")))
        for pkg in ext_doc.get("packages") or []
        if isinstance(pkg, dict)
        for rel in pkg.get("releases") or []
        if isinstance(rel, dict)
        for b in rel.get("builds") or []
        if isinstance(b, dict) and b.get("cuda_match") in ("major", "exact")
    }


def _final(version: Version, folder: str) -> bool:
    """A final release; in a variant folder its local tag may name the folder ("+cu128")."""
    return not (version.is_prerelease or version.is_devrelease) and version.local in (None, folder)


def files_by_version(
    links: Iterable[Link], package: str, folder: str
) -> dict[Version, list[tuple[Link, str | None]]]:
    """An index page's files of final releases (not yanked), by public version: each with the
    platform its wheel is for (None: a source distribution)."""
    out: dict[Version, list[tuple[Link, str | None]]] = {}
    for link in links:
        if link.yanked:
            continue
        parsed = _file_version(package, link.filename)
        if parsed is None or not _final(parsed[0], folder):
            continue
        out.setdefault(Version(parsed[0].public), []).append((link, parsed[1]))
    return out


def _file_version(package: str, filename: str) -> tuple[Version, str | None] | None:
    """(version, platform) of a wheel (platform ANY for a pure one) or an sdist (None); None
    for a name that is not one (or carries characters no real file name has)."""
    if not _SAFE_NAME.fullmatch(filename):
        return None
    try:
        if filename.endswith(".whl"):
            name, version, _b, tags = parse_wheel_filename(filename)
            plats = {of_wheel_tag(t.platform) for t in tags if t.platform != "any"}
            plat = (
                ANY
                if all(t.platform == "any" for t in tags)
                else next((p for p in PLATFORMS if p in plats), None)
            )
            if plat is None:
                return None
        else:
            name, version = parse_sdist_filename(filename)
            plat = None
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None
    if canonicalize_name(name) != package:
        return None
    return version, plat


def _python_rank(filename: str) -> tuple[bool, PythonVersion]:
    """GIL builds first, then the newest CPython (abi3 and pure wheels rank as the oldest)."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, ValueError):
        return (False, PythonVersion.parse("3.0"))
    pythons = [p for t in tags if (p := python_of(t)) is not None] or ["3.0"]
    best = max(pythons, key=PythonVersion.parse)
    return (not is_free_threaded(best), PythonVersion.parse(best))


class _ExtReader:
    def __init__(self, fetcher: Client, progress: Progress, facts: ExtFacts) -> None:
        self.fetcher = fetcher
        self.progress = progress
        self.facts = facts
        self.left = MAX_TOTAL  # bytes the libraries' scans may still read

    def page(self, url: str, package: str) -> list[Link] | None:
        page = self.fetcher.get_optional(url, ACCEPT)
        if page is None:
            return None
        self.facts.pages += 1
        return parse_page(page.body, page.content_type, page.url)

    def new_releases(
        self, links: list[Link], package: str, folder: str, known: set[str]
    ) -> list[tuple[ExtReleaseFacts, dict[str, Link]]]:
        """The releases newer than the newest known, newest first, with one wheel a platform."""
        by_version = files_by_version(links, package, folder)
        newest = max((Version(v) for v in known), default=None)
        fresh = sorted(
            (v for v in by_version if str(v) not in known and (newest is None or v > newest)),
            reverse=True,
        )
        if len(fresh) > MAX_NEW:
            self.facts.notes.append(
                f"{package} ({folder}): {len(fresh)} new releases; read the newest {MAX_NEW}"
            )
        out = []
        for version in fresh[:MAX_NEW]:
            files = by_version[version]
            rf = ExtReleaseFacts(package, str(version), folder)
            rf.sdist = any(plat is None for _l, plat in files)
            times = sorted(link.upload_time for link, _p in files if link.upload_time)
            rf.date = times[0][:10] if times else None
            chosen: dict[str, Link] = {}
            for plat in (*PLATFORMS, ANY):
                here = [link for link, p in files if p == plat]
                if here:
                    chosen[plat] = max(here, key=lambda link: _python_rank(link.filename))
            out.append((rf, chosen))
        return out

    def _requires_python(self, value: str | None, package: str, version: str) -> str | None:
        """Requires-Python when it is a specifier (else None, and a note: never written)."""
        if value is None:
            return None
        try:
            return str(SpecifierSet(value.strip())) if len(value) <= 200 else None
        except InvalidSpecifier:
            self.facts.notes.append(f"{package} {version}: Requires-Python is no specifier")
            return None

    def read_wheel(self, package: str, version: str, plat: str, link: Link) -> ExtWheel:
        text: bytes
        how = "range reads"
        if link.metadata:
            page = self.fetcher.get_optional(link.url + ".metadata")
            if page is not None:
                if link.metadata_sha256 and (
                    hashlib.sha256(page.body).hexdigest() != link.metadata_sha256
                ):
                    raise MetadataError(f"{link.url}.metadata: sha256 does not match the index's")
                text, how = page.body, "PEP 658"
            else:
                text = remote_metadata(self.fetcher, link.url, package)
        else:
            text = remote_metadata(self.fetcher, link.url, package)
        parse_metadata(text, package, version)  # the wheel's own, or garbage: refused
        decoded = text.decode("utf-8", errors="replace")
        msg = BytesHeaderParser().parsebytes(text)
        wheel = ExtWheel(
            platform=plat,
            filename=link.filename,
            sha256=link.sha256 if link.sha256 and _SHA256.fullmatch(link.sha256) else None,
            torch=torch_requirement(decoded),
            python=self._requires_python(msg.get("Requires-Python"), package, version),
            metadata_from=how,
        )
        if plat == ANY:  # a pure wheel: no library to scan
            wheel.scanned = True
            return wheel
        try:
            if self.left <= 0:
                raise ReadError(f"the update's {MAX_TOTAL >> 20} MiB for extension wheels is spent")
            budget = min(MAX_WHEEL, self.left)
            report = inspect_extension(link.url, budget=budget, client=self.fetcher)
            self.left -= report.bytes_read
        except (ReadError, WheelError) as exc:
            detail = " ".join(str(exc).split())[:160]
            self.facts.notes.append(
                f"{package} {version} {plat}: libraries not read ({detail}); platform left out"
            )
            return wheel
        wheel.scanned = True
        wheel.libraries = report.libraries
        return wheel


def collect_extensions(
    fetcher: Client,
    ext_doc: Mapping[str, Any],
    pypi_index: str | None,
    pytorch_index: str | None,
    variants: list[str],
    *,
    progress: Progress = no_progress,
    mirror: bool = False,
    pages: Mapping[str, list[Link]] | None = None,
) -> ExtFacts:
    """New releases of every package extensions.yaml lists, from the default index and the
    PyTorch index's variant folders ``variants`` (a 404 there: the package is not served;
    not read from a ``mirror``: a build recorded with index "pytorch" is offered to every user).
    With ``pages`` (URL -> links, as ``exthistory.read_pages`` read them), no page is asked for
    again: a URL not in it is unchanged since the last update, or absent.

    Raises FetchError, IndexFormatError or MetadataError: the caller keeps the old database.
    """
    facts = ExtFacts()
    if pytorch_index and mirror:  # a build recorded as "pytorch" must be on the real one
        facts.notes.append(
            f"{pytorch_index.rstrip('/')} is a mirror: the extension packages' builds in its "
            "variant folders are not recorded (only the database's own PyTorch index's are)"
        )
        pytorch_index = None
    reader = _ExtReader(fetcher, progress, facts)
    known = known_versions(ext_doc)
    by_cuda = cuda_packages(ext_doc)
    todo: list[tuple[ExtReleaseFacts, dict[str, Link]]] = []
    for package in sorted(known):
        places: list[tuple[str, str]] = []
        if pypi_index:
            places.append(("default", pypi_index.rstrip("/") + f"/{package}/"))
        if pytorch_index and package in by_cuda:
            base = pytorch_index.rstrip("/")
            places += [(v, f"{base}/{v}/{package}/") for v in variants if variant_cuda(v)]
        for folder, url in places:
            links = pages.get(url) if pages is not None else reader.page(url, package)
            if links is None:
                continue
            todo += reader.new_releases(links, package, folder, known[package])
    count = sum(len(chosen) for _rf, chosen in todo)
    with progress("reading extension wheels", count) as bar:
        for rf, chosen in todo:
            for plat, link in chosen.items():
                rf.wheels.append(reader.read_wheel(rf.package, rf.version, plat, link))
                facts.wheels_read += 1
                bar.update(1)
            facts.releases.append(rf)
    return facts
