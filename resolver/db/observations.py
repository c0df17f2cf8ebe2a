"""The observations overlay: facts read from wheels, layered over the curated database.

A wheel reader (ours or another tool) writes ``observations.yaml`` (format in data/SCHEMA.md);
each entry names one wheel by file name and sha256. Its facts replace the curated ones for that
release at grade ``observed``, and the curated value stays on the fact as a contradiction when it
differs, so nothing is hidden and nothing in the curated files is edited.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from resolver.core.errors import DataError
from resolver.core.platforms import PLATFORMS, of_wheel_tag
from resolver.core.versions import CC, cc_str, parse_cc
from resolver.db.evidence import Contradiction, Provenance
from resolver.db.models import ArchList, Catalog, Pinned, Variant

FILE = "observations.yaml"
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_WHEEL_RE = re.compile(
    r"^torch-(?P<version>[0-9]+\.[0-9]+\.[0-9]+)(?:\+(?P<local>[a-z0-9.]+))?"
    r"(?:-[0-9][^-]*)?"  # a build tag: torch-2.10.0-3-cp310-... (a re-upload; pip takes highest)
    r"-[^-]+-[^-]+-(?P<plat>[^-]+)\.whl$"
)


def source_key(sha256: str) -> str:
    return f"WHEEL_{sha256[:16]}"


def apply_observations(catalog: Catalog, doc: Any, *, lenient: bool = False) -> Catalog:
    """The catalog with every observation of ``doc`` (observations.yaml, parsed) applied.

    ``lenient`` (a user's own observations laid over the shipped database): an entry for a
    build this database does not have, or that does not parse, is skipped, not an error.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("observations"), list):
        raise DataError(f"{FILE}: expected 'observations:' with a list of wheels")
    # the load's own dict, added to in place: the extension packages' sources join this same
    # dict when they load (db/extdefer), so they must be the catalog's after this too
    sources = catalog.sources if isinstance(catalog.sources, dict) else dict(catalog.sources)
    at: dict[str, int] = {}
    for n, r in enumerate(catalog.releases):
        at.setdefault(r.version, n)  # the first release of that version, as ever
    # Each release's builds as the observations leave them; the release is rebuilt once, after.
    variants: dict[int, list[Variant]] = {}
    for i, entry in enumerate(doc["observations"]):
        where = f"{FILE} observations[{i}]"
        try:
            if not isinstance(entry, dict):
                raise DataError(f"{where}: expected a mapping")
            obs = _parse(entry, where)
            idx = at.get(obs["torch"])
            if idx is None:
                raise DataError(f"{where}: torch {obs['torch']} is not in the database")
            key = source_key(obs["sha256"])
            rel = catalog.releases[idx]
            builds = variants.get(idx) or list(rel.variants)
            _apply(rel.version, builds, obs, key, where)
            variants[idx] = builds
        except DataError:
            if lenient:  # checked entry by entry; the catalog is built once, after them all
                continue
            raise
        sources[key] = {
            "cite": f"{obs['wheel']} sha256 {obs['sha256']}, read {obs['read']}"
            + (f" by {obs['tool']}" if obs.get("tool") else ""),
            "kind": "observed",
        }
    releases = list(catalog.releases)
    for idx, builds in variants.items():
        releases[idx] = releases[idx]._replace(variants=tuple(builds))
    return replace(catalog, sources=sources, releases=tuple(releases))


