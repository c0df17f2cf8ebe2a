"""A Kubernetes cluster as a team fleet: GFD labels in, one lock and a report out.

The fixture (tests/fixtures/kubernetes/nodes.json, see its README) is in the shape of real
`kubectl get nodes -o json` output; label variants are made from its nodes.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.platforms import BY_NAME
from resolver.core.versions import Driver
from resolver.fleet import jsonstream
from resolver.fleet.kubernetes import read_node_list
from resolver.solve.shapes import Shape, ShapeGpu, group

FIXTURE = Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"
SPEC = """\
name: cluster
python: "3.12"
packages:
  torch: ">=2.4"
targets:
{targets}
"""


def nodes() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return doc


def by_name(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in doc["items"] if i["metadata"]["name"] == name)


def write_list(path: Path, items: list[dict[str, Any]]) -> Path:
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path.write_text(json.dumps(doc, indent=4), encoding="utf-8")
    return path


def one(shipped: Catalog, tmp_path: Path, node: dict[str, Any]) -> Shape:
    machines = read_node_list(write_list(tmp_path / "n.json", [node]), shipped).machines
    assert len(machines) == 1
    return machines[0][1]


def labels(node: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = node["metadata"]["labels"]
    return result


def without(node: dict[str, Any], *prefixes: str) -> dict[str, Any]:
    node = copy.deepcopy(node)
    node["metadata"]["labels"] = {
        k: v for k, v in labels(node).items() if not k.startswith(prefixes)
    }
    return node


# --- the recorded-shape cluster, end to end ----------------------------------------------------


def test_cluster_locks_to_one_release_with_a_file_per_platform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.json").write_bytes(FIXTURE.read_bytes())
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC.format(targets="  - kubernetes: nodes.json"), encoding="utf-8")
    code, out, err = run_cli(capsys, "lock", str(spec))
    assert code == 0, err
    out_dir = tmp_path / "cluster"
    x86 = (out_dir / "linux-x86_64" / "requirements.txt").read_text()
    arm = (out_dir / "linux-aarch64" / "requirements.txt").read_text()
    torch_x86 = next(line for line in x86.splitlines() if line.startswith("torch=="))
    torch_arm = next(line for line in arm.splitlines() if line.startswith("torch=="))
    assert torch_x86.split("+")[0] == torch_arm.split("+")[0]  # one release for the cluster
    report = (out_dir / "report.md").read_text()
    assert "9 nodes in 6 groups" in report
    for row in (
        "| h100-80gb-hbm3-x8-580.95.05 | 3 |",
        "| a100-sxm4-80gb-x8-535.104.05 | 2 |",
        "| a100-sxm4-40gb-mig-1g.5gb-570.195.03 | 1 |",
        "| l4-shared-570.172.08 | 1 |",
        "| gh200-480gb-580.95.05 | 1 |",
        "| cpu | 1 |",
    ):
        assert row in report
    assert "h100-01, h100-02, h100-03" in report
    assert "MIG 1g.5gb x7" in report and "time-slicing x4" in report
    # The driver upgrade that unlocks the next release names the nodes holding it back.
    change = report.split("## What would change", 1)[1].split("##", 1)[0]
    assert "a100-sxm4-80gb-x8-535.104.05 (2, from 535.104.05)" in change
    assert "to driver ≥ 580" in change and "h100" not in change
    # CI: --check passes on what was written, and names a changed cluster.
    code, out, _ = run_cli(capsys, "lock", str(spec), "--check")
    assert code == 0 and "all current" in out
    doc = nodes()
    doc["items"].append(copy.deepcopy(by_name(doc, "h100-01")))
    doc["items"][-1]["metadata"]["name"] = "h100-04"
    (tmp_path / "nodes.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out, _ = run_cli(capsys, "lock", str(spec), "--check")
    assert code == 1 and "+| h100-80gb-hbm3-x8-580.95.05 | 4 |" in out


def test_prefix_and_selector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes.json").write_bytes(FIXTURE.read_bytes())
    spec = tmp_path / "cluster.yaml"
    targets = (
        "  - name: gpu\n    kubernetes: nodes.json\n"
        "    selector: {nvidia.com/gpu.present: true, kubernetes.io/arch: amd64}"
    )
    spec.write_text(SPEC.format(targets=targets), encoding="utf-8")
    code, _out, err = run_cli(capsys, "lock", str(spec))
    assert code == 0, err
    report = (tmp_path / "cluster" / "report.md").read_text()
    assert "| gpu-h100-80gb-hbm3-x8-580.95.05 | 3 |" in report
    assert "gh200" not in report  # arm64: left out by the selector
    assert "cp-01" not in report  # no gpu.present label
    assert "a100-01" not in report  # old GFD, no gpu.present label (the operator sets it)


def test_bad_node_is_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = nodes()
    labels(by_name(doc, "h100-02"))["nvidia.com/gpu.compute.major"] = "nine"
    write_list(tmp_path / "nodes.json", doc["items"])
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC.format(targets="  - kubernetes: nodes.json"), encoding="utf-8")
    code, _out, err = run_cli(capsys, "lock", str(spec))
    assert code == 2
    assert err.count("\n") == 1
    assert "node h100-02: nvidia.com/gpu.compute.major: unexpected value 'nine'" in err
    assert "Traceback" not in err
    assert not (tmp_path / "cluster").exists()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("  - kubernetes: nodes.json\n    count: 3", "count: not with `kubernetes:`"),
        ("  - kubernetes: nodes.json\n    driver: '580.95.05'", "driver: not with `kubernetes:`"),
        ("  - kubernetes: missing.json", "no such file: missing.json"),
        ("  - kubernetes: nodes.json\n    selector: {team: [a]}", "selector.team: expected"),
        ("  - kubernetes: nodes.json\n    selector: {team: ml}", "none of its 9 nodes matches"),
        ("  - driver: '580.95.05'\n    selector: {a: b}", "selector: only with `kubernetes:`"),
        ("  - kubernetes: nodes.json\n  - kubernetes: nodes.json", "is used twice"),
    ],
)
def test_spec_entry_errors(
    entry: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nodes.json").write_bytes(FIXTURE.read_bytes())
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC.format(targets=entry), encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 2
    assert message in err, err


# --- each label variant ----------------------------------------------------------------------


def test_new_driver_labels(shipped: Catalog, tmp_path: Path) -> None:
    shape = one(shipped, tmp_path, by_name(nodes(), "h100-01"))
    assert shape == Shape(
        BY_NAME["linux-x86_64"],
        Driver.parse("580.95.05"),
        gpus=(ShapeGpu("NVIDIA-H100-80GB-HBM3", (9, 0), 8),),
        nvidia=True,
    )


def test_only_the_deprecated_driver_labels(shipped: Catalog, tmp_path: Path) -> None:
    node = by_name(nodes(), "a100-01")
    assert "nvidia.com/cuda.driver-version.full" not in labels(node)
    assert str(one(shipped, tmp_path, node).driver) == "535.104.05"


def test_old_driver_labels_with_an_empty_revision(shipped: Catalog, tmp_path: Path) -> None:
    node = without(by_name(nodes(), "a100-01"), "nvidia.com/cuda.driver")
    labels(node).update(
        {
            "nvidia.com/cuda.driver.major": "455",
            "nvidia.com/cuda.driver.minor": "06",
            "nvidia.com/cuda.driver.rev": "",
        }
    )
    assert str(one(shipped, tmp_path, node).driver) == "455.06"


def test_split_new_driver_labels_and_an_empty_revision(shipped: Catalog, tmp_path: Path) -> None:
    node = without(by_name(nodes(), "h100-01"), "nvidia.com/cuda.driver")
    labels(node).update(
        {
            "nvidia.com/cuda.driver-version.major": "550",
            "nvidia.com/cuda.driver-version.minor": "120",
            "nvidia.com/cuda.driver-version.revision": "",
        }
    )
    assert str(one(shipped, tmp_path, node).driver) == "550.120"


def test_mig_single_strips_the_profile(shipped: Catalog, tmp_path: Path) -> None:
    shape = one(shipped, tmp_path, by_name(nodes(), "a100-mig-01"))
    assert shape.gpus == (ShapeGpu("NVIDIA-A100-SXM4-40GB", (8, 0), None),)  # 7 = MIG devices
    assert shape.mig == "1g.5gb x7"


def test_mig_mixed_counts_each_profile(shipped: Catalog, tmp_path: Path) -> None:
    node = copy.deepcopy(by_name(nodes(), "h100-01"))
    labels(node).update(
        {
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig-1g.10gb.count": "14",
            "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "nvidia.com/mig-3g.40gb.count": "4",
            "nvidia.com/mig-7g.80gb.count": "0",
        }
    )
    shape = one(shipped, tmp_path, node)
    assert shape.mig == "mixed: 1g.10gb x14, 3g.40gb x4"
    assert shape.gpus[0].count == 8  # "mixed": the count stays the physical GPUs
    assert shape.slug() == "h100-80gb-hbm3-x8-mig-mixed-580.95.05"


def test_mig_invalid(shipped: Catalog, tmp_path: Path) -> None:
    node = copy.deepcopy(by_name(nodes(), "a100-mig-01"))
    labels(node)["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    labels(node)["nvidia.com/gpu.count"] = "0"
    shape = one(shipped, tmp_path, node)
    assert shape.mig == "invalid" and shape.gpus[0].name == "NVIDIA-A100-SXM4-40GB"


def test_time_slicing_suffix(shipped: Catalog, tmp_path: Path) -> None:
    shape = one(shipped, tmp_path, by_name(nodes(), "l4-shared-01"))
    assert shape.gpus == (ShapeGpu("NVIDIA-L4", (8, 9), 1),)
    assert shape.sharing == "time-slicing x4"


def test_mps_sharing_and_an_old_gfd_without_the_strategy_label(
    shipped: Catalog, tmp_path: Path
) -> None:
    node = copy.deepcopy(by_name(nodes(), "l4-shared-01"))
    labels(node)["nvidia.com/gpu.sharing-strategy"] = "mps"
    assert one(shipped, tmp_path, node).sharing == "mps x4"
    node = without(node, "nvidia.com/gpu.sharing-strategy")
    assert one(shipped, tmp_path, node).sharing == "shared x4"


def test_arm64_and_platform_from_node_info(shipped: Catalog, tmp_path: Path) -> None:
    gh200 = by_name(nodes(), "gh200-01")
    assert one(shipped, tmp_path, gh200).platform.name == "linux-aarch64"
    bare = without(gh200, "kubernetes.io/", "beta.kubernetes.io/")
    assert one(shipped, tmp_path, bare).platform.name == "linux-aarch64"  # status.nodeInfo


def test_windows_node_and_unsupported_arch(shipped: Catalog, tmp_path: Path) -> None:
    node = copy.deepcopy(by_name(nodes(), "cp-01"))
    labels(node).update({"kubernetes.io/os": "windows", "beta.kubernetes.io/os": "windows"})
    assert one(shipped, tmp_path, node) == Shape(BY_NAME["windows-x86_64"])
    labels(node).update({"kubernetes.io/os": "linux", "kubernetes.io/arch": "ppc64le"})
    with pytest.raises(UserError, match=r"node cp-01: kubernetes.io/arch: 'ppc64le'"):
        one(shipped, tmp_path, node)


def test_cpu_node_and_an_nvidia_device_without_gfd(shipped: Catalog, tmp_path: Path) -> None:
    assert one(shipped, tmp_path, by_name(nodes(), "cp-01")) == Shape(BY_NAME["linux-x86_64"])
    bare = without(by_name(nodes(), "h100-01"), "nvidia.com/")
    listed = read_node_list(write_list(tmp_path / "n.json", [bare]), shipped)
    assert listed.machines[0][1] == Shape(BY_NAME["linux-x86_64"])
    assert "no GPU Feature Discovery labels" in listed.notes["h100-01"][0]


def test_gpu_present_without_gfd_labels_is_an_error(shipped: Catalog, tmp_path: Path) -> None:
    node = without(by_name(nodes(), "h100-01"), "nvidia.com/gpu.", "nvidia.com/cuda")
    labels(node)["nvidia.com/gpu.present"] = "true"
    with pytest.raises(UserError, match=r"node h100-01: nvidia.com/gpu.product: missing"):
        one(shipped, tmp_path, node)


def test_compute_labels_missing_uses_the_model(shipped: Catalog, tmp_path: Path) -> None:
    node = without(by_name(nodes(), "a100-01"), "nvidia.com/gpu.compute")
    listed = read_node_list(write_list(tmp_path / "n.json", [node]), shipped)
    assert listed.machines[0][1].gpus[0].cc == (8, 0)
    assert "compute capability from the model name" in listed.notes["a100-01"][0]
    labels(node)["nvidia.com/gpu.product"] = "A100-SXM4-40GB"  # an older driver's NVML name
    assert one(shipped, tmp_path, node).gpus[0].cc == (8, 0)
    labels(node)["nvidia.com/gpu.product"] = "NVIDIA-Quantum-Accelerator-9000"
    with pytest.raises(UserError, match=r"node a100-01: nvidia.com/gpu.product: .* not a GPU"):
        one(shipped, tmp_path, node)
    # With compute labels, an unknown product is fine: the labels are authoritative.
    node = copy.deepcopy(by_name(nodes(), "h100-01"))
    labels(node)["nvidia.com/gpu.product"] = "NVIDIA-Quantum-Accelerator-9000"
    assert one(shipped, tmp_path, node).gpus[0].cc == (9, 0)


def test_labels_contradicting_the_database_are_noted(shipped: Catalog, tmp_path: Path) -> None:
    node = copy.deepcopy(by_name(nodes(), "a100-01"))
    labels(node)["nvidia.com/gpu.compute.minor"] = "6"
    listed = read_node_list(write_list(tmp_path / "n.json", [node]), shipped)
    assert listed.machines[0][1].gpus[0].cc == (8, 6)
    assert "the label is used" in listed.notes["a100-01"][0]


@pytest.mark.parametrize(
    ("label", "value", "message"),
    [
        ("nvidia.com/gpu.count", "-1", "unexpected value '-1'"),
        ("nvidia.com/gpu.count", "eight", "unexpected value 'eight'"),
        ("nvidia.com/cuda.driver-version.full", "latest", "not a driver version"),
        ("nvidia.com/cuda.driver-version.full", "580.95.05\n", "control or bidi character U+000A"),
        ("nvidia.com/gpu.compute.minor", "10", "not a compute capability"),
        ("nvidia.com/gpu.compute.major", "0", "not a compute capability"),
        ("nvidia.com/gpu.product", "H100 <script>", "unexpected value"),
        ("nvidia.com/gpu.present", "yes", "expected true or false"),
        ("nvidia.com/gpu.replicas", "4x", "unexpected value"),
        ("nvidia.com/mig.strategy", "Single!", "unexpected value"),
        ("nvidia.com/gpu.count", 8, "expected a string"),
    ],
)
def test_nonsense_label_values(
    label: str, value: object, message: str, shipped: Catalog, tmp_path: Path
) -> None:
    node = copy.deepcopy(by_name(nodes(), "h100-01"))
    labels(node)[label] = value  # type: ignore[assignment]
    with pytest.raises(UserError) as exc:
        one(shipped, tmp_path, node)
    assert f"node h100-01: {label}: " in str(exc.value) and message in str(exc.value)


def test_a_driver_label_is_required_on_a_gpu_node(shipped: Catalog, tmp_path: Path) -> None:
    node = without(by_name(nodes(), "h100-01"), "nvidia.com/cuda.driver")
    with pytest.raises(UserError, match=r"node h100-01: nvidia.com/cuda.driver-version.full"):
        one(shipped, tmp_path, node)


# --- the document ----------------------------------------------------------------------------


def test_one_node_document(shipped: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(by_name(nodes(), "gh200-01")), encoding="utf-8")
    assert read_node_list(path, shipped).machines[0][0] == "gh200-01"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"apiVersion": "v1", "items": [], "kind": "List"}', "the node list is empty"),
        ('{"apiVersion": "v1", "kind": "Pod"}', "not a node list (kind 'Pod')"),
        ('[{"kind": "Node"}]', "expected an object"),
        ('{"items": [{"kind": "Pod", "metadata": {"name": "p"}}], "kind": "List"}', "not a Node"),
        ('{"items": [{"metadata": {"name": "Bad_Name"}}], "kind": "List"}', "not a node name"),
        ('{"items": [1], "kind": "List"}', "items[0]: expected a Node object"),
        (
            '{"items": [{"metadata": {"name": "a", "labels": {"kubernetes.io/arch": "amd64", '
            '"kubernetes.io/os": "linux"}}} {}], "kind": "List"}',
            "line 1 column 112",
        ),
        ('{"items": [], "kind": "List"} trailing', "extra data"),
        ('{"items": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
    ],
)
def test_bad_documents(text: str, message: str, shipped: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(message)):
        read_node_list(path, shipped)


def test_twice_listed_node(shipped: Catalog, tmp_path: Path) -> None:
    h100 = by_name(nodes(), "h100-01")
    with pytest.raises(UserError, match="node h100-01 is listed twice"):
        read_node_list(write_list(tmp_path / "n.json", [h100, h100]), shipped)


def test_nodes_of_one_kind_keep_their_own_placement(shipped: Catalog, tmp_path: Path) -> None:
    """Placements are cached per kind of node: a node differing only in what a Job needs (its
    GPU count, a taint, a control-plane label, even a null one) still gets its own, the one it
    gets when read alone."""
    base = by_name(nodes(), "h100-01")
    variants = [copy.deepcopy(base) for _ in range(6)]  # the last one as the first
    variants[1]["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    variants[2]["spec"]["taints"] = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    labels(variants[3])["node-role.kubernetes.io/control-plane"] = ""
    labels(variants[4])["node-role.kubernetes.io/control-plane"] = None  # type: ignore[assignment]
    for n, node in enumerate(variants):
        node["metadata"]["name"] = f"node-{n}"
    together = read_node_list(write_list(tmp_path / "all.json", variants), shipped)
    for node in variants:
        name = node["metadata"]["name"]
        alone = read_node_list(write_list(tmp_path / f"{name}.json", [node]), shipped)
        assert together.placement[name] == alone.placement[name]
    gpus = [together.placement[f"node-{n}"].allocatable for n in range(2)]
    assert gpus == [(("nvidia.com/gpu", "8"),), (("nvidia.com/gpu", "4"),)]
    assert [together.placement[f"node-{n}"].control_plane for n in (0, 3, 4, 5)] == [
        False,
        True,
        True,
        False,
    ]


def test_a_null_label_is_not_an_absent_one(shipped: Catalog, tmp_path: Path) -> None:
    """A node whose arch label is null is refused, even after one of its kind without the
    label (read from status.nodeInfo): the kinds worked out once tell the two apart."""
    first = by_name(nodes(), "h100-01")
    for key in ("kubernetes.io/arch", "beta.kubernetes.io/arch"):
        del labels(first)[key]
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "h100-null-arch"
    labels(second)["kubernetes.io/arch"] = None  # type: ignore[assignment]
    assert one(shipped, tmp_path, first).platform.arch == "x86_64"
    with pytest.raises(UserError, match=r"node h100-null-arch: kubernetes\.io/arch: missing"):
        read_node_list(write_list(tmp_path / "n.json", [first, second]), shipped)


@pytest.mark.parametrize("compact", [False, True])
def test_many_nodes_read_as_each_alone(
    compact: bool, shipped: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list of many nodes of few kinds (as bench/cluster_lock.py writes it, in either layout,
    with images) reads each node as its kind reads alone: the kinds worked out once, the
    window moved many times, change nothing."""
    kinds = nodes()["items"]
    alone = {}
    for node in kinds:
        one_list = read_node_list(write_list(tmp_path / "one.json", [node]), shipped)
        name = node["metadata"]["name"]
        alone[name] = (one_list.machines[0][1], one_list.notes.get(name), one_list.placement[name])
    items = []
    for n in range(600):
        node = copy.deepcopy(kinds[n % len(kinds)])
        node["metadata"]["name"] = f"{node['metadata']['name']}-{n:04d}"
        items.append(node)
    doc = {"apiVersion": "v1", "items": items, "kind": "List"}
    path = tmp_path / "many.json"
    path.write_text(
        json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=4)
    )
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 5000)  # a node is several reads
    read = read_node_list(path, shipped)
    assert read.total == len(items) == len(read.machines)
    for name, shape in read.machines:
        kind = name.rsplit("-", 1)[0]
        assert (shape, read.notes.get(name), read.placement[name]) == alone[kind]


