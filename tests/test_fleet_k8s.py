"""A cluster lock's verification Jobs: valid against the Kubernetes API schema (strict, every minor
from 1.29 to the newest kubernetes-validate ships), each selecting exactly its group's nodes by
Kubernetes' documented selector semantics (resolver/fleet/k8s_selector.py, itself checked on the
examples of Kubernetes' documentation)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli

from resolver.core.errors import UserError
from resolver.fleet import k8s_selector, manifests_k8s
from resolver.fleet.report import read_plan

FIXTURE = Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"
SPEC = """\
name: cluster
python: "3.12"
packages:
  torch: ">=2.4"
image: registry.example/ml/train:1
targets:
  - kubernetes: nodes.json
"""


def _node(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return copy.deepcopy(next(i for i in doc["items"] if i["metadata"]["name"] == name))


def mixed_nodes() -> dict[str, Any]:
    """The fixture (x86 and arm64, MIG single, time-slicing, a control plane) plus a CPU worker,
    a MIG "mixed" node (its profiles as resources) and a node carrying the GPU taint."""
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    cpu = _node(doc, "cp-01")
    cpu["metadata"]["name"] = "cpu-01"
    for key in list(cpu["metadata"]["labels"]):
        if key.startswith("node-role.kubernetes.io/"):
            del cpu["metadata"]["labels"][key]
    cpu["spec"].pop("taints", None)
    mixed = _node(doc, "a100-01")
    mixed["metadata"]["name"] = "a100-mixed-01"
    mixed["metadata"]["labels"].update(
        {
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig-1g.10gb.count": "4",
            "nvidia.com/mig-2g.20gb.count": "2",
        }
    )
    mixed["status"]["allocatable"].update(
        {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-2g.20gb": "2"}
    )
    tainted = _node(doc, "h100-03")
    tainted["spec"]["taints"] = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "training", "effect": "NoExecute"},
    ]
    doc["items"] = [i for i in doc["items"] if i["metadata"]["name"] != "h100-03"]
    doc["items"] += [cpu, mixed, tainted]
    return doc


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("k8s")
    doc = mixed_nodes()
    (tmp / "nodes.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp / "cluster.yaml").write_text(SPEC, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        from resolver.cli import main

        main(["lock", "--top-level", str(tmp / "cluster.yaml")])  # no index here
    assert exc.value.code == 0
    return tmp / "cluster", doc


def _jobs(out: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    found = {}
    for path in sorted(out.glob("*/verify-*.yaml")):
        configmap, job = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        found[str(path.relative_to(out))] = (configmap, job)
    return found


def test_one_manifest_per_gpu_group_beside_its_lock(locked: tuple[Path, dict[str, Any]]) -> None:
    out, _ = locked
    assert sorted(_jobs(out)) == [
        "linux-aarch64/verify-gh200-480gb-580.95.05.yaml",
        "linux-x86_64/verify-a100-sxm4-40gb-mig-1g.5gb-570.195.03.yaml",
        "linux-x86_64/verify-a100-sxm4-80gb-x8-535.104.05.yaml",
        "linux-x86_64/verify-a100-sxm4-80gb-x8-mig-mixed-535.104.05.yaml",
        "linux-x86_64/verify-h100-80gb-hbm3-x8-580.95.05.yaml",
        "linux-x86_64/verify-l4-shared-570.172.08.yaml",
    ]
    plan = yaml.safe_load((out / "fleet.yaml").read_text(encoding="utf-8"))
    cpu = next(g for g in plan["groups"] if g["nodes_of"] == "cpu")
    assert cpu["job"] is None and cpu["nodes"] == []
    assert cpu["left_out"] == {"cp-01": "control-plane node", "cpu-01": "no GPU"}
    expected = read_plan(out)
    assert expected["h100-01"] == "cluster/linux-x86_64"
    assert expected["gh200-01"] == "cluster/linux-aarch64"
    assert "cp-01" not in expected and "cpu-01" not in expected


@pytest.mark.slow
def test_schema_accepts_every_manifest_strictly(locked: tuple[Path, dict[str, Any]]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    from kubernetes_validate import utils

    minors = sorted(
        {v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) >= (1, 29)},
        key=lambda v: tuple(map(int, v.split("."))),
    )
    assert minors[0] == "1.29.0" and len(minors) >= 2
    out, _ = locked
    for rel, docs in _jobs(out).items():
        for doc in docs:
            for version in minors:
                kv.validate(doc, version, strict=True), (rel, version)
    # strict: a field the API does not know is refused (the check can fail)
    _, job = next(iter(_jobs(out).values()))
    bad = copy.deepcopy(job)
    bad["spec"]["template"]["spec"]["containers"][0]["gpus"] = 8
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, minors[-1], strict=True)


def test_each_selection_picks_exactly_its_group(locked: tuple[Path, dict[str, Any]]) -> None:
    out, doc = locked
    plan = yaml.safe_load((out / "fleet.yaml").read_text(encoding="utf-8"))
    by_job = {g["job"]: set(g["nodes"]) for g in plan["groups"] if g["job"]}
    for rel, (_, job) in _jobs(out).items():
        pod = job["spec"]["template"]["spec"]
        admitted = {
            n["metadata"]["name"]
            for n in doc["items"]
            if k8s_selector.pod_admits(pod, n["metadata"]["name"], n["metadata"]["labels"])
        }
        assert admitted == by_job[rel], rel
        assert job["spec"]["completions"] == job["spec"]["parallelism"] == len(admitted)
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        for t in terms["nodeSelectorTerms"]:
            keys = {e["key"] for e in t["matchExpressions"]}
            assert "kubernetes.io/arch" in keys and "node-role.kubernetes.io/control-plane" in keys


def test_job_shape(locked: tuple[Path, dict[str, Any]]) -> None:
    out, _ = locked
    jobs = _jobs(out)
    configmap, job = jobs["linux-x86_64/verify-h100-80gb-hbm3-x8-580.95.05.yaml"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["backoffLimitPerIndex"] == 0
    assert spec["activeDeadlineSeconds"] > 0 and spec["ttlSecondsAfterFinished"] > 0
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    [c] = pod["containers"]
    assert c["image"] == "registry.example/ml/train:1"
    assert c["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    env = {e["name"]: e for e in c["env"]}
    assert env["GPURESOLVE_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["NCCL_NVLS_ENABLE"]["value"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"]["value"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"]["value"] == "1"
    script = c["command"][2]
    assert "gpuresolve-check.py /etc/gpuresolve/requirements.txt" in script
    assert "verify --json --benchmark --no-record --lock /etc/gpuresolve/requirements.txt" in script
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["lock"]["configMap"]["name"] == configmap["metadata"]["name"]
    lock = (out / "linux-x86_64" / "requirements.txt").read_text(encoding="utf-8")
    assert configmap["data"]["requirements.txt"] == lock
    plan = yaml.safe_load(configmap["data"]["fleet.yaml"])  # the group's entry, for --group
    [entry] = plan["groups"]
    assert entry["nodes_of"] == env["GPURESOLVE_GROUP"]["value"] == "h100-80gb-hbm3-x8-580.95.05"
    assert entry["expects"]["driver"] == "580.95.05" and entry["expects"]["gpus"][0]["count"] == 8
    assert '"group":"cluster/linux-x86_64"' in lock  # what verify --json reports as group
    tolerated = {(t["key"], t.get("effect")) for t in pod["tolerations"]}
    assert tolerated == {("nvidia.com/gpu", None), ("dedicated", "NoExecute")}
    mixed = jobs["linux-x86_64/verify-a100-sxm4-80gb-x8-mig-mixed-535.104.05.yaml"][1]
    [mc] = mixed["spec"]["template"]["spec"]["containers"]
    assert mc["resources"]["limits"] == {
        "nvidia.com/mig-1g.10gb": "4",
        "nvidia.com/mig-2g.20gb": "2",
    }
    assert "cp-01 (control-plane node)" not in (out / "linux-x86_64").joinpath(
        "verify-h100-80gb-hbm3-x8-580.95.05.yaml"
    ).read_text(encoding="utf-8")


def test_multi_arch_dockerfile(locked: tuple[Path, dict[str, Any]]) -> None:
    out, _ = locked
    text = (out / "Dockerfile").read_text(encoding="utf-8")
    assert "docker buildx build --platform linux/arm64,linux/amd64" in text
    assert "ARG TARGETARCH" in text
    assert "COPY linux-aarch64/requirements.txt /opt/gpuresolve/lock/arm64/requirements.txt" in text
    assert "COPY linux-x86_64/requirements.txt /opt/gpuresolve/lock/amd64/requirements.txt" in text
    assert '/opt/gpuresolve/venv/bin/python -m pip install --no-cache-dir "$GPURESOLVE"' in text
    assert (out / "gpuresolve-check.py").is_file() and (out / "gpuresolve-probe.py").is_file()
    assert "linux-x86_64-cpu" not in text


def test_lock_check_and_an_unchanged_rerun(
    locked: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = locked
    code, text, err = run_cli(capsys, "lock", str(out.parent / "cluster.yaml"), "--check")
    assert code == 0, text + err


def test_configmap_limit_is_refused() -> None:
    from resolver.fleet.kubernetes import Placement

    p = Placement((("kubernetes.io/arch", "amd64"),), (("nvidia.com/gpu", "1"),), (), False)
    with pytest.raises(UserError, match="ConfigMap"):
        manifests_k8s.render(
            group="g", set_group="s", nodes=["n1"], placement={"n1": p}, read_keys=[],
            arch="linux-x86_64", image="i:1", lock_name="requirements.txt",
            lock_text="x" * (1 << 20), header=[], everyone={"n1": p},
        )  # fmt: skip


def test_single_arm64_set_says_how_to_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    doc["items"] = [i for i in doc["items"] if i["metadata"]["name"] == "gh200-01"]
    (tmp_path / "nodes.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "cluster.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 0, err
    text = (tmp_path / "cluster" / "Dockerfile").read_text(encoding="utf-8")
    assert "docker buildx build --platform linux/arm64 -t registry.example/ml/train:1" in text
    assert "TARGETARCH" not in text
    assert (tmp_path / "cluster" / "verify-gh200-480gb-580.95.05.yaml").is_file()


# --- the selector matcher on the examples of Kubernetes' documentation --------------------------
# "Assigning Pods to Nodes" (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node):
# pods/pod-with-node-affinity.yaml requires topology.kubernetes.io/zone In (antarctica-east1,
# antarctica-west1); its NotIn example excludes antarctica-east1; the operator table defines Gt/Lt
# on integers. "Labels and Selectors" (kubernetes.io/docs/concepts/overview/working-with-objects/
# labels): `environment in (production, qa)`, `tier notin (frontend, backend)` (which also selects
# objects without a tier label), `partition` and `!partition`, and the AND of
# `partition, environment notin (qa)`.


def _pod(
    *terms: list[dict[str, Any]], node_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    }
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return spec


def _admits(pod: dict[str, Any], labels: dict[str, str], name: str = "n") -> bool:
    return k8s_selector.pod_admits(pod, name, labels)


ZONES = {"key": "topology.kubernetes.io/zone", "operator": "In",
         "values": ["antarctica-east1", "antarctica-west1"]}  # fmt: skip


def test_docs_in_and_not_in() -> None:
    pod = _pod([ZONES])
    assert _admits(pod, {"topology.kubernetes.io/zone": "antarctica-east1"})
    assert _admits(pod, {"topology.kubernetes.io/zone": "antarctica-west1"})
    assert not _admits(pod, {"topology.kubernetes.io/zone": "europe-west1"})
    assert not _admits(pod, {})
    not_east = _pod([{**ZONES, "operator": "NotIn", "values": ["antarctica-east1"]}])
    assert not _admits(not_east, {"topology.kubernetes.io/zone": "antarctica-east1"})
    assert _admits(not_east, {"topology.kubernetes.io/zone": "antarctica-west1"})
    assert _admits(not_east, {})  # NotIn also selects nodes without the label


def test_docs_set_based_requirements() -> None:
    env = {"key": "environment", "operator": "In", "values": ["production", "qa"]}
    tier = {"key": "tier", "operator": "NotIn", "values": ["frontend", "backend"]}
    part = {"key": "partition", "operator": "Exists"}
    no_part = {"key": "partition", "operator": "DoesNotExist"}
    assert _admits(_pod([env]), {"environment": "qa"})
    assert not _admits(_pod([env]), {"environment": "dev"})
    assert _admits(_pod([tier]), {"tier": "cache"}) and _admits(_pod([tier]), {})
    assert not _admits(_pod([tier]), {"tier": "backend"})
    assert _admits(_pod([part]), {"partition": ""}) and not _admits(_pod([part]), {})
    assert _admits(_pod([no_part]), {}) and not _admits(_pod([no_part]), {"partition": "a"})
    both = _pod([part, {"key": "environment", "operator": "NotIn", "values": ["qa"]}])
    assert _admits(both, {"partition": "customerA", "environment": "production"})
    assert not _admits(both, {"partition": "customerA", "environment": "qa"})
    assert not _admits(both, {"environment": "production"})  # ANDed


def test_docs_gt_lt_terms_ored_and_node_selector() -> None:
    gt = _pod([{"key": "cpu-count", "operator": "Gt", "values": ["4"]}])
    assert _admits(gt, {"cpu-count": "8"})
    assert not _admits(gt, {"cpu-count": "4"}) and not _admits(gt, {"cpu-count": "x"})
    assert not _admits(gt, {})
    lt = _pod([{"key": "cpu-count", "operator": "Lt", "values": ["4"]}])
    assert _admits(lt, {"cpu-count": "2"}) and not _admits(lt, {"cpu-count": "16"})
    with pytest.raises(ValueError):
        _admits(_pod([{"key": "k", "operator": "Gt", "values": ["1", "2"]}]), {"k": "3"})
    ored = _pod([ZONES], [{"key": "gpu", "operator": "Exists"}])
    assert _admits(ored, {"gpu": "true"}) and _admits(ored, ZONES_EAST)
    assert not _admits(ored, {"zone": "x"})
    assert not _admits(_pod([]), {"anything": "x"})  # an empty term matches no node
    both = _pod([ZONES], node_selector={"disktype": "ssd"})  # nodeSelector AND affinity
    assert not _admits(both, ZONES_EAST)
    assert _admits(both, {**ZONES_EAST, "disktype": "ssd"})
    name = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}  # fmt: skip
    by_name = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": name}}
    }
    assert _admits(by_name, {}, "gpu-1") and not _admits(by_name, {}, "gpu-2")


ZONES_EAST = {"topology.kubernetes.io/zone": "antarctica-east1"}


# --- `kubectl get nodes -o yaml` -------------------------------------------------------------


def test_yaml_node_list_reads_like_json(shipped: Any, tmp_path: Path) -> None:
    from resolver.fleet import kubernetes

    doc = mixed_nodes()
    (tmp_path / "n.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    from_json = kubernetes.read_node_list(tmp_path / "n.json", shipped)
    from_yaml = kubernetes.read_node_list(tmp_path / "n.yaml", shipped)
    assert from_yaml.machines == from_json.machines
    assert from_yaml.placement == from_json.placement and from_yaml.notes == from_json.notes
    one = _node(doc, "gh200-01")  # `kubectl get node NAME -o yaml`
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(one), encoding="utf-8")
    [(name, shape)] = kubernetes.read_node_list(tmp_path / "one.yaml", shipped).machines
    assert name == "gh200-01" and shape.platform.name == "linux-aarch64"


def test_yaml_node_list_cap_points_to_json(
    shipped: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from resolver.fleet import kubernetes

    (tmp_path / "n.yaml").write_text(yaml.safe_dump(mixed_nodes()), encoding="utf-8")
    monkeypatch.setattr(kubernetes, "MAX_NODE_LIST_YAML_BYTES", 1024)
    with pytest.raises(UserError, match="kubectl get nodes -o json"):
        kubernetes.read_node_list(tmp_path / "n.yaml", shipped)
    (tmp_path / "bad.yaml").write_text("items: [a, b\n", encoding="utf-8")
    monkeypatch.setattr(kubernetes, "MAX_NODE_LIST_YAML_BYTES", 1 << 20)
    with pytest.raises(UserError, match="invalid YAML"):
        kubernetes.read_node_list(tmp_path / "bad.yaml", shipped)


def test_arm64_machine_dockerfile_names_the_platform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, "lock", "--platform", "linux-aarch64", "--gpu", "NVIDIA GH200", "--driver",
        "580.95.05", "--python", "3.12", "--format", "dockerfile", "-o", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    text = (tmp_path / "Dockerfile").read_text(encoding="utf-8")
    assert "# build: docker buildx build --platform linux/arm64 -t my-image --load ." in text


def test_group_in_the_image_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`{group}` in `image:` names each set's image (here one set: the spec's name)."""
    (tmp_path / "nodes.json").write_bytes(FIXTURE.read_bytes())
    spec = SPEC.replace("image: registry.example/ml/train:1", "image: reg.example/ml:{group}")
    (tmp_path / "cluster.yaml").write_text(spec, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 0, err
    out = tmp_path / "cluster"
    jobs = sorted(out.glob("*/verify-*.yaml"))
    assert jobs
    for job in jobs:
        _, doc = yaml.safe_load_all(job.read_text(encoding="utf-8"))
        assert doc["spec"]["template"]["spec"]["containers"][0]["image"] == "reg.example/ml:cluster"
    assert "-t reg.example/ml:cluster" in (out / "Dockerfile").read_text(encoding="utf-8")
    bad = SPEC.replace("image: registry.example/ml/train:1", "image: reg.example/ml:{other}")
    (tmp_path / "cluster.yaml").write_text(bad, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 2 and "not an image reference" in err


def _mig_twins() -> dict[str, Any]:
    """Two MIG nodes whose profiles read alike once made a DNS label: 1g.6gb and 1g-6gb."""
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    twins = []
    for name, profile in (("mig-dot", "1g.6gb"), ("mig-dash", "1g-6gb")):
        node = _node(doc, "a100-mig-01")
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["nvidia.com/gpu.product"] = f"NVIDIA-A30-MIG-{profile}"
        twins.append(node)
    doc["items"] += twins
    return doc


def test_object_names_are_unique_and_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1g.6gb and 1g-6gb once gave two groups one Job and one ConfigMap (`kubectl apply` of the
    second replaced the first): a name that is not a DNS label as written carries the digest of
    the name as written; every name is a DNS-1123 label of at most 52 characters."""
    (tmp_path / "nodes.json").write_text(json.dumps(_mig_twins()), encoding="utf-8")
    (tmp_path / "cluster.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 0, err
    names: dict[str, list[str]] = {}
    for path in sorted((tmp_path / "cluster").glob("*/verify-*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            names.setdefault(doc["kind"], []).append(doc["metadata"]["name"])
    assert len(names["Job"]) == len(set(names["Job"])) == 7
    assert sorted(names["ConfigMap"]) == sorted(names["Job"])
    label = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    assert all(label.fullmatch(n) and len(n) <= 52 for n in names["Job"]), names
    dot, dash = (manifests_k8s.job_name(f"a30-mig-1g{c}6gb-570.195.03") for c in ".-")
    assert dot != dash and {dot, dash} <= set(names["Job"])
    long = manifests_k8s.job_name("x" * 300)
    assert len(long) == 52 and long != manifests_k8s.job_name("x" * 299)


def test_a_shared_object_name_is_an_error_when_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were two groups ever named alike, the lock says so and writes nothing."""
    monkeypatch.setattr(manifests_k8s, "job_name", lambda group: "gpuresolve-same")
    (tmp_path / "nodes.json").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "cluster.yaml").write_text(SPEC, encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "cluster.yaml"))
    assert code == 2
    assert "would get the same Kubernetes Job and ConfigMap name gpuresolve-same" in err
    assert not (tmp_path / "cluster").exists()
