"""What `gpuresolve verify` saw, recorded as a runtime observation in the user's database.

Only the build's own facts are kept (see ``entries.runtime_entry``); contradictions with the
curated database in use are reported and recorded on the entry, never applied silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError
from resolver.observe import compare, store
from resolver.observe.entries import runtime_entry


@dataclass
class Recorded:
    entry: dict[str, Any] | None
    status: str  # added | same | differs | none (nothing to record) | error
    file: Path | None
    lines: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "build": {
                k: self.entry.get(k)
                for k in ("torch", "variant", "platform", "python", "version", "git_version")
            }
            if self.entry
            else None,
            "contradicts": (self.entry or {}).get("contradicts", []),
            "file": str(self.file) if self.file else None,
        }


def record_verified(
    probe: Mapping[str, Any] | None,
    target: Path,
    database: Path | Mapping[str, Any] | None,
) -> Recorded:
    """Record the probed build into ``target``; compare it with ``database``'s torch.yaml
    (a database directory, or its torch.yaml already parsed: verify reads it while the probe
    runs)."""
    entry = runtime_entry(probe or {})
    if entry is None:
        return Recorded(None, "none", None)
    lines: list[str] = []
    if database is not None:
        doc: Mapping[str, Any] | None = None
        if isinstance(database, Path):
            try:
                doc = compare.read_torch_doc(database)
            except UserError:
                doc = None
        else:
            doc = database
        if doc is not None:
            found = compare.contradictions(
                entry, compare.find(doc, entry["torch"], entry["variant"], entry["platform"])
            )
            if found:
                entry["contradicts"] = found
                lines += [f"contradiction: {line}" for line in compare.describe(entry, found)]
    try:
        status, _old = store.record(target, entry, "runtime")
    except UserError as exc:
        return Recorded(entry, "error", target, [*lines, f"not recorded: {exc}"])
    build = f"torch {entry['version']} {entry['platform']}"
    lines.insert(0, f"observed: {build} recorded in {target}")
    if status == "differs":
        lines.append(f"an earlier observation of {build} says otherwise: both kept")
    return Recorded(entry, status, target, lines)
