"""Parse simple-repository pages (PEP 503 HTML, PEP 691 JSON) and wheel file names.

Pure functions over bytes: the network lives in ``fetch``. A page that is neither HTML nor the
JSON form is an error (``IndexFormatError``), so a broken mirror cannot pass for an empty one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from resolver.core.errors import IndexFormatError
from resolver.core.platforms import PythonVersion, of_wheel_tag
from resolver.io.bounded import problem

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
# The build variants gpuresolve reads: CPU and CUDA (ROCm and XPU are listed without GPU logic).
VARIANT_RE = re.compile(r"^(cpu|cu[0-9]{2,3})$")
_ANY_VARIANT_RE = re.compile(r"^(cpu|cu[0-9]{2,3}|rocm[0-9]+(\.[0-9]+)*|xpu)$")


@dataclass(frozen=True)
class Link:
    """One file (or project) link of a simple-repository page."""

    url: str  # absolute, without the fragment
    filename: str  # the last path segment, unquoted ("torch-2.8.0+cu126-...whl")
    sha256: str | None = None
    metadata: bool = False  # PEP 658/714: a ``<url>.metadata`` file is served
    metadata_sha256: str | None = None
    yanked: bool = False
    upload_time: str | None = None  # PEP 700 (JSON only)


@dataclass(frozen=True)
class Wheel:
    """A wheel link with its file name parsed into the facts the database records."""

    link: Link
    name: str  # canonical project name
    version: Version
    local: str | None  # "cu126"; None for untagged wheels (macOS, the Python Package Index)
    platforms: frozenset[str]  # gpuresolve platform names
    pythons: frozenset[str]  # "3.12", "3.13t"

    @property
    def public(self) -> str:
        return self.version.public


def parse_page(body: bytes, content_type: str, url: str) -> list[Link]:
    """Links of a project page or an index root, in either format."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == JSON_TYPE or (ctype.endswith("json") and body.lstrip().startswith(b"{")):
        return _parse_json(body, url)
    text = body.decode("utf-8", errors="replace")
    if not re.search(r"<\s*(!doctype|html|body|a)\b", text, re.IGNORECASE):
        raise IndexFormatError(f"{url}: not an index page (content type {ctype or 'none'})")
    parser = _AnchorParser()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # html.parser is lenient; anything it raises means garbage
        raise IndexFormatError(f"{url}: unreadable HTML: {exc}") from None
    links = [_html_link(url, attrs) for attrs in parser.anchors if attrs.get("href")]
    return [link for link in links if followable(url, link.url)]


_WEB = ("http", "https")


def followable(page_url: str, link_url: str) -> bool:
    """Whether a page's link may be followed: a remote (http/https) page's links stay on the
    web (an http page linking ``file:///etc/...`` must not make us read a local file, nor
    record what it says); a local mirror's (``file:``) may be local or on the web."""
    page = urlsplit(page_url).scheme.lower()
    link = urlsplit(link_url).scheme.lower()
    if page in _WEB:
        return link in _WEB
    return link in (*_WEB, "file")


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append({k.lower(): v for k, v in attrs})


def _hash_from(value: str | None) -> tuple[bool, str | None]:
    """A PEP 658 attribute value ("true" or "sha256=<hex>") → (served, sha256)."""
    if value is None or value.strip().lower() == "false":
        return False, None
    name, _, digest = value.partition("=")
    return True, (digest.strip().lower() if name.strip().lower() == "sha256" and digest else None)


def _html_link(page_url: str, attrs: dict[str, str | None]) -> Link:
    absolute, fragment = urldefrag(urljoin(page_url, attrs["href"] or ""))
    sha = fragment.partition("=")[2].lower() if fragment.startswith("sha256=") else None
    meta_attr = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
    served, meta_sha = _hash_from(meta_attr)
    return Link(
        url=absolute,
        filename=_last_segment(absolute),
        sha256=sha,
        metadata=served,
        metadata_sha256=meta_sha,
        yanked="data-yanked" in attrs,
    )


def _parse_json(body: bytes, url: str) -> list[Link]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # a server's words: nested past the stack
        detail = "nested too deeply" if isinstance(exc, RecursionError) else problem(exc)
        raise IndexFormatError(f"{url}: invalid JSON: {detail}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise IndexFormatError(f"{url}: not a PEP 691 page (no 'meta')")
    if "projects" in doc:  # the root: project names
        projects = doc["projects"]
        if not isinstance(projects, list):
            raise IndexFormatError(f"{url}: 'projects' must be a list")
        found = [
            Link(url=urljoin(url, f"{p['name']}/"), filename=str(p["name"]))
            for p in projects
            if isinstance(p, dict) and isinstance(p.get("name"), str)
        ]
        return [link for link in found if followable(url, link.url)]
    files = doc.get("files")
    if not isinstance(files, list):
        raise IndexFormatError(f"{url}: not a PEP 691 page (no 'files')")
    links: list[Link] = []
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            raise IndexFormatError(f"{url}: a file entry without 'url'")
        absolute = urldefrag(urljoin(url, item["url"]))[0]
        if not followable(url, absolute):
            continue
        hashes: dict[str, Any] = item["hashes"] if isinstance(item.get("hashes"), dict) else {}
        meta = item.get("core-metadata", item.get("dist-info-metadata", False))
        meta_sha = meta.get("sha256") if isinstance(meta, dict) else None
        upload = item.get("upload-time")
        links.append(
            Link(
                url=absolute,
                filename=str(item.get("filename") or _last_segment(absolute)),
                sha256=str(hashes["sha256"]).lower() if hashes.get("sha256") else None,
                metadata=bool(meta),
                metadata_sha256=str(meta_sha).lower() if meta_sha else None,
                yanked=bool(item.get("yanked", False)),
                upload_time=upload if isinstance(upload, str) else None,
            )
        )
    return links


def _last_segment(url: str) -> str:
    path = urlsplit(url).path
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])


