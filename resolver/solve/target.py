"""The values a solve is asked about: the machine (`Target`, its GPUs) and the request.

Plain frozen records of typed values (`Platform`, `PythonVersion`, `Driver`, compute
capabilities), parsed once at the edges (options, a host record, a fleet spec, a lock's record)
and read by every part of the decision layer; the solver (`solver.py`) is what judges them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, AsWritten, Driver, cc_sm

if TYPE_CHECKING:  # packaging's specifiers cost ~20 ms to import: only a given --torch needs them
    from packaging.specifiers import SpecifierSet

__all__ = ["Policy", "Request", "Target", "TargetGpu"]

Policy = Literal["compat", "strict"]


@dataclass(frozen=True)
class TargetGpu:
    cc: CC
    name: str | None = None

    @property
    def label(self) -> str:
        return f"{cc_sm(self.cc)} ({self.name})" if self.name else cc_sm(self.cc)


@dataclass(frozen=True, eq=False)
class Target(AsWritten):
    """The machine to resolve for: detected, described, or one member of a fleet.

    Equal targets are the same machine as written (``AsWritten``): a cache or set of targets
    never merges a machine on 570.124.6 with one on 570.124.06 (equal ``Driver`` values).
    """

    platform: Platform
    python: PythonVersion
    driver: Driver | None = None  # None: unknown, not checked (the answer states what it needs)
    driver_os: str = "linux"  # whose driver floors apply ("windows" on Windows and WSL2)
    gpus: tuple[TargetGpu, ...] = ()
    nvidia: bool = False  # an NVIDIA GPU is there (even when its CC is unknown)
    name: str | None = None  # a label for fleets and reports
    unknown_gpus: tuple[str, ...] = ()  # GPUs seen whose compute capability nobody knows


@dataclass(frozen=True)
class Request:
    """What the user asks for."""

    torch: SpecifierSet | None = None  # None: any release
    companions: tuple[tuple[str, SpecifierSet | None], ...] = ()  # (name, specifier or None)
    extensions: tuple[tuple[str, SpecifierSet | None], ...] = ()  # xformers, vllm...: same form
    cuda: str | None = None  # "12.8"
    variant: str | None = None  # "cu126": from a local version in a pin (torch==2.8.0+cu126)
    policy: Policy = "compat"
    allow_unconfirmed: bool = False  # the old flag: --evidence any
    cuda_on_gpu_less: bool = False  # a fleet's GPU-less members run its CUDA build on the CPU
    evidence: str = "documented"  # documented | observed | any: which builds rank first

    @property
    def level(self) -> str:
        return "any" if self.allow_unconfirmed else self.evidence
