r"""A Slurm cluster as a fleet: `scontrol show node --oneliner` output, one sbatch script a group.

Each line is one node: Slurm ends a node with ``\n`` and nothing else, so only ``\n`` splits
nodes; any other line break in a line (U+2028, U+2029, U+0085, CR, VT, FF, FS, GS, RS: what
``str.splitlines`` also splits on) is refused, naming the node. A line is ``Key=value`` fields
separated by spaces, in the order Slurm's ``slurm_sprint_node_table`` (``src/api/node_info.c``)
prints them (``KEYS``). A value may hold spaces: the free-text fields (``OS``, from uname;
``Reason``, ``Comment``, ``Extra``, written by an admin) run to the next key Slurm prints after
them and set nothing else, so ``Reason=moved NodeName=gpu-n9 Partitions=x`` is one reason. Any
other field is one word; a known key out of Slurm's order is refused, a key Slurm added later (not
in ``KEYS``) is skipped. What is read, and why:

- ``NodeName``; ``Arch`` (``x86_64``, ``aarch64``) for the platform;
- ``Gres``: ``gpu:TYPE:COUNT`` entries (``gpu:h100:8(S:0-1)``, ``gpu:a100:4,gpu:v100:2``); the GPU
  model is the TYPE looked up in the GPU-name database (``AutoDetect=nvml`` names it after the
  device, ``nvidia_h100_80gb_hbm3``; admins write ``h100``); ``gpu:COUNT`` without a type names no
  model, and the group is refused;
- ``AvailableFeatures``: the group's features, and the driver from a ``driver-NNN[.NN[.NN]]``
  feature (Slurm does not report the driver), else the spec entry's ``driver:``;
- ``Partitions``: the first one is the partition the group's job is submitted to.

Groups are partition × GPU type × features; GPU-less nodes form their own groups (locked, never
sent a GPU job). A GPU group without a driver is refused, naming the fix.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped
from resolver.core.platforms import BY_NAME, Platform
from resolver.core.versions import Driver
from resolver.io.bounded import read_text
from resolver.solve.shapes import Shape, ShapeGpu, ShapeGroup, bounded_name

MAX_NODE_FILE = 64 << 20  # ~500 bytes a node: over 100,000 nodes
TIME_LIMIT = "00:30:00"
_KEY = re.compile(r"[A-Za-z][A-Za-z_]{0,40}")  # a key Slurm may print (a newer one too)
# Every key `scontrol show node` prints, in its order: slurm_sprint_node_table() in SchedMD/slurm
# src/api/node_info.c, the union of releases 18.08 to 26.05 (Debian 12 ships 22.05); the order
# never changed, keys were only added or dropped.
KEYS = (  # noqa: SIM905 - read as a line of Slurm's output, not 61 lines of literals
    "NodeName Arch CpuBind CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures "
    "ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName BcastAddr Port Version OS "
    "RealMemory AllocMem FreeMem Sockets Boards CoreSpecCount CPUSpecList MemSpecLimit "
    "RestrictedCoresPerGPU State ThreadsPerCore TmpDisk Weight Owner MCS_label NextState "
    "Partitions BootTime SlurmdStartTime LastBusyTime ResumeAfterTime SuspendTime CfgTRES "
    "AllocTRES CapWatts CurrentWatts AveWatts ConsumedJoules LowestJoules ExtSensorsJoules "
    "ExtSensorsWatts ExtSensorsTemp Reason Comment Extra InstanceId InstanceType "
    "ReservationName TLSCertTokenSet TLSCertLastRenewal Topology Parameters"
).split()
RANK = {k: i for i, k in enumerate(KEYS)}
# Free text (spaces, and any words at all) and the keys that end it: only those Slurm prints
# next. OS is uname's (RealMemory always follows it); Reason, Comment and Extra an admin's, and
# every key after them is one gpuresolve does not read.
FREE_TEXT = {
    "OS": frozenset({"RealMemory"}),
    **{k: frozenset(KEYS[RANK[k] + 1 :]) for k in ("Reason", "Comment", "Extra")},
}
# What str.splitlines() also splits on: inside a line, a value's character, never a new node.
LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GRES = re.compile(r"^gpu(?::([A-Za-z0-9._-]{1,64}))?:([0-9]{1,4})(?:\(.*\))?$")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_DRIVER_FEATURE = re.compile(r"^driver-([0-9.]{1,14})$")  # the version: `Driver`'s grammar
_MODEL_FEATURE = re.compile(r"^gpu-model-([A-Za-z0-9._-]{1,64})$")  # a GRES type's grammar
_STATE = re.compile(r"^[A-Z_]{1,32}(\+[A-Z_]{1,32}){0,16}$")  # BASE+FLAG+...: IDLE+DRAIN
# The State= words (a base state or a +flag, src/common/slurm_protocol_defs.c) of a node that
# cannot run the verify job now: its group's job would pend (ReqNodeNotAvail) or fail there.
UNAVAILABLE = frozenset(
    {
        "DRAIN",
        "DOWN",
        "FAIL",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "RESERVED",
        "POWERED_DOWN",
        "INVALID_REG",
        "REBOOT_ISSUED",
    }
)
_NOT = "not a driver version (expected e.g. driver-550.54.15)"
ARCH = {
    "x86_64": BY_NAME["linux-x86_64"],
    "aarch64": BY_NAME["linux-aarch64"],
    "arm64": BY_NAME["linux-aarch64"],
}


@dataclass(frozen=True)
class SlurmNode:
    """What an sbatch script needs of a node: where to submit, which GRES to ask for, and
    whether it can run a job now (else why not: fleet.yaml lists it, the job leaves it out)."""

    partition: str
    gres: tuple[tuple[str | None, int], ...]  # (type, count) of each gpu entry
    features: tuple[str, ...]
    unavailable: str | None = None  # "Slurm state IDLE+DRAIN: disk swap [root@...]"


@dataclass(frozen=True)
class ModelRule:
    """A `gpu_model:` rule of a `slurm:` entry: the GPU model of GRES without a type
    (``Gres=gpu:8``) on a partition's nodes, on nodes whose names match a shell-style pattern,
    or (neither given) on every node."""

    model: str  # read as a GRES type is: "h100", "A100", "nvidia_h100_80gb_hbm3"
    partition: str | None = None
    nodes: str | None = None

    def matches(self, node: str, partitions: Sequence[str]) -> bool:
        if self.partition is not None and self.partition not in partitions:
            return False
        return self.nodes is None or fnmatch.fnmatchcase(node, self.nodes)


def parse_line(line: str, where: str) -> dict[str, str]:
    """One `--oneliner` line as a field map, read by Slurm's key order (the module says how)."""
    fields: dict[str, str] = {}
    last: str | None = None
    rank = -1  # the last known field's place in KEYS
    for word in line.split(" "):  # Slurm separates with spaces; other blanks are a value's
        if not word:
            continue  # Slurm pads some fields with a second space
        head, eq, value = word.partition("=")
        key = head if eq and (head in RANK or _KEY.fullmatch(head)) else None
        if last is None:
            if key != "NodeName":
                # Only a key is named, never the text: a spec from a repository may point its
                # `slurm:` at a file of the user's (a bare token on one line) that is no node list.
                got = f"{key}=..." if key else "text that is no KEY=VALUE field"
                raise UserError(
                    f"{where}: expected NodeName=... first, got {got} (one node a line; a "
                    "Comment= or Extra= holding a line break splits one)"
                )
        elif key is None or (last in FREE_TEXT and key not in FREE_TEXT[last]):
            fields[last] += " " + word  # free text, or a space a read field's grammar refuses
            continue
        elif key in RANK and RANK[key] <= rank:
            raise UserError(
                f"{where}: {key}= after {last}=: not the order `scontrol show node --oneliner` "
                "writes (one node a line)"
            )
        rank = RANK.get(key, rank)  # a key newer than KEYS: its field is skipped
        last = key
        fields[key] = value
    return fields


