"""The decision's documents as TypedDicts: `suggest`, `lock`, `lock --check`, `install` and
`image --json` (a target, a build, a decision: what `render` writes)."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "BuildExtensionJson",
    "BuildJson",
    "CheckedFileJson",
    "ConfirmJson",
    "DatabaseJson",
    "DecisionJson",
    "EvidenceFactJson",
    "FileJson",
    "ImageContentsJson",
    "ImageDoc",
    "ImageEvidenceJson",
    "ImageSuggestionJson",
    "InstallDoc",
    "InstallFailedJson",
    "InstallNoBuildDoc",
    "InstallPlanDoc",
    "InstalledJson",
    "LockCheckDoc",
    "LockCheckSingleDoc",
    "LockCheckTeamDoc",
    "LockDoc",
    "LockSingleDoc",
    "LockTeamDoc",
    "PlanJson",
    "RejectedJson",
    "RemovalJson",
    "StepJson",
    "SuggestDoc",
    "TargetGpuJson",
    "TargetJson",
    "TeamGroupJson",
    "VerifiedJson",
]

# --- shared: a decision (suggest, lock, install) ---------------------------------------------


class _TargetGpuKeys(TypedDict):
    cc: str


class TargetGpuJson(_TargetGpuKeys, total=False):
    name: str | None


class _TargetKeys(TypedDict):
    platform: str
    python: str


class TargetJson(_TargetKeys, total=False):
    """The machine resolved for (`render.target_json`)."""

    name: str | None
    driver: str | None
    driver_os: str | None
    nvidia: bool
    gpus: list[TargetGpuJson]
    unknown_gpus: list[str]


class _EvidenceFactKeys(TypedDict):
    fact: str
    grade: str
    source: list[str]


class EvidenceFactJson(_EvidenceFactKeys, total=False):
    what: str
    decides: bool


class _BuildExtensionKeys(TypedDict):
    package: str
    version: str
    requirement: str


class BuildExtensionJson(_BuildExtensionKeys, total=False):
    index: str | None
    requires_torch: str | None
    cuda: str | None
    cuda_match: str | None
    device_code: bool | None
    grade: str
    coverage: list[str]


class _BuildKeys(TypedDict):
    torch: str
    variant: str
    cuda: str | None
    cudnn: str | None
    index_url: str
    packages: dict[str, str]


class BuildJson(_BuildKeys, total=False):
    """One torch build: the selection, an alternative, the CPU fallback (`candidate_json`)."""

    nccl: str | None
    pypi: bool
    min_driver: str | None
    min_driver_reason: str | None
    confirmed: bool
    evidence: str
    evidence_detail: list[EvidenceFactJson]
    coverage: list[str]
    warnings: list[str]
    pip: str
    extensions: list[BuildExtensionJson]


class _RejectedKeys(TypedDict):
    torch: str
    variant: str
    reasons: list[str]


class GateJson(TypedDict):
    """An extension gate that holds a build back: which, and the values it compared."""

    package: str
    version: str
    gate: str
    values: dict[str, str]


class RejectedJson(_RejectedKeys, total=False):
    kinds: list[str]
    gates: list[GateJson]


class DatabaseJson(TypedDict):
    origin: str
    updated: str | None  # a database whose torch.yaml has no `updated:`


class _DecisionKeys(TypedDict):
    target: TargetJson
    selection: BuildJson | None
    alternatives: list[BuildJson]
    rejected: list[RejectedJson]
    hints: list[str]


class DecisionJson(_DecisionKeys, total=False):
    """A decision for one target (`render.decision_json`): `suggest --json`, and inside lock's
    and install's documents."""

    cpu_fallback: BuildJson | None
    database: DatabaseJson
    messages: list[str]


class ConfirmJson(TypedDict):
    """What `--confirm` found reading the selection's wheel (`observe.confirm.Confirmation`)."""

    status: str
    build: str
    wheel: str | None
    bytes_read: int
    contradicts: list[dict[str, Any]]


class SuggestDoc(DecisionJson, total=False):
    """`suggest --json`: the decision, and with --confirm what reading the wheel found."""

    confirm: ConfirmJson | None


