"""The database's typed records: what the solver, the writers and the CLI see, never raw YAML.

They are built from the parsed YAML on every start (the cache in resolver/db/cache.py holds only
that plain data), so nothing outside this package can construct one behind the parser's checks.

No ``from __future__ import annotations`` here: typing.NamedTuple compiles every string
annotation into a ForwardRef, ~60 compiles (~1.5 ms) on every start; evaluated ones cost nothing.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from resolver.core.errors import UserError
from resolver.core.platforms import PythonVersion
from resolver.core.versions import CC, CudaVersion, Driver, cuda_key, driver_key
from resolver.db import gpunames
from resolver.db.evidence import Provenance

_NOTHING: Mapping[str, Any] = MappingProxyType({})  # a read-only empty default


@functools.lru_cache(maxsize=1024)
def release_key(version: str) -> tuple[int, ...]:
    """ "2.10.1" -> (2, 10, 1): how releases sort (each version worked out once)."""
    return tuple(int(p) for p in version.split("."))


class DriverWindow(NamedTuple):
    """Which driver branches drive GPUs of an architecture at all: from `first` (inclusive) up
    to `dropped` (the first branch that ignores them); `last` names the last one that does."""

    first: int | None  # None: no edge known
    last: int | None  # the last branch that drives it; None: still supported (or not named)
    prov: Provenance
    dropped: int | None = None  # None: derived from `last` (older databases), or still supported

    @property
    def cut(self) -> int | None:
        """The lowest branch that no longer drives the architecture."""
        if self.dropped is not None:
            return self.dropped
        return self.last + 1 if self.last is not None else None


class WindowsBranch(NamedTuple):
    """The Windows driver numbers seen for one branch (581.57 is an R580 driver, not "R581")."""

    branch: int
    first: Driver  # lowest Windows number seen for the branch
    last: Driver  # highest seen
    prov: Provenance


class Branch(NamedTuple):
    """What is known of a driver's branch: exactly (lo == hi) or bounds, and how it was read."""

    lo: int
    hi: int
    how: str  # "linux", "windows table", "windows bounds"
    record: WindowsBranch | None = None

    @property
    def exact(self) -> int | None:
        return self.lo if self.lo == self.hi else None

    @property
    def text(self) -> str:
        return f"R{self.lo}" if self.lo == self.hi else f"R{self.lo}..R{self.hi} (not certain)"


class Toolkit(NamedTuple):
    version: str
    min_driver: Mapping[str, Driver | None]  # "linux" / "windows" -> version or None (unknown)
    prov: Provenance


class CompatFloor(NamedTuple):
    major: int
    min_driver: Mapping[str, Driver | None]
    prov: Provenance


class Architecture(NamedTuple):
    cc: CC
    name: str
    tegra: bool
    prov: Provenance
    drivers: DriverWindow | None = None


class GpuModel(NamedTuple):
    name: str
    cc: CC
    kind: str
    pci_ids: tuple[str, ...]
    aliases: tuple[str, ...]
    prov: Provenance


class ArchList(NamedTuple):
    """The kernels compiled into a build for one platform."""

    sass: tuple[CC, ...]
    ptx: tuple[CC, ...]
    prov: Provenance
    ptx_prov: Provenance | None = None  # None: the same as the SASS list's

    @property
    def ptx_provenance(self) -> Provenance:
        return self.ptx_prov or self.prov


class Pinned(NamedTuple):
    """A library version a build ships with (cuDNN, NCCL)."""

    version: str | None
    prov: Provenance


class Variant(NamedTuple):
    name: str  # cpu | cu126 | rocm6.4 | xpu
    cuda: CudaVersion | None
    cudnn: Pinned | None
    nccl: Pinned | None
    pypi: frozenset[str]  # platforms whose Python Package Index wheel is this build
    platforms: Mapping[str, ArchList | None]  # platform -> arch list (None: unknown)
    prov: Provenance

    @property
    def kind(self) -> str:
        """cpu, cuda, rocm or xpu: only cpu and cuda get solver logic."""
        if self.name == "cpu":
            return "cpu"
        if self.name.startswith("cu"):
            return "cuda"
        return "rocm" if self.name.startswith("rocm") else "xpu"


