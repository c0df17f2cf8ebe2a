"""conda's view of a target: conda-forge's own PyTorch builds, pins, and virtual packages.

The conda-forge builds (``conda_forge.yaml``) are turned into a catalog of the solver's own shape,
so a conda environment is chosen by exactly the same rules as a wheel set: kernels for every GPU,
the driver's floor, newest release first. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from resolver.catalog import ArchList, Catalog, CondaForge, Release, Variant
from resolver.core.errors import UserError
from resolver.core.platforms import (
    DEFAULT_GLIBC,
    DEFAULT_LINUX,
    DEFAULT_MACOS,
    PythonVersion,
)
from resolver.core.versions import CudaVersion
from resolver.solve import Candidate, Decision, Request, Target, solve


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isascii() and p.isdigit())


def conda_forge_catalog(catalog: Catalog, glibc: str | None = None) -> Catalog:
    """The catalog with conda-forge's releases and builds in place of the PyTorch index's.

    A CUDA build becomes variant ``cu129`` (so ``--cuda 12.9`` and ``+cu129`` pins select it), the
    CPU build ``cpu``; companions keep PyTorch's pairing. A Linux build needing a newer glibc
    than the target's (when known) is left out.
    """
    cf = catalog.conda_forge
    if cf is None:
        raise UserError(
            f"the database ({catalog.origin}) has no conda_forge.yaml: "
            "conda-forge's builds are unknown (use --conda-source pip)"
        )
    releases: list[Release] = []
    for rel in cf.releases:
        platforms: dict[str, dict[str, tuple[CudaVersion | None, ArchList | None]]] = {}
        for plat, builds in rel.builds.items():
            for b in builds:
                if glibc and b.glibc and plat.startswith("linux") and _vkey(glibc) < _vkey(b.glibc):
                    continue
                name = "cpu" if b.cuda is None else "cu" + b.cuda.replace(".", "")
                platforms.setdefault(name, {})[plat] = (b.cuda, b.arch)
        variants = tuple(
            Variant(
                name=name,
                cuda=next(iter(per_plat.values()))[0],
                cudnn=None,
                nccl=None,
                pypi=frozenset(),
                platforms={p: arch for p, (_, arch) in per_plat.items()},
                prov=rel.prov,
            )
            for name, per_plat in sorted(platforms.items())
        )
        wheel = catalog.release(rel.version)
        releases.append(
            Release(
                version=rel.version,
                minor=".".join(rel.version.split(".")[:2]),
                date=None,
                python={plat: rel.python for plat in rel.builds},
                torchvision=wheel.torchvision if wheel else None,
                torchaudio=wheel.torchaudio if wheel else None,
                variants=variants,
                prov=rel.prov,
            )
        )
    return replace(catalog, releases=tuple(releases), origin=f"{catalog.origin} (conda-forge)")


def solve_conda_forge(
    catalog: Catalog, target: Target, request: Request, glibc: str | None = None
) -> Decision:
    """The best conda-forge build for the target, by the solver's own rules."""
    return solve(conda_forge_catalog(catalog, glibc), target, request)


def conda_forge_pins(cf: CondaForge, cand: Candidate) -> tuple[str, ...]:
    """``pytorch=V=cuda129*`` plus ``cuda-version=12.9`` (and the companions, by version).

    conda's classic solver does not enforce constraints on virtual packages (conda/conda#10803),
    so it can pick a CUDA 13 build for a 12.x driver; with both pins every solver agrees.
    """
    cuda = cand.variant.cuda
    specs = [f"{cf.package}={cand.release.version}={cf.build_prefix(cuda)}*"]
    if cuda is not None:
        specs.append(f"{cf.cuda_package}={cuda}")
    for name, _ in cand.packages:
        version = cand.release.companion(name) if name != "torch" else None
        if version is not None:
            specs.append(f"{name}={version}")
    return tuple(specs)


def python_specs(python: PythonVersion) -> list[str]:
    """conda specs for the target's Python: "3.13t" is python 3.13 plus the free-threaded ABI."""
    if python.free_threaded:
        return [f"python={python.plain}", "python-freethreading"]
    return [f"python={python}"]


def virtual_packages(
    catalog: Catalog, target: Target, cuda: str | None, glibc: str | None = None
) -> dict[str, str]:
    """The target's conda virtual packages, as conda-lock's spec file spells them.

    ``__cuda`` is the highest CUDA the target's driver supports; with no driver given, the CUDA of
    the build chosen (``cuda``); absent without an NVIDIA GPU.
    """
    plat = target.platform
    out: dict[str, str] = {}
    if plat.os == "linux":
        out["__unix"] = "0"
        out["__linux"] = DEFAULT_LINUX
        out["__glibc"] = glibc or DEFAULT_GLIBC
    elif plat.os == "windows":
        out["__win"] = "0"
    elif plat.os == "macos":
        out["__unix"] = "0"
        out["__osx"] = DEFAULT_MACOS
    out["__archspec"] = plat.conda_archspec
    if (target.nvidia or target.gpus) and plat.os != "macos":
        have = catalog.driver_max_cuda(target.driver, target.driver_os) if target.driver else None
        if have or cuda:
            out["__cuda"] = have or cuda or ""
    return dict(sorted(out.items()))