# --- lock and lock --check -------------------------------------------------------------------


class FileJson(TypedDict):
    path: str
    format: str
    status: str


class _CheckedFileKeys(TypedDict):
    path: str
    format: str
    status: str
    changes: list[str]


class CheckedFileJson(_CheckedFileKeys, total=False):
    line_endings: str


class TeamGroupJson(TypedDict):
    label: str | None
    ok: bool
    torch: str | None
    platforms: dict[str, BuildJson | None]
    conflicts: list[Any]


class _LockSingleKeys(TypedDict):
    ok: bool
    files: list[FileJson]
    decision: DecisionJson | None


class LockSingleDoc(_LockSingleKeys, total=False):
    check: str | None
    conda_decision: DecisionJson | None


class _LockTeamKeys(TypedDict):
    ok: bool
    spec: str
    files: list[FileJson]
    groups: list[TeamGroupJson]


class LockTeamDoc(_LockTeamKeys, total=False):
    check: str | None
    split: bool


class CheckFoundJson(TypedDict):
    """What `--check` found, as both its documents carry it (not a document of its own)."""

    changes: list[str]
    messages: list[str]
    exit: int


class _LockCheckKeys(TypedDict):
    ok: bool
    check: str
    exit: int
    changes: list[str]
    messages: list[str]
    files: list[CheckedFileJson]


class LockCheckSingleDoc(_LockCheckKeys):
    build: BuildJson | None


class _LockCheckTeamKeys(_LockCheckKeys):
    spec: str
    groups: list[TeamGroupJson]


class LockCheckTeamDoc(_LockCheckTeamKeys, total=False):
    split: bool


LockDoc = LockSingleDoc | LockTeamDoc
LockCheckDoc = LockCheckSingleDoc | LockCheckTeamDoc

# --- install ---------------------------------------------------------------------------------


class RemovalJson(TypedDict):
    name: str
    version: str
    why: str
    installer: str | None


class StepJson(TypedDict):
    purpose: str
    command: str
    argv: list[str]


class PlanJson(TypedDict):
    """What `install` will do (`flows.install.Plan.to_json`)."""

    python: str
    env_kind: str
    python_version: str
    installer: str
    lock: str | None
    removals: list[RemovalJson]
    notes: list[str]
    steps: list[StepJson]


class VerifiedJson(TypedDict):
    exit_code: int
    report: dict[str, Any] | None


class InstalledJson(TypedDict):
    installed: bool
    verify: VerifiedJson | None


class _InstallFailedKeys(TypedDict):
    installed: bool
    failed_step: str
    returncode: int | None


class InstallFailedJson(_InstallFailedKeys, total=False):
    done: list[Any]
    tail: list[str]


class InstallPlanDoc(TypedDict):
    ok: bool
    dry_run: bool
    plan: PlanJson
    outcome: InstalledJson | InstallFailedJson | None


class InstallNoBuildDoc(TypedDict):
    """No build runs on the target: the decision says why."""

    ok: bool
    plan: None
    outcome: None
    decision: DecisionJson


InstallDoc = InstallPlanDoc | InstallNoBuildDoc

# --- image -----------------------------------------------------------------------------------


class ImageContentsJson(TypedDict):
    torch: str | None
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str | None
    sass: list[str] | None
    ptx: list[str] | None


class _ImageEvidenceKeys(TypedDict):
    fact: str
    grade: str


class ImageEvidenceJson(_ImageEvidenceKeys, total=False):
    value: str | None
    source: list[str]
    note: str | None


class ImageSuggestionJson(TypedDict):
    image: str
    contents: ImageContentsJson


class _ImageKeys(TypedDict):
    image: str | None
    contents: ImageContentsJson | None
    runs: bool
    reasons: list[str]
    evidence: list[ImageEvidenceJson]
    target: TargetJson
    notes: list[str]


class ImageDoc(_ImageKeys, total=False):
    forward_compat: bool
    suggestion: ImageSuggestionJson | None
    upgrades: list[Any]
    run: str | None
