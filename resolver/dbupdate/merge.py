"""Merge what the index says into the raw database: pure (no I/O), so every rule is unit-tested.

Rules, in order of caution:
- Nothing is ever deleted, and a curated value is never overwritten: where the index disagrees
  with the database, the summary says so and the database keeps its value.
- New releases, new builds (variants) of a release, missing companions and pins are added, each
  record citing the read (``PYTORCH_INDEX_<date>``, kind observed: the wheels' own metadata).
- What an index cannot tell comes from the curated records: a build of a variant the database
  already knows from an earlier series gets that series' architecture list, marked
  ``confirmed: false``; a variant never seen before gets none (``null``: unknown) and the variant
  itself is ``confirmed: false``, so the solver uses it only as a last resort, with a warning.
  A CUDA version missing from cuda.yaml gets a placeholder toolkit with unknown drivers.
- A new release with no torchvision (or, before 2.12, no torchaudio) pairing on the index yet
  is skipped: ``db check`` refuses a release without its companions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from resolver.core.platforms import PLATFORMS, PythonVersion
from resolver.core.versions import cuda_key
from resolver.dbupdate.facts import BuildFacts, IndexFacts, ReleaseFacts
from resolver.wheels.simple import release_key, variant_cuda

_PYTHON_META = ("source", "confirmed", "note")


@dataclass
class Summary:
    """What an update changed (or would change), for people: one line per fact."""

    releases: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)
    companions: list[str] = field(default_factory=list)
    pypi: list[str] = field(default_factory=list)
    toolkits: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)  # per package: release, pin, arch list
    notes: list[str] = field(default_factory=list)  # not changes: conflicts, skips

    SECTIONS = (
        ("releases", "new releases"),
        ("variants", "new builds"),
        ("pins", "pins"),
        ("companions", "companions"),
        ("pypi", "the Python Package Index's builds"),
        ("toolkits", "CUDA toolkits"),
        ("extensions", "extension packages"),
        ("notes", "notes"),
    )

    @property
    def changed(self) -> bool:
        return any(getattr(self, name) for name, _ in self.SECTIONS if name != "notes")

    def lines(self) -> list[str]:
        out: list[str] = []
        for name, title in self.SECTIONS:
            items: list[str] = getattr(self, name)
            if items:
                out.append(f"{title}:")
                out.extend(f"  {item}" for item in items)
        return out

    def as_json(self) -> dict[str, list[str]]:
        return {name: list(getattr(self, name)) for name, _ in self.SECTIONS}


def source_keys(facts: IndexFacts) -> tuple[str, str]:
    """The keys this read's records cite: the PyTorch index, and pip's default index."""
    return f"PYTORCH_INDEX_{facts.read_date}", f"PIP_INDEX_{facts.read_date}"


def stamp_torch(doc: dict[str, Any], read_at: str) -> None:
    """Set torch.yaml's ``schema:`` (this gpuresolve's: it validated the result) and
    ``updated:`` (a timestamp: a same-day update still sorts after a plain date; the database's
    version, by which the loader picks it over the shipped one), after ``index_url``."""
    from resolver.db.location import SCHEMA

    stamps = {"schema": SCHEMA, "updated": read_at}
    if all(k in doc for k in stamps):
        doc.update(stamps)
        return
    items = [(k, v) for k, v in doc.items() if k not in stamps]
    doc.clear()
    for k, v in items:
        doc[k] = v
        if k == "index_url":
            doc.update(stamps)
    doc.update(stamps)


def merge(raw: Mapping[str, Any], facts: IndexFacts) -> tuple[dict[str, Any], Summary]:
    """The new raw database (a deep copy; ``raw`` is untouched) and what changed."""
    merger = _Merger(copy.deepcopy(dict(raw)), facts)
    merger.run()
    return merger.raw, merger.summary


# --- raw helpers (shared with collect) --------------------------------------------------------


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def series_of(torch_doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [s for s in as_list(torch_doc.get("series")) if isinstance(s, dict)]


def variant_names(series: Mapping[str, Any]) -> list[str]:
    return [str(v.get("name")) for v in as_list(series.get("variants")) if isinstance(v, dict)]


def release_variants(series: Mapping[str, Any], release: Mapping[str, Any]) -> list[str]:
    """The variants a raw release record is built for (its own list, else the series')."""
    own = as_list(release.get("variants"))
    return [str(n) for n in own] if own else variant_names(series)


def db_releases(torch_doc: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """version -> (series record, release record)."""
    out: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for series in series_of(torch_doc):
        for rel in as_list(series.get("releases")):
            if isinstance(rel, dict) and isinstance(rel.get("version"), str):
                out[rel["version"]] = (series, rel)
    return out


def companion_version(value: Any) -> str | None:
    """A raw companion pairing: "0.23.0", or {version: "0.23.0", source: [...]}."""
    if isinstance(value, dict):
        value = value.get("version")
    return value if isinstance(value, str) else None


def _sources(record: dict[str, Any]) -> list[str]:
    src = record.get("source")
    return [src] if isinstance(src, str) else [str(s) for s in as_list(src)]


def _cite(record: dict[str, Any], key: str) -> None:
    src = _sources(record)
    if key not in src:
        src.append(key)
    record["source"] = src


def _insert_sorted(
    items: list[dict[str, Any]], item: dict[str, Any], key: Callable[[dict[str, Any]], Any]
) -> None:
    """Insert keeping the list's own direction (curated files run oldest or newest first)."""
    desc = len(items) >= 2 and key(items[0]) > key(items[-1])
    for i, other in enumerate(items):
        if (key(item) > key(other)) if desc else (key(item) < key(other)):
            items.insert(i, item)
            return
    items.append(item)


def _variant_order(name: str) -> tuple[int, tuple[int, int], str]:
    cuda = variant_cuda(name)
    return (0 if name == "cpu" else 1, cuda_key(cuda) if cuda else (0, 0), name)


def _python_map(builds: Iterable[BuildFacts]) -> dict[str, list[str]]:
    union: dict[str, set[str]] = {}
    for build in builds:
        for plat, versions in build.python.items():
            union.setdefault(plat, set()).update(versions)
    return {p: sorted(union[p], key=PythonVersion.parse) for p in PLATFORMS if p in union}


def _effective_python(series: dict[str, Any], release: dict[str, Any]) -> dict[str, list[str]]:
    own = release.get("python")
    chosen = own if isinstance(own, dict) and own else series.get("python")
    if not isinstance(chosen, dict):
        return {}
    return {str(k): list(v) for k, v in chosen.items() if k not in _PYTHON_META}


def _minor_number(minor: str) -> int:
    major, _, rest = minor.partition(".")
    return int(major) * 1000 + int(rest.partition(".")[0] or 0)


def _span(python: Mapping[str, list[str]]) -> str:
    versions = sorted({v for vs in python.values() for v in vs}, key=PythonVersion.parse)
    return f"{versions[0]}–{versions[-1]}" if versions else "none"


# --- the merger -------------------------------------------------------------------------------


class _Merger:
    def __init__(self, raw: dict[str, Any], facts: IndexFacts) -> None:
        self.raw = raw
        self.facts = facts
        self.torch: dict[str, Any] = raw["torch.yaml"]
        self.key, self.pip_key = source_keys(facts)
        self.used: set[str] = set()
        self.summary = Summary(notes=list(facts.notes))
        self.pinned: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (series, release)

    # --- driver ------------------------------------------------------------------------------
    def run(self) -> None:
        known = db_releases(self.torch)
        for version in sorted(self.facts.releases, key=release_key):
            rf = self.facts.releases[version]
            if not rf.builds:
                continue
            if version in known:
                self._update_release(*known[version], rf)
            else:
                self._add_release(rf)
        self._unpin()
        if self.used:
            self._write_sources()
            self._stamp()

    def _mirror(self) -> str | None:
        """The index read when it is not the database's own (``index_url``): a mirror's
        releases record it, so only a user of that mirror is offered them."""
        default = str(self.torch.get("index_url") or "").split("{variant}")[0].rstrip("/")
        read = self.facts.index_url.rstrip("/")
        return None if read == default else read

    def _cite(self, record: dict[str, Any], key: str | None = None) -> None:
        key = key or self.key
        _cite(record, key)
        self.used.add(key)

    def _write_sources(self) -> None:
        doc = self.raw["sources.yaml"]
        sources = doc.setdefault("sources", {})
        date = self.facts.read_date
        if self.key in self.used:
            sources[self.key] = {
                "cite": f"PyTorch wheel index {self.facts.index_url}/<variant>/<package>/: "
                f"wheel file names and their core metadata (Requires-Dist), read {date}",
                "kind": "observed",
            }
        if self.pip_key in self.used:
            sources[self.pip_key] = {
                "cite": "the default package index configured in pip, project torch: "
                f"wheel file names and their core metadata (Requires-Dist), read {date}",
                "kind": "observed",
            }

    def _stamp(self) -> None:
        stamp_torch(self.torch, self.facts.read_at)

    # --- series and releases -----------------------------------------------------------------
    def _series(self, minor: str) -> dict[str, Any] | None:
        return next((s for s in series_of(self.torch) if s.get("minor") == minor), None)

    def _new_series(self, minor: str, python: dict[str, list[str]]) -> dict[str, Any]:
        series: dict[str, Any] = {
            "minor": minor,
            "python": {**python, "source": [self.key]},
            "releases": [],
            "variants": [],
        }
        self.used.add(self.key)
        self.torch.setdefault("series", [])
        _insert_sorted(self.torch["series"], series, lambda s: release_key(str(s["minor"])))
        return series

    def _add_release(self, rf: ReleaseFacts) -> None:
        version = rf.version
        if rf.torchvision is None:
            self.summary.notes.append(
                f"torch {version} skipped: no torchvision release pairs with it on the index yet"
            )
            return
        if rf.torchaudio is None and release_key(version) < (2, 12):
            self.summary.notes.append(
                f"torch {version} skipped: no torchaudio release pairs with it on the index yet"
            )
            return
        python = _python_map(rf.builds.values())
        series = self._series(rf.minor) or self._new_series(rf.minor, python)
        record: dict[str, Any] = {
            "version": version,
            "date": rf.date,
            "torchvision": rf.torchvision,
            "torchaudio": rf.torchaudio,
        }
        names: list[str] = []
        for name in sorted(rf.builds, key=_variant_order):
            build = rf.builds[name]
            var = self._series_variant(series, name)
            if var is None:
                self._new_variant(series, name, build, version)
            else:
                self._extra_platforms(var, version, build)
                self._pins(series, var, version, build)
            names.append(name)
        series_python = _effective_python(series, {})
        claimed = {
            plat
            for name in names
            for plat in as_dict(as_dict(self._series_variant(series, name)).get("platforms"))
        }
        lacking = sorted(p for p in claimed - set(python) if p in series_python)
        if lacking:  # the series' variant records claim a platform this release has no wheel for
            self.summary.notes.append(
                f"torch {version} has no wheels for {', '.join(lacking)}, which the series' "
                "variant records claim; the series' Python versions stand in (curate)"
            )
            python = {
                p: python.get(p) or series_python[p]
                for p in PLATFORMS
                if p in python or p in lacking
            }
        if python != series_python:
            record["python"] = {**python, "source": [self.key]}
        full = variant_names(series)
        if set(names) != set(full):
            record["variants"] = [n for n in full if n in names]
            self.pinned.append((series, record))
        record["source"] = [self.key]
        mirror = self._mirror()
        if mirror:  # offered only to --pytorch-index MIRROR, never to a plain suggest
            record["index"] = mirror
        self.used.add(self.key)
        series.setdefault("releases", [])
        _insert_sorted(series["releases"], record, lambda r: release_key(str(r["version"])))
        self._pypi(series, rf)
        self.summary.releases.append(
            f"torch {version} ({', '.join(names)}); torchvision {rf.torchvision}, "
            f"torchaudio {rf.torchaudio or '-'}; Python {_span(python)}"
        )

    def _update_release(
        self, series: dict[str, Any], rel: dict[str, Any], rf: ReleaseFacts
    ) -> None:
        version = rf.version
        if rel.get("index") and self._mirror() is None:
            del rel["index"]  # the default index lists it now: every user may be offered it
            self.summary.notes.append(f"torch {version}: now on the default index too")
        have = release_variants(series, rel)
        for name in sorted(rf.builds, key=_variant_order):
            if name in have:
                continue
            build = rf.builds[name]
            var = self._series_variant(series, name)
            if var is None:
                self._new_variant(series, name, build, version)  # pins the others' lists first
            else:
                self._extra_platforms(var, version, build)
                self._pins(series, var, version, build)
            if not as_list(rel.get("variants")):
                rel["variants"] = list(have)
            rel["variants"].append(name)
            have.append(name)
            self.pinned.append((series, rel))
            self._cite(rel)
            self._cover_python(series, rel, build)
        for package in ("torchvision", "torchaudio"):
            found = getattr(rf, package)
            paired = companion_version(rel.get(package))
            if paired is None and found is not None:
                rel[package] = found
                self._cite(rel)
                self.summary.companions.append(f"torch {version}: {package} {found}")
            elif found is not None and paired != found:
                self.summary.notes.append(
                    f"torch {version}: the index pairs {package} {found}, the database "
                    f"{paired} (kept; curate)"
                )
        self._pypi(series, rf)

    def _cover_python(self, series: dict[str, Any], rel: dict[str, Any], build: BuildFacts) -> None:
        """A build added to an existing release must have its platforms' Python versions."""
        python = _effective_python(series, rel)
        missing = [p for p in build.python if p not in python]
        if not missing:
            return
        for plat in missing:
            python[plat] = sorted(build.python[plat], key=PythonVersion.parse)
        rel["python"] = {
            **{p: python[p] for p in PLATFORMS if p in python},
            "source": [self.key],
        }
        self.summary.notes.append(
            f"torch {rel['version']}: Python versions for {', '.join(missing)} added "
            f"from the {build.variant} wheels"
        )

    def _unpin(self) -> None:
        """Drop the variant lists this merge wrote where they name every variant of the series."""
        for series, rel in self.pinned:
            listed = as_list(rel.get("variants"))
            if listed and set(listed) == set(variant_names(series)):
                del rel["variants"]

    # --- variants ----------------------------------------------------------------------------
    def _series_variant(self, series: dict[str, Any], name: str) -> dict[str, Any] | None:
        for var in as_list(series.get("variants")):
            if isinstance(var, dict) and var.get("name") == name:
                return var
        return None

    def _new_variant(
        self, series: dict[str, Any], name: str, build: BuildFacts, version: str
    ) -> dict[str, Any]:
        minor = str(series["minor"])
        full = variant_names(series)
        for rel in as_list(series.get("releases")):
            if isinstance(rel, dict) and not as_list(rel.get("variants")):
                rel["variants"] = list(full)  # older releases were not built for this one
                self.pinned.append((series, rel))
        cuda = variant_cuda(name)
        var: dict[str, Any] = {"name": name, "cuda": cuda, "cudnn": None, "nccl": None, "pypi": []}
        platforms: dict[str, Any] = {}
        carried_from: set[str] = set()
        if cuda is None:
            platforms = {p: {} for p in PLATFORMS if p in build.python}
        else:
            self._toolkit(cuda, name)
            for label in ("cudnn", "nccl"):
                pin = getattr(build, label)
                if pin:
                    var[label] = {"version": pin, "source": [self.key]}
            for plat in (p for p in PLATFORMS if p in build.python):
                arch, origin = self._carried_arch(minor, name, plat)
                platforms[plat] = arch
                if origin:
                    carried_from.add(origin)
            if build.cudnn or build.nccl:
                self.summary.pins.append(
                    f"torch {minor} {name}: cuDNN {build.cudnn or '-'}, NCCL {build.nccl or '-'}"
                    f" (from {version})"
                )
            self._runtime_check(name, version, build)
        var["source"] = [self.key]
        self.used.add(self.key)
        unknown = cuda is not None and all(a is None for a in platforms.values())
        if unknown:
            var["confirmed"] = False
            var["note"] = (
                "new on the PyTorch index; which architectures it compiles is not known yet"
            )
        var["platforms"] = platforms
        series.setdefault("variants", []).append(var)
        where = ", ".join(platforms)
        if cuda is None:
            what = f"CPU build ({where})"
        elif unknown:
            what = (
                f"CUDA {cuda} ({where}): architectures unknown, the variant is unconfirmed "
                "(used only as a last resort): curate its architecture list"
            )
        else:
            what = (
                f"CUDA {cuda} ({where}): architectures carried over from torch "
                f"{', '.join(sorted(carried_from))}, unconfirmed: curate"
            )
        self.summary.variants.append(f"torch {version} {name}: {what}")
        return var

    def _carried_arch(self, minor: str, name: str, plat: str) -> tuple[dict[str, Any] | None, str]:
        """The nearest other series' architecture list for this variant and platform."""
        here = _minor_number(minor)
        best: tuple[tuple[bool, int], str, dict[str, Any]] | None = None
        for series in series_of(self.torch):
            other = str(series.get("minor"))
            var = self._series_variant(series, name) if other != minor else None
            arch = as_dict(var.get("platforms")).get(plat) if var else None
            if not isinstance(arch, dict) or not as_list(arch.get("sass")):
                continue
            there = _minor_number(other)
            rank = (there > here, abs(there - here))  # older series first, the nearest of them
            if best is None or rank < best[0]:
                best = (rank, other, arch)
        if best is None:
            return None, ""
        _rank, other, arch = best
        return {
            "sass": list(arch.get("sass") or []),
            "ptx": list(arch.get("ptx") or []),
            "confirmed": False,
            "source": _sources(arch) or [self.key],
            "note": f"carried over from torch {other} {name}: the index does not say which "
            f"architectures torch {minor} compiles",
        }, other

    def _extra_platforms(self, var: dict[str, Any], version: str, build: BuildFacts) -> None:
        extra = [p for p in build.python if p not in as_dict(var.get("platforms"))]
        if extra:
            self.summary.notes.append(
                f"torch {version} {var['name']} is also built for {', '.join(extra)}, which the "
                "series' variant record does not list (not added: it would claim the other "
                "releases of the series too; curate)"
            )

    def _pins(
        self, series: dict[str, Any], var: dict[str, Any], version: str, build: BuildFacts
    ) -> None:
        if not build.metadata_read:
            return
        self._runtime_check(str(var["name"]), version, build)
        for label, title in (("cudnn", "cuDNN"), ("nccl", "NCCL")):
            pin = getattr(build, label)
            if pin is None:
                continue
            current = var.get(label)
            have = current.get("version") if isinstance(current, dict) else None
            if have is None:
                var[label] = {"version": pin, "source": [self.key]}
                self.used.add(self.key)
                self.summary.pins.append(
                    f"torch {series['minor']} {var['name']}: {title} {pin} (from {version})"
                )
            elif have != pin:
                self.summary.notes.append(
                    f"torch {version} {var['name']} pins {title} {pin}; the series records {have} "
                    "(kept: one pin per series; curate)"
                )

    def _runtime_check(self, name: str, version: str, build: BuildFacts) -> None:
        cuda = variant_cuda(name)
        runtime = build.cuda_runtime
        if cuda and runtime and cuda_key(".".join(runtime.split(".")[:2])) != cuda_key(cuda):
            self.summary.notes.append(
                f"torch {version} {name} requires the CUDA {runtime} runtime, not CUDA {cuda}"
            )

    def _toolkit(self, cuda: str, variant: str) -> None:
        doc = self.raw["cuda.yaml"]
        toolkits = doc.setdefault("toolkits", [])
        if any(isinstance(t, dict) and t.get("version") == cuda for t in toolkits):
            return
        record = {
            "version": cuda,
            "min_driver": {"linux": None, "windows": None},
            "confirmed": False,
            "source": [self.key],
            "note": f"a torch build ({variant}) uses this CUDA version; the index does not "
            "tell its minimum drivers: curate them",
        }
        self.used.add(self.key)
        _insert_sorted(toolkits, record, lambda t: cuda_key(str(t.get("version"))))
        self.summary.toolkits.append(
            f"CUDA {cuda}: added for {variant} with unknown minimum drivers (curate)"
        )

    # --- the Python Package Index's builds -----------------------------------------------------
    def _pypi(self, series: dict[str, Any], rf: ReleaseFacts) -> None:
        for plat, name in sorted(rf.pypi.items()):
            owners = [
                v
                for v in as_list(series.get("variants"))
                if isinstance(v, dict) and plat in as_list(v.get("pypi"))
            ]
            if any(o.get("name") == name for o in owners):
                continue
            if owners:
                self.summary.notes.append(
                    f"torch {rf.version}: the {plat} wheel of the default index is the {name} "
                    f"build; the series records {owners[0].get('name')} (kept; curate)"
                )
                continue
            var = self._series_variant(series, name)
            if var is None or plat not in as_dict(var.get("platforms")):
                self.summary.notes.append(
                    f"torch {rf.version}: the {plat} wheel of the default index is the {name} "
                    "build, which the database does not list for that platform"
                )
                continue
            listed = [*as_list(var.get("pypi")), plat]
            var["pypi"] = [p for p in PLATFORMS if p in listed]
            self._cite(var, self.pip_key)
            self.summary.pypi.append(
                f"torch {series['minor']}: the default index's {plat} wheel is the {name} build"
            )


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
