"""A Kubernetes cluster as a fleet: `kubectl get nodes -o json`, read through GPU Feature Discovery.

NVIDIA's GPU Feature Discovery (GFD; part of the GPU Operator and of the k8s-device-plugin) labels
each GPU node. What is read, and why (label names and formats from NVIDIA/k8s-device-plugin
``internal/lm``: ``nvml.go``, ``resource.go``, ``mig-strategy.go``):

- platform: ``kubernetes.io/arch`` and ``kubernetes.io/os`` (else ``status.nodeInfo``);
- GPU model: ``nvidia.com/gpu.product``, the NVML name with spaces written as ``-``; MIG appends
  ``-MIG-<profile>`` (``-MIG-INVALID`` for a rejected layout), sharing appends ``-SHARED``; both
  are stripped before the database lookup and reported;
- compute capability: ``nvidia.com/gpu.compute.major`` / ``.minor`` (authoritative; else the
  model's, from the database);
- GPU count: ``nvidia.com/gpu.count`` (under the MIG "single" strategy: MIG devices, not GPUs);
- driver: ``nvidia.com/cuda.driver-version.full``, else ``cuda.driver-version.major/minor/
  revision``, else the deprecated ``cuda.driver.major/minor/rev`` (every GFD release writes them);
- MIG: ``nvidia.com/mig.strategy`` and, for "mixed", ``nvidia.com/mig-<profile>.count``;
- sharing: ``nvidia.com/gpu.sharing-strategy`` and ``nvidia.com/gpu.replicas``.

A node without NVIDIA labels is a CPU machine. Any label read that holds nonsense is one error
naming the node and the label; nothing is written then.

What a node's verification Job asks for (``Placement.requests``) follows the NVIDIA device
plugin's README (NVIDIA/k8s-device-plugin ``README.md``, "Shared Access to GPUs"; labels from
``internal/lm/resource.go``, which writes ``<resource>.product``, ``.count``, ``.replicas`` and
``.sharing-strategy`` for ``nvidia.com/gpu`` and, under MIG "mixed", for each
``nvidia.com/mig-<profile>``):

- no sharing (``replicas`` 1, ``sharing-strategy`` ``none``), MIG "single" (``nvidia.com/gpu``
  counts MIG devices) and "mixed" (one resource per profile): every device the node lists as
  allocatable, so verify sees all of them;
- time-slicing and MPS (``replicas`` > 1, ``sharing-strategy`` ``time-slicing`` / ``mps``, the
  product with ``-SHARED``; ``renameByDefault: true`` advertises ``<resource>.shared`` instead
  and leaves ``-SHARED`` off): ONE replica of each shared resource. The README: a shared
  request of more than one "does not imply that you will get guaranteed access to a
  proportional amount of compute power", and ``failRequestsGreaterThanOne: true`` (always on
  for MPS: ``api/config/v1/config.go``) fails such a pod with ``UnexpectedAdmissionError``.

A node that is cordoned (``spec.unschedulable: true``) or NotReady (its ``Ready`` condition is
not ``"True"``) is locked with its group but left out of the Jobs (``Placement.unavailable``,
listed under ``left_out`` in ``fleet.yaml``), unless the entry says ``include_unavailable``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import repeat
from pathlib import Path
from typing import Any, TypeVar

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped, unsafe_char
from resolver.core.errors import shown as shown_value
from resolver.core.platforms import Platform, by_kubernetes
from resolver.core.versions import Driver
from resolver.fleet.jsonstream import JsonStream
from resolver.io.bounded import open_regular
from resolver.solve.shapes import Shape, ShapeGpu

# `kubectl get nodes -o json` is tens of KB a node (status.images): 2 GiB is ~50,000 nodes.
MAX_NODE_LIST_BYTES = 2 << 30
PROGRESS_BYTES = 32 << 20  # a node list this large takes a second or more to read
# `kubectl get nodes -o yaml` is parsed whole (about 20x its size in memory, 1 MB/s): a cap of
# 64 MiB (~2,000 nodes with their images), and -o json, read as a stream, past it.
MAX_NODE_LIST_YAML_BYTES = 64 << 20
MAX_NODE_LIST_YAML_NODES = 8_000_000

ARCH = ("kubernetes.io/arch", "beta.kubernetes.io/arch")
OS = ("kubernetes.io/os", "beta.kubernetes.io/os")
PRESENT = "nvidia.com/gpu.present"
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
CC_MAJOR = "nvidia.com/gpu.compute.major"
CC_MINOR = "nvidia.com/gpu.compute.minor"
DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_PARTS = (
    (
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)
MIG_STRATEGY = "nvidia.com/mig.strategy"
SHARING = "nvidia.com/gpu.sharing-strategy"
REPLICAS = "nvidia.com/gpu.replicas"
NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"  # Node Feature Discovery

_READ = (  # every label a node's shape depends on (with MIG "mixed": also its profiles)
    *ARCH,
    *OS,
    PRESENT,
    PRODUCT,
    COUNT,
    CC_MAJOR,
    CC_MINOR,
    DRIVER_FULL,
    *DRIVER_PARTS[0],
    *DRIVER_PARTS[1],
    MIG_STRATEGY,
    SHARING,
    REPLICAS,
    NVIDIA_PCI,
)

_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a DNS subdomain
_PRODUCT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")  # GFD's sanitised name, <= 63
_MIG_SUFFIX = re.compile(r"-MIG-([A-Za-z0-9._-]{1,40})$")
_DRIVER_PART = re.compile(r"^[0-9]{1,4}$")
_SMALL_INT = re.compile(r"^[0-9]{1,6}$")
_WORD = re.compile(r"^[a-z][a-z-]{0,31}$")
_SHARING_VALUE = re.compile(r"^(|[a-z][a-z-]{0,31})$")
_REVISION = re.compile(r"^[0-9]{0,4}$")
_MIG_COUNT_KEY = re.compile(r"^nvidia\.com/mig-([0-9a-z.+_-]{1,40})\.count$")
# A device plugin resource: nvidia.com/gpu or a MIG profile, ".shared" where renamed
_NVIDIA_RESOURCE = re.compile(r"^(nvidia\.com/(?:gpu|mig-[0-9a-z.+_-]{1,40}?))(\.shared)?$")
# GFD's labels of a MIG "mixed" profile: <resource>.count, .replicas, .sharing-strategy
_MIG_LABEL_KEY = re.compile(
    r"^nvidia\.com/mig-[0-9a-z.+_-]{1,40}?\.(count|replicas|sharing-strategy|product)$"
)
SHARED_STRATEGIES = ("time-slicing", "mps")
_TAINT_KEY = re.compile(  # a label key: an optional DNS-subdomain prefix, a name of <= 63
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MISSING = object()
_ABSENT = repeat(_MISSING)  # labels.get's default: an absent label told apart from a null one


CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
CONTROL_PLANE_NOTE = "a control-plane node: left out of the verification Jobs (fleet.yaml)"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # what a cordon adds (NoSchedule)
NO_DEVICE = (
    "no NVIDIA GPU allocatable (status.allocatable: is the device plugin running, "
    "the MIG layout valid?)"
)
MAX_REASON = 200  # characters of a node's condition reason and message kept for fleet.yaml


@dataclass(frozen=True)
class Placement:
    """What a verification Job needs of a node (``fleet/manifests_k8s.py``): the labels its shape
    was read from, its NVIDIA resources and what a Job asks of them, its taints, whether it is
    a control-plane node, and why it cannot run a Job now (``state``: cordoned, NotReady)."""

    labels: tuple[tuple[str, str], ...]
    allocatable: tuple[tuple[str, str], ...]  # nvidia.com/gpu, nvidia.com/mig-1g.5gb, ...
    taints: tuple[tuple[str, str], ...]  # (key, effect)
    control_plane: bool
    requests: tuple[tuple[str, str], ...] = ()  # what its Job asks for (see the module's doc)
    state: str | None = None  # "Kubernetes node cordoned (spec.unschedulable)", ...
    cordoned: bool = False
    include_unavailable: bool = False  # the spec entry's include_unavailable

    @property
    def unavailable(self) -> str | None:
        """Why the node is left out of the Jobs (None: it gets one), as `fleet.yaml` says it."""
        return None if self.include_unavailable else self.state


@dataclass(frozen=True)
class NodeList:
    """The nodes of one `kubernetes:` entry that pass its selector, as (name, shape)."""

    machines: list[tuple[str, Shape]]
    notes: dict[str, tuple[str, ...]]  # node -> what the report should say about it
    total: int  # nodes in the file, before the selector
    placement: dict[str, Placement] = field(default_factory=dict)


def read_node_list(
    path: Path,
    catalog: Catalog,
    selector: Mapping[str, str] | None = None,
    shown: str | None = None,
    max_bytes: int = MAX_NODE_LIST_BYTES,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    include_unavailable: bool = False,
) -> NodeList:
    """Read `kubectl get nodes -o json` (a List of Nodes, or one Node) into node shapes.

    ``progress(label, total)`` is told of the bytes read, for a list large enough to take a
    few seconds (``PROGRESS_BYTES``); ``include_unavailable`` keeps cordoned and NotReady
    nodes in the Jobs."""
    shown = shown or str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise UserError(
                f"{shown}: {size >> 20} MiB is over the {max_bytes >> 20} MiB cap on node lists"
            )
        fh = open_regular(path, what="`kubectl get nodes -o json` output")
    except FileNotFoundError:
        raise UserError(
            f"{shown}: no such file (expected `kubectl get nodes -o json` output)"
        ) from None
    except OSError as exc:
        raise UserError(f"{shown}: cannot read: {exc.strerror}") from None
    reader = _Reader(catalog, selector or {}, shown, include_unavailable)
    with fh:
        head = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
        fh.seek(0)
        if head and not head.startswith((b"{", b"[")):  # `kubectl get nodes -o yaml`
            fh.close()
            return _finish(_yaml_nodes(path, shown, size, reader), reader, selector, shown)
    fh = open_regular(path, what="`kubectl get nodes -o json` output")
    try:
        with fh:
            stream = JsonStream(fh, shown, max_bytes)
            top: dict[str, Any] = {}
            tick = (
                progress(f"reading {shown}", size) if progress and size >= PROGRESS_BYTES else None
            )
            done = 0
            for key in stream.object_keys():
                if key == "items":
                    for item in stream.array_items():
                        reader.add(item)
                        if tick is not None:
                            now = fh.tell()
                            tick(now - done)
                            done = now
                    top["items"] = True
                else:
                    top[key] = stream.value()
            stream.finish()
    except UnicodeDecodeError as exc:
        raise UserError(f"{shown}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise UserError(f"{shown}: cannot read: {exc.strerror}") from None
    return _finish(top, reader, selector, shown)


def _yaml_nodes(path: Path, shown: str, size: int, reader: _Reader) -> dict[str, Any]:
    """`kubectl get nodes -o yaml`, read whole with the bounded YAML reader: YAML has no
    streaming reader here and its parse is slow and large, hence ``MAX_NODE_LIST_YAML_BYTES``
    (a few hundred nodes with their images); past it, `-o json` (read as a stream) is the way."""
    from resolver.io.bounded import load_yaml, read_text

    if size > MAX_NODE_LIST_YAML_BYTES:
        raise UserError(
            f"{shown}: {size >> 20} MiB of YAML is over the {MAX_NODE_LIST_YAML_BYTES >> 20} MiB "
            "cap on YAML node lists: write it with `kubectl get nodes -o json` (read as a stream)"
        )
    text = read_text(path, limit=MAX_NODE_LIST_YAML_BYTES, what="`kubectl get nodes -o yaml`")
    doc = load_yaml(text, shown, max_nodes=MAX_NODE_LIST_YAML_NODES)
    if not isinstance(doc, dict):
        raise UserError(f"{shown}: not a node list; write it with `kubectl get nodes -o json`")
    items = doc.get("items")
    if isinstance(items, list):
        _check_kind(doc, shown)  # before any item is read: a kubeconfig's are not to be quoted
        for item in items:
            reader.add(item)
    return doc


def _check_kind(top: dict[str, Any], shown: str) -> None:
    kind = top.get("kind")
    if kind not in ("List", "NodeList") or "items" not in top:
        what = f"kind {shown_value(kind)}" if isinstance(kind, str) else "no kind"
        raise UserError(
            f"{shown}: not a node list ({what}); write it with `kubectl get nodes -o json`"
        )


def _finish(
    top: dict[str, Any], reader: _Reader, selector: Mapping[str, str] | None, shown: str
) -> NodeList:
    kind = top.get("kind")
    if kind == "Node" and "items" not in top:  # `kubectl get node NAME -o json`
        reader.add(top)
    else:
        _check_kind(top, shown)
    if reader.total == 0:
        raise UserError(f"{shown}: the node list is empty")
    if not reader.machines:
        wanted = ", ".join(f"{k}={v}" for k, v in sorted((selector or {}).items()))
        raise UserError(f"{shown}: none of its {reader.total} nodes matches the selector {wanted}")
    return NodeList(reader.machines, reader.notes, reader.total, reader.placement)


_T = TypeVar("_T")


def _memo(cache: dict[Any, _T], key: Any, make: Callable[[], _T]) -> _T:
    """``make()`` once per ``key``; none kept for None or a key holding a list (make() says)."""
    if key is None:
        return make()
    try:
        known = cache.get(key)
    except TypeError:
        return make()
    if known is None:
        known = cache[key] = make()
    return known


class _Reader:
    """Turns each node into (name, shape) as the stream hands it over; keeps nothing else."""

    def __init__(
        self,
        catalog: Catalog,
        selector: Mapping[str, str],
        shown: str,
        include_unavailable: bool = False,
    ) -> None:
        self.catalog = catalog
        self.include_unavailable = include_unavailable
        self.selector = selector
        self.shown = shown
        self.machines: list[tuple[str, Shape]] = []
        self.notes: dict[str, tuple[str, ...]] = {}
        self.names: set[str] = set()
        self.total = 0
        self.placement: dict[str, Placement] = {}
        self._placements: dict[Any, Placement] = {}
        self._kinds: dict[tuple[Any, ...], tuple[Shape, tuple[str, ...], Placement]] = {}
        self._selection_keys = tuple(dict.fromkeys((*_READ, *selector, *CONTROL_PLANE)))
        self._models: dict[str, tuple[str | None, tuple[int, int] | None]] = {}
        self._shapes: dict[tuple[Any, ...], tuple[Shape, tuple[str, ...]]] = {}

    def fail(self, node: str, label: str, msg: str) -> UserError:
        return UserError(f"{self.shown}: node {node}: {label}: {msg}")

    def add(self, item: Any) -> None:
        self.total += 1
        if not isinstance(item, dict):
            raise UserError(f"{self.shown}: items[{self.total - 1}]: expected a Node object")
        kind = item.get("kind")
        if kind is not None and kind != "Node":
            raise UserError(
                f"{self.shown}: items[{self.total - 1}] is a {kind!r}, not a Node: "
                "write the list with `kubectl get nodes -o json`"
            )
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            raise UserError(f"{self.shown}: items[{self.total - 1}]: no metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
            raise UserError(
                f"{self.shown}: items[{self.total - 1}]: metadata.name: not a node name: {name!r}"
            )
        if name in self.names:
            raise UserError(f"{self.shown}: node {name} is listed twice")
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise self.fail(name, "metadata.labels", "expected an object of strings")
        for key, wanted in self.selector.items():
            if labels.get(key) != wanted:
                return
        self.names.add(name)
        status = item.get("status")
        status = status if isinstance(status, dict) else {}
        spec = item.get("spec")
        cordoned = isinstance(spec, dict) and spec.get("unschedulable") is True
        ready = _ready(status.get("conditions"))
        raw = spec.get("taints") if isinstance(spec, dict) else None
        taints: tuple[Any, ...] = ()
        if raw:
            taints = tuple(
                (t.get("key"), t.get("effect")) if isinstance(t, dict) else (None, None)
                for t in (raw if isinstance(raw, list) else [None])
            )
        # Nodes of one kind carry the same values in what is read: each kind is worked out
        # once, keyed by those raw values (a label's absence told apart from a null), the key
        # built at C speed. With MIG "mixed", which labels are read varies by node: no reuse.
        kind_key: tuple[Any, ...] | None = None
        if labels.get(MIG_STRATEGY) != "mixed":
            info = status.get("nodeInfo")
            alloc = status.get("allocatable")
            kind_key = (
                tuple(map(labels.get, self._selection_keys, _ABSENT)),
                (info.get("architecture"), info.get("operatingSystem"))
                if isinstance(info, dict)
                else info,
                tuple(alloc.items()) if isinstance(alloc, dict) else alloc,
                taints,
                cordoned,
                ready,
            )

        def work_out() -> tuple[Shape, tuple[str, ...], Placement]:
            shape, notes = self._shape_of(name, labels, status)
            placement = self._placement(name, labels, status, taints, cordoned, ready)
            if placement.control_plane:
                notes = (*notes, CONTROL_PLANE_NOTE)
            elif shape.nvidia and not placement.requests:  # a Job asking for none sees none
                state = "; ".join(s for s in (placement.state, NO_DEVICE) if s)
                placement = replace(placement, state=state, include_unavailable=False)
            return (shape, notes, placement)

        known = _memo(self._kinds, kind_key, work_out)
        self.machines.append((name, known[0]))
        if known[1]:
            self.notes[name] = known[1]
        self.placement[name] = known[2]

    def _shape_of(
        self, node: str, labels: dict[str, Any], status: dict[str, Any]
    ) -> tuple[Shape, tuple[str, ...]]:
        """The node's shape and notes, one object per distinct set of the labels read."""
        facts: tuple[Any, ...] = tuple(map(labels.get, _READ, _ABSENT))
        if not (labels.get(ARCH[0]) and labels.get(OS[0])):
            info = status.get("nodeInfo")
            if isinstance(info, dict):
                facts = (*facts, info.get("architecture"), info.get("operatingSystem"))
        seen = None if labels.get(MIG_STRATEGY) == "mixed" else facts

        def shape() -> tuple[Shape, tuple[str, ...]]:
            notes: list[str] = []
            platform = self._platform(node, labels, status)
            return (self._shape(node, labels, platform, notes), tuple(notes))

        return _memo(self._shapes, seen, shape)

    def _placement(
        self,
        node: str,
        labels: dict[str, Any],
        status: dict[str, Any],
        taints: tuple[tuple[Any, Any], ...],
        cordoned: bool = False,
        ready: tuple[Any, ...] | None = None,
    ) -> Placement:
        """Only the few keys a Job selects on are looked at; a cluster's thousands of nodes
        share a few placements (one object each, interned)."""
        keys = self._selection_keys
        if labels.get(MIG_STRATEGY) == "mixed":
            keys = keys + tuple(
                k for k in labels if isinstance(k, str) and _MIG_LABEL_KEY.fullmatch(k)
            )
        read = tuple(sorted((k, labels[k]) for k in keys if isinstance(labels.get(k), str)))
        alloc = status.get("allocatable")
        resources = tuple(
            sorted(
                (k, v)
                for k, v in (alloc.items() if isinstance(alloc, dict) else ())
                if isinstance(k, str) and k.startswith("nvidia.com/")
            )
        )
        control_plane = any(k in labels for k in CONTROL_PLANE)
        return _memo(
            self._placements,
            (read, resources, taints, control_plane, cordoned, ready),
            lambda: self._check_placement(
                node, read, resources, taints, control_plane, cordoned, ready
            ),
        )

    def _check_placement(
        self,
        node: str,
        read: tuple[tuple[str, Any], ...],
        resources: tuple[tuple[str, Any], ...],
        taints: tuple[tuple[Any, Any], ...],
        control_plane: bool,
        cordoned: bool = False,
        ready: tuple[Any, ...] | None = None,
    ) -> Placement:
        for key, value in read:  # a Job selects on them: they must be label values
            if not _LABEL_VALUE.fullmatch(value):
                raise self.fail(node, key, f"not a label value: {value!r}"[:200])
        have = dict(read)
        gpus = []
        requests = []
        for key, qty in resources:
            hit = _NVIDIA_RESOURCE.fullmatch(key)
            if hit is None:
                continue  # another NVIDIA resource (a NIC's): not what verify needs
            if not isinstance(qty, str) or not _SMALL_INT.fullmatch(qty):
                raise self.fail(node, f"status.allocatable.{key}", f"not a count: {qty!r}")
            gpus.append((key, qty))
            if int(qty):
                shared = hit.group(2) is not None or _shared(have, hit.group(1))
                requests.append((key, "1" if shared else str(int(qty))))
        for tkey, effect in taints:
            if (
                not isinstance(tkey, str)
                or not _TAINT_KEY.fullmatch(tkey)
                or effect not in _EFFECTS
            ):
                raise self.fail(
                    node, "spec.taints", f"not a taint: key {tkey!r}, effect {effect!r}"[:200]
                )
        return Placement(
            read,
            tuple(gpus),
            tuple(sorted(set(taints))),
            control_plane,
            tuple(requests),
            _state(cordoned, ready),
            cordoned,
            self.include_unavailable,
        )

    def _label(self, node: str, labels: dict[str, Any], key: str) -> str | None:
        value = labels.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(node, key, f"expected a string, got {value!r}")
        if value is not None and (ch := unsafe_char(value)) is not None:
            raise self.fail(node, key, f"holds the control or bidi character U+{ord(ch):04X}")
        return value

    def _match(
        self, node: str, labels: dict[str, Any], key: str, pattern: re.Pattern[str]
    ) -> str | None:
        value = self._label(node, labels, key)
        if value is not None and not pattern.fullmatch(value):
            raise self.fail(node, key, f"unexpected value {value!r}")
        return value

    def _platform(self, node: str, labels: dict[str, Any], status: Any) -> Platform:
        info = status.get("nodeInfo") if isinstance(status, dict) else None
        info = info if isinstance(info, dict) else {}
        arch_key = next((k for k in ARCH if k in labels), None)
        os_key = next((k for k in OS if k in labels), None)
        arch = self._label(node, labels, arch_key) if arch_key else info.get("architecture")
        os_ = self._label(node, labels, os_key) if os_key else info.get("operatingSystem")
        arch_key = arch_key or "status.nodeInfo.architecture"
        os_key = os_key or "status.nodeInfo.operatingSystem"
        if not isinstance(arch, str):
            raise self.fail(
                node, "kubernetes.io/arch", "missing (and no status.nodeInfo.architecture)"
            )
        if not isinstance(os_, str):
            raise self.fail(
                node, "kubernetes.io/os", "missing (and no status.nodeInfo.operatingSystem)"
            )
        platform = by_kubernetes(os_, arch)
        if platform is None:
            key, value = (os_key, os_) if os_ not in ("linux", "windows") else (arch_key, arch)
            raise self.fail(
                node,
                key,
                f"{value!r}: gpuresolve locks linux amd64/arm64 and windows amd64 nodes "
                "(leave this node out with `selector:`)",
            )
        return platform

    def _shape(
        self, node: str, labels: dict[str, Any], platform: Platform, notes: list[str]
    ) -> Shape:
        present = self._label(node, labels, PRESENT)
        if present not in (None, "true", "false"):
            raise self.fail(node, PRESENT, f"expected true or false, got {present!r}")
        product = self._match(node, labels, PRODUCT, _PRODUCT)
        major = self._match(node, labels, CC_MAJOR, _DRIVER_PART)
        minor = self._match(node, labels, CC_MINOR, _DRIVER_PART)
        if product is None and major is None and present != "true":
            if labels.get(NVIDIA_PCI) == "true":
                notes.append(
                    f"an NVIDIA PCI device ({NVIDIA_PCI}) but no GPU Feature Discovery labels: "
                    "locked as a CPU machine"
                )
            return Shape(platform)
        if product is None and major is None:
            raise self.fail(
                node,
                PRODUCT,
                f"missing: the node has {PRESENT}=true but no GPU Feature Discovery labels "
                "(is GFD running there?)",
            )
        model, mig, sharing = self._product(node, labels, product or "")
        known_name, known_cc = self._model(model) if model else (None, None)
        if major is not None or minor is not None:
            if major is None or minor is None:
                missing = CC_MINOR if minor is None else CC_MAJOR
                raise self.fail(
                    node,
                    missing,
                    f"missing (the node has {CC_MAJOR if minor is None else CC_MINOR})",
                )
            if len(minor) != 1 or int(major) == 0:
                bad = CC_MINOR if len(minor) != 1 else CC_MAJOR
                raise self.fail(node, bad, f"not a compute capability: {major}.{minor}")
            cc = (int(major), int(minor))
            if known_cc is not None and known_cc != cc:
                notes.append(
                    f"GFD reports compute capability {cc[0]}.{cc[1]} where the database has "
                    f"{known_cc[0]}.{known_cc[1]} for {known_name}: the label is used"
                )
        elif known_cc is not None:
            cc = known_cc
            notes.append(f"no {CC_MAJOR}/{CC_MINOR} labels: compute capability from the model name")
        else:
            raise self.fail(
                node,
                PRODUCT,
                f"{product!r} is not a GPU gpuresolve knows, and the node has no {CC_MAJOR} / "
                f"{CC_MINOR} labels to say its compute capability",
            )
        count_text = self._match(node, labels, COUNT, _SMALL_INT)
        count = int(count_text) if count_text is not None else None
        if mig is not None and not mig.startswith("mixed") and mig != "invalid":
            mig = f"{mig} x{count}" if count else mig  # "single": the count is of MIG devices
            count = None
        driver = self._driver(node, labels)
        if driver is None:
            raise self.fail(
                node,
                DRIVER_FULL,
                "missing: a GPU node without driver labels "
                "(neither cuda.driver-version.* nor cuda.driver.*)",
            )
        return Shape(
            platform=platform,
            driver=driver,
            driver_os="windows" if platform.os == "windows" else "linux",
            gpus=(ShapeGpu(model or f"sm_{cc[0]}{cc[1]}", cc, count),),
            nvidia=True,
            mig=mig,
            sharing=sharing,
        )

    def _product(
        self, node: str, labels: dict[str, Any], product: str
    ) -> tuple[str, str | None, str | None]:
        """(model, MIG, sharing) from the product label and the MIG and sharing labels."""
        model = product
        shared = model.endswith("-SHARED")
        if shared:
            model = model.removesuffix("-SHARED")
        mig: str | None = None
        m = _MIG_SUFFIX.search(model)
        if m is not None:
            model = model[: m.start()]
            mig = "invalid" if m.group(1) == "INVALID" else m.group(1)
        if product and not model:
            raise self.fail(node, PRODUCT, f"no model name in {product!r}")
        strategy = self._match(node, labels, MIG_STRATEGY, _WORD)
        if strategy == "mixed" and mig is None:
            devices = []
            for key, value in labels.items():
                hit = _MIG_COUNT_KEY.fullmatch(key)
                if hit is None:
                    continue
                if not isinstance(value, str) or not _SMALL_INT.fullmatch(value):
                    raise self.fail(node, key, f"unexpected value {value!r}")
                if int(value):
                    devices.append(f"{hit.group(1)} x{int(value)}")
            if devices:
                mig = "mixed: " + ", ".join(sorted(devices))
        how = self._match(node, labels, SHARING, _SHARING_VALUE)
        replicas = self._match(node, labels, REPLICAS, _SMALL_INT)
        sharing = None
        n = int(replicas) if replicas else 0
        if how in ("time-slicing", "mps") or shared or n > 1:
            name = how if how and how != "none" else "shared"
            sharing = f"{name} x{n}" if n > 1 else name
        return model, mig, sharing

    def _model(self, model: str) -> tuple[str | None, tuple[int, int] | None]:
        """The database's name and CC for a product (GFD writes NVML's name, spaces as '-')."""
        if model not in self._models:
            hit = self.catalog.gpu_by_name(model)
            self._models[model] = (hit.name, hit.cc) if hit else (None, None)
        return self._models[model]

    def _driver(self, node: str, labels: dict[str, Any]) -> Driver | None:
        """The node's driver, in `Driver`'s one grammar (what `lock --check` reads back)."""
        full = self._label(node, labels, DRIVER_FULL)
        if full is not None:
            return self._parsed(node, DRIVER_FULL, full)
        for major_key, minor_key, rev_key in DRIVER_PARTS:
            major = self._match(node, labels, major_key, _DRIVER_PART)
            if major is None:
                continue
            minor = self._match(node, labels, minor_key, _DRIVER_PART)
            if minor is None:
                raise self.fail(node, minor_key, f"missing (the node has {major_key})")
            rev = self._match(node, labels, rev_key, _REVISION)
            return self._parsed(node, major_key, f"{major}.{minor}" + (f".{rev}" if rev else ""))
        return None

    def _parsed(self, node: str, label: str, text: str) -> Driver:
        try:
            return Driver.parse(text)
        except UserError:
            raise self.fail(node, label, f"not a driver version: {text!r}") from None