def _parse(entry: dict[str, Any], where: str) -> dict[str, Any]:
    wheel = entry.get("wheel")
    sha = entry.get("sha256")
    if not isinstance(wheel, str) or not wheel.endswith(".whl"):
        raise DataError(f"{where}: 'wheel' must be the wheel's file name")
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise DataError(f"{where}: 'sha256' must be 64 lower-case hex digits")
    m = _WHEEL_RE.match(wheel)
    if m is None:
        raise DataError(f"{where}: not a torch wheel file name: {wheel!r}")
    plat = entry.get("platform") or next(
        (p for tag in m["plat"].split(".") if (p := of_wheel_tag(tag)) is not None), None
    )
    if plat not in PLATFORMS:
        raise DataError(f"{where}: unknown platform for {wheel!r}")
    out = {
        "wheel": wheel,
        "sha256": sha,
        "read": str(entry.get("read") or "unknown date"),
        "tool": entry.get("tool"),
        "torch": str(entry.get("torch") or m["version"]),
        "variant": entry.get("variant") or m["local"],
        "platform": plat,
    }
    for key in ("sass", "ptx"):
        if entry.get(key) is not None:
            ccs = entry[key]
            if not isinstance(ccs, list) or not all(isinstance(c, str) for c in ccs):
                raise DataError(f"{where}: {key!r} must be a list of quoted compute capabilities")
            out[key] = tuple(sorted(parse_cc(c) for c in ccs))
    for key in ("cudnn", "nccl"):
        if entry.get(key) is not None:
            out[key] = str(entry[key])
    return out


def _apply(version: str, builds: list[Variant], obs: dict[str, Any], key: str, where: str) -> None:
    """Lay one observation over torch ``version``'s ``builds`` (in place; checked first)."""
    plat = obs["platform"]
    name = obs["variant"]
    if name is None:  # an untagged wheel: the build the Python Package Index carries there
        name = next((v.name for v in builds if plat in v.pypi), None)
    at = next((n for n, v in enumerate(builds) if v.name == name), None)
    if at is None:
        raise DataError(f"{where}: torch {version} has no {name} build in the database")
    var = builds[at]
    seen = Provenance((key,), "observed", None, "observed")
    curated = var.platforms.get(plat)
    platforms = dict(var.platforms)
    if "sass" in obs or "ptx" in obs:
        platforms[plat] = _arch(curated, obs, seen, key)
    builds[at] = var._replace(
        platforms=platforms,
        prov=_lost(seen, None, None, var.prov),
        cudnn=_pinned(var.cudnn, obs.get("cudnn"), seen),
        nccl=_pinned(var.nccl, obs.get("nccl"), seen),
    )


def _arch(curated: ArchList | None, obs: dict[str, Any], seen: Provenance, key: str) -> ArchList:
    sass: tuple[CC, ...] = obs.get("sass", curated.sass if curated else ())
    ptx: tuple[CC, ...] = obs.get("ptx", curated.ptx if curated else ())
    sass_prov = seen if "sass" in obs else (curated.prov if curated else seen)
    ptx_prov = seen if "ptx" in obs else (curated.ptx_provenance if curated else seen)
    if curated is not None:
        sass_prov = (
            _lost(sass_prov, curated.sass, sass, curated.prov) if "sass" in obs else sass_prov
        )
        if "ptx" in obs:
            ptx_prov = _lost(ptx_prov, curated.ptx, ptx, curated.ptx_provenance)
    return ArchList(sass=sass, ptx=ptx, prov=sass_prov, ptx_prov=ptx_prov)


def _lost(winner: Provenance, old: Any, new: Any, loser: Provenance) -> Provenance:
    """The winner's provenance, carrying the curated value as a contradiction where it differs."""
    carried = loser.contradicts if winner is not loser else ()
    if old is not None and old != new:
        carried = (*carried, Contradiction(_text(old), loser.source, f"curated ({loser.grade})"))
    if winner.source == loser.source:
        return winner
    if old == new:  # the wheel agrees: cite the curated sources too, graded by the wheel
        merged = tuple(dict.fromkeys((*loser.source, *winner.source)))
        return winner._replace(source=merged, contradicts=(*winner.contradicts, *carried))
    return winner._replace(contradicts=(*winner.contradicts, *carried))


def _pinned(curated: Pinned | None, value: str | None, seen: Provenance) -> Pinned | None:
    if value is None:
        return curated
    if curated is None or curated.version is None:
        return Pinned(value, seen)
    return Pinned(value, _lost(seen, curated.version, value, curated.prov))


def _text(value: Any) -> str:
    if isinstance(value, tuple):
        return ";".join(cc_str(c) for c in value) or "none"
    return str(value)
