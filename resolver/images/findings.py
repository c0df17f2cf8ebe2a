"""What the image report found, as data: its notes, reasons and fixes as typed records.

Like the solver's (``solve/findings.py``), the image decision returns records and never a
sentence; ``resolver.present.image`` says them. A report's lists also hold the solver's own
records (a reason, a hint, a GPU's coverage) and text the database gives as it is (a release's
note): ``Said``.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from resolver.core.platforms import Platform
from resolver.core.versions import CC, Driver
from resolver.db.evidence import About
from resolver.solve import findings as fd


class Plain(Enum):
    """The report's notes and fixes that carry no value."""

    WSL = "wsl"  # a Windows host runs Linux containers through WSL2
    MACOS = "macos"  # a macOS host gives containers no GPU
    JIT = "jit"  # a GPU reached through PTX JIT only
    CPU_ONLY = "cpu-only"  # no NVIDIA GPU: torch runs on the CPU
    NO_MODEL = "no-model"  # an NVIDIA GPU without its model: kernels not checked
    DIGEST = "digest"  # the digest was not checked
    ARCH_FIX = "arch-fix"  # build an image from this platform's wheels
    NONE_RUNS = "none-runs"  # no official image's torch build runs here


class DriverMet(NamedTuple):
    have: Driver
    need: Driver
    why: fd.DriverWhy | None


class DriverNotGiven(NamedTuple):
    need: Driver
    why: fd.DriverWhy | None


class Upgrade(NamedTuple):
    need: Driver
    why: fd.DriverWhy | None


class Doubt(NamedTuple):
    doubt: About | None  # what the fact that rests on a secondary source is about


class LatestMoves(NamedTuple):
    updated: str | None  # the database's date
    torch: str


class KernelsUnchecked(NamedTuple):
    gpus: tuple[str, ...]


class PlatformOnly(NamedTuple):
    """A Linux host of another architecture: the image (or the record of ``ref``) is for one."""

    ref: str | None  # None: the official CUDA image
    image_platform: str
    host: Platform


class CudaFails(NamedTuple):
    cuda: str | None
    reasons: tuple[fd.Reason, ...]


class NewestRuns(NamedTuple):
    """Why the suggested image: the newest torch whose CUDA build runs here."""

    coverage: tuple[fd.Covered, ...]
    driver: DriverMet | None


class NoForwardCompat(Enum):
    NO_GPU = "no-gpu"  # no GPU named
    NOT_DATA_CENTER = "not-data-center"
    NOT_DRIVEN = "not-driven"  # the branch predates the GPU


class ForwardCompat(NamedTuple):
    """Why CUDA forward compatibility does not apply (``why``), or that it runs (None)."""

    branch: int
    major: int
    why: NoForwardCompat | None = None
    gpu: str | None = None  # the GPU it does not apply to (its name)
    cc: CC | None = None
    first: int | None = None  # the GPU's first branch
    driver: Driver | None = None  # where it runs: the host's driver, below ``need``
    need: Driver | None = None
    need_why: fd.DriverWhy | None = None
    gpus: tuple[str, ...] = ()
    grade: str = ""
    source: tuple[str, ...] = ()


class InstalledBuild(NamedTuple):
    """An official image's build: from the PyTorch index, or installed by ``by``."""

    torch: str
    variant: str
    cuda: str | None
    by: str | None  # None: the wheel


Said = (
    str
    | Plain
    | DriverMet
    | DriverNotGiven
    | Upgrade
    | Doubt
    | LatestMoves
    | KernelsUnchecked
    | PlatformOnly
    | CudaFails
    | ForwardCompat
    | fd.Reason
    | fd.Hint
    | fd.Covered
    | fd.LoaderPick
    | fd.CeilingFallback
)

fd.records_apart(globals(), __name__)
