"""What a decision found, as data: reasons, kernel coverage, warnings and hints as typed records.

The decision layer never writes a sentence (tests/test_architecture.py holds it to that): it
returns these records, each with its kind and its values (the GPU, what was needed, what was
found), and ``resolver.present`` says every one of them in English. So the fleet memo restates a
shared decision by replacing values (the driver, the GPUs' names), never by editing text, and
code that asks which GPUs a build lacks reads a field, not a sentence.

The records are ``NamedTuple`` classes, not frozen dataclasses: defining a frozen dataclass
execs its generated methods, ~3.8 M instructions each at import, and this module's ~50 records
were a third of ``suggest``'s start-up (issue 40). ``records_apart`` keeps them records, not
tuples: each equals only a record of its own kind (two kinds with the same values differ, and a
plain tuple equals none), and each is true, even one without fields.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

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


def _eq(self: tuple[object, ...], other: object) -> bool:
    if type(other) is type(self):
        return tuple.__eq__(self, other)
    return False if isinstance(other, tuple) else NotImplemented


def _ne(self: tuple[object, ...], other: object) -> bool:
    same = _eq(self, other)
    return same if same is NotImplemented else not same


def _true(self: object) -> bool:
    return True


def records_apart(namespace: dict[str, object], module: str) -> None:
    """Give each ``NamedTuple`` record class of ``module`` a dataclass's equality: equal only to
    a record of its own class (a tuple's hash stays: equal records still hash alike), and true
    even without fields. Called once, at the end of each module of records."""
    methods = (("__eq__", _eq), ("__ne__", _ne), ("__bool__", _true))
    for cls in tuple(namespace.values()):
        # (Misfit stays a plain NamedTuple, as it was before the records)
        if isinstance(cls, type) and issubclass(cls, tuple) and cls.__module__ == module:
            for name, method in methods if cls is not Misfit else ():
                setattr(cls, name, method)


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


class LoaderPick(NamedTuple):
    """An extension's loader takes its library of another CUDA minor (bitsandbytes)."""

    cuda: str  # the torch build's
    loaded: str


class CeilingFallback(NamedTuple):
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


class DriverWhy(NamedTuple):
    """Why a CUDA build needs the driver it does (``min_driver_reason`` in ``--json``)."""

    cuda: str
    basis: Basis
    major: int  # the CUDA major, whose compatibility floor ``COMPAT`` is


class Reach(NamedTuple):
    """How a build's kernels reach one compute capability: SASS, or PTX JIT-compiled, of ``via``."""

    ptx: bool
    via: CC


class Covered(NamedTuple):
    """One GPU of the target and how a build reaches it."""

    gpu: str  # its label
    cc: CC
    reach: Reach


# --- reasons: why a build does not run (one record per way) ------------------------------------


class SpecMiss(NamedTuple):
    torch: str
    spec: str

    @property
    def kind(self) -> ReasonKind:
        return K.SPEC


class NoPythonWheel(NamedTuple):
    torch: str
    python: PythonVersion
    platform: Platform
    have: tuple[PythonVersion, ...]

    @property
    def kind(self) -> ReasonKind:
        return K.PYTHON


class CudaMiss(NamedTuple):
    cuda: str | None  # the build's; None: a CPU build
    asked: str

    @property
    def kind(self) -> ReasonKind:
        return K.CUDA


class VariantMiss(NamedTuple):
    variant: str
    asked: str

    @property
    def kind(self) -> ReasonKind:
        return K.VARIANT


class NoCompanion(NamedTuple):
    name: str
    torch: str

    @property
    def kind(self) -> ReasonKind:
        return K.COMPANION


class CompanionMiss(NamedTuple):
    name: str
    paired: str
    spec: str
    yanked: tuple[str, ...]  # releases the spec admits, pulled from the Package Index

    @property
    def kind(self) -> ReasonKind:
        return K.COMPANION


class CpuBuild(NamedTuple):
    @property
    def kind(self) -> ReasonKind:
        return K.CPU


class CudaBuild(NamedTuple):
    @property
    def kind(self) -> ReasonKind:
        return K.NOGPU


class ArchUnknown(NamedTuple):
    variant: str
    platform: Platform

    @property
    def kind(self) -> ReasonKind:
        return K.UNKNOWN


class NoKernels(NamedTuple):
    gpu: str  # its label
    cc: CC
    sass: tuple[CC, ...]
    ptx: tuple[CC, ...]

    @property
    def kind(self) -> ReasonKind:
        return K.ARCH


class FloorUnknown(NamedTuple):
    driver_os: str
    cuda: str | None

    @property
    def kind(self) -> ReasonKind:
        return K.DRIVER


class DriverTooOld(NamedTuple):
    need: Driver
    why: DriverWhy | None
    have: Driver

    @property
    def kind(self) -> ReasonKind:
        return K.DRIVER


class Verdict(Enum):
    """Where a driver's branch falls in an architecture's window of driver branches."""

    DROPPED = 1  # the branch no longer drives it
    MAYBE_DROPPED = 2  # a Windows number whose branch is unknown, on both sides of the cut
    PREDATES = 3  # the branch predates it
    MAYBE_PREDATES = 4


class OutsideWindow(NamedTuple):
    gpu: str
    driver: Driver
    lo: int  # the branch as known: exactly (lo == hi) or within bounds
    hi: int
    arch: str  # the architecture's name
    verdict: Verdict
    cut: int | None
    first: int | None
    last: int | None

    @property
    def kind(self) -> ReasonKind:
        return K.WINDOW


class TooWeak(NamedTuple):
    what: About  # what the weakest fact is about
    grade: str

    @property
    def kind(self) -> ReasonKind:
        return K.EVIDENCE


class ExtensionMiss(NamedTuple):
    """An extension package that has no build for this torch build (``--json``'s ``gates``)."""

    miss: Misfit

    @property
    def kind(self) -> ReasonKind:
        return K.EXTENSION


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


class PairingInferred(NamedTuple):
    name: str
    paired: str
    torch: str


class ExtensionPassed(NamedTuple):
    note: Misfit  # a newer release passed over
    package: str
    version: str


class Undocumented(NamedTuple):
    doubt: About | None
    evidence: str


class CpuAsAsked(NamedTuple):
    pass


class JitOnly(NamedTuple):
    pass


class CcUnknown(NamedTuple):
    gpu: str


Warning = PairingInferred | ExtensionPassed | Undocumented | CpuAsAsked | JitOnly | CcUnknown


# --- hints: the single change that would change a decision --------------------------------------


class NeedsDriver(NamedTuple):
    torch: str
    variant: str
    need: Driver
    why: DriverWhy | None
    have: Driver
    selected: str | None  # the selection's variant where it is the same release


class KernelsDropped(NamedTuple):
    torch: str
    gpus: tuple[str, ...]  # the labels of the GPUs its builds lack kernels for, sorted
    known: tuple[str, ...]  # the builds known to lack them
    unknown: tuple[str, ...]  # the builds whose GPUs are unknown


class MayRun(NamedTuple):
    torch: str
    builds: tuple[str, ...]
    platform: Platform


class NeedsPython(NamedTuple):
    torch: str
    oldest: PythonVersion  # the oldest Python it has a wheel for, all newer than the target's
    python: PythonVersion


class NoPythonHint(NamedTuple):
    torch: str
    python: PythonVersion
    platform: Platform
    have: tuple[PythonVersion, ...]


class NoCudaBuild(NamedTuple):
    cuda: str
    platform: Platform
    have: tuple[str, ...]


class HeldByCompanions(NamedTuple):
    torch: str
    reasons: tuple[Reason, ...]


class InstallBranch(NamedTuple):
    """The driver does not drive the target's GPUs (``windows``, every build's): the branch to
    install, said first; ``numbers``: how a branch's drivers are numbered on Windows, by branch."""

    windows: tuple[OutsideWindow, ...]
    numbers: tuple[tuple[int, Driver, Driver], ...]


class LastBranch(NamedTuple):
    gpu: str
    arch: str
    last: int
    cut: int | None


class WeakerRuns(NamedTuple):
    torch: str
    variant: str
    doubt: About | None
    evidence: str


class NoDriverGiven(NamedTuple):
    need: Driver
    why: DriverWhy | None


class NoGpuModel(NamedTuple):
    pass


class CcUnknownHint(NamedTuple):
    gpu: str


class Tegra(NamedTuple):
    gpus: tuple[str, ...]


class ExtHeldBack(NamedTuple):
    torch: str
    names: tuple[str, ...]
    blockers: tuple[Reason, ...]


class ExtFitsElsewhere(NamedTuple):
    name: str
    torch: str
    variant: str
    reasons: tuple[Reason, ...]  # why that torch build does not run here


class ExtCannotRun(NamedTuple):
    name: str
    miss: Misfit


class ExtNoCommonTorch(NamedTuple):
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


class Fits(NamedTuple):
    """The builds a member runs: their variants and torch releases (none: no build at all)."""

    variants: tuple[str, ...]
    oldest: str
    newest: str


class NothingRuns(NamedTuple):
    member: str
    reasons: tuple[Reason, ...]  # its newest build's; none where the database has no build


class NothingShared(NamedTuple):
    a: str
    a_fits: Fits
    b: str
    b_fits: Fits


class PlatformsApart(NamedTuple):
    fits: tuple[tuple[str, bool, tuple[str, ...]], ...]  # platform, GPU-less, torch releases


Conflict = NothingRuns | NothingShared | PlatformsApart

records_apart(globals(), __name__)
