"""`gpuresolve fleet report`: many nodes' verify results, one verdict per group and its outliers.

Nodes are grouped by the ``group`` their lock records (or, for results without one, by GPU model
and driver). A node is listed when its verify failed, or when it disagrees with its group: another
torch, variant, cuDNN or NCCL than most of the group; another driver, a benchmark case or NCCL
bandwidth below the median of the group's nodes with the same GPUs by more than the margin; a
check that fails on it while it passes elsewhere in the group. Each is shown with the cause its own
verify named.

Margins, from the runs recorded on the device (tests/fixtures/verify/h100_diag): four healthy
H100 runs of the same benchmark case differ by at most 3% (bf16 matmul 735-759 TFLOP/s), while a
GPU shared with another process lost 39-61% and TF32 switched off 85%: a case more than
``SPEED_MARGIN`` (15%, five times the healthy spread) below the median is an outlier. NCCL bus
bandwidth: five healthy runs of one 2 x H200 host were within 1% (327.1-330.0 GB/s at 1 GiB,
tests/fixtures/verify/h200x2_multigpu), a busy GPU gave 46% and P2P off 8%; it depends on more
than a matmul (links, switch, message size, other jobs on the fabric) and only one host was
recorded, so ``NCCL_MARGIN`` is wider: 25%.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from resolver.core.errors import UserError, escaped
from resolver.io.bounded import SPEC_MAX_NODES, load_yaml, read_text
from resolver.team.fleet_results import Result

if TYPE_CHECKING:
    from resolver.core.documents.reports import FleetGroupJson, FleetReportDoc, OutlierJson

REPORT_VERSION = 1
SPEED_MARGIN = 0.15
NCCL_MARGIN = 0.25
PLAN_FILE = "fleet.yaml"  # written by a cluster lock beside report.md: which nodes should answer
MAX_PLAN = 64 << 20  # bytes
# values after aliases are expanded: a plan names each node once (a spec's cap: 50,000-machine
# fleets); the byte cap used as a node count let a 409-byte alias bomb walk 64 M values (~20 s)
MAX_PLAN_NODES = SPEC_MAX_NODES
_SAME_IN_GROUP = ("torch", "variant", "cuDNN", "NCCL")  # one lock: one build everywhere
_CHECK_FOR = {"cuDNN": "cudnn", "NCCL": "nccl", "driver": "driver", "torch": "import"}


@dataclass
class Outlier:
    node: str
    file: str
    differs: list[str]
    cause: str | None

    def to_json(self) -> OutlierJson:
        return {"node": self.node, "file": self.file, "differs": self.differs, "cause": self.cause}


@dataclass
class Group:
    name: str
    results: list[tuple[str, Result]] = field(default_factory=list)  # (shown name, result)
    expected: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for _, r in self.results if r.status == status)

    def to_json(self) -> FleetGroupJson:
        return {
            "group": self.name,
            "pass": self.count("pass"),
            "warn": self.count("warn"),
            "fail": self.count("fail"),
            "missing": len(self.missing),
            "nodes": len(self.results),
            "outliers": [o.to_json() for o in self.outliers],
            "missing_nodes": self.missing,
        }


@dataclass
class FleetReport:
    groups: list[Group]

    @property
    def status(self) -> str:
        if any(g.outliers or g.missing or g.count("fail") for g in self.groups):
            return "fail"
        return "warn" if any(g.count("warn") for g in self.groups) else "pass"

    def to_json(self) -> FleetReportDoc:
        return {
            "fleet_report": REPORT_VERSION,
            "status": self.status,
            "groups": [g.to_json() for g in self.groups],
        }


def find_plan(folder: Path) -> Path:
    """The ``fleet.yaml`` of the lock ``folder`` is in: there, or in the nearest folder above
    (``results/``, a platform or group folder lie inside the lock); ``folder`` may name it."""
    if folder.name == PLAN_FILE and folder.is_file():
        return folder
    here = folder.absolute()
    for place in (here, *here.parents):
        if (place / PLAN_FILE).is_file():
            return place / PLAN_FILE
    raise UserError(
        f"--expect {escaped(str(folder))}: no {PLAN_FILE} in it or a folder above it (a cluster "
        "lock, `targets: - kubernetes:` or `- slurm:`, writes it at the lock's top)"
    )


def read_plan(folder: Path) -> dict[str, str]:
    """node -> group, from the ``fleet.yaml`` of the cluster lock ``folder`` is in."""
    path = find_plan(folder)
    text = read_text(path, limit=MAX_PLAN, what="a fleet plan")
    doc = load_yaml(text, path, max_nodes=MAX_PLAN_NODES)
    groups = doc.get("groups") if isinstance(doc, dict) and doc.get("fleet") == 1 else None
    if not isinstance(groups, list):
        raise UserError(f"{escaped(str(path))}: not a gpuresolve fleet plan (fleet: 1, groups)")
    out: dict[str, str] = {}
    for i, g in enumerate(groups):
        name, nodes = (g.get("group"), g.get("nodes")) if isinstance(g, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(nodes, list):
            raise UserError(f"{escaped(str(path))}: groups[{i}]: expected a group and its nodes")
        for node in nodes:
            if isinstance(node, str):
                out.setdefault(node, name)
    return out


def build_report(results: list[Result], expected: dict[str, str] | None = None) -> FleetReport:
    """Group the results, find each group's outliers and (with ``expected``) its missing nodes."""
    named = _names(results)
    groups: dict[str, Group] = {}
    for shown, r in zip(named, results, strict=True):
        key = r.group or (expected or {}).get(r.node or "") or _fallback(r)
        groups.setdefault(key, Group(key)).results.append((shown, r))
    answered = {r.node for r in results if r.node}
    for node, key in sorted((expected or {}).items()):
        g = groups.setdefault(key, Group(key))
        g.expected.append(node)
        if node not in answered:
            g.missing.append(node)
    for g in groups.values():
        g.outliers = _outliers(g.results)
    return FleetReport(sorted(groups.values(), key=lambda g: g.name))