class Release(NamedTuple):
    version: str
    minor: str
    date: str | None
    python: Mapping[str, tuple[PythonVersion, ...]]  # platform -> CPython versions with wheels
    torchvision: str | None
    torchaudio: str | None
    variants: tuple[Variant, ...]
    prov: Provenance
    companion_prov: Mapping[str, Provenance] = _NOTHING  # where not the release's
    companion_untagged: frozenset[str] = frozenset()  # py3-none wheels: no +cuXYZ tag
    python_prov: Provenance | None = None  # the Python tags' own sources (None: the release's)
    # companion versions made for this release but yanked on the Package Index (never paired)
    yanked: Mapping[str, tuple[str, ...]] = _NOTHING
    # the mirror `db update --pytorch-index` read it from (None: the database's own index, or
    # curated): offered only with that --pytorch-index (`Catalog.for_index`); the file's `index:`
    mirror: str | None = None

    @property
    def key(self) -> tuple[int, ...]:
        return release_key(self.version)

    def companion(self, name: str) -> str | None:
        if name == "torchvision":
            return self.torchvision
        if name == "torchaudio":
            return self.torchaudio
        raise UserError(f"unknown companion package {name!r} (torchvision or torchaudio)")


class CondaBuild(NamedTuple):
    """One conda-forge build of a release on one platform: its CUDA (None: CPU), its kernels."""

    cuda: CudaVersion | None
    arch: ArchList | None
    glibc: str | None  # the lowest glibc it needs on Linux, when above conda-forge's 2.17


class CondaRelease(NamedTuple):
    version: str
    python: tuple[PythonVersion, ...]
    builds: Mapping[str, tuple[CondaBuild, ...]]  # platform -> its builds
    prov: Provenance


class CondaForge(NamedTuple):
    """conda-forge's own PyTorch builds (``conda_forge.yaml``), for conda environments."""

    channel: str  # a channel name ("conda-forge")
    package: str  # "pytorch"
    cuda_string: str  # build-string prefix of a CUDA build: "cuda{major}{minor}"
    cpu_string: str  # of a CPU build: "cpu"
    cuda_package: str  # the package pinned to the CUDA version: "cuda-version"
    releases: tuple[CondaRelease, ...]  # newest first
    prov: Provenance

    def build_prefix(self, cuda: str | None) -> str:
        """ "12.9" -> "cuda129"; None -> "cpu": what a build string starts with."""
        if cuda is None:
            return self.cpu_string
        major, _, minor = cuda.partition(".")
        return self.cuda_string.format(major=major, minor=minor or "0")


class ImportGate(NamedTuple):
    """A package's own check of torch at import (torchao's ``__init__``): outside ``torch`` it
    skips loading its compiled kernels, so a build outside it does not run them."""

    torch: str  # a PEP 440 specifier
    prov: Provenance


class Ceiling(NamedTuple):
    """A kernel's own compute-capability ceiling, enforced by the package (xformers' CUTLASS
    attention refuses above 9.0, whatever PTX its library carries)."""

    cc: CC
    fallback: str | None  # what runs above it instead (None: nothing of the package)
    prov: Provenance


class AbiBuilds(NamedTuple):
    """Torch builds of a minor before ``torch_cxx11_abi.since`` that use the C++11 ABI all the
    same (2.6's cu126, ROCm, XPU and aarch64 builds)."""

    minor: str
    variants: frozenset[str]  # empty: every variant
    platforms: frozenset[str]  # empty: every platform
    prov: Provenance