def read_nodes(
    path: Path,
    catalog: Catalog,
    shown: str,
    driver: Driver | None,
    models: Sequence[ModelRule] = (),
    include_unavailable: bool = False,
) -> list[ShapeGroup]:
    """The node groups of a `scontrol show node --oneliner` file; ``models`` name the GPU of
    untyped GRES, ``include_unavailable`` keeps drained, down... nodes in the jobs."""
    text = read_text(path, limit=MAX_NODE_FILE, what="`scontrol show node --oneliner` output")
    groups: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, Shape, SlurmNode]]] = {}
    seen: set[str] = set()
    for i, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")  # a CRLF copy of the file: its line end, not a value's
        if not line.strip(" "):
            continue
        where = f"{shown}:{i}"
        brk = LINE_BREAKS.search(line)
        if brk is not None:
            head, space, _ = line[: brk.start()].partition(" ")
            head = head.removeprefix("NodeName=")
            who = f"node {head}" if space and _NODE.fullmatch(head) else "a node"
            raise UserError(
                f"{where}: {who}: a value holds a line break ({escaped(brk.group())}); Slurm "
                "ends a node's line with \\n only: not `scontrol show node --oneliner` as written"
            )
        fields = parse_line(line, where)
        name = fields.get("NodeName", "")
        if not _NODE.fullmatch(name):
            raise UserError(f"{where}: NodeName: not a node name: {escaped(name[:60])!r}")
        if name in seen:
            raise UserError(f"{where}: node {name} is listed twice")
        seen.add(name)
        platform = ARCH.get(fields.get("Arch", ""))
        if platform is None:
            arch = escaped(fields.get("Arch", "(none)")[:40])
            raise UserError(f"{where}: node {name}: Arch {arch!r}: x86_64 or aarch64 expected")
        features = _words(fields.get("AvailableFeatures", ""), where, "AvailableFeatures")
        partitions = _words(fields.get("Partitions", ""), where, "Partitions")
        gres = _gres(fields.get("Gres", ""), where)
        named = _models(gres, features, models, name, partitions, where)
        down = None if include_unavailable else _unavailable(fields, where, name)
        node = SlurmNode(partitions[0] if partitions else "", gres, features, down)
        typed = [(m, count) for m, (_, count) in zip(named, gres, strict=True)]
        shape = _shape(catalog, platform, typed, features, driver, where, name)
        kind = "+".join(
            t or (f"gpu-{_slug(m)}" if m else "gpu") for (t, _), m in zip(gres, named, strict=True)
        )
        key = (node.partition, kind or "cpu", features)
        groups.setdefault(key, []).append((name, shape, node))
    if not groups:
        raise UserError(f"{shown}: no nodes (write it with `scontrol show node --oneliner`)")
    out = []
    slugs = {key: _slug("-".join([key[0] or "nopartition", key[1], *key[2]])) for key in groups}
    taken = Counter(slugs.values())
    for (partition, kind, features), nodes in sorted(groups.items()):
        shapes = {s for _, s, _ in nodes}
        if len(shapes) > 1:
            raise UserError(
                f"{shown}: partition {partition or '(none)'}, {kind}, features "
                f"{','.join(features) or '(none)'}: nodes of one group differ (driver or GPU "
                "count); tell them apart with a node feature"
            )
        shape = shapes.pop()
        # lower case and "-" for the rest can make two groups' names one ("IB", "ib"): each
        # then gets the digest of its own key, as written
        slug = slugs[(partition, kind, features)]
        raw = "\0".join([partition, kind, *features])
        name = bounded_name(slug, raw, clash=taken[slug] > 1)
        node_names = tuple(n for n, _, _ in nodes)
        placement = {n: p for n, _, p in nodes}
        out.append(ShapeGroup(name, shape, node_names, shown, (), "node", placement))
    return out


