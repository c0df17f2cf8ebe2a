"""`gpuresolve fleet report`: many nodes' verify results, one verdict per group and its outliers.

Nodes are grouped by ``fleet.yaml`` (with ``--expect``), else by the ``group`` their lock
records, else by GPU model and driver (results of earlier releases). A node is listed when its
verify failed or left no result (it did not run, or did not finish: a failed node, named with
what it left), or when it disagrees: another torch, variant, cuDNN or NCCL than its lock pins
(``--expect``; what the lock does not pin, or without it: than most of its group); another
driver, a benchmark case or NCCL bandwidth below the median of the group's nodes with the same
GPUs by more than the margin; a check that fails on it while it passes elsewhere in the group.
Each is shown with the cause its own verify named, in the order of what decides (``Decides``):
a node that did not run, then its torch or CUDA variant, then its GPU or driver, then the rest.

One pass reads the results (a stream: only the reduced ``Result`` is kept); the group's
majorities, medians and counts are taken once per group, then each node is judged against
them: linear in the results (the pairwise version took 16 s for 4,000 nodes).

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from resolver.core.collector import collector_paused
from resolver.core.errors import UserError, escaped
from resolver.fleet.results import Result
from resolver.io.bounded import SPEC_MAX_NODES, load_yaml, read_text

if TYPE_CHECKING:
    from resolver.core.documents.reports import (
        FleetGroupJson,
        FleetPinsJson,
        FleetReportDoc,
        OutlierJson,
    )
    from resolver.readers.pins import Pin

REPORT_VERSION = 1
SPEED_MARGIN = 0.15
NCCL_MARGIN = 0.25
PLAN_FILE = "fleet.yaml"  # written by a cluster lock beside report.md: which nodes should answer
MAX_PLAN = 64 << 20  # bytes
# values after aliases are expanded: a plan names each node once (a spec's cap: 50,000-machine
# fleets); the byte cap used as a node count let a 409-byte alias bomb walk 64 M values (~20 s)
MAX_PLAN_NODES = SPEC_MAX_NODES
MAX_REASON = 300  # characters of a left-out node's reason shown
NO_RESULT_GROUP = "no verify result"  # a node that left none, when no plan names its group
_SAME_IN_GROUP = ("torch", "variant", "cuDNN", "NCCL")  # one lock: one build everywhere
_PIN_OF = {"torch": "torch", "variant": "torch", "cuDNN": "nvidia-cudnn-", "NCCL": "nvidia-nccl-"}
_CHECK_FOR = {"cuDNN": "cudnn", "NCCL": "nccl", "driver": "driver", "torch": "import"}


class Decides(Enum):
    """What a difference is about, in the order a reader acts on it: a node that did not run
    (or whose probe did not finish) says nothing else; a wrong torch or CUDA variant explains
    most checks after it; then the GPU and driver; then the rest."""

    DID_NOT_RUN = "did-not-run"
    BUILD = "build"
    GPU = "gpu"
    OTHER = "other"


_ORDER = {d: i for i, d in enumerate(Decides)}
_CHECK_DECIDES = {
    "probe": Decides.DID_NOT_RUN,
    "import": Decides.BUILD,
    "build": Decides.BUILD,
    "group": Decides.GPU,
    "driver": Decides.GPU,
    "cuda": Decides.GPU,
    "arch": Decides.GPU,
    "compute": Decides.GPU,
}
_FACT_DECIDES = {"torch": Decides.BUILD, "variant": Decides.BUILD, "driver": Decides.GPU}


@dataclass
class Outlier:
    node: str
    file: str
    differs: list[str]
    cause: str | None
    decides: Decides = Decides.OTHER

    def to_json(self) -> OutlierJson:
        return {
            "node": self.node,
            "file": self.file,
            "differs": self.differs,
            "cause": self.cause,
            "decides": self.decides.value,
        }


@dataclass
class Group:
    name: str
    results: list[Result] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    pins: FleetPinsJson | None = None  # --expect: the torch, variant, cuDNN, NCCL its lock pins
    tally: Counter[str] = field(default_factory=Counter)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (node, reason): no job ran

    def count(self, status: str) -> int:
        return self.tally[status]

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
            "no_result": self.count("no-result"),
            "pins": self.pins,
            "left_out": [{"node": n, "reason": why} for n, why in self.left_out],
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


@dataclass
class Plan:
    """What ``fleet.yaml`` says: each node's group, and each group's lock (relative paths)."""

    folder: Path  # where the plan is: the lock's top
    nodes: dict[str, str]
    locks: dict[str, str]
    left_out: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> (group, why)


def read_plan(folder: Path) -> dict[str, str]:
    """node -> group, from the ``fleet.yaml`` of the cluster lock ``folder`` is in."""
    return load_plan(folder).nodes


def load_plan(folder: Path) -> Plan:
    """The plan of the cluster lock ``folder`` is in (``find_plan``)."""
    path = find_plan(folder)
    text = read_text(path, limit=MAX_PLAN, what="a fleet plan")
    doc = load_yaml(text, path, max_nodes=MAX_PLAN_NODES)
    groups = doc.get("groups") if isinstance(doc, dict) and doc.get("fleet") == 1 else None
    if not isinstance(groups, list):
        raise UserError(f"{escaped(str(path))}: not a gpuresolve fleet plan (fleet: 1, groups)")
    out: dict[str, str] = {}
    locks: dict[str, str] = {}
    left_out: dict[str, tuple[str, str]] = {}
    for i, g in enumerate(groups):
        name, nodes = (g.get("group"), g.get("nodes")) if isinstance(g, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(nodes, list):
            raise UserError(f"{escaped(str(path))}: groups[{i}]: expected a group and its nodes")
        lock = g.get("lock")
        if isinstance(lock, str) and _inside(lock):
            locks.setdefault(name, lock)
        for node in nodes:
            if isinstance(node, str):
                out.setdefault(node, name)
        gone = g.get("left_out")
        if isinstance(gone, dict):  # a lock's record: shown escaped and cut, never trusted
            for node, why in gone.items():
                if isinstance(node, str) and node not in out:
                    left_out.setdefault(node, (name, escaped(str(why))[:MAX_REASON]))
    return Plan(path.parent, out, locks, left_out)


def _inside(rel: str) -> bool:
    """A lock path the plan may name: relative, inside the lock's folder."""
    path = PurePosixPath(rel)
    return bool(rel) and not path.is_absolute() and ".." not in path.parts and "\\" not in rel