def test_size_cap_and_encoding(shipped: Catalog, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cap on node lists"):
        read_node_list(FIXTURE, shipped, max_bytes=50_000)
    path = tmp_path / "n.json"
    path.write_bytes(b'{"items": [], "kind": "List", "x": "\xff"}')
    with pytest.raises(UserError, match="not UTF-8"):
        read_node_list(path, shipped)


@pytest.mark.parametrize("chunk", [1000, 1 << 20])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_error_lines_count_the_dropped_images(
    chunk: int, bom: str, shipped: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line numbers in messages are the file's, though `status.images` never reaches the parser."""
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)  # small: the window moves many times
    text = bom + FIXTURE.read_text(encoding="utf-8")
    doc = nodes()
    last = doc["items"][-1]["metadata"]["name"]
    broken = text.replace(f'"name": "{last}"', f'"name": "{last}",,')
    path = tmp_path / "n.json"
    path.write_text(broken, encoding="utf-8")
    line = next(i for i, s in enumerate(broken.splitlines(), 1) if ",," in s)
    column = broken.splitlines()[line - 1].index(",,") + 2
    with pytest.raises(UserError, match=f"line {line} column {column}: not JSON"):
        read_node_list(path, shipped)


def test_groups_are_named_uniquely_and_sorted() -> None:
    a = Shape(
        BY_NAME["linux-x86_64"],
        Driver.parse("580.95.05"),
        gpus=(ShapeGpu("NVIDIA-L4", (8, 9), 1),),
        nvidia=True,
    )
    b = Shape(
        BY_NAME["windows-x86_64"],
        Driver.parse("580.95.05"),
        "windows",
        (ShapeGpu("NVIDIA-L4", (8, 9), 1),),
        True,
    )
    groups = group(
        [("n-10", a), ("n-2", a), ("w-1", b), ("c", Shape(BY_NAME["linux-x86_64"]))], source="x"
    )
    assert [(g.name, g.nodes) for g in groups] == [
        ("cpu", ("c",)),
        ("l4-580.95.05-linux-x86_64", ("n-2", "n-10")),
        ("l4-580.95.05-windows-x86_64", ("w-1",)),
    ]


# --- a folder of `detect --json` files -----------------------------------------------------------

HOSTS = Path(__file__).parent.parent / "environments" / "hosts"
H100 = Path(__file__).parent / "fixtures" / "host" / "h100_driver580" / "detect.json"


def test_detect_folder_groups_machines_by_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for name in ("laptop-1", "laptop-2", "laptop-3"):
        (fleet / f"{name}.json").write_bytes((HOSTS / "pascal-laptop.json").read_bytes())
    (fleet / "dgx-1.json").write_bytes(H100.read_bytes())
    (fleet / "notes.txt").write_text("not a detect file")
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.format(targets="  - name: lab\n    detect: fleet/"), encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec), "--split")
    assert code == 0, err
    report = (tmp_path / "cluster" / "report.md").read_text()
    assert "| lab-geforce-gtx-1080-ti-560.35.03 | 3 |" in report
    assert "laptop-1, laptop-2, laptop-3" in report
    assert "4 machines in 2 groups of identical hardware and driver, from `fleet/`" in report
    assert "| lab-h100-80gb-hbm3-580.159.04 | 1 |" in report


def test_detect_folder_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "fleet").mkdir()
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.format(targets="  - detect: fleet/"), encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 2 and "no *.json files" in err
    (tmp_path / "fleet" / "bad.json").write_text('{"platform": "linux-x86_64"}')
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 2 and "bad.json: not a `gpuresolve detect --json` file" in err


# --- what would change ---------------------------------------------------------------------------


def test_what_would_change_names_a_blocker_no_driver_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Pascal card: newer releases lack its kernels, so no driver upgrade unlocks them."""
    doc = nodes()
    pascal = copy.deepcopy(by_name(doc, "l4-shared-01"))
    pascal["metadata"]["name"] = "p40-01"
    labels(pascal).update(
        {
            "nvidia.com/gpu.product": "Tesla-P40",
            "nvidia.com/gpu.compute.major": "6",
            "nvidia.com/gpu.compute.minor": "1",
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
        }
    )
    write_list(tmp_path / "nodes.json", [by_name(doc, "h100-01"), pascal])
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC.format(targets="  - kubernetes: nodes.json"), encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 0, err
    change = (tmp_path / "cluster" / "report.md").read_text().split("## What would change")[1]
    assert "no driver upgrade is enough — tesla-p40-570.172.08: no kernels for sm_61" in change
