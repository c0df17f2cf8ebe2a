"""What a decision found, as data: reasons, kernel coverage, warnings and hints as typed records.

The decision layer never writes a sentence (tests/test_architecture.py holds it to that): it
returns these records, each with its kind and its values (the GPU, what was needed, what was
found), and ``resolver.present`` says every one of them in English. So the fleet memo restates a
shared decision by replacing values (the driver, the GPUs' names), never by editing text, and
code that asks which GPUs a build lacks reads a field, not a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, NamedTuple

from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, Driver
from resolver.db.evidence import About


class ReasonKind(str, Enum):
    """Why a build is turned down, by kind (the ``kinds`` of ``--json``'s rejected builds)."""

    SPEC = "spec"
    PYTHON = "python"
    CUDA = "cuda"
    VARIANT = "variant"
    COMPANION = "companion"
    CPU = "cpu"
    NOGPU = "nogpu"
    ARCH = "arch"
    DRIVER = "driver"
    UNKNOWN = "unknown"
    WINDOW = "window"
    EVIDENCE = "evidence"
    EXTENSION = "extension"

    def __str__(self) -> str:
        return self.value


K = ReasonKind


class Gate(str, Enum):
    """What holds an extension build back, read from the build's own facts."""

    NO_FACTS = "no-facts"  # the database has no facts for the package
    NO_MATCH = "no-match"  # no release within the user's specifier
    SOURCE_ONLY = "source-only"  # a source distribution only (needs nvcc)
    PLATFORM = "platform"  # no wheel for the target's platform
    TORCH = "torch"  # its Requires-Dist torch excludes the torch build
    TORCH_HISTORY = "torch-history"  # no release of the database is for that torch
    IMPORT = "import"  # its own import check loads its kernels only with another torch
    PYTHON = "python"  # Requires-Python
    CUDA = "cuda"  # compiled for another CUDA major than the torch build's
    CUDART = "cudart"  # its libraries need libcudart.so.N of another CUDA major
    LIBRARY = "library"  # it loads only the library of torch's CUDA, and has none for it
    LOADER = "loader"  # its loader finds no library in the torch build's CUDA major
    DEFAULT_BUILD = "default-build"  # built against the default index's torch build only
    NEEDS_CUDA = "needs-cuda"  # GPU code, and the torch build is not a CUDA one
    ABI = "abi"  # built for the other C++ ABI than the torch build's
    ARCH_UNKNOWN = "arch-unknown"  # device code whose architectures are not known
    KERNELS = "kernels"  # no SASS or PTX that runs on a GPU
    CEILING = "ceiling"  # its own kernels refuse the GPU, and nothing runs in their place


class Misfit(NamedTuple):
    """Why a package has no build for a torch build: the gate and the values it compared."""

    gate: Gate
    package: str
    version: str = ""  # the release held back ("" where none is meant)
    values: tuple[tuple[str, str], ...] = ()

    def value(self, key: str) -> str | None:
        return dict(self.values).get(key)


@dataclass(frozen=True)
class LoaderPick:
    """An extension's loader takes its library of another CUDA minor (bitsandbytes)."""

    cuda: str  # the torch build's
    loaded: str


@dataclass(frozen=True)
class CeilingFallback:
    """A GPU above an extension's own kernel ceiling, reached by what runs instead."""

    gpu: str
    ceiling: str
    fallback: str
    grade: str


class Basis(Enum):
    """Which floor a build's driver need is: its toolkit's own minimum (strict policy, or where
    it equals its major's floor), that minimum for PTX JIT, or its major's compatibility floor."""

    TOOLKIT = "toolkit"
    JIT = "jit"
    COMPAT = "compat"


@dataclass(frozen=True)
class DriverWhy:
    """Why a CUDA build needs the driver it does (``min_driver_reason`` in ``--json``)."""

    cuda: str
    basis: Basis
    major: int  # the CUDA major, whose compatibility floor ``COMPAT`` is


@dataclass(frozen=True)
class Reach:
    """How a build's kernels reach one compute capability: SASS, or PTX JIT-compiled, of ``via``."""

    ptx: bool
    via: CC


@dataclass(frozen=True)
class Covered:
    """One GPU of the target and how a build reaches it."""

    gpu: str  # its label
    cc: CC
    reach: Reach


# --- reasons: why a build does not run (one record per way) ------------------------------------


@dataclass(frozen=True)
class SpecMiss:
    kind: ClassVar[ReasonKind] = K.SPEC
    torch: str
    spec: str


@dataclass(frozen=True)
class NoPythonWheel:
    kind: ClassVar[ReasonKind] = K.PYTHON
    torch: str
    python: PythonVersion
    platform: Platform
    have: tuple[str, ...]


@dataclass(frozen=True)
class CudaMiss:
    kind: ClassVar[ReasonKind] = K.CUDA
    cuda: str | None  # the build's; None: a CPU build
    asked: str


@dataclass(frozen=True)
class VariantMiss:
    kind: ClassVar[ReasonKind] = K.VARIANT
    variant: str
    asked: str


@dataclass(frozen=True)
class NoCompanion:
    kind: ClassVar[ReasonKind] = K.COMPANION
    name: str
    torch: str


@dataclass(frozen=True)
class CompanionMiss:
    kind: ClassVar[ReasonKind] = K.COMPANION
    name: str
    paired: str
    spec: str
    yanked: tuple[str, ...]  # releases the spec admits, pulled from the Package Index


@dataclass(frozen=True)
class CpuBuild:
    kind: ClassVar[ReasonKind] = K.CPU


@dataclass(frozen=True)
class CudaBuild:
    kind: ClassVar[ReasonKind] = K.NOGPU


@dataclass(frozen=True)
class ArchUnknown:
    kind: ClassVar[ReasonKind] = K.UNKNOWN
    variant: str
    platform: Platform


@dataclass(frozen=True)
class NoKernels:
    kind: ClassVar[ReasonKind] = K.ARCH
    gpu: str  # its label
    cc: CC
    sass: tuple[CC, ...]
    ptx: tuple[CC, ...]


@dataclass(frozen=True)
class FloorUnknown:
    kind: ClassVar[ReasonKind] = K.DRIVER
    driver_os: str
    cuda: str | None


@dataclass(frozen=True)
class DriverTooOld:
    kind: ClassVar[ReasonKind] = K.DRIVER
    need: str
    why: DriverWhy | None
    have: Driver


class Verdict(Enum):
    """Where a driver's branch falls in an architecture's window of driver branches."""

    DROPPED = 1  # the branch no longer drives it
    MAYBE_DROPPED = 2  # a Windows number whose branch is unknown, on both sides of the cut
    PREDATES = 3  # the branch predates it
    MAYBE_PREDATES = 4


@dataclass(frozen=True)
class OutsideWindow:
    kind: ClassVar[ReasonKind] = K.WINDOW
    gpu: str
    driver: Driver
    lo: int  # the branch as known: exactly (lo == hi) or within bounds
    hi: int
    arch: str  # the architecture's name
    verdict: Verdict
    cut: int | None
    first: int | None
    last: int | None


@dataclass(frozen=True)
class TooWeak:
    kind: ClassVar[ReasonKind] = K.EVIDENCE
    what: About  # what the weakest fact is about
    grade: str


@dataclass(frozen=True)
class ExtensionMiss:
    """An extension package that has no build for this torch build (``--json``'s ``gates``)."""

    kind: ClassVar[ReasonKind] = K.EXTENSION
    miss: Misfit


Reason = (
    SpecMiss
    | NoPythonWheel
    | CudaMiss
    | VariantMiss
    | NoCompanion
    | CompanionMiss
    | CpuBuild
    | CudaBuild
    | ArchUnknown
    | NoKernels
    | FloorUnknown
    | DriverTooOld
    | OutsideWindow
    | TooWeak
    | ExtensionMiss
)

# Reason kinds by who is at fault: the request, or the target's GPU side (kernels, driver).
REQUEST_KINDS: frozenset[ReasonKind] = frozenset({K.SPEC, K.CUDA, K.VARIANT, K.COMPANION})
GPU_KINDS: frozenset[ReasonKind] = frozenset({K.ARCH, K.DRIVER, K.UNKNOWN, K.WINDOW})


# --- warnings on a build that runs --------------------------------------------------------------


@dataclass(frozen=True)
class PairingInferred:
    name: str
    paired: str
    torch: str


@dataclass(frozen=True)
class ExtensionPassed:
    note: Misfit  # a newer release passed over
    package: str
    version: str


@dataclass(frozen=True)
class Undocumented:
    doubt: About | None
    evidence: str


@dataclass(frozen=True)
class CpuAsAsked:
    pass


@dataclass(frozen=True)
class JitOnly:
    pass


@dataclass(frozen=True)
class CcUnknown:
    gpu: str


Warning = PairingInferred | ExtensionPassed | Undocumented | CpuAsAsked | JitOnly | CcUnknown


# --- hints: the single change that would change a decision --------------------------------------


@dataclass(frozen=True)
class NeedsDriver:
    torch: str
    variant: str
    need: str
    why: DriverWhy | None
    have: Driver
    selected: str | None  # the selection's variant where it is the same release


@dataclass(frozen=True)
class KernelsDropped:
    torch: str
    gpus: tuple[str, ...]  # the labels of the GPUs its builds lack kernels for, sorted
    known: tuple[str, ...]  # the builds known to lack them
    unknown: tuple[str, ...]  # the builds whose GPUs are unknown


@dataclass(frozen=True)
class MayRun:
    torch: str
    builds: tuple[str, ...]
    platform: Platform


@dataclass(frozen=True)
class NeedsPython:
    torch: str
    oldest: str  # the oldest Python it has a wheel for, all newer than the target's
    python: PythonVersion


@dataclass(frozen=True)
class NoPythonHint:
    torch: str
    python: PythonVersion
    platform: Platform
    have: tuple[str, ...]


@dataclass(frozen=True)
class NoCudaBuild:
    cuda: str
    platform: Platform
    have: tuple[str, ...]


@dataclass(frozen=True)
class HeldByCompanions:
    torch: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class InstallBranch:
    """The driver does not drive the target's GPUs (``windows``, every build's): the branch to
    install, said first; ``numbers``: how a branch's drivers are numbered on Windows, by branch."""

    windows: tuple[OutsideWindow, ...]
    numbers: tuple[tuple[int, str, str], ...]


@dataclass(frozen=True)
class LastBranch:
    gpu: str
    arch: str
    last: int
    cut: int | None


@dataclass(frozen=True)
class WeakerRuns:
    torch: str
    variant: str
    doubt: About | None
    evidence: str


@dataclass(frozen=True)
class NoDriverGiven:
    need: str
    why: DriverWhy | None


@dataclass(frozen=True)
class NoGpuModel:
    pass


@dataclass(frozen=True)
class CcUnknownHint:
    gpu: str


@dataclass(frozen=True)
class Tegra:
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class ExtHeldBack:
    torch: str
    names: tuple[str, ...]
    blockers: tuple[Reason, ...]


@dataclass(frozen=True)
class ExtFitsElsewhere:
    name: str
    torch: str
    variant: str
    reasons: tuple[Reason, ...]  # why that torch build does not run here


@dataclass(frozen=True)
class ExtCannotRun:
    name: str
    miss: Misfit


@dataclass(frozen=True)
class ExtNoCommonTorch:
    fits: tuple[tuple[str, tuple[str, ...]], ...]  # each package, the torch releases it fits


Hint = (
    NeedsDriver
    | KernelsDropped
    | MayRun
    | NeedsPython
    | NoPythonHint
    | NoCudaBuild
    | HeldByCompanions
    | InstallBranch
    | LastBranch
    | WeakerRuns
    | NoDriverGiven
    | NoGpuModel
    | CcUnknownHint
    | Tegra
    | ExtHeldBack
    | ExtFitsElsewhere
    | ExtCannotRun
    | ExtNoCommonTorch
)


# --- a fleet's conflicts: why no build set fits every member --------------------------------------


@dataclass(frozen=True)
class Fits:
    """The builds a member runs: their variants and torch releases (none: no build at all)."""

    variants: tuple[str, ...]
    oldest: str
    newest: str


@dataclass(frozen=True)
class NothingRuns:
    member: str
    reasons: tuple[Reason, ...]  # its newest build's; none where the database has no build


@dataclass(frozen=True)
class NothingShared:
    a: str
    a_fits: Fits
    b: str
    b_fits: Fits


@dataclass(frozen=True)
class PlatformsApart:
    fits: tuple[tuple[str, bool, tuple[str, ...]], ...]  # platform, GPU-less, torch releases


Conflict = NothingRuns | NothingShared | PlatformsApart