def lock_pins(plan: Plan) -> dict[str, dict[str, Pin]]:
    """Each group's pins of torch, cuDNN and NCCL (the ``nvidia-cudnn-*`` and ``nvidia-nccl-*``
    wheels), from the lock the plan names (each lock read once); what a group's lock does not
    pin (or a lock gone) is judged by the group's majority instead."""
    from resolver.readers import lockfile

    read: dict[str, dict[str, Pin]] = {}
    out: dict[str, dict[str, Pin]] = {}
    for group, rel in plan.locks.items():
        if rel not in read:
            try:
                pins = lockfile.read(plan.folder / rel).pins
            except UserError:
                pins = ()
            found: dict[str, Pin] = {}
            for key, name in _PIN_OF.items():
                pin = next((p for p in pins if p.version and _named(p.name, name)), None)
                if pin is not None:
                    found[key] = pin
            read[rel] = found
        if read[rel]:
            out[group] = read[rel]
    return out


@collector_paused()  # the results are acyclic: resolver/core/collector.py
def build_report(
    results: Iterable[Result],
    expected: dict[str, str] | None = None,
    pins: dict[str, dict[str, Pin]] | None = None,
    left_out: dict[str, tuple[str, str]] | None = None,
) -> FleetReport:
    """Group the results (read once, as they come), find each group's outliers and (with
    ``expected``, node -> group) its missing nodes; ``pins``: each group's lock pins;
    ``left_out``: node -> (group, reason), the nodes the lock sent no job to (listed, not
    missing: a drained node that never answers is what the lock asked for)."""
    plan = expected or {}
    groups: dict[str, Group] = {}
    names: Counter[str] = Counter()
    for r in results:
        key = (
            plan.get(r.node or "")
            or r.group
            or (NO_RESULT_GROUP if r.left is not None else _fallback(r))
        )
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key)
        group.results.append(r)
        group.tally[r.status] += 1
        if r.left is not None:
            group.tally["no-result"] += 1
        names[_base(r)] += 1
    answered = {r.node for g in groups.values() for r in g.results if r.node}
    for node, key in sorted(plan.items()):
        g = groups.setdefault(key, Group(key))
        g.expected.append(node)
        if node not in answered:
            g.missing.append(node)
    for node, (key, why) in sorted((left_out or {}).items()):
        if node not in answered:
            groups.setdefault(key, Group(key)).left_out.append((node, why))
    for g in groups.values():
        held = (pins or {}).get(g.name, {})
        if held:
            g.pins = _pins_json(held)
        g.outliers = _outliers(g.results, names, held)
    return FleetReport(sorted(groups.values(), key=lambda g: g.name))


def _fallback(r: Result) -> str:
    """A group for a result whose lock recorded none (older releases, single-machine locks)."""
    driver = r.facts.get("driver") or "unknown"
    return f"{r.gpu or 'no GPU seen'} · driver {driver}"


def _base(r: Result) -> str:
    return r.node or Path(r.file.split(":")[0]).name


