"""What the observation commands work on: which builds were already observed, where a new
observation goes, what a read wheel contradicts in the database. `commands/db_wheels.py` keeps
the options, the progress and the output.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resolver.observe.store import Observations
    from resolver.wheels.torchwheel import WheelReport

__all__ = [
    "against_database",
    "import_entries",
    "observations_file",
    "observed_builds",
    "read_wheels_inputs",
]


def against_database(report: WheelReport) -> list[dict[str, Any]] | None:
    """The curated facts the wheel contradicts (database in use); None: no such build."""
    from resolver import catalog as catalog_mod
    from resolver.core.errors import UserError
    from resolver.observe import compare

    public, _, local = report.version.partition("+")
    if report.platform is None:
        return None
    try:
        doc = compare.read_torch_doc(catalog_mod.data_dir())
    except UserError:
        return None
    curated = compare.find(doc, public, local or None, report.platform)
    if curated is None:
        return None
    entry: dict[str, Any] = {
        "torch": public,
        "variant": curated.variant,
        "platform": report.platform,
        "cuda": report.cuda,
        "cudnn": report.cudnn,
        "nccl": report.nccl,
    }
    if report.cuda is not None:
        entry["sass"], entry["ptx"] = report.sass_cc, report.ptx_cc
    return compare.contradictions(entry, curated)


def observations_file(write_data: str | None) -> Path:
    """Where observations are recorded: --write-data DIR, else the user's data directory."""
    from resolver import catalog as catalog_mod
    from resolver.observe.store import FILE

    return (Path(write_data) if write_data else catalog_mod.user_data_dir()) / FILE


def observed_builds(*files: Path) -> set[tuple[str, str, str]]:
    """(torch, variant, platform) observed in any of ``files`` (the shipped one included)."""
    from resolver.observe import store

    seen: set[tuple[str, str, str]] = set()
    for path in dict.fromkeys(files):
        seen |= store.load(path).observed_builds()
    return seen


def read_wheels_inputs(
    write_data: str | None,
) -> tuple[Path, Path, dict[str, Any], set[tuple[str, str, str]]]:
    """`db update --read-wheels`: where it records, the database it reads builds from, that
    database's torch.yaml, and the builds already observed (in a database of its own only its
    own observations count; else the shipped ones, the database's and the user's)."""
    from resolver import catalog as catalog_mod
    from resolver.observe import compare, store

    target = observations_file(write_data)
    base = Path(write_data) if write_data else catalog_mod.data_dir()
    doc = compare.read_torch_doc(base)
    if write_data:
        return target, base, doc, observed_builds(target)
    shipped = catalog_mod.shipped_data_dir() / store.FILE
    return target, base, doc, observed_builds(shipped, base / store.FILE, target)


def import_entries(
    incoming: Observations, target: Path, source: str, dry_run: bool
) -> tuple[dict[str, int], list[str]]:
    """`db import`: each entry of ``incoming`` validated and compared with the curated facts
    (a contradiction is kept on the entry; a wheel of a build the database lacks is refused),
    merged into ``target`` under the database folder's lock (concurrent imports all land);
    the counts and the lines that say what was refused or contradicted."""
    import contextlib

    from resolver import catalog as catalog_mod
    from resolver.io.filelock import locked
    from resolver.observe import compare, store

    doc = compare.read_torch_doc(catalog_mod.data_dir())
    counts = {"added": 0, "same": 0, "differs": 0, "refused": 0}
    lines: list[str] = []
    with contextlib.nullcontext() if dry_run else locked(target.parent):
        mine = store.load(target)
        for kind, entries in (("observations", incoming.wheels), ("runtime", incoming.runtime)):
            for entry in entries:
                curated = compare.find(doc, entry["torch"], entry["variant"], entry["platform"])
                found = compare.contradictions(entry, curated)
                if curated is None and kind == "observations":
                    counts["refused"] += 1
                    lines += [f"refused: {line}" for line in compare.describe(entry, found)]
                    continue
                if found:
                    entry = {**entry, "contradicts": found}
                    lines += [f"contradiction: {line}" for line in compare.describe(entry, found)]
                status, _old = mine.add(store.validate_entry(entry, kind, source), kind)
                counts[status] += 1
        if not dry_run and (counts["added"] or counts["differs"]):
            store.save(target, mine)
    return counts, lines
