"""A Slurm cluster as a fleet: `scontrol show node --oneliner` output, one sbatch script a group.

Each line is one node, ``Key=value`` fields separated by spaces (a value may itself hold spaces:
``OS=Linux 6.1.0-18-amd64 #1 SMP ...``, so a word without ``=`` continues the previous value).
What is read, and why:

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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped
from resolver.core.platforms import BY_NAME, Platform
from resolver.core.versions import Driver
from resolver.io.bounded import read_text
from resolver.solve.shapes import Shape, ShapeGpu, ShapeGroup

MAX_NODE_FILE = 64 << 20  # ~500 bytes a node: over 100,000 nodes
TIME_LIMIT = "00:30:00"
_FIELD = re.compile(r"^([A-Za-z][A-Za-z_]{0,40})=(.*)$")
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GRES = re.compile(r"^gpu(?::([A-Za-z0-9._-]{1,64}))?:([0-9]{1,4})(?:\(.*\))?$")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_DRIVER_FEATURE = re.compile(r"^driver-([0-9.]{1,14})$")  # the version: `Driver`'s grammar
_NOT = "not a driver version (expected e.g. driver-550.54.15)"
ARCH = {
    "x86_64": BY_NAME["linux-x86_64"],
    "aarch64": BY_NAME["linux-aarch64"],
    "arm64": BY_NAME["linux-aarch64"],
}


@dataclass(frozen=True)
class SlurmNode:
    """What an sbatch script needs of a node: where to submit, which GRES to ask for."""

    partition: str
    gres: tuple[tuple[str | None, int], ...]  # (type, count) of each gpu entry
    features: tuple[str, ...]


def parse_line(line: str, where: str) -> dict[str, str]:
    """One `--oneliner` line as a field map (later words without ``=`` extend the last value)."""
    fields: dict[str, str] = {}
    last = None
    for word in line.split():
        m = _FIELD.match(word)
        if m:
            last = m.group(1)
            fields[last] = m.group(2)
        elif last is not None:
            fields[last] += " " + word
        else:
            raise UserError(f"{where}: expected NodeName=... first, got {escaped(word[:60])!r}")
    return fields


def read_nodes(path: Path, catalog: Catalog, shown: str, driver: Driver | None) -> list[ShapeGroup]:
    """The node groups of a `scontrol show node --oneliner` file."""
    text = read_text(path, limit=MAX_NODE_FILE, what="`scontrol show node --oneliner` output")
    groups: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, Shape, SlurmNode]]] = {}
    seen: set[str] = set()
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{shown}:{i}"
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
        node = SlurmNode(partitions[0] if partitions else "", gres, features)
        shape = _shape(catalog, platform, gres, features, driver, where, name)
        kind = "+".join(t or "gpu" for t, _ in gres) or "cpu"
        key = (node.partition, kind, features)
        groups.setdefault(key, []).append((name, shape, node))
    if not groups:
        raise UserError(f"{shown}: no nodes (write it with `scontrol show node --oneliner`)")
    out = []
    names: set[str] = set()
    for (partition, kind, features), nodes in sorted(groups.items()):
        shapes = {s for _, s, _ in nodes}
        if len(shapes) > 1:
            raise UserError(
                f"{shown}: partition {partition or '(none)'}, {kind}, features "
                f"{','.join(features) or '(none)'}: nodes of one group differ (driver or GPU "
                "count); tell them apart with a node feature"
            )
        shape = shapes.pop()
        name = _slug("-".join([partition or "nopartition", kind, *features]))
        while name in names:
            name += "-x"
        names.add(name)
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
        if model is None:
            what = f"GRES type {gtype!r}" if gtype else "a GRES without a type"
            raise UserError(
                f"{where}: node {node}: {what} names no GPU gpuresolve knows: name the type "
                "after the model (gpu:h100:8; AutoDetect=nvml does)"
            )
        gpus.append(ShapeGpu(model.name, model.cc, count))
    return Shape(platform=platform, driver=node_driver, gpus=tuple(sorted(gpus)), nvidia=True)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "group"


def render_sbatch(
    *,
    group: str,
    set_group: str,
    nodes: Sequence[str],
    placement: Mapping[str, object],
    lock_name: str,
) -> str:
    """An sbatch script: one task on each of the group's nodes runs `verify --json --lock`,
    writing ``results/$SLURMD_NODENAME.json`` beside the lock (submit it from this folder)."""
    first = placement[nodes[0]]
    if not isinstance(first, SlurmNode):
        raise TypeError(f"{group}: not a Slurm node group")
    gres = ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in first.gres)
    lines = [
        "#!/bin/bash",
        f"# Generated by gpuresolve: verifies node group {group} ({len(nodes)} nodes) where it "
        f"runs, with the lock of {set_group}.",
        f"# run:    cd THIS-FOLDER && sbatch {'verify-' + group + '.sbatch'}",
        "# report: gpuresolve fleet report results/ --expect LOCK-FOLDER",
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
        "#SBATCH --output=%x-%j.out",  # in the submit folder: results/ may not exist yet
        "set -u",
        'cd "$SLURM_SUBMIT_DIR" || exit 2',
        "mkdir -p results",
        f'export GPURESOLVE_LOCK="$SLURM_SUBMIT_DIR/{lock_name}"',
        'export GPURESOLVE="${GPURESOLVE:-gpuresolve}"',
        "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1",
        "srun --ntasks-per-node=1 bash -c '$GPURESOLVE verify --json --benchmark --no-record "
        '--lock "$GPURESOLVE_LOCK" ${GPURESOLVE_PYTHON:+--python "$GPURESOLVE_PYTHON"} '
        '> "results/$SLURMD_NODENAME.json"\'',
    ]
    return "\n".join(lines) + "\n"
