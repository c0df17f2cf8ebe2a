"""What a cluster lock writes beside its locks so the fleet can be verified where it runs.

For each node group read from a cluster (`kubernetes:`, `slurm:`) whose set has GPUs: a Job
manifest (``fleet/manifests_k8s.py``) or an ``sbatch`` script (``fleet/slurm.py``) beside the set's
lock; per set, with the spec's ``image:``, the Dockerfile that builds that image (multi-arch when
the set spans x86-64 and arm64); and ``fleet.yaml`` at the top: which nodes should answer, in
which group (`gpuresolve fleet report --expect`). Control-plane and GPU-less nodes are left out,
each with the reason, and so are nodes that cannot run a job now (cordoned or NotReady; drained,
down... on Slurm) unless the spec entry says ``include_unavailable: true``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from resolver import __version__
from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.platforms import PythonVersion
from resolver.fleet.kubernetes import Placement
from resolver.fleet.report import PLAN_FILE as PLAN
from resolver.solve.fleet import FleetDecision
from resolver.solve.shapes import FleetMember
from resolver.writers import recorded


class FleetSpec(Protocol):
    """What these files need of a team spec (``team.spec.EnvSpec`` is one), named here because
    the team spec sits above this room: its `kubernetes:` and `slurm:` entries read the fleet."""

    @property
    def path(self) -> Path: ...
    @property
    def name(self) -> str: ...
    @property
    def python(self) -> PythonVersion: ...
    @property
    def members(self) -> tuple[FleetMember, ...]: ...
    @property
    def image(self) -> str | None: ...


LOCKS = ("requirements.txt", "pylock.toml")  # what `verify --lock` in a Job reads, by preference


def set_name(spec_name: str, label: str, folder: str, several: bool) -> str:
    """A set's name as its lock files record it: `verify --json` reports it as ``group``, and
    `fleet report` groups nodes by it (``gpu-cluster/linux-aarch64``, ``h100-group``)."""
    return f"{label or spec_name}/{folder}" if several else label or spec_name


def fleet_files(
    catalog: Catalog,
    spec: FleetSpec,
    groups: Sequence[tuple[str, FleetDecision]],
    files: Mapping[str, str],
    record: recorded.LockInputs,
    root: str = ".",
) -> dict[str, str]:
    """The manifests, scripts, Dockerfiles and plan of a cluster lock ({} for other locks);
    ``root`` is the lock folder's absolute path, which the sbatch scripts run in."""
    from resolver.fleet import manifests_k8s, slurm

    members = {m.target.name: m for m in spec.members}
    if not any(m.group is not None and m.group.placement for m in spec.members):
        return {}
    k8s_nodes: dict[str, Placement] = {}
    for m in spec.members:
        for node, p in (m.group.placement if m.group else {}).items():
            if isinstance(p, Placement):
                k8s_nodes[node] = p
    read_keys = sorted({k for p in k8s_nodes.values() for k, _ in p.labels})
    sets = [(label, d) for label, d in groups if d.ok]
    if spec.image and "{group}" not in spec.image and len(sets) > 1:
        raise UserError(
            f"{spec.path}: image: one image for {len(sets)} groups with different locks: "
            "write {group} in it (registry/ml:{group}), one image per group"
        )
    out: dict[str, str] = {}
    plan: list[dict[str, Any]] = []
    objects: dict[str, str] = {}  # Kubernetes object name -> the group whose Job and ConfigMap
    taken = {p.casefold() for p in files}  # the lock's file names as a case-folding disk sees
    for label, decision in sets:
        several = len(decision.choices) > 1
        prefix = f"{label}/" if label else ""
        image = spec.image.replace("{group}", label or spec.name) if spec.image else None
        locks: list[tuple[str, str]] = []
        for choice in decision.choices:
            sub = f"{prefix}{choice.folder}/" if several else prefix
            group = set_name(spec.name, label, choice.folder, several)
            lock = next((n for n in LOCKS if f"{sub}{n}" in files), None)
            if not choice.cpu and f"{sub}requirements.txt" in files:
                locks.append((choice.platform, f"{sub}requirements.txt".removeprefix(prefix)))
            for name in choice.members:
                member = members.get(name)
                g = member.group if member else None
                if member is None or g is None or not g.placement:
                    continue
                gpu = bool(member.target.gpus) and not choice.cpu
                left = {n: why for n in g.nodes if (why := _left_out(g.placement.get(n), gpu))}
                wanted = [n for n in g.nodes if n not in left]
                entry: dict[str, Any] = {
                    "group": group,
                    "nodes_of": g.name,
                    "engine": "slurm" if _is_slurm(g.placement) else "kubernetes",
                    "lock": f"{sub}{lock}" if lock else None,
                    "nodes": wanted,
                    "expects": _expects(g.shape) if gpu else None,
                }
                if left:
                    entry["left_out"] = left
                job = None
                if wanted and lock and _is_slurm(g.placement):
                    job = f"{sub}verify-{g.name}.sbatch"
                    text = slurm.render_sbatch(
                        group=g.name,
                        set_group=group,
                        nodes=wanted,
                        placement=g.placement,
                        root=root,
                        lock_path=f"{sub}{lock}",
                    )
                    _put(
                        out,
                        taken,
                        job,
                        recorded.stamp(job, text, replace(record, group=group).to_json()),
                    )
                    readme = f"{slurm.RESULTS}/README.md"
                    if readme not in out:
                        _put(
                            out,
                            taken,
                            readme,
                            recorded.stamp(readme, slurm.results_readme(), record.to_json()),
                        )
                elif wanted and lock and image:
                    job = f"{sub}verify-{g.name}.yaml"
                    _claim(objects, manifests_k8s.job_name(g.name), g.name)
                    text = manifests_k8s.render(
                        group=g.name,
                        set_group=group,
                        nodes=wanted,
                        placement=g.placement,
                        read_keys=read_keys,
                        arch=choice.platform,
                        image=image,
                        lock_name=lock,
                        lock_text=files[f"{sub}{lock}"],
                        header=_header(spec, g.name, group, len(wanted), left),
                        everyone=k8s_nodes,
                        plan_text=_plan_yaml(
                            {"fleet": 1, "groups": [{k: entry[k] for k in _IN_JOB}]}
                        ),
                    )
                    _put(
                        out,
                        taken,
                        job,
                        recorded.stamp(job, text, replace(record, group=group).to_json()),
                    )
                entry["job"] = job
                plan.append(entry)
        if image and locks:
            from resolver.writers.formats.dockerfile import probe_files
            from resolver.writers.formats.fleet_dockerfile import render_fleet_dockerfile

            name = f"team {spec.name}" + (f" ({label})" if label else "")
            text = render_fleet_dockerfile(name, spec.python, locks, image, catalog.updated)
            out[f"{prefix}Dockerfile"] = recorded.stamp("Dockerfile", text, record.to_json())
            for fname, body in probe_files().items():
                out[f"{prefix}{fname}"] = recorded.stamp(fname, body, record.to_json())
    doc = {"fleet": 1, "spec": spec.path.name, "image": spec.image, "groups": plan}
    head = (
        f"# Generated by gpuresolve {__version__}: the nodes each verification job should hear "
        "from;\n# `gpuresolve fleet report RESULTS --expect THIS-FOLDER` names the missing.\n"
    )
    out[PLAN] = recorded.stamp(PLAN, head + _plan_yaml(doc), record.to_json())
    return out


