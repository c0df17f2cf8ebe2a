"""Which release of an extension package (xformers, flash-attn, vllm...) goes with one torch build.

Pure, like the solver: for a torch release and variant on a target, the newest release of the
package (within the user's specifier) with a prebuilt build whose torch requirement, CUDA,
C++ ABI, Python, platform and GPU code all fit; else the reason, from the release that came
closest. The solver calls it for every candidate, so the newest torch for which every package
fits wins, and a rejected newer torch names the package that holds it back.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from resolver.catalog import ArchList, Catalog, Release, Variant
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, cc_sm, cc_str
from resolver.db.models import ExtBuild, ExtRelease
from resolver.db.torchabi import uses_cxx11
from resolver.solve.findings import CeilingFallback, Covered, Gate, LoaderPick, Misfit, Reach

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

Coverage = Callable[[ArchList, CC], "Reach | None"]
FITS = 10  # choose()'s closeness for a fit
_TORCH = 2  # ...for a build that fails only on its torch requirement


class ExtChoice(NamedTuple):
    """The release and build of one extension package chosen beside a torch build."""

    package: str
    release: ExtRelease
    build: ExtBuild
    coverage: tuple[Covered | LoaderPick | CeilingFallback, ...] = ()  # how each GPU is reached
    notes: tuple[Misfit, ...] = ()  # newer releases passed over, and why

    @property
    def version(self) -> str:
        return self.release.version


class Place(NamedTuple):
    """The target facts an extension is judged on (the solver's Target, without importing it)."""

    platform: Platform
    python: PythonVersion
    gpus: tuple[tuple[CC, str], ...]  # (CC, label)


_Why = tuple[Gate, dict[str, str]]  # a build's misfit before it names its package and release


def choose(
    catalog: Catalog,
    place: Place,
    rel: Release,
    var: Variant,
    name: str,
    spec: SpecifierSet | None,
    coverage: Coverage,
) -> tuple[ExtChoice | None, Misfit | None, int]:
    """The newest fitting release of ``name`` for torch ``rel``/``var`` on ``place``, or None and
    why none fits (the closest release's gate and values), with how close it came (``FITS``
    when it fits; the higher, the closer)."""
    pkg = catalog.extensions.get(name)
    if pkg is None:
        return None, Misfit(Gate.NO_FACTS, name), 0
    releases = [r for r in pkg.releases if spec is None or spec.contains(r.version, True)]
    if not releases:
        return None, Misfit(Gate.NO_MATCH, name, "", (("spec", str(spec)),)), 0
    passed: list[Misfit] = []
    best: tuple[int, Misfit | None] = (-1, None)
    gates: list[tuple[str, Gate]] = []  # each release-with-wheels' gate, to sum up the others
    for ext in releases:
        if not ext.builds:
            miss = Misfit(Gate.SOURCE_ONLY, name, ext.version)
            passed.append(miss)  # said where an older one is taken
            best = max(best, (0, miss), key=lambda b: b[0])
            continue
        closest: tuple[int, _Why | None] = (-1, None)
        loaded = _loader_pick(ext.builds, var, place.platform.name)
        for build in ext.builds:
            if build.cuda_match == "nearest" and loaded is not None and build is not loaded:
                continue  # the package's loader takes another of its libraries
            stage, why_not, reached = _misfit(catalog, place, rel, var, build, coverage)
            if why_not is None:
                if loaded is build and build.cuda != var.cuda and build.cuda and var.cuda:
                    reached.insert(0, LoaderPick(var.cuda, build.cuda))
                return ExtChoice(name, ext, build, tuple(reached), tuple(passed[:2])), None, FITS
            closest = max(closest, (stage, why_not), key=lambda b: b[0])
        if closest[1] is not None:
            gate, values = closest[1]
            gates.append((ext.version, gate))
            miss = Misfit(gate, name, ext.version, tuple(values.items()))
            best = max(best, (closest[0], miss), key=lambda b: b[0])
    if best[0] == _TORCH and len(releases) > 1:
        built = [r for r in releases if r.builds]
        values = {
            "versions": ", ".join(r.version for r in releases),
            "count": str(len(releases)),
            "torch": rel.version,
        }
        if built:
            values |= {"newest": built[0].version, "newest_torch": _torch_spec(built[0])}
        return None, Misfit(Gate.TORCH_HISTORY, name, "", tuple(values.items())), 2
    closest_miss = best[1]
    others = [g for v, g in gates if closest_miss is None or v != closest_miss.version]
    if closest_miss is not None and others:
        # the closest release is named; the rest of the history is summed up by gate
        counts = Counter(g.value for g in others)
        said = ", ".join(f"{g} ({n})" for g, n in counts.most_common())
        extra = (("others", str(len(others))), ("by", said))
        closest_miss = closest_miss._replace(values=(*closest_miss.values, *extra))
    return None, closest_miss, best[0]


def _build_cuda(build: ExtBuild) -> tuple[int, int]:
    return build.cuda.key if build.cuda is not None else (0, 0)


def _loader_pick(builds: tuple[ExtBuild, ...], var: Variant, platform: str) -> ExtBuild | None:
    """The library bitsandbytes' loader takes for torch's CUDA (``cuda_match: nearest``): that
    CUDA's, else the newest below it in the same major, else the oldest above it; None where
    the major has none (it never crosses a major)."""
    if var.cuda is None:
        return None
    want = var.cuda.key
    same = [
        b
        for b in builds
        if b.cuda_match == "nearest"
        and b.cuda is not None
        and platform in b.platforms
        and b.cuda.major == want[0]
    ]
    if not same:
        return None
    below = [b for b in same if _build_cuda(b) <= want]
    if below:
        return max(below, key=_build_cuda)
    return min(same, key=_build_cuda)


def _torch_spec(rel: ExtRelease) -> str:
    """The torch a release's builds require, in few words ("2.4 to 2.8", ">=2.10")."""
    specs = sorted({b.torch or "(any)" for b in rel.builds})
    minors = [s[2:-2] for s in specs if s.startswith("==") and s.endswith(".*")]
    if len(minors) == len(specs) > 1:
        ordered = sorted(minors, key=lambda m: tuple(int(p) for p in m.split(".")))
        return f"{ordered[0]} to {ordered[-1]}"
    return " or ".join(specs)


def _misfit(
    catalog: Catalog,
    place: Place,
    rel: Release,
    var: Variant,
    build: ExtBuild,
    coverage: Coverage,
) -> tuple[int, _Why | None, list[Covered | LoaderPick | CeilingFallback]]:
    """How far a build gets (a later stage is a closer miss), the gate that stops it and its
    values, and how it reaches each GPU when it fits."""
    if place.platform.name not in build.platforms:
        have = ", ".join(sorted(build.platforms))
        return 1, (Gate.PLATFORM, {"platform": str(place.platform), "have": have}), []
    if build.torch and not _admits(build.torch, rel.version):
        return _TORCH, (Gate.TORCH, {"requires": build.torch, "torch": rel.version}), []
    gate = build.import_gate
    if gate and not _admits(gate.torch, rel.version):
        values = {"gate": gate.torch, "torch": rel.version, "grade": gate.prov.grade}
        return 3, (Gate.IMPORT, values), []
    if build.python and not _admits(build.python, place.python.plain):
        return 4, (Gate.PYTHON, {"requires": build.python, "python": str(place.python)}), []
    cuda_why = _cuda_misfit(place, var, build)
    if cuda_why:
        return 5, cuda_why, []
    if build.cxx11_abi is not None:
        torch_abi = uses_cxx11(
            catalog.cxx11_since, catalog.cxx11_builds, rel.version, var.name, place.platform.name
        )
        if torch_abi is not None and torch_abi != build.cxx11_abi:
            abi = "cxx11" if build.cxx11_abi else "old"
            values = {"abi": abi, "torch": rel.version, "variant": var.name}
            return 6, (Gate.ABI, values), []
    arch = build.platforms[place.platform.name]
    if not (build.device_code and build.gate) or var.kind != "cuda":
        return FITS, None, []
    if arch is None:
        return 7, (Gate.ARCH_UNKNOWN, {"platform": str(place.platform)}), []
    reached: list[Covered | LoaderPick | CeilingFallback] = []
    top = build.ceiling
    for cc, label in place.gpus:
        if top is not None and cc > top.cc:  # the package's own kernels refuse this GPU
            values = {"gpu": label, "ceiling": cc_str(top.cc), "grade": top.prov.grade}
            if top.fallback is None:
                return 8, (Gate.CEILING, values), []
            reached.append(CeilingFallback(label, cc_str(top.cc), top.fallback, values["grade"]))
            continue
        how = coverage(arch, cc)
        if how is None:
            return 8, (Gate.KERNELS, {"gpu": label, "arch": _arch_text(arch)}), []
        reached.append(Covered(label, cc, how))
    return FITS, None, reached


@functools.lru_cache(maxsize=4096)
def _admits(spec: str, version: str) -> bool:
    """Whether a specifier admits a version, pre-releases included: every build is judged
    against every torch candidate, over the whole history, so each pair is worked out once."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec).contains(version, prereleases=True)


def _cuda_misfit(place: Place, var: Variant, build: ExtBuild) -> _Why | None:
    """The CUDA gates: the runtime its libraries link (read from them), then the curated match."""
    runtime = var.cuda.major if var.kind == "cuda" and var.cuda else None
    if build.cudart is not None and runtime is not None and build.cudart != runtime:
        return Gate.CUDART, {"cudart": str(build.cudart), "variant": var.name}
    if build.cuda_match == "any":
        return None
    if var.kind != "cuda" or var.cuda is None:
        return (Gate.NEEDS_CUDA, {}) if build.device_code else None
    if build.cuda_match == "default":
        if place.platform.name not in var.pypi:
            return Gate.DEFAULT_BUILD, {"variant": var.name}
        return None
    assert build.cuda is not None
    major = build.cuda.major
    if build.cuda_match == "exact" and var.cuda != build.cuda:
        return Gate.LIBRARY, {"cuda": var.cuda}
    if var.cuda.major != major:
        if build.cuda_match == "nearest":
            values = {"major": str(var.cuda.major), "have": build.cuda}
            return Gate.LOADER, values | {"variant": var.name}
        return Gate.CUDA, {"cuda": build.cuda, "major": str(major), "variant": var.name}
    return None


def _arch_text(arch: ArchList) -> str:
    sass = " ".join(cc_sm(c) for c in arch.sass) or "none"
    ptx = " ".join(cc_sm(c) for c in arch.ptx) or "none"
    return f"its libraries have SASS {sass}; PTX {ptx}"


def requirement(
    catalog: Catalog, choice: ExtChoice, torch: Release, python: PythonVersion | None
) -> str:
    """What pip installs for a choice: ``name==version`` from the default index, or the wheel's
    URL where the project publishes it in its own release downloads (flash-attn)."""
    pkg = catalog.extensions.get(choice.package)
    build = choice.build
    if build.index != "release-downloads" or pkg is None or not pkg.download or not python:
        return f"{choice.package}=={choice.version}"
    return pkg.download.format(
        version=choice.version,
        cuda_major=build.cuda.major if build.cuda else "",
        torch_minor=".".join(torch.version.split(".")[:2]),
        abi="TRUE" if build.cxx11_abi else "FALSE",
        python_tag=python.abi,
    )


def requirement_line(
    catalog: Catalog, choice: ExtChoice, torch: Release, python: PythonVersion
) -> str:
    """A PEP 508 line for lock files: ``name==version`` or ``name @ URL``."""
    req = requirement(catalog, choice, torch, python)
    return req if "==" in req else f"{choice.package} @ {req}"
