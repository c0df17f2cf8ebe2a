"""The host's and the database's documents as TypedDicts: `detect`, `verify`, `fleet report`,
`db ... --json` and the error object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from resolver.core.documents.decision import DatabaseJson

__all__ = [
    "CheckJson",
    "DbCheckDoc",
    "DbInspectWheelDoc",
    "DbResetDoc",
    "DbShowDoc",
    "DbUpdateDoc",
    "DbUpdateDone",
    "DbUpdateFailed",
    "DetectDoc",
    "ErrorDoc",
    "ErrorJson",
    "FleetGroupJson",
    "FleetReportDoc",
    "GradeCountJson",
    "HostDoc",
    "HostGpuJson",
    "KindGradesJson",
    "LeftOutJson",
    "LostGpuJson",
    "OutlierJson",
    "ReleaseJson",
    "VerifyDoc",
    "VerifyHostJson",
    "VerifyNodeJson",
    "VerifySummaryJson",
]

# --- detect, and the host inside verify ------------------------------------------------------


class _HostGpuKeys(TypedDict):
    index: int
    name: str | None
    cc: str | None


class HostGpuJson(_HostGpuKeys, total=False):
    memory_mib: int | None
    pci_device_id: str | None
    mig: str | None
    sources: dict[str, str]


class _LostGpuKeys(TypedDict):
    pci_bus_id: str


class LostGpuJson(_LostGpuKeys, total=False):
    error: str | None
    source: str


class _HostKeys(TypedDict):
    platform: str
    python: str
    python_full: str | None
    glibc: str | None
    wsl: bool
    driver: str | None
    driver_cuda: str | None
    driver_branch: str | None
    driver_build_branch: str | None
    driver_os: str | None
    state: str
    gpus: list[HostGpuJson]
    sources: dict[str, str]
    messages: list[str]
    probes: dict[str, str]


class HostDoc(_HostKeys, total=False):
    """A host profile as `HostProfile.to_json` writes it (a `detect --json` file, read back)."""

    lost_gpus: list[LostGpuJson]


class DetectDoc(HostDoc, total=False):
    """`detect --json`: the profile and how its GPUs are linked."""

    topology: dict[str, Any] | None


# --- verify ----------------------------------------------------------------------------------

VerifySummaryJson = TypedDict(
    "VerifySummaryJson", {"pass": int, "warn": int, "fail": int, "skip": int}
)


class _CheckKeys(TypedDict):
    id: str
    title: str
    status: str
    reason: str


class CheckJson(_CheckKeys, total=False):
    fix: str | None
    details: list[str]


class _VerifyHostKeys(TypedDict):
    platform: str
    python: str
    driver: str | None
    state: str
    gpus: list[HostGpuJson]


class VerifyHostJson(_VerifyHostKeys, total=False):
    """The host inside a `verify --json`: its profile, and the names `fleet report` groups by."""

    python_full: str | None
    glibc: str | None
    wsl: bool
    driver_cuda: str | None
    driver_branch: str | None
    driver_build_branch: str | None
    driver_os: str | None
    sources: dict[str, str]
    messages: list[str]
    probes: dict[str, str]
    hostname: str | None
    node: str | None
    lost_gpus: list[LostGpuJson]


class VerifyNodeJson(TypedDict):
    """The host inside a `verify --json` where detection failed: only the names."""

    hostname: str | None
    node: str | None


class _VerifyKeys(TypedDict):
    verify: int
    status: str
    summary: VerifySummaryJson
    python: str
    torch: str | None
    variant: str | None
    checks: list[CheckJson]
    lock: str | None
    # the probe's measurements as judged: open (the schema publishes benchmark.gpus[])
    benchmark: dict[str, Any] | None
    host: VerifyHostJson | VerifyNodeJson | None
    database: DatabaseJson | None
    elapsed_s: float


class VerifyDoc(_VerifyKeys, total=False):
    probe: dict[str, Any] | None
    probe_run: dict[str, Any] | None
    observation: Any
    state: dict[str, Any] | None
    # the NCCL run, topology and bandwidths: open (the schema publishes nccl_check.peak)
    nccl_check: dict[str, Any] | None
    group: str | None


# --- db --------------------------------------------------------------------------------------


class GradeCountJson(TypedDict):
    grade: str
    meaning: str
    facts: int


class KindGradesJson(TypedDict):
    kind: str
    decides: bool
    grades: dict[str, int]


class _ReleaseKeys(TypedDict):
    version: str
    variants: list[dict[str, Any]]


class ReleaseJson(_ReleaseKeys, total=False):
    date: str | None
    torchvision: str | None
    torchaudio: str | None
    python: dict[str, Any]
    confirmed: bool
    source: list[str]
    grade: str


class _DbShowKeys(TypedDict):
    origin: str
    updated: str | None
    index_url: str
    counts: dict[str, int]
    grades: list[GradeCountJson]
    grades_by_kind: list[KindGradesJson]
    releases: list[ReleaseJson]


class DbShowDoc(_DbShowKeys, total=False):
    packages: Mapping[str, Any]  # extensions.yaml: package -> its releases, open


class DbCheckDoc(TypedDict):
    ok: bool
    origin: str
    updated: str | None
    problems: list[str]
    counts: dict[str, int]


class _DbUpdateDoneKeys(TypedDict):
    ok: bool
    changed: bool
    written: bool
    target: str
    requests: int
    changes: dict[str, Any]


class DbUpdateDone(_DbUpdateDoneKeys, total=False):
    dry_run: bool
    base: str
    pypi_read: Any
    extension_pages_read: int
    extension_wheels_read: int
    extension_bytes_read: int
    extension_seconds: float


class DbUpdateFailed(TypedDict):
    ok: bool
    error: str
    changed: bool
    written: bool


DbUpdateDoc = DbUpdateDone | DbUpdateFailed


class DbResetDoc(TypedDict):
    data_dir: str
    cache_dir: str | None  # no home directory to find it in
    dry_run: bool
    removed: list[str]
    kept: list[str]
    failed: list[str]


class _WheelKeys(TypedDict):
    file: str
    sha256: str | None
    version: str | None
    cuda: str | None
    sass: list[str]
    ptx: list[str]


class DbInspectWheelDoc(_WheelKeys, total=False):
    git_version: str | None
    bytes_read: int
    source: str
    size: int | None
    platform: str | None
    variant: str | None
    cudnn: str | None
    nccl: str | None
    arch_flags: str | None
    arch_member: str | None
    notes: list[str]
    contradicts: Any


# --- fleet report and errors -----------------------------------------------------------------


class _OutlierKeys(TypedDict):
    node: str
    differs: list[str]
    cause: str | None


class OutlierJson(_OutlierKeys, total=False):
    file: str | None
    decides: str  # fleet.report.Decides: did-not-run, build, gpu, other


_FleetGroupKeys = TypedDict(
    "_FleetGroupKeys",
    {
        "group": str | None,
        "pass": int,
        "warn": int,
        "fail": int,
        "missing": int,
        "nodes": int,
        "outliers": list[OutlierJson],
    },
)


class FleetPinsJson(TypedDict, total=False):
    torch: str
    variant: str
    cudnn: str
    nccl: str


class LeftOutJson(TypedDict):
    node: str
    reason: str


class FleetGroupJson(_FleetGroupKeys, total=False):
    missing_nodes: list[str]
    no_result: int
    pins: FleetPinsJson | None
    left_out: list[LeftOutJson]


class FleetReportDoc(TypedDict):
    fleet_report: int
    status: str
    groups: list[FleetGroupJson]


class ErrorJson(TypedDict):
    code: int
    message: str


class ErrorDoc(TypedDict):
    error: ErrorJson
