"""A Kubernetes Job per node group that runs `gpuresolve verify` on every node of the group.

Why an Indexed Job with required pod anti-affinity on ``kubernetes.io/hostname``: a Job runs to
completion (a DaemonSet restarts its pods forever), ``completions`` = ``parallelism`` = the
group's node count with at most one of its pods per node puts exactly one pod on each node, and
``backoffLimitPerIndex: 0`` (Kubernetes 1.29+) lets one node's failed verify fail its own index
without stopping the others (``backoffLimit: 0`` would end the whole Job at the first failure).

The selection: required node affinity with one ``nodeSelectorTerm`` per distinct set of the GPU
Feature Discovery labels the group's nodes were grouped by (terms are ORed, a term's expressions
ANDed; an exact ``nodeSelector`` cannot say "this product or that driver spelling", nor that a
label is absent), each term also requiring ``kubernetes.io/arch`` and the absence of every read
label the node does not carry and of the control-plane role; nodes of those labels that are left
out (cordoned, NotReady: ``Placement.unavailable``) are named in the term's ``matchFields``
(``metadata.name NotIn``), so the Job cannot land there once they are back. ``k8s_selector``
proves, at lock time, that the terms admit exactly the group's nodes of the node list, or the
lock is refused.

What each pod asks for is the node's ``Placement.requests`` (``fleet/kubernetes.py``: all of an
unshared node's GPUs or MIG devices, one replica of a time-sliced or MPS-shared resource).

Pod security: the pod meets the Kubernetes "restricted" Pod Security Standard
(kubernetes.io/docs/concepts/security/pod-security-standards; ``tests/test_fleet_k8s_cluster.py``
checks each of its controls): it runs as the image's non-root user
(``fleet_dockerfile.USER_ID``) with ``runAsNonRoot``, the ``RuntimeDefault`` seccomp profile, no
privilege escalation and every capability dropped; its root filesystem is read-only, so
everything verify writes (``HOME``, the temporary folder, ``/dev/shm``) is on an ``emptyDir``;
it mounts no service account token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from resolver.core.errors import UserError
from resolver.fleet import k8s_selector
from resolver.fleet.kubernetes import CONTROL_PLANE, UNSCHEDULABLE_TAINT, Placement
from resolver.solve.shapes import bounded_name
from resolver.writers.formats.fleet_dockerfile import USER_HOME, USER_ID

CONFIGMAP_LIMIT = 1 << 20  # the API server refuses a ConfigMap over 1 MiB
LOCK_DIR = "/etc/gpuresolve"
TOOL = "/opt/gpuresolve/venv/bin"  # the fleet Dockerfile installs gpuresolve here
CHECK = "/opt/gpuresolve/gpuresolve-check.py"
DEADLINE_S = 1800  # a verify takes seconds to a minute; pulling a large image takes longer
TTL_S = 86400  # a day to collect `kubectl logs` before the Job and its pods go
SHM = "8Gi"  # NCCL's shared-memory transport needs more than a container's 64 MiB /dev/shm
NCCL_OFF = (  # NVLink multicast off: verify measures the links, not a fabric feature
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
)
TMP = "/tmp"
SCRATCH = "4Gi"  # HOME's caches (CUDA's JIT cache, Triton's kernels) and verify's temporary files
WRITABLE = (  # the root filesystem is read-only: everything written goes to an emptyDir
    ("HOME", USER_HOME),
    ("TMPDIR", TMP),
    ("PYTHONDONTWRITEBYTECODE", "1"),
)
GPU_TAINT = "nvidia.com/gpu"  # the GPU Operator's and the cloud GPU pools' usual taint
_NOT_NAME = re.compile(r"[^a-z0-9-]+")
PREFIX = "gpuresolve-"  # short: the readable part keeps a group's driver
JOB_NAME = 52


def job_name(group: str) -> str:
    """``gpuresolve-<group>``, a DNS-1123 label of at most 52 characters (the Job's pods are
    ``<job>-<index>-<id>`` and its ``job-name`` label is at most 63). Where the group's name is
    not a label as written (``1g.6gb`` and ``1g-6gb`` both read ``1g-6gb``) or is too long, a
    readable start and the digest of the name as written: two groups never share a Job."""
    slug = _NOT_NAME.sub("-", group.lower()).strip("-")
    return bounded_name(f"{PREFIX}{slug}", group, limit=JOB_NAME, clash=slug != group)


def node_terms(
    placement: Mapping[str, Placement],
    read_keys: Sequence[str],
    left_out: Mapping[str, Placement] | None = None,
) -> list[dict[str, Any]]:
    """One term per distinct set of read labels among the nodes (control-plane nodes left out);
    ``left_out``: nodes that must not be picked though they may carry the same labels."""
    seen: dict[tuple[tuple[str, str], ...], None] = {}
    for p in placement.values():
        if not p.control_plane:
            seen.setdefault(p.labels, None)
    excluded: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for node, p in (left_out or {}).items():
        if p.labels in seen:
            excluded.setdefault(p.labels, []).append(node)
    terms = []
    for labels in seen:
        have = dict(labels)
        exprs: list[dict[str, Any]] = [
            {"key": k, "operator": "In", "values": [v]} for k, v in labels
        ]
        exprs += [
            {"key": k, "operator": "DoesNotExist"}
            for k in sorted({*read_keys, *CONTROL_PLANE})
            if k not in have
        ]
        term: dict[str, Any] = {"matchExpressions": exprs}
        if labels in excluded:
            names = sorted(excluded[labels])
            term["matchFields"] = [{"key": "metadata.name", "operator": "NotIn", "values": names}]
        terms.append(term)
    return terms


def resources(placement: Mapping[str, Placement]) -> dict[str, str]:
    """What the group's nodes ask of their NVIDIA resources (the least, where they differ): an
    unshared node's every GPU or MIG device, so verify sees them all; one replica of a shared
    one (``Placement.requests``)."""
    counts: dict[str, int] | None = None
    for p in placement.values():
        if p.control_plane:
            continue
        mine = {k: int(v) for k, v in p.requests}
        counts = (
            mine if counts is None else {k: min(v, mine[k]) for k, v in counts.items() if k in mine}
        )
    return {k: str(v) for k, v in sorted((counts or {}).items()) if v > 0}


def _one_resource_set(placement: Mapping[str, Placement], group: str) -> None:
    """One pod template asks the same resources of every node: nodes of one shape whose device
    plugins name them differently (``nvidia.com/gpu`` here, ``nvidia.com/gpu.shared`` where
    ``renameByDefault`` is on) would get a Job asking for neither, so the lock says so."""
    first: tuple[str, frozenset[str]] | None = None
    for node, p in placement.items():
        names = frozenset(k for k, _ in p.requests)
        if first is None:
            first = (node, names)
        elif names != first[1]:
            shown = [", ".join(sorted(n)) or "no NVIDIA resource" for n in (first[1], names)]
            raise UserError(
                f"{group}: node {first[0]} offers {shown[0]} and node {node} {shown[1]}: one "
                "Job cannot ask both (configure their device plugins alike, or give each its "
                "own spec entry with selector:)"
            )


def tolerations(placement: Mapping[str, Placement]) -> list[dict[str, Any]]:
    """The usual GPU taint, and every taint the group's nodes carry (but a control plane's and
    the node lifecycle's ``node.kubernetes.io/*``, which mean "do not run here now", unless the
    spec sent the Job to such a node: ``include_unavailable``; a cordoned node then needs the
    ``node.kubernetes.io/unschedulable`` toleration, which the scheduler's NodeUnschedulable
    check accepts in place of an uncordon)."""
    keys = {GPU_TAINT: "Exists"}
    found: dict[tuple[str, str], None] = {}
    for p in placement.values():
        if p.cordoned and p.state and not p.unavailable:
            found.setdefault((UNSCHEDULABLE_TAINT, "NoSchedule"), None)
        for key, effect in p.taints:
            lifecycle = key.startswith("node.kubernetes.io/")
            if key not in CONTROL_PLANE and (not lifecycle or (p.state and not p.unavailable)):
                found.setdefault((key, effect), None)
    out: list[dict[str, Any]] = [{"key": k, "operator": op} for k, op in keys.items()]
    out += [
        {"key": k, "operator": "Exists", "effect": e} for k, e in sorted(found) if k not in keys
    ]
    return out


def script(lock_name: str) -> str:
    """The container's command: the image's start-up check, then verify as one JSON line
    (`kubectl logs -l` shows the last 10 lines unless told otherwise); verify's exit status."""
    lock = f"{LOCK_DIR}/{lock_name}"
    return "\n".join(
        [
            f'python {CHECK} {lock} true >&2 || echo "gpuresolve: the start-up check failed; '
            'verify says why" >&2',
            f"{TOOL}/gpuresolve verify --json --benchmark --no-record --lock {lock} "
            '--python "$(command -v python)" > /tmp/verify.json',
            "status=$?",
            f"{TOOL}/python -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), "
            'separators=(",", ":")))\' /tmp/verify.json',
            'exit "$status"',
        ]
    )


