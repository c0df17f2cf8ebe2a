"""The values a solve is asked about: the machine (`Target`, its GPUs) and the request.

Plain frozen records of typed values (`Platform`, `PythonVersion`, `Driver`, compute
capabilities), read by every part of the decision layer; the solver (`solver.py`) is what judges
them. A machine given in text (the options, a recorded host, a fleet spec's entry) is made a
`Target` once, at its edge: a host record here (``target_from_profile``), options in the target
flow (``flows/target.py``), a spec's entry by its reader (``team/spec.py``); nothing downstream
parses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from resolver.core.errors import UserError
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, AsWritten, Driver, cc_sm, parse_cc
from resolver.core.vocab import DriverPolicy, EvidenceLevel

if TYPE_CHECKING:  # packaging's specifiers cost ~20 ms to import: only a given --torch needs them
    from packaging.specifiers import SpecifierSet

    from resolver.catalog import Catalog
    from resolver.core.hostprofile import HostProfile  # a detected host only: not on every start

__all__ = [
    "Policy",
    "Request",
    "Target",
    "TargetGpu",
    "target_from_profile",
]

Policy = DriverPolicy


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
    policy: Policy = DriverPolicy.COMPAT
    allow_unconfirmed: bool = False  # the old flag: --evidence any
    cuda_on_gpu_less: bool = False  # a fleet's GPU-less members run its CUDA build on the CPU
    evidence: EvidenceLevel = EvidenceLevel.DOCUMENTED  # which builds rank first

    @property
    def level(self) -> EvidenceLevel:
        return EvidenceLevel.ANY if self.allow_unconfirmed else self.evidence


# --- the edge: a host record (detected, or read back) made a Target, once ---


def target_from_profile(catalog: Catalog, profile: HostProfile, name: str | None = None) -> Target:
    """A detected (or recorded) host as the solver sees it."""
    from resolver.core import hostprofile

    gpus: list[TargetGpu] = []
    unknown: list[str] = []
    for gpu in profile.gpus:
        cc = gpu.cc
        if cc is None:  # an old driver's nvidia-smi has no compute_cap: look the model up
            model = catalog.gpu_by_name(gpu.name) if gpu.name else None
            if model is None and gpu.pci_device_id:
                model = catalog.gpu_by_pci_id(gpu.pci_device_id)
            cc = f"{model.cc[0]}.{model.cc[1]}" if model else None
        if cc is None:  # a GPU newer than the database: still an NVIDIA GPU, coverage unknown
            unknown.append(gpu.name or f"GPU {gpu.index}")
            continue
        try:
            gpus.append(TargetGpu(parse_cc(cc), gpu.name))
        except UserError:
            raise UserError(f"GPU {gpu.index}: not a compute capability: {cc!r}") from None
    return Target(
        platform=Platform.parse(profile.platform),
        python=PythonVersion.parse(profile.python),
        driver=None if profile.driver is None else Driver.parse(profile.driver),
        driver_os=profile.driver_os,
        gpus=tuple(gpus),
        nvidia=profile.state in (hostprofile.STATE_OK, "driver-mismatch") or bool(gpus or unknown),
        name=name,
        unknown_gpus=tuple(unknown),
    )