def variant_links(links: list[Link]) -> set[str]:
    """Variant names a root page links to (``cu126/``, ``cpu/``), CPU and CUDA only."""
    return {link.filename for link in links if VARIANT_RE.match(link.filename)}


def variants_in_hrefs(links: list[Link]) -> set[str]:
    """Variant names from where the wheels of an all-variants page live (``/whl/cu126/torch-…``).

    The PyTorch index root lists projects, not variants; its ``torch/`` page links every
    variant's wheels, so the directory of each wheel names its variant.
    """
    found: set[str] = set()
    for link in links:
        parts = urlsplit(link.url).path.rstrip("/").split("/")
        if len(parts) >= 2 and VARIANT_RE.match(parts[-2]):
            found.add(parts[-2])
    return found


def is_variant_name(name: str) -> bool:
    """Any variant-shaped directory name, including ROCm and XPU."""
    return bool(_ANY_VARIANT_RE.match(name))


def variant_cuda(name: str) -> str | None:
    """ "cu126" → "12.6", "cu118" → "11.8", "cu130" → "13.0"; None for cpu."""
    m = re.fullmatch(r"cu([0-9]+)([0-9])", name)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def cuda_variant(cuda: str) -> str:
    """ "12.6" (or "12.6.77") → "cu126"."""
    major, minor = cuda.split(".")[:2]
    return f"cu{int(major)}{int(minor)}"


def python_of(tag: Tag) -> str | None:
    """cp312-cp312 → "3.12"; cp313-cp313t (free-threaded) → "3.13t"; None for non-CPython."""
    m = re.fullmatch(r"cp([0-9])([0-9]+)", tag.interpreter)
    if not m:
        return None
    return str(PythonVersion(int(m.group(1)), int(m.group(2)), tag.abi.endswith("t")))


def parse_wheel(link: Link) -> Wheel | None:
    """The wheel behind a link, or None when the link is not a wheel gpuresolve can use."""
    if not link.filename.endswith(".whl") or link.yanked:
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(link.filename)
    except (InvalidWheelFilename, ValueError):
        return None
    platforms = frozenset(p for t in tags if (p := of_wheel_tag(t.platform)) is not None)
    pythons = frozenset(p for t in tags if (p := python_of(t)) is not None)
    if not platforms or not pythons:
        return None
    return Wheel(
        link=link,
        name=canonicalize_name(name),
        version=version,
        local=version.local,
        platforms=platforms,
        pythons=pythons,
    )


def release_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))
