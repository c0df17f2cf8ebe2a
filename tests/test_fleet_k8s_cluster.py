"""A cluster as it really is: node states, device plugin sharing modes, pod security.

Node states: a cordoned (``spec.unschedulable``) or NotReady node is left out of its Job and
listed in ``fleet.yaml`` with the reason, unless the entry says ``include_unavailable``.

Device plugin modes: the GFD labels and the allocatable each mode really writes, from
NVIDIA/k8s-device-plugin ``internal/lm/resource.go`` (``<resource>.product`` with ``-SHARED``
when replicas > 1 and the resource is not renamed, ``.count``, ``.replicas`` — 0 where sharing
is disabled, as for the MIG-enabled parents under "mixed" — and ``.sharing-strategy``),
``internal/lm/mig-strategy.go`` (the resource names of MIG "single" and "mixed"), and the README's
"Shared Access to GPUs" (a node with N GPUs and R replicas advertises N x R of the resource,
``<resource>.shared`` with ``renameByDefault: true``; ``failRequestsGreaterThanOne`` refuses a
shared request over 1, always on for MPS: ``api/config/v1/config.go``).

Pod security: every manifest a cluster lock writes is checked against the "restricted" profile
of the Kubernetes Pod Security Standards, control by control as the page defines them
(``restricted_violations`` below), and against the API schema (kubernetes-validate, strict).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli

from resolver.catalog import Catalog
from resolver.fleet import k8s_selector
from resolver.fleet.kubernetes import read_node_list

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "kubernetes" / "nodes.json"
SPEC = """\
name: cluster
python: "3.12"
packages:
  torch: ">=2.4"
image: registry.example/ml/train:1
targets:
  - kubernetes: nodes.json
{extra}"""


def fixture_nodes() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return doc


def node(name: str, like: str) -> dict[str, Any]:
    """A copy of fixture node ``like``, renamed."""
    found = next(i for i in fixture_nodes()["items"] if i["metadata"]["name"] == like)
    made: dict[str, Any] = copy.deepcopy(found)
    made["metadata"]["name"] = made["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return made


def gpu_labels(item: dict[str, Any], **values: str) -> dict[str, Any]:
    labels = item["metadata"]["labels"]
    for key, value in values.items():
        labels[f"nvidia.com/{key.replace('__', '.').replace('_', '-')}"] = value
    return item


def allocatable(item: dict[str, Any], **resources: str) -> dict[str, Any]:
    """Replace the node's NVIDIA resources (``gpu__shared`` for ``nvidia.com/gpu.shared``)."""
    for where in ("allocatable", "capacity"):
        have = item["status"][where]
        for key in [k for k in have if k.startswith("nvidia.com/")]:
            del have[key]
        for key, qty in resources.items():
            have[f"nvidia.com/{key.replace('__', '.').replace('_', '-')}"] = qty
    return item


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def requests(shipped: Catalog, tmp_path: Path, item: dict[str, Any]) -> dict[str, str]:
    nodes = read_node_list(write(tmp_path / "n.json", [item]), shipped)
    placement = nodes.placement[item["metadata"]["name"]]
    assert placement.unavailable is None
    return dict(placement.requests)


# --- device plugin sharing modes: one test each, with what GFD and the plugin write ------------


