"""Which release of an extension package (xformers, flash-attn, vllm...) goes with one torch build.

Pure, like the solver: for a torch release and variant on a target, the newest release of the
package (within the user's specifier) with a prebuilt build whose torch requirement, CUDA,
C++ ABI, Python, platform and GPU code all fit; else the reason, from the release that came
closest. The solver calls it for every candidate, so the newest torch for which every package
fits wins, and a rejected newer torch names the package that holds it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from resolver.catalog import ArchList, Catalog, Release, Variant
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, cc_sm, cuda_key
from resolver.db.models import ExtBuild, ExtRelease

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# what `--with` accepts besides torch's companions; facts in data/extensions.yaml
EXTENSIONS = ("xformers", "flash-attn", "bitsandbytes", "torchao", "vllm", "triton")
Coverage = Callable[[ArchList, CC], "str | None"]
FITS = 9  # choose()'s closeness for a fit
_TORCH = 2  # ...for a build that fails only on its torch requirement


class ExtChoice(NamedTuple):
    """The release and build of one extension package chosen beside a torch build."""

    package: str
    release: ExtRelease
    build: ExtBuild
    coverage: tuple[str, ...] = ()  # how each GPU is reached ("sm_86 (RTX 3090): SASS sm_80")
    notes: tuple[str, ...] = ()  # newer releases passed over, and why

    @property
    def version(self) -> str:
        return self.release.version


class Place(NamedTuple):
    """The target facts an extension is judged on (the solver's Target, without importing it)."""

    platform: Platform
    python: PythonVersion
    gpus: tuple[tuple[CC, str], ...]  # (CC, label)


def choose(
    catalog: Catalog,
    place: Place,
    rel: Release,
    var: Variant,
    name: str,
    spec: SpecifierSet | None,
    coverage: Coverage,
) -> tuple[ExtChoice | None, str, int]:
    """The newest fitting release of ``name`` for torch ``rel``/``var`` on ``place``, or None and
    one line saying why none fits (naming the package and the closest release's reason), with
    how close it came (``FITS`` when it fits; the higher, the closer)."""
    pkg = catalog.extensions.get(name)
    if pkg is None:
        return None, f"{name}: the database has no facts for it (extensions.yaml)", 0
    releases = [r for r in pkg.releases if spec is None or spec.contains(r.version, True)]
    if not releases:
        return None, f"{name}: no release in the database matches {spec}", 0
    passed: list[str] = []
    best: tuple[int, str] = (-1, "")
    for ext in releases:
        if not ext.builds:
            why = "has only a source distribution (compiling it needs nvcc and the CUDA toolkit)"
            passed.append(f"{name} {ext.version} {why}")  # said where an older one is taken
            best = max(best, (0, f"{name} {ext.version} {why}"), key=lambda b: b[0])
            continue
        closest: tuple[int, str] = (-1, "")
        for build in ext.builds:
            stage, why_not, reached = _misfit(catalog, place, rel, var, build, coverage)
            if why_not is None:
                notes = tuple(passed[:2])
                return ExtChoice(name, ext, build, tuple(reached), notes), "", FITS
            closest = max(closest, (stage, why_not), key=lambda b: b[0])
        best = max(best, (closest[0], f"{name} {ext.version} {closest[1]}"), key=lambda b: b[0])
    if best[0] == _TORCH and len(releases) > 1:
        built = [r for r in releases if r.builds]
        newest = f"; {built[0].version} requires torch {_torch_spec(built[0])}" if built else ""
        versions = ", ".join(r.version for r in releases)
        return (
            None,
            f"{name}: no release in the database ({versions}) is for torch {rel.version}{newest}",
            2,
        )
    return None, best[1], best[0]


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
) -> tuple[int, str | None, list[str]]:
    """How far a build gets (a later stage is a closer miss), why it fails, and how it reaches
    each GPU when it fits."""
    from packaging.specifiers import SpecifierSet

    if place.platform.name not in build.platforms:
        have = ", ".join(sorted(build.platforms))
        return 1, f"has no {place.platform} wheel (only {have})", []
    if build.torch and not SpecifierSet(build.torch).contains(rel.version, prereleases=True):
        return _TORCH, f"requires torch{build.torch}, not {rel.version}", []
    if build.python and not SpecifierSet(build.python).contains(place.python.plain, True):
        return 3, f"requires Python {build.python}, not {place.python}", []
    cuda_why = _cuda_misfit(place, var, build)
    if cuda_why:
        return 4, cuda_why, []
    if build.cxx11_abi is not None and catalog.cxx11_since:
        torch_abi = rel.key[:2] >= tuple(int(p) for p in catalog.cxx11_since.split("."))
        if torch_abi != build.cxx11_abi:
            return 5, f"build for the {'C++11' if build.cxx11_abi else 'old'} ABI", []
    arch = build.platforms[place.platform.name]
    if not (build.device_code and build.gate) or var.kind != "cuda":
        return FITS, None, []
    if arch is None:
        return 6, f"has device code whose architectures are not known for {place.platform}", []
    reached: list[str] = []
    for cc, label in place.gpus:
        how = coverage(arch, cc)
        if how is None:
            return 7, f"has no kernels for {label}: {_arch_text(arch)}", []
        reached.append(f"{label}: {how}")
    return FITS, None, reached


def _cuda_misfit(place: Place, var: Variant, build: ExtBuild) -> str | None:
    if build.cuda_match == "any":
        return None
    if var.kind != "cuda" or var.cuda is None:
        return "needs a CUDA torch build" if build.device_code else None
    if build.cuda_match == "default":
        if place.platform.name not in var.pypi:
            return f"is built against torch's default-index build, not {var.name}"
        return None
    assert build.cuda is not None
    if build.cuda_match == "exact" and var.cuda != build.cuda:
        return f"has no library for CUDA {var.cuda}"
    if cuda_key(var.cuda)[0] != cuda_key(build.cuda)[0]:
        major = cuda_key(build.cuda)[0]
        return (
            f"is built with CUDA {build.cuda}: it needs a CUDA {major} torch build, not {var.name}"
        )
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
        cuda_major=cuda_key(build.cuda)[0] if build.cuda else "",
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