def _shown(r: Result, names: Counter[str]) -> str:
    """The node's name; two results naming one node are both ``node (file)``."""
    base = _base(r)
    return f"{base} ({r.file})" if names[base] > 1 else base


def _majority(values: Iterable[str | None]) -> str | None:
    """The value most nodes have (ties: the first seen); None when no node has one."""
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    return counts.most_common(1)[0][0]


@dataclass
class _Peers:
    """What the nodes with the same GPUs in a group share: taken once, read by each node."""

    driver: str | None
    medians: dict[str, tuple[float, int]]  # case -> (median TFLOP/s, how many nodes)
    busbw: tuple[float, int] | None  # (median GB/s, how many nodes)
    env: set[tuple[str, str]]  # the NCCL variables every measured node set alike


def _peers(rs: list[Result]) -> _Peers:
    cases: dict[str, list[float]] = {}
    for r in rs:
        for case, value in r.speed.items():
            values = cases.get(case)
            if values is None:
                cases[case] = [value]
            else:
                values.append(value)
    bws = [r.nccl_busbw for r in rs if r.nccl_busbw is not None]
    envs = [set(r.nccl_env.items()) for r in rs if r.nccl_busbw is not None]
    return _Peers(
        driver=_majority(r.facts.get("driver") for r in rs),
        medians={c: (statistics.median(v), len(v)) for c, v in cases.items()},
        busbw=(statistics.median(bws), len(bws)) if bws else None,
        env=set.intersection(*envs) if len(envs) > 1 else set(),
    )


def _named(pin: str, name: str) -> bool:
    """``pin`` is the distribution ``name``, or one of the family ``name`` ends in ``-``."""
    return pin == name or (name.endswith("-") and pin.startswith(name))


def _pins_json(held: dict[str, Pin]) -> FleetPinsJson:
    out: FleetPinsJson = {}
    if "torch" in held:
        out["torch"] = held["torch"].text
        if held["torch"].variant:
            out["variant"] = held["torch"].variant
    if "cuDNN" in held:
        out["cudnn"] = held["cuDNN"].text
    if "NCCL" in held:
        out["nccl"] = held["NCCL"].text
    return out


def _pinned(r: Result, pin: Pin, key: str) -> tuple[str, str] | None:
    """(what the node has, what the lock pins) where they differ, else None. cuDNN and NCCL
    as the probe reports them: ``9.19.0`` is the wheel ``nvidia-cudnn-cu13==9.19.0.56``."""
    mine = r.facts.get(key)
    if key == "torch":
        public = (mine or "").split("+", 1)[0]
        return None if public == pin.version else (mine or "unknown", pin.text)
    if key == "variant":
        if not pin.variant or pin.variant == "cuda":
            return None
        return None if mine == pin.variant else (mine or "unknown", pin.variant)
    version = pin.version or ""
    if mine and (version == mine or version.startswith(mine + ".")):
        return None
    return (mine or "unknown", pin.text)