def test_exclusive_gpus_ask_for_every_gpu(shipped: Catalog, tmp_path: Path) -> None:
    """No sharing: replicas 1, sharing-strategy none; 8 GPUs allocatable: all 8 asked for."""
    item = node("h100-x", "h100-01")
    assert item["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "none"
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu": "8"}


def test_time_slicing_asks_for_one_replica(shipped: Catalog, tmp_path: Path) -> None:
    """8 GPUs x 4 replicas: product -SHARED, 32 nvidia.com/gpu; a request of 1 (what
    failRequestsGreaterThanOne: true accepts), not 32."""
    item = gpu_labels(
        node("t4-ts", "h100-01"),
        gpu__product="NVIDIA-H100-80GB-HBM3-SHARED",
        gpu__replicas="4",
        gpu__sharing_strategy="time-slicing",
    )
    allocatable(item, gpu="32")
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu": "1"}
    single = node("l4-ts", "l4-shared-01")  # the fixture's 1 GPU x 4 replicas
    assert requests(shipped, tmp_path, single) == {"nvidia.com/gpu": "1"}


def test_time_slicing_renamed_asks_for_the_shared_resource(
    shipped: Catalog, tmp_path: Path
) -> None:
    """renameByDefault: true: the resource is nvidia.com/gpu.shared and the product has no
    -SHARED (resource.go: `isShared() && !isRenamed()`); the Job once asked for nothing."""
    item = gpu_labels(node("l4-renamed", "l4-shared-01"), gpu__product="NVIDIA-L4")
    allocatable(item, gpu__shared="4")
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu.shared": "1"}
    shape = read_node_list(write(tmp_path / "n.json", [item]), shipped).machines[0][1]
    assert shape.sharing == "time-slicing x4"


def test_mps_asks_for_one_replica(shipped: Catalog, tmp_path: Path) -> None:
    """MPS: sharing-strategy mps, mps.capable true, product -SHARED, 2 GPUs x 4 replicas; the
    plugin always fails a request over 1 (config.go sets failRequestsGreaterThanOne)."""
    item = gpu_labels(
        node("a100-mps", "h100-01"),
        gpu__product="NVIDIA-H100-80GB-HBM3-SHARED",
        gpu__count="2",
        gpu__replicas="4",
        gpu__sharing_strategy="mps",
        mps__capable="true",
    )
    allocatable(item, gpu="8")
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu": "1"}
    gpu_labels(item, gpu__product="NVIDIA-H100-80GB-HBM3")  # renamed
    allocatable(item, gpu__shared="8")
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu.shared": "1"}


def test_mig_single_asks_for_every_mig_device(shipped: Catalog, tmp_path: Path) -> None:
    """MIG "single": nvidia.com/gpu counts MIG devices (7 x 1g.5gb): all 7 asked for."""
    item = node("mig-single", "a100-mig-01")
    assert item["metadata"]["labels"]["nvidia.com/mig.strategy"] == "single"
    assert requests(shipped, tmp_path, item) == {"nvidia.com/gpu": "7"}


def mixed(name: str) -> dict[str, Any]:
    """MIG "mixed" on 1 A100 80GB (4 x 1g.10gb + 1 x 3g.40gb): the parent's labels have
    replicas 0 (sharing disabled: NewGPUResourceLabelerWithoutSharing), each profile its own
    product, count, replicas and sharing-strategy; nvidia.com/gpu 0 allocatable."""
    item = gpu_labels(
        node(name, "a100-01"),
        gpu__count="1",
        gpu__replicas="0",
        gpu__sharing_strategy="none",
        mig__strategy="mixed",
        **{
            "mig-1g__10gb__product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
            "mig-1g__10gb__count": "4",
            "mig-1g__10gb__replicas": "1",
            "mig-1g__10gb__sharing-strategy": "none",
            "mig-3g__40gb__product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
            "mig-3g__40gb__count": "1",
            "mig-3g__40gb__replicas": "1",
            "mig-3g__40gb__sharing-strategy": "none",
        },
    )
    return allocatable(item, gpu="0", **{"mig-1g__10gb": "4", "mig-3g__40gb": "1"})


def test_mig_mixed_asks_for_every_profile(shipped: Catalog, tmp_path: Path) -> None:
    assert requests(shipped, tmp_path, mixed("mig-mixed")) == {
        "nvidia.com/mig-1g.10gb": "4",
        "nvidia.com/mig-3g.40gb": "1",
    }


def test_mig_mixed_with_a_time_sliced_profile(shipped: Catalog, tmp_path: Path) -> None:
    """Time-slicing a MIG profile (the README: "any of the resource types that emerge from
    configuring a node with the mixed MIG strategy"): one of that profile, all of the rest."""
    item = gpu_labels(
        mixed("mig-mixed-ts"),
        **{
            "mig-1g__10gb__product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED",
            "mig-1g__10gb__replicas": "2",
            "mig-1g__10gb__sharing-strategy": "time-slicing",
        },
    )
    allocatable(item, gpu="0", **{"mig-1g__10gb": "8", "mig-3g__40gb": "1"})
    assert requests(shipped, tmp_path, item) == {
        "nvidia.com/mig-1g.10gb": "1",
        "nvidia.com/mig-3g.40gb": "1",
    }


def test_a_gpu_node_without_allocatable_gpus_is_left_out(shipped: Catalog, tmp_path: Path) -> None:
    """GFD labels but no nvidia.com resource (the device plugin is not running): a Job there
    would ask for no GPU and see none."""
    item = allocatable(node("no-plugin", "h100-01"))
    p = read_node_list(write(tmp_path / "n.json", [item]), shipped).placement["no-plugin"]
    assert p.requests == () and p.unavailable is not None
    assert "device plugin" in p.unavailable
    path = write(tmp_path / "n.json", [item])  # include_unavailable cannot give it a GPU
    p = read_node_list(path, shipped, include_unavailable=True).placement["no-plugin"]
    assert p.unavailable is not None and "device plugin" in p.unavailable


# --- the restricted Pod Security Standard, as the page defines it ------------------------------
# kubernetes.io/docs/concepts/security/pod-security-standards, "Restricted": everything of
# "Baseline", plus Volume Types, Privilege Escalation (v1.8+), Running as Non-root, Running as
# Non-root user (v1.23+), Seccomp (v1.19+) and Capabilities (v1.22+). Each control lists its
# restricted fields over spec.containers[*], spec.initContainers[*] and
# spec.ephemeralContainers[*] and the values it allows. The same field lists head each check of
# the reference implementation, kubernetes/pod-security-admission ``policy/check_*.go`` (the
# Volume Types list read from ``check_restrictedVolumes.go``); written here from the page, not
# ported from that code.

SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}  # fmt: skip
SECCOMP_OK = {"RuntimeDefault", "Localhost"}
APPARMOR_OK = {None, "RuntimeDefault", "Localhost"}


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for i, c in enumerate(pod.get(kind) or []):
            yield f"spec.{kind}[{i}]", c