def _shared(labels: Mapping[str, str], resource: str) -> bool:
    """Whether the device plugin shares ``resource`` (time-slicing or MPS), from the labels GFD
    writes for it (``internal/lm/resource.go``: ``replicas`` > 1, ``sharing-strategy``, and
    ``-SHARED`` on the product where the resource is not renamed)."""
    replicas = labels.get(f"{resource}.replicas", "")
    return (
        (replicas.isdigit() and int(replicas) > 1)
        or labels.get(f"{resource}.sharing-strategy") in SHARED_STRATEGIES
        or labels.get(f"{resource}.product", "").endswith("-SHARED")
    )


def _ready(conditions: Any) -> tuple[Any, ...] | None:
    """None for a node whose ``Ready`` condition is ``"True"``; else what it says instead
    (status, reason, message), or ``("absent",)`` where it has no Ready condition."""
    if isinstance(conditions, list):
        for c in conditions:
            if isinstance(c, dict) and c.get("type") == "Ready":
                status = c.get("status")
                if status == "True":
                    return None
                return (status, c.get("reason"), c.get("message"))
    return ("absent",)


def _state(cordoned: bool, ready: tuple[Any, ...] | None) -> str | None:
    """Why a node cannot take a Job now, as `fleet.yaml` lists it (node text escaped, bounded)."""
    said = []
    if cordoned:
        said.append("Kubernetes node cordoned (spec.unschedulable)")
    if ready == ("absent",):
        said.append("Kubernetes node NotReady (no Ready condition in status.conditions)")
    elif ready is not None:
        status, reason, message = ready
        words = [str(w)[:MAX_REASON] for w in (reason, message) if isinstance(w, str) and w]
        text = f"Kubernetes node NotReady (Ready={str(status)[:20]})"
        said.append(escaped(": ".join([text, *words])))
    return "; ".join(said) or None
