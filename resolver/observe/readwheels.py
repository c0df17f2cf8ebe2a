"""`db update --read-wheels`: read one wheel per build whose architectures are not observed.

For every build of the database (release x variant x platform, CPU and CUDA) that no
observations file covers yet, the wheel with the smallest Python tag is found on an index —
the default index (pip's) for the build it carries on that platform, else the PyTorch index's
variant page (or a mirror's) — and read over range requests. Each observation is written
atomically as soon as it is read, so an interrupted run keeps what it confirmed; contradictions
with the curated facts are recorded on the observation and listed in the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.core.errors import IndexFormatError
from resolver.io import ReadError
from resolver.io.http import Client, FetchError
from resolver.io.ranges import BudgetError
from resolver.observe import compare, store
from resolver.observe.entries import wheel_entry
from resolver.wheels.index import pick_wheel, project_wheels
from resolver.wheels.simple import Wheel, release_key
from resolver.wheels.torchwheel import inspect_wheel

MIB = 1024 * 1024
PER_WHEEL = 64 * MIB  # no single wheel may take more (the largest arch library is ~10 MB)
GPU_VARIANT_PREFIXES = ("cpu", "cu")


@dataclass(frozen=True)
class Build:
    torch: str
    variant: str
    platform: str
    pypi: bool  # the default index carries this build on this platform

    @property
    def label(self) -> str:
        return f"torch {self.torch} {self.variant} {self.platform}"


@dataclass
class ReadSummary:
    planned: int = 0
    already: int = 0
    observed: list[str] = field(default_factory=list)
    same: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    new_in_index: list[str] = field(default_factory=list)  # releases the database lacks
    skipped_budget: int = 0
    indexes_read: int = 0  # index pages that could be read
    bytes_read: int = 0
    budget: int = 0

    @property
    def offline(self) -> bool:
        """Builds were to be read, but not one index page could be."""
        return bool(self.planned and self.unreachable and not self.indexes_read)

    def lines(self) -> list[str]:
        out = [
            f"builds without an observation: {self.planned} ({self.already} already observed)",
            f"read {len(self.observed) + len(self.same) + len(self.failed)} wheel(s), "
            f"{self.bytes_read / MIB:.1f} MiB of a {self.budget / MIB:.0f} MiB budget",
        ]
        out += [f"observed: {line}" for line in self.observed]
        out += [f"contradiction: {line}" for line in self.contradictions]
        out += [f"not on the index: {line}" for line in self.not_found]
        out += [f"failed: {line}" for line in self.failed]
        out += [f"index unreachable: {line}" for line in self.unreachable]
        if self.new_in_index:
            out.append(
                f"new in the index: torch {', '.join(self.new_in_index)} (not in the database: "
                "run `gpuresolve db update` first, then --read-wheels again)"
            )
        if self.skipped_budget:
            out.append(
                f"budget reached: {self.skipped_budget} build(s) left for the next run "
                "(--budget MB)"
            )
        return out


def plan(doc: dict[str, Any], observed: set[tuple[str, str, str]]) -> tuple[list[Build], int]:
    """The builds to read (newest first), and how many are observed already."""
    todo: dict[tuple[str, str, str], Build] = {}
    already = 0
    for version, var, platform, _arch in compare.builds(doc):
        name = str(var.get("name"))
        if not name.startswith(GPU_VARIANT_PREFIXES):
            continue
        key = (version, name, platform)
        if key in observed:
            already += 1
            continue
        todo[key] = Build(version, name, platform, platform in (var.get("pypi") or []))
    ordered = sorted(
        todo.values(),
        key=lambda b: (release_key(b.torch), b.pypi, b.variant, b.platform),
        reverse=True,
    )
    return ordered, already


class _Listings:
    """Index pages, fetched once each; a failure is remembered (and reported once)."""

    def __init__(self, fetcher: Client) -> None:
        self.fetcher = fetcher
        self.pages: dict[str, list[Wheel] | str] = {}

    def wheels(self, index: str) -> list[Wheel] | str:
        if index not in self.pages:
            try:
                self.pages[index] = project_wheels(self.fetcher, index)
            except (FetchError, IndexFormatError) as exc:
                self.pages[index] = str(exc)
        return self.pages[index]


def read_wheels(
    *,
    doc: dict[str, Any],
    observed: set[tuple[str, str, str]],
    target: Path,
    pytorch_index: str,
    pypi_index: str | None,
    fetcher: Client,
    budget: int,
    on_build: Callable[[int, int, str], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> ReadSummary:
    """Read a wheel for every unobserved build, recording each into ``target`` atomically."""
    todo, already = plan(doc, observed)
    summary = ReadSummary(planned=len(todo), already=already, budget=budget)
    listings = _Listings(fetcher)
    reported_unreachable: set[str] = set()
    for n, build in enumerate(todo):
        if on_build is not None:
            on_build(n, len(todo), build.label)
        left = budget - summary.bytes_read
        if left < MIB:
            summary.skipped_budget = len(todo) - n
            break
        index = (
            pypi_index
            if build.pypi and pypi_index
            else f"{pytorch_index.rstrip('/')}/{build.variant}"
        )
        listing = listings.wheels(index)
        if isinstance(listing, str):
            if index not in reported_unreachable:
                reported_unreachable.add(index)
                summary.unreachable.append(listing)
            continue
        local = None if build.pypi else build.variant
        wheel = pick_wheel(listing, build.torch, build.platform, local)
        if wheel is None:
            summary.not_found.append(f"{build.label} on {index}")
            continue
        base = summary.bytes_read

        def progress(n_bytes: int, base: int = base) -> None:
            if on_bytes is not None:
                on_bytes(base + n_bytes)

        try:
            report = inspect_wheel(
                wheel.link.url,
                budget=min(left, PER_WHEEL),
                progress=progress,
                sha256=wheel.link.sha256,
                client=fetcher,
            )
        except BudgetError:
            summary.skipped_budget = len(todo) - n
            break
        except ReadError as exc:
            summary.failed.append(f"{build.label}: {exc}")
            continue
        summary.bytes_read += report.bytes_read
        if not report.sha256:
            summary.failed.append(
                f"{build.label}: {wheel.link.filename}: the index gives no sha256"
            )
            continue
        entry = wheel_entry(report)
        curated = compare.find(doc, entry["torch"], entry["variant"], entry["platform"])
        if curated is None:  # the overlay may only name builds the database has
            summary.failed.append(
                f"{build.label}: {wheel.link.filename} is {entry['version']}, a build the "
                "database lacks: not recorded (run `gpuresolve db update` first)"
            )
            continue
        found = compare.contradictions(entry, curated)
        if entry["variant"] != build.variant:
            found.insert(
                0,
                {
                    "fact": "variant",
                    "value": build.variant,
                    "note": f"the database names {build.variant} for this wheel; it is "
                    f"{entry['variant']}",
                },
            )
        if found:
            entry["contradicts"] = found
        status, _old = store.record(target, entry, "observations")
        mib = report.bytes_read / MIB
        what = f"{build.label}: {_facts(entry)} ({wheel.link.filename}, {mib:.1f} MiB)"
        (summary.same if status == "same" else summary.observed).append(what)
        summary.contradictions += compare.describe(entry, found)
        if status == "differs":
            summary.contradictions.append(
                f"{build.label}: an earlier observation of the same file says otherwise "
                f"(both kept in {target})"
            )
    summary.indexes_read = sum(1 for v in listings.pages.values() if not isinstance(v, str))
    known = {version for version, _v, _p, _a in compare.builds(doc)}
    listed = {w.public for v in listings.pages.values() if not isinstance(v, str) for w in v}
    newest = max((release_key(v) for v in known), default=())
    summary.new_in_index = sorted(
        (v for v in listed if not _prerelease(v) and release_key(v) > newest), key=release_key
    )
    return summary


def _prerelease(version: str) -> bool:
    return not all(part.isascii() and part.isdigit() for part in version.split("."))


def _facts(entry: dict[str, Any]) -> str:
    if "sass" not in entry:
        return f"{entry.get('version')}, no CUDA kernels"
    ptx = " ".join(entry.get("ptx") or []) or "none"
    return f"CUDA {entry.get('cuda')}, SASS {' '.join(entry['sass'])}, PTX {ptx}"