def _fallback(r: Result) -> str:
    """A group for a result whose lock recorded none (older releases, single-machine locks)."""
    driver = r.facts.get("driver") or "unknown"
    return f"{r.gpu or 'no GPU seen'} · driver {driver}"


def _names(results: list[Result]) -> list[str]:
    """Each result's node name; two results naming one node are both ``node (file)``."""
    base = [r.node or Path(r.file.split(":")[0]).name for r in results]
    seen = Counter(base)
    return [f"{b} ({r.file})" if seen[b] > 1 else b for b, r in zip(base, results, strict=True)]


def _majority(values: list[str | None]) -> str | None:
    """The value most nodes have (ties: the first seen); None when there is no majority to
    disagree with (a single value, or no node has it)."""
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    return counts.most_common(1)[0][0]


def _outliers(results: list[tuple[str, Result]]) -> list[Outlier]:
    out: list[Outlier] = []
    rs = [r for _, r in results]
    common = {k: _majority([r.facts.get(k) for r in rs]) for k in _SAME_IN_GROUP}
    by_gpu: dict[str, list[Result]] = {}
    for r in rs:
        by_gpu.setdefault(r.gpu, []).append(r)
    failing = Counter(c.id for r in rs for c in r.checks if c.status == "fail")
    for shown, r in results:
        differs: list[str] = []
        causes: list[str | None] = []
        for key in _SAME_IN_GROUP:
            mine, theirs = r.facts.get(key), common[key]
            if theirs is not None and mine != theirs:
                differs.append(f"{key} {mine or 'unknown'} (group: {theirs})")
                causes.append(_cause(r, _CHECK_FOR.get(key)))
        peers = by_gpu[r.gpu]
        driver = _majority([p.facts.get("driver") for p in peers])
        if driver is not None and r.facts.get("driver") != driver:
            differs.append(f"driver {r.facts.get('driver') or 'unknown'} (same GPUs: {driver})")
            causes.append(_cause(r, "driver"))
        for case, value in sorted(r.speed.items()):
            values = [p.speed[case] for p in peers if case in p.speed]
            median = statistics.median(values)
            if len(values) > 1 and value < median * (1 - SPEED_MARGIN):
                differs.append(
                    f"{case} {value:.1f} TFLOP/s, {value / median:.0%} of the median "
                    f"{median:.1f} of {len(values)} nodes"
                )
                causes.append(_cause(r, "speed", measured=True))
        bws = [p.nccl_busbw for p in peers if p.nccl_busbw is not None]
        if r.nccl_busbw is not None and len(bws) > 1:
            median = statistics.median(bws)
            if r.nccl_busbw < median * (1 - NCCL_MARGIN):
                differs.append(
                    f"NCCL all-reduce {r.nccl_busbw:.1f} GB/s, {r.nccl_busbw / median:.0%} of "
                    f"the median {median:.1f}"
                )
                said = _cause(r, "multigpu", measured=True)
                only = sorted(set(r.nccl_env.items()) - _common_env(peers))
                if only:
                    env = ", ".join(f"{k}={v}" for k, v in only)
                    said = f"{said}; set on this node only: {env}" if said else f"set: {env}"
                causes.append(said)
        for c in r.checks:
            if c.status != "fail":
                continue
            alone = failing[c.id] < len(rs)
            differs.append(
                f"check {c.id} fails" + (" (passes elsewhere in the group)" if alone else "")
            )
            causes.append(f"{c.id}: {c.reason}")
        if differs:
            cause = next((c for c in causes if c), None) or _cause(r, None)
            out.append(Outlier(shown, r.file, _unique(differs), cause))
    return out


