"""Read the indexes into ``IndexFacts``: which pages, which wheels' metadata, in what order.

Reads only what the database lacks: every variant's torch page (cheap), then metadata only for
builds the database does not have yet, companions only for releases without them, and the
default index's wheels only for new releases. A metadata read prefers PEP 658 ``.metadata``
files and falls back to range reads of the wheel.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from typing import Any, Protocol

from packaging.version import Version

from resolver.core.errors import IndexFormatError
from resolver.core.platforms import PLATFORMS, PythonVersion, is_free_threaded
from resolver.core.versions import cuda_key
from resolver.dbupdate.facts import BuildFacts, IndexFacts, ReleaseFacts
from resolver.dbupdate.merge import (
    companion_version,
    db_releases,
    release_variants,
    series_of,
    variant_names,
)
from resolver.dbupdate.metadata import (
    CoreMetadata,
    MetadataError,
    parse_metadata,
    remote_metadata,
)
from resolver.io.http import Client, FetchError
from resolver.wheels.simple import (
    ACCEPT,
    VARIANT_RE,
    Wheel,
    cuda_variant,
    parse_page,
    parse_wheel,
    release_key,
    variant_cuda,
    variant_links,
    variants_in_hrefs,
)

OLDEST = (2, 0)  # the database starts at torch 2.0
TORCHAUDIO_LAST = (2, 11)  # torchaudio ends at 2.11: later releases need no pairing


class ProgressBar(Protocol):
    def update(self, n_steps: int) -> None: ...


Progress = Callable[[str, int], AbstractContextManager[ProgressBar]]


class _NoBar:
    def update(self, n_steps: int) -> None:
        pass


@contextmanager
def no_progress(label: str, length: int) -> Iterator[ProgressBar]:
    yield _NoBar()


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the reader --------------------------------------------------------------------------------


class _Reader:
    def __init__(
        self,
        fetcher: Client,
        base: str,
        torch_doc: Mapping[str, Any],
        progress: Progress,
        facts: IndexFacts,
    ) -> None:
        self.fetcher = fetcher
        self.base = base.rstrip("/")
        self.progress = progress
        self.facts = facts
        self.known = db_releases(torch_doc)
        self.known_variants = {
            n for s in series_of(torch_doc) for n in variant_names(s) if VARIANT_RE.match(n)
        }
        self.known_companions = {
            pkg: {v for _s, rel in self.known.values() if (v := companion_version(rel.get(pkg)))}
            for pkg in ("torchvision", "torchaudio")
        }
        self.torch_wheels: dict[str, dict[str, list[Wheel]]] = {}  # version -> variant -> wheels

    # --- pages ---------------------------------------------------------------------------------
    def page_wheels(self, url: str, package: str, variant: str | None) -> list[Wheel] | None:
        """The final-release wheels of ``package`` on one page (None: the page does not exist)."""
        page = self.fetcher.get_optional(url, ACCEPT)
        if page is None:
            return None
        wheels = []
        for link in parse_page(page.body, page.content_type, page.url):
            wheel = parse_wheel(link)
            if wheel is None or wheel.name != package:
                continue
            v = wheel.version
            if v.is_prerelease or v.is_postrelease or v.is_devrelease or len(v.release) != 3:
                continue
            # A variant page's wheels carry its tag (the CPU page's macOS wheels none); the
            # default index's carry none.
            expected = {variant, None} if variant == "cpu" else {variant}
            if wheel.local not in expected:
                continue
            wheels.append(wheel)
        return wheels

    def variants_to_read(self) -> list[str]:
        """The database's CPU/CUDA variants plus the new ones the index root names."""
        page = self.fetcher.get(self.base + "/", ACCEPT)
        links = parse_page(page.body, page.content_type, page.url)
        found = variant_links(links)
        if not found and any(link.filename == "torch" for link in links):
            # The PyTorch root lists projects; its torch/ page links every variant's wheels.
            all_page = self.fetcher.get_optional(self.base + "/torch/", ACCEPT)
            if all_page is not None:
                found = variants_in_hrefs(
                    parse_page(all_page.body, all_page.content_type, all_page.url)
                )
        cudas = [cuda_key(c) for n in self.known_variants if (c := variant_cuda(n))]
        floor = min(cudas) if cudas else (0, 0)
        new = {
            n
            for n in found - self.known_variants
            if n == "cpu" or cuda_key(variant_cuda(n) or "0.0") >= floor
        }
        if not found:
            self.facts.notes.append(
                f"{self.base}/ names no variants: read only the {len(self.known_variants)} the "
                "database knows"
            )
        return sorted(self.known_variants | new, key=_variant_sort)

    def read_torch_pages(self, variants: list[str]) -> None:
        with self.progress("reading the PyTorch index", len(variants)) as bar:
            for variant in variants:
                wheels = self.page_wheels(f"{self.base}/{variant}/torch/", "torch", variant)
                bar.update(1)
                if wheels is None:
                    if variant in self.known_variants:
                        self.facts.notes.append(f"{variant}: no torch page on the index (404)")
                    continue
                for wheel in wheels:
                    if release_key(wheel.public) < OLDEST:
                        continue
                    by_variant = self.torch_wheels.setdefault(wheel.public, {})
                    by_variant.setdefault(variant, []).append(wheel)
        if not self.torch_wheels:
            raise IndexFormatError(f"{self.base}: the index lists no torch wheel in any variant")
        for version, by_variant in self.torch_wheels.items():
            rf = self.facts.releases.setdefault(version, ReleaseFacts(version))
            for variant, wheels in by_variant.items():
                build = rf.builds.setdefault(variant, BuildFacts(variant))
                for wheel in wheels:
                    for plat in wheel.platforms:
                        build.python.setdefault(plat, set()).update(wheel.pythons)
            rf.date = _first_upload(w for ws in by_variant.values() for w in ws)

    # --- metadata ------------------------------------------------------------------------------
    def metadata(self, wheel: Wheel) -> CoreMetadata:
        link = wheel.link
        data: bytes | None = None
        try:
            if link.metadata:
                page = self.fetcher.get_optional(link.url + ".metadata")
                if page is not None:
                    data = page.body
                    digest = hashlib.sha256(data).hexdigest()
                    if link.metadata_sha256 and digest != link.metadata_sha256:
                        raise MetadataError("sha256 does not match the index's")
            if data is None:
                data = remote_metadata(self.fetcher, link.url, wheel.name)
            return parse_metadata(data, wheel.name, str(wheel.version))
        except MetadataError as exc:
            raise MetadataError(f"{link.url}: {exc}") from None

    def read_pins(self) -> None:
        """Pins of every CUDA build the database does not have yet (one Linux wheel each)."""
        todo: list[tuple[BuildFacts, Wheel]] = []
        for version, by_variant in self.torch_wheels.items():
            have = release_variants(*self.known[version]) if version in self.known else []
            for variant, wheels in by_variant.items():
                if variant_cuda(variant) is None or variant in have:
                    continue
                wheel = _pick(wheels, linux_only=True)
                if wheel is not None:
                    todo.append((self.facts.releases[version].builds[variant], wheel))
        if not todo:
            return
        with self.progress("reading wheel metadata", len(todo)) as bar:
            for build, wheel in todo:
                plat, python = _wheel_env(wheel)
                pins = self.metadata(wheel).pins(plat, python)
                build.metadata_read = True
                build.cuda_runtime = pins.get("cuda_runtime")
                build.cudnn = pins.get("cudnn")
                build.nccl = pins.get("nccl")
                bar.update(1)

    def read_companions(self) -> None:
        for package in ("torchvision", "torchaudio"):
            needed = set()
            for version in self.torch_wheels:
                rel = self.known[version][1] if version in self.known else None
                if rel is None or (
                    companion_version(rel.get(package)) is None
                    and (package == "torchvision" or release_key(version)[:2] <= TORCHAUDIO_LAST)
                ):
                    needed.add(version)
            if needed:
                self._companion(package, needed)

    def _companion(self, package: str, needed: set[str]) -> None:
        variants = sorted(
            {v for version in needed for v in self.torch_wheels[version]}, key=_variant_sort
        )
        by_version: dict[str, list[Wheel]] = {}
        for variant in variants:
            for wheel in (
                self.page_wheels(f"{self.base}/{variant}/{package}/", package, variant) or ()
            ):
                by_version.setdefault(wheel.public, []).append(wheel)
        candidates = sorted(
            set(by_version) - self.known_companions[package], key=Version, reverse=True
        )
        floor = min(release_key(v) for v in needed)
        found: dict[str, str] = {}
        with self.progress(f"pairing {package}", len(candidates)) as bar:
            for version in candidates:  # newest first: stop below the oldest torch wanted
                if needed <= set(found):
                    break
                chosen = _pick(by_version[version])
                bar.update(1)
                torch = (
                    self.metadata(chosen).pins(*_wheel_env(chosen)).get("torch") if chosen else None
                )
                if torch is None:
                    continue
                if release_key(torch) < floor:
                    break
                if torch in needed:
                    found.setdefault(torch, version)
        for torch, version in found.items():
            setattr(self.facts.releases[torch], package, version)

    def read_pypi(self, index_url: str) -> None:
        """Which build the default index's wheel is, per platform, for each new release."""
        new = {v for v in self.torch_wheels if v not in self.known}
        url = index_url.rstrip("/") + "/torch/"
        if not new:
            return
        wheels = self.page_wheels(url, "torch", None)
        if wheels is None:
            self.facts.notes.append(f"the default index has no torch page ({url}): skipped")
            return
        self.facts.pypi_read = True
        todo: list[tuple[ReleaseFacts, str, Wheel]] = []
        for version in sorted(new, key=release_key):
            rf = self.facts.releases[version]
            mine = [w for w in wheels if w.public == version]
            if not mine:
                continue
            rf.date = _first_upload(mine) or rf.date
            for plat in PLATFORMS:
                wheel = _pick([w for w in mine if plat in w.platforms], platform=plat)
                if wheel is not None:
                    todo.append((rf, plat, wheel))
        with self.progress("reading the default index's metadata", len(todo)) as bar:
            for rf, plat, wheel in todo:
                runtime = self.metadata(wheel).pins(plat, _best_python(wheel)).get("cuda_runtime")
                rf.pypi[plat] = cuda_variant(runtime) if runtime else "cpu"
                bar.update(1)