def restricted_violations(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> list[str]:
    """Every control of the restricted profile ``pod`` (a pod spec) fails, by field."""
    bad: list[str] = []
    psc = pod.get("securityContext") or {}
    # Baseline: HostProcess, Host Namespaces
    if (psc.get("windowsOptions") or {}).get("hostProcess") not in (None, False):
        bad.append("spec.securityContext.windowsOptions.hostProcess")
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(k) not in (None, False):
            bad.append(f"spec.{k}")
    # Baseline: HostPath Volumes; Restricted: Volume Types (each volume one of the allowed)
    for i, v in enumerate(pod.get("volumes") or []):
        kinds = set(v) - {"name"}
        if "hostPath" in kinds or not kinds or not kinds <= RESTRICTED_VOLUMES:
            bad.append(f"spec.volumes[{i}]: {sorted(kinds)}")
    # Baseline: Sysctls, SELinux, AppArmor, Seccomp (pod level)
    for s in psc.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            bad.append(f"spec.securityContext.sysctls: {s.get('name')}")
    # Restricted: Running as Non-root, Running as Non-root user, Seccomp
    pod_nonroot = psc.get("runAsNonRoot") is True
    if psc.get("runAsNonRoot") is False:
        bad.append("spec.securityContext.runAsNonRoot")
    if psc.get("runAsUser") == 0:
        bad.append("spec.securityContext.runAsUser")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in SECCOMP_OK:
        bad.append("spec.securityContext.seccompProfile.type")
    for where, sc in [("spec.securityContext", psc)] + [
        (f"{w}.securityContext", c.get("securityContext") or {}) for w, c in _containers(pod)
    ]:
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            bad.append(f"{where}.seLinuxOptions")
        if (sc.get("appArmorProfile") or {}).get("type") not in APPARMOR_OK:
            bad.append(f"{where}.appArmorProfile")
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            bad.append(f"metadata.annotations[{key}]")
    for where, c in _containers(pod):
        sc = c.get("securityContext") or {}
        if (sc.get("windowsOptions") or {}).get("hostProcess") not in (None, False):
            bad.append(f"{where}.securityContext.windowsOptions.hostProcess")
        if sc.get("privileged") not in (None, False):
            bad.append(f"{where}.securityContext.privileged")
        if sc.get("procMount") not in (None, "Default"):
            bad.append(f"{where}.securityContext.procMount")
        bad += [f"{where}.ports[*].hostPort" for p in c.get("ports") or [] if p.get("hostPort")]
        # Privilege Escalation: false, and only false
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{where}.securityContext.allowPrivilegeEscalation")
        # Running as Non-root: the container's true, or unset where the pod's is true
        nonroot = sc.get("runAsNonRoot")
        if nonroot is False or (nonroot is None and not pod_nonroot):
            bad.append(f"{where}.securityContext.runAsNonRoot")
        if sc.get("runAsUser") == 0:
            bad.append(f"{where}.securityContext.runAsUser")
        # Seccomp: RuntimeDefault or Localhost, the container's or (unset) the pod's
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in SECCOMP_OK:
            bad.append(f"{where}.securityContext.seccompProfile.type")
        # Capabilities: drop ALL; add nothing but NET_BIND_SERVICE (within Baseline's list)
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{where}.securityContext.capabilities.drop")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            bad.append(f"{where}.securityContext.capabilities.add")
    return bad


def writes_only_to_empty_dirs(pod: Mapping[str, Any]) -> list[str]:
    """A read-only root filesystem, and HOME, TMPDIR and verify's result file on emptyDirs."""
    bad = []
    empty = {v["name"] for v in pod.get("volumes") or [] if "emptyDir" in v}
    for where, c in _containers(pod):
        if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is not True:
            bad.append(f"{where}: root filesystem writable")
        mounts = [m["mountPath"] for m in c.get("volumeMounts") or [] if m["name"] in empty]
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        script = " ".join(c.get("command") or [])
        written = [env.get("HOME"), env.get("TMPDIR"), *re.findall(r"> (/\S+)", script)]
        for path in written:
            if not path or not any(path == m or path.startswith(m + "/") for m in mounts):
                bad.append(f"{where}: {path} not on an emptyDir")
    return bad


# --- one cluster with every mode and state, locked once -----------------------------------------


def cluster() -> list[dict[str, Any]]:
    cordoned = node("h100-cordoned", "h100-01")
    cordoned["spec"]["unschedulable"] = True
    cordoned["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ]
    not_ready = node("h100-notready", "h100-01")
    ready = next(c for c in not_ready["status"]["conditions"] if c["type"] == "Ready")
    ready.update(
        status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status."
    )
    not_ready["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
    renamed = gpu_labels(node("l4-renamed-01", "l4-shared-01"), gpu__product="NVIDIA-L4")
    renamed["metadata"]["labels"]["nvidia.com/gpu.count"] = "2"
    allocatable(renamed, gpu__shared="8")
    mps = gpu_labels(
        node("h100-mps-01", "h100-01"),
        gpu__product="NVIDIA-H100-80GB-HBM3-SHARED",
        gpu__count="2",
        gpu__replicas="4",
        gpu__sharing_strategy="mps",
        mps__capable="true",
    )
    allocatable(mps, gpu="8")
    items = fixture_nodes()["items"]
    return [*items, cordoned, not_ready, renamed, mps, mixed("a100-mixed-01")]


def lock(tmp: Path, extra: str = "") -> Path:
    write(tmp / "nodes.json", cluster())
    (tmp / "cluster.yaml").write_text(SPEC.format(extra=extra), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        from resolver.cli import main

        main(["lock", "--top-level", str(tmp / "cluster.yaml")])
    assert exc.value.code == 0
    return tmp / "cluster"


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lock(tmp_path_factory.mktemp("k8s-cluster"))


def jobs(out: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    found = {}
    for path in sorted(out.rglob("verify-*.yaml")):
        configmap, job = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        found[str(path.relative_to(out))] = (configmap, job)
    return found


def plan(out: Path) -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((out / "fleet.yaml").read_text(encoding="utf-8"))
    return {g["nodes_of"]: g for g in doc["groups"]}


def limits(job: dict[str, Any]) -> dict[str, str]:
    [c] = job["spec"]["template"]["spec"]["containers"]
    found: dict[str, str] = c.get("resources", {}).get("limits", {})
    return found


def test_each_mode_job_asks_what_the_plugin_grants(locked: Path) -> None:
    asked = {job["metadata"]["name"]: limits(job) for _, job in jobs(locked).values()}
    assert {"nvidia.com/gpu": "8"} in asked.values()  # H100s, exclusive
    assert {"nvidia.com/gpu": "7"} in asked.values()  # MIG single
    assert {"nvidia.com/gpu.shared": "1"} in asked.values()  # time-slicing, renamed
    assert {"nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-3g.40gb": "1"} in asked.values()
    shared = [v for v in asked.values() if v == {"nvidia.com/gpu": "1"}]
    assert len(shared) >= 2  # the time-sliced L4, the MPS H100s (and the 1-GPU GH200)
    assert all(v for v in asked.values()), asked  # no Job asks for nothing


def test_a_shared_gpu_group_expects_the_model_not_the_node_count(locked: Path) -> None:
    """A Job granted one replica of a time-sliced or MPS GPU sees one GPU: verify --group must
    not hold the pod to the node's count of GPUs (it would fail every shared node)."""
    groups = plan(locked)
    for name in ("h100-80gb-hbm3-x2-mps-580.95.05", "l4-x2-shared-570.172.08"):
        [gpu] = groups[name]["expects"]["gpus"]
        assert gpu["count"] is None, name
    [exclusive] = groups["h100-80gb-hbm3-x8-580.95.05"]["expects"]["gpus"]
    assert exclusive["count"] == 8


def test_cordoned_and_not_ready_nodes_are_left_out_with_the_reason(locked: Path) -> None:
    h100 = next(g for g in plan(locked).values() if "h100-01" in g["nodes"])
    assert h100["nodes"] == ["h100-01", "h100-02", "h100-03"]
    assert h100["left_out"] == {
        "h100-cordoned": "Kubernetes node cordoned (spec.unschedulable)",
        "h100-notready": "Kubernetes node NotReady (Ready=Unknown): NodeStatusUnknown: "
        "Kubelet stopped posting node status.",
    }
    _, job = jobs(locked)[h100["job"]]
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    pod = job["spec"]["template"]["spec"]
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "NotIn", "values": ["h100-cordoned", "h100-notready"]}
    ]
    admitted = {
        n["metadata"]["name"]
        for n in cluster()
        if k8s_selector.pod_admits(pod, n["metadata"]["name"], n["metadata"]["labels"])
    }
    assert admitted == {"h100-01", "h100-02", "h100-03"}  # not once they are back either
    tolerated = {t["key"] for t in pod["tolerations"]}
    assert not any(k.startswith("node.kubernetes.io/") for k in tolerated)
    header = (locked / h100["job"]).read_text(encoding="utf-8")
    assert "h100-cordoned (Kubernetes node cordoned (spec.unschedulable))" in header


def test_include_unavailable_sends_the_job_there(tmp_path: Path) -> None:
    out = lock(tmp_path, "    include_unavailable: true\n")
    h100 = next(g for g in plan(out).values() if "h100-01" in g["nodes"])
    assert h100["nodes"] == ["h100-01", "h100-02", "h100-03", "h100-cordoned", "h100-notready"]
    assert "left_out" not in h100
    _, job = jobs(out)[h100["job"]]
    assert job["spec"]["completions"] == 5
    pod = job["spec"]["template"]["spec"]
    tolerated = {(t["key"], t.get("effect")) for t in pod["tolerations"]}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated  # the cordon
    assert ("node.kubernetes.io/unreachable", "NoExecute") in tolerated
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert all("matchFields" not in t for t in terms["nodeSelectorTerms"])


def test_include_unavailable_must_be_a_boolean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "nodes.json", cluster())
    spec = SPEC.format(extra='    include_unavailable: "yes"\n')
    (tmp_path / "cluster.yaml").write_text(spec, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 2 and "include_unavailable" in err and "true or false" in err
    assert "Traceback" not in err and not (tmp_path / "cluster").exists()


def test_a_node_reason_is_escaped_and_bounded(shipped: Catalog, tmp_path: Path) -> None:
    item = node("h100-odd", "h100-01")
    ready = next(c for c in item["status"]["conditions"] if c["type"] == "Ready")
    ready.update(status="False", reason="KubeletNotReady", message="\x1b[31mred" + "x" * 5000)
    p = read_node_list(write(tmp_path / "n.json", [item]), shipped).placement["h100-odd"]
    assert p.unavailable is not None and "\x1b" not in p.unavailable
    assert p.unavailable.startswith("Kubernetes node NotReady (Ready=False): KubeletNotReady: ")
    assert "\\x1b[31mred" in p.unavailable and len(p.unavailable) < 400
    del item["status"]["conditions"]
    p = read_node_list(write(tmp_path / "n.json", [item]), shipped).placement["h100-odd"]
    assert p.unavailable == "Kubernetes node NotReady (no Ready condition in status.conditions)"


def test_renamed_and_plain_nodes_of_one_shape_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One pod template cannot ask nvidia.com/gpu of one node and nvidia.com/gpu.shared of
    another: said when locked, nothing written (it once asked for neither)."""
    plain = node("l4-a", "l4-shared-01")
    renamed = allocatable(node("l4-b", "l4-shared-01"), gpu__shared="4")
    write(tmp_path / "nodes.json", [plain, renamed])
    (tmp_path / "cluster.yaml").write_text(SPEC.format(extra=""), encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 2, err
    assert "nvidia.com/gpu and node l4-b nvidia.com/gpu.shared" in err


# --- pod security over every manifest a cluster lock writes -------------------------------------


def all_manifests(locked: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every Job of this cluster and of the shipped example (environments/gpu-cluster)."""
    found = [(rel, job) for rel, (_, job) in jobs(locked).items()]
    shipped_example = ROOT / "environments" / "gpu-cluster"
    found += [(f"example:{rel}", job) for rel, (_, job) in jobs(shipped_example).items()]
    assert len(found) >= 12
    return found


def test_every_job_meets_the_restricted_profile(locked: Path) -> None:
    for rel, job in all_manifests(locked):
        template = job["spec"]["template"]
        pod = template["spec"]
        notes = template.get("metadata", {}).get("annotations") or {}
        assert restricted_violations(pod, notes) == [], rel
        assert writes_only_to_empty_dirs(pod) == [], rel
        assert pod["automountServiceAccountToken"] is False


def test_the_checker_finds_each_control_broken(locked: Path) -> None:
    _, job = all_manifests(locked)[0]
    pod = job["spec"]["template"]["spec"]
    breaks: dict[str, Callable[[dict[str, Any]], object]] = {
        "allowPrivilegeEscalation": lambda p: p["containers"][0]["securityContext"].pop(
            "allowPrivilegeEscalation"
        ),
        "runAsNonRoot": lambda p: p["securityContext"].pop("runAsNonRoot"),
        "runAsUser": lambda p: p["securityContext"].update(runAsUser=0),
        "seccompProfile": lambda p: p["securityContext"].pop("seccompProfile"),
        "capabilities.drop": lambda p: p["containers"][0]["securityContext"].pop("capabilities"),
        "capabilities.add": lambda p: p["containers"][0]["securityContext"]["capabilities"].update(
            add=["SYS_ADMIN"]
        ),
        "volumes": lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "hostNetwork": lambda p: p.update(hostNetwork=True),
        "privileged": lambda p: p["containers"][0]["securityContext"].update(privileged=True),
    }
    for what, brk in breaks.items():
        broken = copy.deepcopy(pod)
        brk(broken)
        assert any(what.split(".")[0] in v for v in restricted_violations(broken, {})), what
    writable = copy.deepcopy(pod)
    writable["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = False
    writable["volumes"] = [v for v in writable["volumes"] if v["name"] != "home"]
    found = writes_only_to_empty_dirs(writable)
    assert any("root filesystem" in f for f in found)
    assert any("/home/gpuresolve not on an emptyDir" in f for f in found)


def test_the_job_runs_as_the_user_the_image_creates(locked: Path) -> None:
    dockerfile = (locked / "Dockerfile").read_text(encoding="utf-8")
    uid = re.search(r"useradd --uid ([0-9]+) --gid ([0-9]+) --home-dir (\S+)", dockerfile)
    assert uid is not None
    user = re.search(r"^USER ([0-9]+):([0-9]+)$", dockerfile, re.MULTILINE)
    assert user is not None and user.groups() == uid.groups()[:2]
    assert dockerfile.index("useradd") < dockerfile.index("USER ") < dockerfile.index("ENTRYPOINT")
    for rel, job in all_manifests(locked):
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == int(uid.group(1)), rel
        assert pod["securityContext"]["runAsGroup"] == int(uid.group(2)), rel
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["HOME"] == uid.group(3), rel


@pytest.mark.slow
def test_schema_accepts_every_new_manifest_strictly(locked: Path) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    from kubernetes_validate import utils

    minors = sorted(
        {v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) >= (1, 29)},
        key=lambda v: tuple(map(int, v.split("."))),
    )
    for rel, (configmap, job) in jobs(locked).items():
        for version in (minors[0], minors[-1]):
            kv.validate(configmap, version, strict=True), (rel, version)
            kv.validate(job, version, strict=True), (rel, version)