@dataclass(frozen=True)
class ExtBuild:
    """One prebuilt form of an extension release: what torch it needs and what GPU code it has.

    ``cuda_match``: how a torch build's CUDA must match ``cuda`` for the extension's libraries to
    load: ``major`` (same CUDA major), ``exact`` (bitsandbytes before 0.50.2 loads the library
    of torch.version.cuda), ``nearest`` (bitsandbytes 0.50.2's loader: that library, else the
    newest below it in the same major, else the oldest above it), ``default`` (built against
    the torch build the default index carries), ``any`` (no CUDA code of its own)."""

    index: str  # default | pytorch | release-downloads
    torch: str | None  # a PEP 440 specifier; None: the wheel requires no torch
    cuda: CudaVersion | None
    cuda_match: str
    python: str | None  # a PEP 440 specifier (Requires-Python); None: any
    device_code: bool
    gate: bool  # whether its arch lists decide where it runs (False: optional kernels only)
    cxx11_abi: bool | None  # the C++ ABI it was built with, where builds differ by it
    platforms: Mapping[str, ArchList | None]  # None: no arch list (no device code)
    prov: Provenance
    cudart: int | None = None  # N of the libcudart.so.N its libraries need (None: not read)
    import_gate: ImportGate | None = None
    ceiling: Ceiling | None = None


class ExtRelease(NamedTuple):
    package: str
    version: str
    date: str
    sdist: bool  # a source distribution exists (it would compile, needing nvcc)
    builds: tuple[ExtBuild, ...]
    prov: Provenance

    @property
    def key(self) -> tuple[Any, ...]:
        """Newest first by PEP 440 (a NamedTuple caches nothing: only --with asks)."""
        from packaging.version import Version

        return (Version(self.version),)


class ExtPackage(NamedTuple):
    """An extension package installed beside torch (``--with xformers``)."""

    name: str  # canonical
    module: str  # what ``import`` takes
    releases: tuple[ExtRelease, ...]  # newest first
    download: str | None = None  # release-downloads: the wheel URL's template