def _common_env(peers: list[Result]) -> set[tuple[str, str]]:
    """The NCCL variables every peer with a measurement has set alike."""
    envs = [set(p.nccl_env.items()) for p in peers if p.nccl_busbw is not None]
    return set.intersection(*envs) if len(envs) > 1 else set()


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _cause(r: Result, check_id: str | None, measured: bool = False) -> str | None:
    """What the node's own verify said: the named check when it did not pass (``measured``: a
    check that measured what differs, whatever its verdict), else its first failure, else its
    first warning."""
    named = r.check(check_id) if check_id else None
    if named is not None and (measured or named.status in ("fail", "warn")):
        return f"{named.id}: {named.reason}"
    for status in ("fail", "warn"):
        found = next((c for c in r.checks if c.status == status), None)
        if found is not None:
            return f"{found.id}: {found.reason}"
    return None


# --- output ------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """A Markdown table cell: escaped, with its pipes kept out of the table's structure."""
    return escaped(text).replace("|", "\\|")


def render_markdown(report: FleetReport) -> str:
    """The report as Markdown (printed, or written with ``-o``)."""
    total = sum(len(g.results) for g in report.groups)
    missing = sum(len(g.missing) for g in report.groups)
    lines = [
        "# Fleet report",
        "",
        f"**{report.status.upper()}**: {total} result(s) in {len(report.groups)} group(s)"
        + (f", {missing} node(s) missing" if missing else ""),
        "",
        "| group | nodes | pass | warn | fail | missing | outliers |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in report.groups:
        lines.append(
            f"| {_cell(g.name)} | {len(g.results)} | {g.count('pass')} | {g.count('warn')} | "
            f"{g.count('fail')} | {len(g.missing)} | {len(g.outliers)} |"
        )
    for g in report.groups:
        if not (g.outliers or g.missing):
            continue
        lines += ["", f"## {_cell(g.name)}", ""]
        for o in g.outliers:
            where = f" ({_cell(o.file)})" if o.file != o.node else ""
            lines.append(f"- **{_cell(o.node)}**{where}: {_cell('; '.join(o.differs))}")
            if o.cause:
                lines.append(f"  - cause: {_cell(o.cause)}")
        if g.missing:
            lines.append(f"- missing (no result): {_cell(', '.join(g.missing))}")
    lines += [
        "",
        f"Outliers: a failed check, another torch/variant/cuDNN/NCCL than the group, another "
        f"driver than the nodes with the same GPUs, a benchmark case more than "
        f"{SPEED_MARGIN:.0%} (NCCL bandwidth {NCCL_MARGIN:.0%}) below their median.",
    ]
    return "\n".join(lines) + "\n"