def _outliers(
    rs: list[Result], names: Counter[str], pins: dict[str, Pin] | None = None
) -> list[Outlier]:
    out: list[Outlier] = []
    common = {k: _majority(r.facts.get(k) for r in rs if r.left is None) for k in _SAME_IN_GROUP}
    by_gpu: dict[str, list[Result]] = {}
    for r in rs:
        if r.left is None:
            by_gpu.setdefault(r.gpu, []).append(r)
    peers = {gpu: _peers(members) for gpu, members in by_gpu.items()}
    failing = Counter(c.id for r in rs for c in r.checks if c.status == "fail")
    judged = sum(len(members) for members in by_gpu.values())  # the nodes with a result
    for r in rs:
        found: list[tuple[Decides, str, str | None]] = []
        if r.left is not None:
            found.append((Decides.DID_NOT_RUN, "no verify result", r.left))
            out.append(Outlier(_shown(r, names), r.file, [found[0][1]], r.left, found[0][0]))
            continue
        for key in _SAME_IN_GROUP:
            decides = _FACT_DECIDES.get(key, Decides.OTHER)
            pin = (pins or {}).get(key)
            if pin is not None:
                differ = _pinned(r, pin, key)
                if differ is not None:
                    said = _torch(r) if key in ("torch", "variant") else _cause(r, _CHECK_FOR[key])
                    found.append((decides, f"{key} {differ[0]} (lock: {differ[1]})", said))
                continue
            mine, theirs = r.facts.get(key), common[key]
            if theirs is not None and mine != theirs:
                said = _cause(r, _CHECK_FOR.get(key))
                found.append((decides, f"{key} {mine or 'unknown'} (group: {theirs})", said))
        mates = peers[r.gpu]
        if mates.driver is not None and r.facts.get("driver") != mates.driver:
            found.append(
                (
                    Decides.GPU,
                    f"driver {r.facts.get('driver') or 'unknown'} (same GPUs: {mates.driver})",
                    _cause(r, "driver"),
                )
            )
        slow = []
        for case, value in r.speed.items():
            median, count = mates.medians[case]
            if count > 1 and value < median * (1 - SPEED_MARGIN):
                slow.append((case, value, median, count))
        for case, value, median, count in sorted(slow):
            found.append(
                (
                    Decides.OTHER,
                    f"{case} {value:.1f} TFLOP/s, {value / median:.0%} of the median "
                    f"{median:.1f} of {count} nodes",
                    _cause(r, "speed", measured=True),
                )
            )
        if r.nccl_busbw is not None and mates.busbw is not None and mates.busbw[1] > 1:
            median = mates.busbw[0]
            if r.nccl_busbw < median * (1 - NCCL_MARGIN):
                said = _cause(r, "multigpu", measured=True)
                only = sorted(set(r.nccl_env.items()) - mates.env)
                if only:
                    env = ", ".join(f"{k}={v}" for k, v in only)
                    said = f"{said}; set on this node only: {env}" if said else f"set: {env}"
                found.append(
                    (
                        Decides.OTHER,
                        f"NCCL all-reduce {r.nccl_busbw:.1f} GB/s, {r.nccl_busbw / median:.0%} "
                        f"of the median {median:.1f}",
                        said,
                    )
                )
        for c in r.checks:
            if c.status != "fail":
                continue
            alone = failing[c.id] < judged
            decides = _CHECK_DECIDES.get(c.id, Decides.OTHER)
            reason = c.reason
            if c.id == "lock" and r.lock_torch:  # a wrong torch, never lost in "and 14 more"
                decides, reason = Decides.BUILD, r.lock_torch
            found.append(
                (
                    decides,
                    f"check {c.id} fails" + (" (passes elsewhere in the group)" if alone else ""),
                    f"{c.id}: {reason}",
                )
            )
        if found:
            found.sort(key=lambda f: _ORDER[f[0]])  # stable: the order within a kind is kept
            cause = next((said for _, _, said in found if said), None) or _cause(r, None)
            differs = list(dict.fromkeys(text for _, text, _ in found))
            out.append(Outlier(_shown(r, names), r.file, differs, cause, found[0][0]))
    return out


def _torch(r: Result) -> str | None:
    """Why a node's torch is not the lock's: its import failure, else what its lock check said
    of torch, else its first failure."""
    failed = r.check("import")
    if failed is not None and failed.status == "fail":
        return f"import: {failed.reason}"
    return f"lock: {r.lock_torch}" if r.lock_torch else _cause(r, "import")


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


# What a node's text must not become where report.md is rendered (a pull request, a wiki, the
# docs): raw HTML (<img onerror=...>, <script>), a link or image ([text](url), ![](tracker)), a
# code span that swallows what follows, a table cell's end. Entities and backslash escapes
# (CommonMark) show each character as written.
_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[", "]": "\\]", "`": "\\`"}


def _cell(text: str) -> str:
    """Text from a node or a file in the report: escaped by the one rule, then kept from being
    read as Markdown structure or HTML where the report is rendered."""
    return "".join(_MARKDOWN.get(ch, ch) for ch in escaped(text))


def render_markdown(report: FleetReport) -> str:
    """The report as Markdown (printed, or written with ``-o``)."""
    total = sum(len(g.results) for g in report.groups)
    missing = sum(len(g.missing) for g in report.groups)
    gone = sum(len(g.left_out) for g in report.groups)
    lines = [
        "# Fleet report",
        "",
        f"**{report.status.upper()}**: {total} result(s) in {len(report.groups)} group(s)"
        + (f", {missing} node(s) missing" if missing else "")
        + (f", {gone} node(s) left out by the lock" if gone else ""),
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
        if not (g.outliers or g.missing or g.left_out):
            continue
        lines += ["", f"## {_cell(g.name)}", ""]
        for o in g.outliers:
            where = f" ({_cell(o.file)})" if o.file != o.node else ""
            lines.append(f"- **{_cell(o.node)}**{where}: {_cell('; '.join(o.differs))}")
            if o.cause:
                lines.append(f"  - cause: {_cell(o.cause)}")
        if g.missing:
            lines.append(f"- missing (no result): {_cell(', '.join(g.missing))}")
        for node, why in g.left_out:
            lines.append(f"- **{_cell(node)}**: left out by the lock, not verified: {_cell(why)}")
    lines += [
        "",
        f"Outliers: no verify result, a failed check, another torch/variant/cuDNN/NCCL than "
        f"the lock pins (--expect) or the group, another driver than the nodes with the same "
        f"GPUs, a benchmark case more than {SPEED_MARGIN:.0%} (NCCL bandwidth "
        f"{NCCL_MARGIN:.0%}) below their median; what decides first.",
    ]
    return "\n".join(lines) + "\n"
