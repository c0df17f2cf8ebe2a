"""The `--json` documents as TypedDicts: the keys the code writes, checked by mypy.

The published JSON Schemas (`resolver/schemas/*.json`, `gpuresolve schema`) say what a reader
may rely on; these types say what the builders write, and tests/test_documents.py holds the two
to the same keys (every schema property is a key here and back, `required` the same), so
neither drifts. A key a schema does not require is ``total=False`` (Python 3.10 has no
``NotRequired``): the required keys sit in a ``_...Keys`` base.

Typing only, no behaviour: the builders import this module under ``TYPE_CHECKING``, so no
command pays for it at run time. Keys that are Python keywords (``pass``) use the functional
form. Where a schema leaves a value open (``{}``), the type is ``Any``.
"""

from __future__ import annotations

from resolver.core.documents.decision import (
    ImageDoc,
    InstallDoc,
    LockCheckDoc,
    LockDoc,
    SuggestDoc,
)
from resolver.core.documents.reports import (
    DbCheckDoc,
    DbInspectWheelDoc,
    DbResetDoc,
    DbShowDoc,
    DbUpdateDoc,
    DetectDoc,
    ErrorDoc,
    FleetReportDoc,
    VerifyDoc,
)

__all__ = ["DOCUMENTS", "Document"]

# What `emit_json` prints: one of the published documents, never a plain dict.
Document = (
    DetectDoc
    | SuggestDoc
    | LockDoc
    | LockCheckDoc
    | InstallDoc
    | VerifyDoc
    | ImageDoc
    | DbShowDoc
    | DbCheckDoc
    | DbUpdateDoc
    | DbResetDoc
    | DbInspectWheelDoc
    | FleetReportDoc
    | ErrorDoc
)

# Each published output schema's document (the team spec is an input: its reader checks it).
DOCUMENTS: dict[str, object] = {
    "detect": DetectDoc,
    "suggest": SuggestDoc,
    "lock": LockDoc,
    "lock-check": LockCheckDoc,
    "install": InstallDoc,
    "verify": VerifyDoc,
    "image": ImageDoc,
    "db-show": DbShowDoc,
    "db-check": DbCheckDoc,
    "db-update": DbUpdateDoc,
    "db-reset": DbResetDoc,
    "db-inspect-wheel": DbInspectWheelDoc,
    "fleet-report": FleetReportDoc,
    "error": ErrorDoc,
}