def _words(value: str, where: str, key: str) -> tuple[str, ...]:
    if value in ("", "(null)"):
        return ()
    words = tuple(value.split(","))
    for w in words:
        if not _WORD.fullmatch(w):
            raise UserError(f"{where}: {key}: not a name: {escaped(w[:60])!r}")
    return words


def _gres(value: str, where: str) -> tuple[tuple[str | None, int], ...]:
    if value in ("", "(null)"):
        return ()
    out: list[tuple[str | None, int]] = []
    for entry in re.split(r",(?![^(]*\))", value):
        if not entry.startswith("gpu"):
            continue  # other GRES (a license, a NIC) say nothing of the GPUs
        m = _GRES.fullmatch(entry)
        if m is None:
            raise UserError(f"{where}: Gres: not gpu[:TYPE]:COUNT: {escaped(entry[:60])!r}")
        out.append((m.group(1), int(m.group(2))))
    return tuple(out)


def _unavailable(fields: Mapping[str, str], where: str, node: str) -> str | None:
    """Why a node cannot take the job now, from its ``State=`` (None: it can)."""
    state = fields.get("State", "")
    if not state:
        return None
    if not _STATE.fullmatch(state):
        raise UserError(f"{where}: node {node}: State: not a Slurm state: {escaped(state[:60])!r}")
    if not UNAVAILABLE.intersection(state.split("+")):
        return None
    reason = fields.get("Reason", "").strip()
    return f"Slurm state {state}" + (f": {escaped(reason[:200])}" if reason else "")


