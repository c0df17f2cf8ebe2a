"""What a verify check says, and what a run of them adds up to.

Each check (a ``Check``: id, title, judge) gives a ``CheckResult``: PASS / WARN / FAIL / SKIP
with one line of reason and one line of fix; ``overall`` and ``summary`` fold the results into
the run's status. The speed verdicts (``speed``) use it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

if TYPE_CHECKING:
    from resolver.core.documents.reports import CheckJson, VerifySummaryJson

Status = Literal["pass", "warn", "fail", "skip"]
PASS: Final = "pass"
WARN: Final = "warn"
FAIL: Final = "fail"
SKIP: Final = "skip"


class Check(NamedTuple):
    """One verify check: its id (a stable key of `verify --json`), its title and its judge (a
    pure function of ``verify.context.Context``); ``host_only``: it judges the host, so it runs
    even when the probe failed. ``verify/checks.CHECKS`` orders them all."""

    id: str
    title: str
    judge: Callable[[Any], CheckResult]
    host_only: bool = False

    def result(
        self, status: Status, reason: str, fix: str | None = None, details: Sequence[str] = ()
    ) -> CheckResult:
        """This check's result."""
        return CheckResult(self.id, self.title, status, reason, fix, tuple(details))


# Added after verify/checks.CHECKS only when `verify --with` names packages (verify/ext_checks.py).
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