def collect(
    fetcher: Client,
    torch_doc: Mapping[str, Any],
    pytorch_index: str,
    pypi_index: str | None,
    *,
    progress: Progress = no_progress,
    read_at: str | None = None,
) -> IndexFacts:
    """What the indexes say that the database (raw torch.yaml) needs.

    Raises FetchError, IndexFormatError or MetadataError: the caller keeps the old database.
    """
    facts = IndexFacts(index_url=pytorch_index.rstrip("/"), read_at=read_at or now_utc())
    reader = _Reader(fetcher, pytorch_index, torch_doc, progress, facts)
    reader.read_torch_pages(reader.variants_to_read())
    reader.read_pins()
    reader.read_companions()
    if pypi_index:
        reader.read_pypi(pypi_index)
    return facts


def _variant_sort(name: str) -> tuple[int, tuple[int, int]]:
    cuda = variant_cuda(name)
    return (0, (0, 0)) if cuda is None else (1, cuda_key(cuda))


def _best_python(wheel: Wheel) -> str:
    gil = [p for p in wheel.pythons if not is_free_threaded(p)] or list(wheel.pythons)
    return max(gil, key=PythonVersion.parse)


def _wheel_env(wheel: Wheel) -> tuple[str, str]:
    plat = next(p for p in PLATFORMS if p in wheel.platforms)
    return plat, _best_python(wheel)


def _pick(
    wheels: list[Wheel], *, linux_only: bool = False, platform: str | None = None
) -> Wheel | None:
    """The wheel whose metadata stands for the build: Linux (where pins live), newest CPython."""

    order = [platform] if platform else list(PLATFORMS)
    if linux_only:
        order = [p for p in order if p.startswith("linux")]
    for plat in order:
        here = [w for w in wheels if plat in w.platforms]
        if here:
            # a GIL build first (free-threaded wheels may pin differently), then the newest
            return max(
                here,
                key=lambda w: (
                    not is_free_threaded(_best_python(w)),
                    PythonVersion.parse(_best_python(w)),
                ),
            )
    return None


def _first_upload(wheels: Any) -> str | None:
    times = sorted(w.link.upload_time for w in wheels if w.link.upload_time)
    return times[0][:10] if times else None


__all__ = ["FetchError", "collect", "no_progress"]
