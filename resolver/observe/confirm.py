"""`suggest/lock --confirm`: read the selected build's wheel before answering.

When the selection's architectures are not yet observed (no observations file names that
release, variant and platform), its wheel — the smallest Python tag, from the default index
for the build it carries there, else from the PyTorch index — is read over range requests (a
few MB) and the observation is stored in the user's observations file. Offline, or when the
wheel cannot be read, the answer stands as it was and the reason is said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from resolver.core.errors import IndexFormatError, UserError
from resolver.io import ReadError
from resolver.io.http import Client
from resolver.observe import compare, store
from resolver.observe.entries import wheel_entry
from resolver.wheels import WheelError
from resolver.wheels.index import pick_wheel, project_wheels
from resolver.wheels.torchwheel import inspect_wheel

if TYPE_CHECKING:
    from resolver.core.documents.decision import ConfirmJson

BUDGET = 64 * 1024 * 1024


@dataclass
class Confirmation:
    status: Literal["observed-before", "confirmed", "contradicted", "unconfirmed"]
    build: str
    wheel: str | None = None
    bytes_read: int = 0
    contradicts: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def to_json(self) -> ConfirmJson:
        return {
            "status": self.status,
            "build": self.build,
            "wheel": self.wheel,
            "bytes_read": self.bytes_read,
            "contradicts": self.contradicts,
        }


def confirm(
    *,
    torch: str,
    variant: str,
    platform: str,
    pypi: bool,
    database: Path,
    observed_files: list[Path],
    target: Path,
    pytorch_index: str,
    pypi_index: str | None,
    timeout: float = 20.0,
) -> Confirmation:
    """Observe the build (torch, variant, platform) unless an observation exists already."""
    label = f"torch {torch} {variant} {platform}"
    for path in observed_files:
        if (torch, variant, platform) in store.load(path).observed_builds():
            return Confirmation("observed-before", label, lines=[f"{label}: already observed"])
    index = pypi_index if pypi and pypi_index else f"{pytorch_index.rstrip('/')}/{variant}"
    try:
        with Client(timeout=timeout, tries=2) as fetcher:
            wheels = project_wheels(fetcher, index)
            wheel = pick_wheel(wheels, torch, platform, None if pypi and pypi_index else variant)
            if wheel is None:
                raise WheelError(f"no wheel of {label} on {index}")
            report = inspect_wheel(
                wheel.link.url,
                budget=BUDGET,
                sha256=wheel.link.sha256,
                client=fetcher,
            )
    except (ReadError, IndexFormatError) as exc:
        return Confirmation(
            "unconfirmed",
            label,
            lines=[f"{label} could not be confirmed ({exc}); the answer rests on the database"],
        )
    out = Confirmation("confirmed", label, wheel=report.file, bytes_read=report.bytes_read)
    mib = report.bytes_read / (1024 * 1024)
    if not report.sha256:
        out.status = "unconfirmed"
        out.lines.append(f"{label}: {report.file} read, but the index gives no sha256: not stored")
        return out
    entry = wheel_entry(report)
    curated = compare.find(compare.read_torch_doc(database), entry["torch"], entry["variant"],
                           entry["platform"])  # fmt: skip
    found = compare.contradictions(entry, curated)
    if entry["variant"] != variant:
        found.insert(
            0, {"fact": "variant", "value": variant, "note": f"the wheel is {entry['variant']}"}
        )
    if found:
        entry["contradicts"] = found
        out.status, out.contradicts = "contradicted", found
    try:
        if curated is not None:
            store.record(target, entry, "observations")
    except UserError as exc:
        out.lines.append(f"{label}: not stored ({exc})")
    sass = " ".join(report.sass + report.ptx) or "no CUDA kernels"
    out.lines.insert(0, f"{label}: read {report.file} ({mib:.1f} MiB): {sass}")
    out.lines += [f"CONTRADICTION: {line}" for line in compare.describe(entry, found)]
    return out