def render(
    *,
    group: str,
    set_group: str,
    nodes: Sequence[str],
    placement: Mapping[str, Placement],
    read_keys: Sequence[str],
    arch: str,
    image: str,
    lock_name: str,
    lock_text: str,
    header: Sequence[str],
    everyone: Mapping[str, Placement],
    plan_text: str | None = None,
) -> str:
    """The ConfigMap (the lock) and the Job, as one YAML file with ``header`` comment lines;
    ``everyone`` is every node of the list, which the selection must admit only where wanted."""
    name = job_name(group)
    if len(lock_text.encode("utf-8")) > CONFIGMAP_LIMIT - 4096:
        raise UserError(
            f"{lock_name} of {set_group}: {len(lock_text.encode('utf-8'))} bytes is over what a "
            f"ConfigMap holds (1 MiB): bake the lock into the image (the Dockerfile copies it)"
        )
    wanted = [n for n in nodes if n in placement and not placement[n].control_plane]
    labels = {"app.kubernetes.io/name": "gpuresolve-verify", "app.kubernetes.io/instance": name}
    mine = {n: placement[n] for n in wanted}
    away = {n: p for n, p in everyone.items() if p.unavailable and n not in mine}
    _one_resource_set(mine, group)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # verify never calls the API server
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": USER_ID,
            "runAsGroup": USER_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": node_terms(mine, read_keys, away)
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": labels},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            },
        },
        "tolerations": tolerations(mine),
        "containers": [
            {
                "name": "verify",
                "image": image,
                "command": ["sh", "-c", script(lock_name)],
                "env": [
                    {
                        "name": "GPURESOLVE_NODE_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                    },
                    {"name": "GPURESOLVE_GROUP", "value": group},
                    *({"name": k, "value": v} for k, v in (*NCCL_OFF, *WRITABLE)),
                ],
                "resources": {"limits": resources(mine)},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                },
                "volumeMounts": [
                    {"name": "lock", "mountPath": LOCK_DIR, "readOnly": True},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "home", "mountPath": USER_HOME},
                    {"name": "tmp", "mountPath": TMP},
                ],
            }
        ],
        "volumes": [
            {"name": "lock", "configMap": {"name": name}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM}},
            {"name": "home", "emptyDir": {"sizeLimit": SCRATCH}},
            {"name": "tmp", "emptyDir": {"sizeLimit": SCRATCH}},
        ],
    }
    if not pod_spec["containers"][0]["resources"]["limits"]:
        del pod_spec["containers"][0]["resources"]
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {lock_name: lock_text, **({"fleet.yaml": plan_text} if plan_text else {})},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"gpuresolve/group": set_group, "gpuresolve/arch": arch},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": len(wanted),
            "parallelism": len(wanted),
            "backoffLimitPerIndex": 0,
            "activeDeadlineSeconds": DEADLINE_S,
            "ttlSecondsAfterFinished": TTL_S,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
    prove_exact(pod_spec, placement, wanted, group)
    prove_only(pod_spec, set(wanted), everyone, group)
    body = yaml.dump_all([configmap, job], Dumper=_Dumper, sort_keys=False, width=100)
    return "".join(f"{line}\n" for line in header) + body


def prove_exact(
    pod_spec: Mapping[str, Any],
    placement: Mapping[str, Placement],
    wanted: Sequence[str],
    group: str,
) -> None:
    """Refuse a selection that misses a node of the group (``prove_only`` checks the rest)."""
    for node in wanted:
        if not k8s_selector.pod_admits(pod_spec, node, dict(placement[node].labels)):
            raise UserError(f"{group}: the Job's node selection misses node {node}")


def prove_only(
    pod_spec: Mapping[str, Any], wanted: set[str], everyone: Mapping[str, Placement], group: str
) -> None:
    """Refuse a selection that admits a node outside the group (each distinct label set is
    judged once: a large cluster has few)."""
    verdict: dict[Any, bool] = {}
    for node, p in everyone.items():
        if node in wanted:
            continue
        key = (p.labels, node) if p.unavailable else p.labels  # matchFields name these
        if key not in verdict:
            verdict[key] = k8s_selector.pod_admits(pod_spec, node, dict(p.labels))
        if verdict[key]:
            raise UserError(f"{group}: the Job's node selection would also pick node {node}")


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the lock, the script) as literal blocks, readable in review; no
    anchors (the labels repeat as written)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