def _models(
    gres: Sequence[tuple[str | None, int]],
    features: Sequence[str],
    rules: Sequence[ModelRule],
    node: str,
    partitions: Sequence[str],
    where: str,
) -> list[str | None]:
    """The model text of each GRES entry: its type, else a ``gpu-model-TYPE`` node feature,
    else the first `gpu_model:` rule that matches the node (None: nothing names it)."""
    found = sorted({m.group(1) for f in features if (m := _MODEL_FEATURE.fullmatch(f))})
    if len(found) > 1:
        raise UserError(f"{where}: node {node}: features name two GPU models: {found}")
    rule = next((r.model for r in rules if r.matches(node, partitions)), None)
    fallback = found[0] if found else rule
    return [t or fallback for t, _ in gres]


def _shape(
    catalog: Catalog,
    platform: Platform,
    gres: Sequence[tuple[str | None, int]],
    features: Sequence[str],
    driver: Driver | None,
    where: str,
    node: str,
) -> Shape:
    if not gres:
        return Shape(platform)
    found = [m.group(1) for f in features if (m := _DRIVER_FEATURE.fullmatch(f))]
    node_driver = driver
    if found:
        try:
            node_driver = Driver.parse(found[0])
        except UserError:
            raise UserError(f"{where}: node {node}: feature driver-{found[0]}: {_NOT}") from None
    if node_driver is None:
        raise UserError(
            f"{where}: node {node} has GPUs but no driver: Slurm does not report it; add a "
            "`driver-NNN.NN.NN` node feature or `driver:` to the spec's slurm entry"
        )
    gpus = []
    for gtype, count in gres:
        model = catalog.gpu_by_name(gtype.replace("_", " ")) if gtype else None
        if model is None and gtype is None:
            raise UserError(
                f"{where}: node {node}: a GRES without a type (gpu:{count}) names no GPU model: "
                "name it with `gpu_model:` in the spec's slurm entry, a `gpu-model-TYPE` node "
                "feature, or the GRES type (gpu:h100:8; AutoDetect=nvml does)"
            )
        if model is None:
            raise UserError(
                f"{where}: node {node}: GPU model {escaped(gtype or '')!r} names no GPU "
                "gpuresolve knows: name it after the model (h100, a100, nvidia_h100_80gb_hbm3)"
            )
        gpus.append(ShapeGpu(model.name, model.cc, count))
    return Shape(platform=platform, driver=node_driver, gpus=tuple(sorted(gpus)), nvidia=True)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "group"


# What an #SBATCH line cannot carry in a quoted value (sbatch reads `\` and `"` as escapes and
# `%` as a file-name pattern in some options): a lock folder holding one is refused.
_UNSAFE_IN_SBATCH = re.compile(r'[\\"%\x00-\x1f\x7f-\x9f\u2028\u2029]')
_LOCK_PATH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*){0,3}$")
RESULTS = "results"  # beside fleet.yaml: each node's verify --json, each job's log


def check_folder(root: str) -> None:
    """Refuse a lock folder an sbatch script could not name (exit 2, naming it)."""
    bad = _UNSAFE_IN_SBATCH.search(root)
    if bad is not None:
        raise UserError(
            f"{escaped(root)}: the sbatch scripts name the lock's folder (#SBATCH --chdir), "
            f"which cannot hold {escaped(bad.group())!r}: write the lock elsewhere (-o)"
        )


