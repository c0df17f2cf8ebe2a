"""What a verify check says, and what a run of them adds up to.

Each check gives a ``CheckResult``: PASS / WARN / FAIL / SKIP with one line of reason and one line
of fix. ``CHECKS`` is the report's order and its stable `verify --json` ids; ``overall`` and
``summary`` fold the results into the run's status. The speed verdicts (``speed``) use it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from resolver.core.documents.reports import CheckJson, VerifySummaryJson

Status = Literal["pass", "warn", "fail", "skip"]
PASS: Final = "pass"
WARN: Final = "warn"
FAIL: Final = "fail"
SKIP: Final = "skip"
# Every check, in report order: id (a stable key of `verify --json`) -> title. Every id is in
# every report: SKIP, with its reason, where the check does not apply.
CHECKS: dict[str, str] = {
    "probe": "probe ran",
    "environment": "environment",
    "import": "torch imports",
    "build": "build vs host",
    "driver": "driver",
    "group": "node group",
    "cuda": "CUDA available",
    "arch": "GPU kernels",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "packages": "CUDA packages",
    "libraries": "loaded libraries",
    "companions": "companions",
    "lock": "lock",
    "compute": "GPU compute",
}
# Added after those only when `verify --with` names packages (resolver/verify/ext_checks.py).
EXTENSIONS_CHECK = ("extensions", "extension packages")


@dataclass(frozen=True)
class CheckResult:
    id: str  # stable key for --json
    title: str
    status: Status
    reason: str
    fix: str | None = None
    details: tuple[str, ...] = ()  # extra lines (library paths, per-GPU coverage)

    def to_json(self) -> CheckJson:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "details": list(self.details),
        }


def overall(results: Iterable[CheckResult]) -> str:
    statuses = {r.status for r in results}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else PASS


def summary(results: Iterable[CheckResult]) -> VerifySummaryJson:
    out: VerifySummaryJson = {PASS: 0, WARN: 0, FAIL: 0, SKIP: 0}
    for r in results:
        out[r.status] += 1
    return out
