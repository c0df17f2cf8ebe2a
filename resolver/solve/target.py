"""The values a solve is asked about: the machine (`Target`, its GPUs) and the request.

Plain frozen records of typed values (`Platform`, `PythonVersion`, `Driver`, compute
capabilities), read by every part of the decision layer; the solver (`solver.py`) is what judges
them. A machine given in text (the options, a recorded host, a fleet spec's entry) is made a
`Target` here, once (``describe_target``, ``target_from_profile``): nothing downstream parses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from resolver.core.errors import UserError, shown
from resolver.core.platforms import MACOS, Platform, PythonVersion, python_option
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
    "describe_target",
    "is_described",
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


# --- the edge: a machine given in text (options, a host record, a spec) made a Target, once ---


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


def _python(python: str | PythonVersion) -> PythonVersion:
    given = python if isinstance(python, PythonVersion) else python_option(python)
    if given is None:  # an interpreter path is read by the caller first (host/interpreter.py)
        raise UserError(
            f"--python {shown(str(python))}: expected a version like 3.12 or an interpreter path"
        )
    return given if isinstance(given, PythonVersion) else PythonVersion.parse(given)


def is_described(
    *,
    driver: str | Driver | None,
    gpus: Sequence[object],
    no_gpu: bool,
    platform: str | None,
    host: str | Platform,
) -> bool:
    """Whether the options describe a machine (then this one's GPUs and driver are not probed)."""
    other_platform = platform is not None and platform.strip().lower() != str(host)
    return bool(gpus) or driver is not None or no_gpu or other_platform


def describe_target(
    catalog: Catalog,
    *,
    base: Target,
    driver: str | None,
    gpus: Sequence[str | TargetGpu],
    no_gpu: bool,
    python: str | PythonVersion | None,
    platform: str | None,
) -> Target:
    """The target: ``base`` (detected host, or a bare one) with the facts the options give.

    Any of --driver/--gpu/--no-gpu, or another platform, describe the GPU side completely: a
    driver not given is not checked, GPUs not given are not checked, and a machine described with
    neither --gpu nor --driver has no NVIDIA GPU (so `--platform windows-x86_64` alone gets CPU).
    A GPU is a name or CC to look up, or one already looked up (a spec looks each name up once).
    """
    if no_gpu and (gpus or driver):
        raise UserError("--no-gpu cannot be combined with --gpu or --driver")
    host = base.platform
    described = is_described(driver=driver, gpus=gpus, no_gpu=no_gpu, platform=platform, host=host)
    plat = base.platform if platform is None else Platform.parse(platform, "--platform")
    from resolver.db.gpunames import resolve_gpu  # the GPU table's own lookup, not the facade's

    resolved = tuple(
        g if isinstance(g, TargetGpu) else TargetGpu(*resolve_gpu(catalog, g)) for g in gpus
    )
    drv = None if driver is None else Driver.parse(driver)
    if plat.name == MACOS and (resolved or drv):
        raise UserError("macOS has no NVIDIA CUDA builds: drop --gpu/--driver for macos-arm64")
    py = base.python if python is None else _python(python)
    if not described:
        return replace(base, python=py)
    # The same platform keeps the base's driver OS: WSL2 (Linux) runs on a Windows driver.
    same = plat == base.platform
    return Target(
        platform=plat,
        python=py,
        driver=drv,
        driver_os="windows" if plat.os == "windows" else base.driver_os if same else "linux",
        gpus=resolved,
        nvidia=bool(resolved) or driver is not None,
        name=base.name,
    )