def _plan_yaml(doc: Mapping[str, Any]) -> str:
    """The plan as block YAML, every scalar a JSON string or number (valid YAML, never read as
    another type): a 50,000-node plan in milliseconds, where a YAML emitter takes seconds."""
    q = json.dumps
    lines = [f"{k}: {q(v)}" for k, v in doc.items() if k != "groups"]
    lines.append("groups:")
    for g in doc["groups"]:
        first = True
        for key, value in g.items():
            lead = "- " if first else "  "
            first = False
            if isinstance(value, list):
                lines.append(f"{lead}{key}:" + (" []" if not value else ""))
                lines.extend(f"  - {q(v)}" for v in value)
            elif isinstance(value, dict):
                lines.append(f"{lead}{key}:")
                lines.extend(f"    {q(k)}: {q(v)}" for k, v in value.items())
            else:
                lines.append(f"{lead}{key}: {q(value)}")
    return "\n".join(lines) + "\n"


def _put(out: dict[str, str], taken: set[str], path: str, text: str) -> None:
    """Add a file of the lock; one that another already has (in any case: macOS and Windows
    fold it) is an error, never an overwrite."""
    folded = path.casefold()
    if folded in taken:
        raise UserError(f"two files of the lock would both be {path}: rename a group")
    taken.add(folded)
    out[path] = text


def _claim(objects: dict[str, str], name: str, group: str) -> None:
    """One group's Job and ConfigMap name; two groups sharing it would replace each other when
    applied (`kubectl apply` updates by name), so it is an error when written."""
    if objects.setdefault(name, group) != group:
        raise UserError(
            f"node groups {objects[name]} and {group} would get the same Kubernetes Job and "
            f"ConfigMap name {name}: rename one (the spec entry's name:)"
        )


def _left_out(p: Any, gpu: bool) -> str | None:
    """Why a node gets no job: a control plane, no GPU, or a state that cannot run one now
    (a cordoned or NotReady Kubernetes node, a drained or down Slurm node: its group's job
    would pend there, or never be placed)."""
    if _control(p):
        return "control-plane node"
    if not gpu:
        return "no GPU"
    return getattr(p, "unavailable", None)


_IN_JOB = ("group", "nodes_of", "expects")  # the plan entry a Job carries beside its lock


def _expects(shape: Any) -> Any:
    """What `verify --group` holds a node of the group to: its GPUs and driver. A shared GPU
    (time-slicing, MPS) is granted one replica, so the pod sees one GPU of the node's several:
    its count is not held (None), only the model."""
    from resolver.verify.expects import expects_json

    shared = bool(getattr(shape, "sharing", None))
    gpus = [(g.name, f"{g.cc[0]}.{g.cc[1]}", None if shared else g.count) for g in shape.gpus]
    return expects_json(gpus, None if shape.driver is None else str(shape.driver))


def _control(p: Any) -> bool:
    return bool(getattr(p, "control_plane", False))


def _is_slurm(placement: Mapping[str, Any]) -> bool:
    from resolver.fleet.slurm import SlurmNode

    return any(isinstance(p, SlurmNode) for p in placement.values())


def _header(
    spec: FleetSpec, name: str, group: str, count: int, left: Mapping[str, str]
) -> list[str]:
    lines = [
        f"# Generated by gpuresolve {__version__} for team {spec.name}: verifies node group "
        f"{name} ({count} nodes) where it runs,",
        f"# with the lock of {group}; `gpuresolve lock` rewrites this file.",
        "# run:     kubectl apply -f THIS-FILE",
        f"# results: kubectl logs -l job-name={_job(name)} --tail=-1 > results.jsonl",
        "# report:  gpuresolve fleet report results.jsonl --expect LOCK-FOLDER",
    ]
    if left:
        lines.append("# left out: " + ", ".join(f"{n} ({why})" for n, why in sorted(left.items())))
    return lines


def _job(name: str) -> str:
    from resolver.fleet.manifests_k8s import job_name

    return job_name(name)
