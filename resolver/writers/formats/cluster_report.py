"""report.md sections for fleets read from where they live (a cluster, a folder of detect files).

"Machine groups": each shape with its machine count and names (abbreviated when many), its GPUs,
driver, MIG and sharing, and what the reader should know; "What would change": the driver upgrade
that would unlock the next torch release (and the newest) for the whole fleet (every team lock's
report has this section, cluster or not).
Deterministic, like the rest of report.md, so `lock --check` compares it byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from resolver.core.versions import cc_sm
from resolver.present.findings import abbreviate
from resolver.present.findings import unlock as sentence
from resolver.solve.fleet import FleetDecision
from resolver.solve.shapes import ShapeGroup
from resolver.solve.whatif import Unlock


def _hardware(group: ShapeGroup) -> str:
    shape = group.shape
    gpus = [
        f"{g.count} × {g.name} ({cc_sm(g.cc)})" if g.count else f"{g.name} ({cc_sm(g.cc)})"
        for g in shape.gpus
    ]
    gpus += [f"{name} (compute capability unknown)" for name in shape.unknown_gpus]
    if not gpus:
        gpus = ["NVIDIA GPU (model unknown)"] if shape.nvidia else ["no NVIDIA GPU"]
    return f"{shape.platform}; {', '.join(gpus)}"


def _notes(group: ShapeGroup) -> list[str]:
    shape = group.shape
    out = []
    if shape.mig == "invalid":
        out.append(
            "GPU Feature Discovery reports an invalid MIG layout (`-MIG-INVALID`): the lock "
            "assumes whole GPUs; fix the node's MIG configuration"
        )
    elif shape.mig:
        out.append(
            f"MIG {shape.mig}: pods get MIG instances of the GPU, with the same compute "
            "capability, so the same build runs"
        )
    if shape.sharing:
        out.append(
            f"shared GPUs ({shape.sharing}): several pods use one GPU; the build is the same"
        )
    return out + list(group.notes)


def cluster_sections(
    fleet: FleetDecision, groups: Sequence[ShapeGroup], changes: Sequence[Unlock]
) -> list[str]:
    """The Markdown lines of both sections, for the groups that are members of ``fleet``."""
    names = {t.name for t, _ in fleet.members}
    mine = [g for g in groups if g.name in names]
    if not mine:
        return []
    machines = sum(g.count for g in mine)
    unit = mine[0].unit if len({g.unit for g in mine}) == 1 else "machine"
    sources = ", ".join(dict.fromkeys(f"`{g.source}`" for g in mine))
    lines = [
        f"## {unit.capitalize()} groups",
        "",
        f"{machines} {unit}{'s' if machines != 1 else ''} in {len(mine)} "
        f"group{'s' if len(mine) != 1 else ''} of identical hardware and driver, from {sources}.",
        "",
        f"| group | {unit}s | hardware | driver | MIG / sharing | names |",
        "|---|---|---|---|---|---|",
    ]
    for g in mine:
        share = "; ".join(x for x in (g.shape.mig and f"MIG {g.shape.mig}", g.shape.sharing) if x)
        lines.append(
            f"| {g.name} | {g.count} | {_hardware(g)} | {g.shape.driver or '—'} | "
            f"{share or '—'} | {abbreviate(g.nodes)} |"
        )
    lines.append("")
    notes = [(g.name, n) for g in mine for n in _notes(g)]
    if notes:
        lines += [f"- {name}: {note}" for name, note in notes]
        lines.append("")
    return lines + what_would_change(changes, unit)


def what_would_change(changes: Sequence[Unlock], unit: str) -> list[str]:
    """The upgrade that would move the whole fleet to a newer torch release (and the newest):
    the flow's what-ifs, said."""
    if not changes:
        return []
    return ["## What would change", "", *(f"- {sentence(u, unit)}" for u in changes), ""]