@dataclass
class Catalog:
    """The whole database, indexed for the solver and the CLI."""

    sources: Mapping[str, Mapping[str, Any]]
    toolkits: Mapping[str, Toolkit]
    compat_floors: Mapping[int, CompatFloor]
    architectures: Mapping[CC, Architecture]
    gpus: tuple[GpuModel, ...]
    releases: tuple[Release, ...]  # newest first
    index_url_template: str
    origin: str = "<memory>"
    updated: str | None = None
    conda_forge: CondaForge | None = None  # conda_forge.yaml, where the database has one
    windows_branches: tuple[WindowsBranch, ...] = ()  # cuda.yaml windows_driver_branches
    extensions: Mapping[str, ExtPackage] = field(default_factory=dict)  # extensions.yaml
    cxx11_since: str | None = None  # the first torch minor whose wheels use the C++11 ABI
    cxx11_builds: tuple[AbiBuilds, ...] = ()  # earlier builds that use it all the same
    _name_index: dict[tuple[str, ...], GpuModel] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        """Index the GPU names, unless ``replace()`` carried a built index over: every replace
        keeps ``gpus``, so the index stays true (one that changed them would pass
        ``_name_index={}``)."""
        if self._name_index:
            return
        for gpu in self.gpus:
            for spelling in (gpu.name, *gpu.aliases):
                self._name_index.setdefault(gpunames.name_words(spelling), gpu)

    # --- lookups -----------------------------------------------------------------------------
    # --- lookups -----------------------------------------------------------------------------
    def index_url(self, variant: str, mirror: str | None = None) -> str:
        """The variant's index on the PyTorch index, or on a mirror of it (--pytorch-index)."""
        if mirror:
            return mirror.rstrip("/") + "/" + variant
        return self.index_url_template.format(variant=variant)

    def for_index(self, mirror: str | None) -> "Catalog":
        """The releases a user of ``mirror`` (--pytorch-index; None: the database's own index)
        can install: every curated one or one the default index lists, and the mirror's own.
        A release only a mirror lists is never offered to someone who does not use it."""
        want = mirror.rstrip("/") if mirror else None
        keep = tuple(r for r in self.releases if r.mirror is None or r.mirror == want)
        return self if len(keep) == len(self.releases) else replace(self, releases=keep)

    def release(self, version: str) -> Release | None:
        return next((r for r in self.releases if r.version == version), None)

    def is_tegra(self, cc: CC) -> bool:
        arch = self.architectures.get(cc)
        return bool(arch and arch.tegra)

    @property
    def name_index(self) -> Mapping[tuple[str, ...], GpuModel]:
        """The curated records by the words of each name and alias."""
        return self._name_index

    def gpu_by_name(self, name: str) -> GpuModel | None:
        """Longest known name whose words begin the query's ("Tesla V100-SXM2-32GB").

        A curated record, else an entry of the generated name table (pci.ids); None when the
        name is unknown or pci.ids uses it for chips of different CCs.
        """
        return _as_model(gpunames.find(self, name))

    def gpu_by_pci_id(self, device_id: str) -> GpuModel | None:
        wanted = device_id.lower()
        curated = next((g for g in self.gpus if wanted in g.pci_ids), None)
        return curated or _as_model(gpunames.find_pci_id(self, wanted))

    def close_gpu_names(self, name: str, n: int = 5) -> list[str]:
        return gpunames.close_names(self, name, n)

    def resolve_gpu(self, spec: str) -> tuple[CC, str | None]:
        """A --gpu value: "8.6", "sm_86" or a model name -> (CC, model name or None)."""
        return gpunames.resolve_gpu(self, spec)

    def driver_branch(self, driver: Driver | str, driver_os: str) -> Branch:
        """The release branch of a driver version: on Linux its major number; on Windows the
        table of numbers per branch, else bounds (a Windows number is at or above its branch's
        name, and numbers grow with the branch). NVML's nvmlSystemGetDriverBranch is no branch
        of this kind: it names the build branch ("r582_49" for Linux 580.159.04)."""
        key = driver.key if isinstance(driver, Driver) else driver_key(driver)
        if driver_os != "windows":
            return Branch(key[0], key[0], "linux")
        lo = 0
        for rec in self.windows_branches:
            if rec.first.key <= key <= rec.last.key:
                return Branch(rec.branch, rec.branch, "windows table", rec)
            if rec.first.key <= key:
                lo = max(lo, rec.branch)
        return Branch(min(lo, key[0]), key[0], "windows bounds")

    def toolkit_min_driver(self, cuda: str, driver_os: str) -> Driver | None:
        tk = self.toolkits.get(cuda)
        return tk.min_driver.get(driver_os) if tk else None

    def compat_min_driver(self, cuda: str, driver_os: str) -> Driver | None:
        """The lowest driver a build of this CUDA version runs on under minor-version compat.

        The major's floor, unless the toolkit itself shipped with an older driver (CUDA 11.0).
        """
        own = self.toolkit_min_driver(cuda, driver_os)
        floor = self.compat_floors.get(cuda_key(cuda)[0])
        floor_v = floor.min_driver.get(driver_os) if floor else None
        if floor_v is None:
            return own
        if own is None:
            return floor_v
        return own if own < floor_v else floor_v

    def driver_max_cuda(self, driver: Driver | str, driver_os: str) -> str | None:
        """Highest CUDA whose toolkit minimum driver this driver meets (what nvidia-smi shows)."""
        have = driver.key if isinstance(driver, Driver) else driver_key(driver)
        best: str | None = None
        for version, tk in self.toolkits.items():
            need = tk.min_driver.get(driver_os)
            if (
                need is not None
                and tk.prov.confirmed
                and need.key <= have
                and (best is None or cuda_key(version) > cuda_key(best))
            ):
                best = version
        return best


def _as_model(hit: gpunames.NameMatch | None) -> GpuModel | None:
    """The record of a name match: the curated one, or one made from a name-table entry."""
    if hit is None or len(hit.ccs) != 1:
        return None
    if isinstance(hit.model, GpuModel):  # a curated record (the lookups see it as a protocol)
        return hit.model
    prov = Provenance((gpunames.TABLE_SOURCE,), hit.grade, None, hit.grade)
    return GpuModel(hit.name, hit.ccs[0], hit.kind, hit.devices, (), prov)