def render_sbatch(
    *,
    group: str,
    set_group: str,
    nodes: Sequence[str],
    placement: Mapping[str, object],
    root: str,
    lock_path: str,
) -> str:
    """An sbatch script: one task on each of the group's nodes runs `verify --json --lock`,
    writing ``results/NODE.json`` in the lock's folder, the job's log beside them.

    Why ``#SBATCH --chdir`` with the folder's absolute path (``root``, as the lock was written
    there): slurmd runs a spool copy of the script, so its own path says nothing, and
    ``$SLURM_SUBMIT_DIR`` is wherever sbatch ran; the folder named at lock time lets the script
    be submitted from any folder (``sbatch --chdir=NEW-FOLDER`` for a lock moved since)."""
    check_folder(root)
    if not _LOCK_PATH.fullmatch(lock_path):  # group and platform folders: spec-checked names
        raise UserError(f"{escaped(lock_path)}: not a lock path an sbatch script may name")
    first = placement[nodes[0]]
    if not isinstance(first, SlurmNode):
        raise TypeError(f"{group}: not a Slurm node group")
    gres = ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in first.gres)
    lines = [
        "#!/bin/bash",
        f"# Generated by gpuresolve: verifies node group {group} ({len(nodes)} nodes) where it "
        f"runs, with the lock of {set_group}.",
        "# run:    sbatch THIS-FILE (from any folder: it runs in the lock's folder, --chdir below;",
        "#         a lock moved since: sbatch --chdir=ITS-FOLDER THIS-FILE)",
        f"# report: cd LOCK-FOLDER && gpuresolve fleet report {RESULTS}/ --expect .",
        "# GPURESOLVE: the command that runs gpuresolve on the nodes (default: gpuresolve);",
        "# GPURESOLVE_PYTHON: the interpreter verify checks (default: the active environment).",
        f"#SBATCH --job-name=gpuresolve-verify-{group}"[:200],
        *([f"#SBATCH --partition={first.partition}"] if first.partition else []),
        f"#SBATCH --nodes={len(nodes)}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --gres={gres}",
        f"#SBATCH --time={TIME_LIMIT}",
        f"#SBATCH --nodelist={','.join(nodes)}",
        f'#SBATCH --chdir="{root}"',
        f"#SBATCH --output={RESULTS}/%x-%j.out",  # results/ is written with the lock
        "set -u",
        f'export GPURESOLVE_LOCK="$PWD/{lock_path}" GPURESOLVE_RESULTS="$PWD/{RESULTS}"',
        'if [ ! -f "$GPURESOLVE_LOCK" ]; then',
        '    echo "gpuresolve: no lock at $GPURESOLVE_LOCK: sbatch --chdir=THE-LOCK-FOLDER" >&2',
        "    exit 2",
        "fi",
        'mkdir -p "$GPURESOLVE_RESULTS"',
        'export GPURESOLVE="${GPURESOLVE:-gpuresolve}"',
        f"export GPURESOLVE_GROUP={group}",  # verify holds each node to its group's GPUs
        "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1",
        "srun --ntasks-per-node=1 bash -c '$GPURESOLVE verify --json --benchmark --no-record "
        '--lock "$GPURESOLVE_LOCK" ${GPURESOLVE_PYTHON:+--python "$GPURESOLVE_PYTHON"} '
        '> "$GPURESOLVE_RESULTS/$SLURMD_NODENAME.json"\'',
    ]
    return "\n".join(lines) + "\n"


def results_readme() -> str:
    """What the lock writes in ``results/``: the folder must exist before a job starts (Slurm
    opens its log there first, and drops it where it cannot), and says what lands in it."""
    return (
        "# Verification results\n\n"
        "Each node of the lock's sbatch jobs writes its `gpuresolve verify --json` here as\n"
        "`NODE.json`, and each job its Slurm log as `gpuresolve-verify-GROUP-JOBID.out`. Read\n"
        "them in the lock's folder with `gpuresolve fleet report results/ --expect .`;\n"
        "`gpuresolve lock` rewrites this file and leaves the others here alone.\n"
    )
