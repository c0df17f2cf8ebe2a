"""Machine shapes: many machines, few kinds. A fleet is locked per shape, not per machine.

A shape is what the solver and the report need to know about a machine (platform, driver, each GPU
model with its compute capability and count, MIG and sharing), minus its name. Thousands of nodes of
a cluster (or a folder of `gpuresolve detect --json` files) collapse into a handful of shapes, each
becoming one fleet target whose ``count`` is its number of machines.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from resolver.catalog import Catalog
from resolver.core.hostprofile import HostProfile
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.versions import CC, AsWritten, Driver, cc_sm
from resolver.solve import Target, TargetGpu


@dataclass(frozen=True, order=True)
class ShapeGpu:
    name: str  # the model as the machine reports it ("NVIDIA-H100-80GB-HBM3" from a GFD label)
    cc: CC
    count: int | None = None  # physical GPUs of this model; None: not published (MIG "single")


@dataclass(frozen=True, eq=False)
class Shape(AsWritten):
    """One kind of machine: everything but its name (drivers as written: ``AsWritten``)."""

    platform: Platform
    driver: Driver | None = None
    driver_os: str = "linux"
    gpus: tuple[ShapeGpu, ...] = ()
    nvidia: bool = False
    unknown_gpus: tuple[str, ...] = ()
    mig: str | None = None  # "1g.5gb", "mixed: 1g.5gb x4, 2g.10gb x2", "invalid"
    sharing: str | None = None  # "time-slicing x4", "mps x2"

    def target(self, python: PythonVersion, name: str) -> Target:
        """The fleet target standing for every machine of this shape."""
        return Target(
            platform=self.platform,
            python=python,
            driver=self.driver,
            driver_os=self.driver_os,
            gpus=tuple(TargetGpu(g.cc, g.name) for g in self.gpus),
            nvidia=self.nvidia or bool(self.gpus),
            name=name,
            unknown_gpus=self.unknown_gpus,
        )

    def slug(self) -> str:
        """A name from the shape: ``h100-80gb-hbm3-x8-580.95.05``, ``cpu``."""
        if not (self.nvidia or self.gpus or self.unknown_gpus):
            return "cpu"
        models = [
            _model_slug(g.name) + (f"-x{g.count}" if (g.count or 1) > 1 else "") for g in self.gpus
        ]
        models += [_model_slug(n) for n in self.unknown_gpus]
        parts = ["_".join(models) or "nvidia-gpu"]
        if self.mig:  # "1g.5gb x7" -> mig-1g.5gb; "mixed: ..." -> mig-mixed
            parts.append("mig-" + self.mig.split()[0].rstrip(":"))
        if self.sharing:
            parts.append("mps" if self.sharing.startswith("mps") else "shared")
        parts.append(str(self.driver or "driver-unknown"))
        return _SLUG_BAD.sub("-", "-".join(parts).lower()).strip("-.")


_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")


def _model_slug(name: str) -> str:
    words = re.findall(r"[A-Za-z0-9.]+", name)
    if len(words) > 1 and words[0].lower() == "nvidia":
        words = words[1:]
    return "-".join(words).lower()


# A group's name is built from node data (models, partitions, features) and names folders, files
# (`verify-<group>.sbatch`) and jobs: past this many characters (ASCII), a readable start and a
# digest, where a cluster's long feature lists once passed the 255-byte limit on a file name.
MAX_NAME = 80
DIGEST = 10  # hex digits: 40 bits, no two groups of a lock meet in practice


def name_digest(key: str) -> str:
    """A short digest of the text a name was made from (before it was normalised)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:DIGEST]


def bounded_name(name: str, key: str, *, limit: int = MAX_NAME, clash: bool = False) -> str:
    """``name`` where it fits ``limit``; else (or where normalising made it ``clash`` with
    another) its readable start and the digest of ``key``, the unnormalised text it came from."""
    if len(name) <= limit and not clash:
        return name
    return f"{name[: limit - DIGEST - 1].rstrip('-._')}-{name_digest(key)}"


@dataclass(frozen=True)
class ShapeGroup:
    """The machines of one shape, named for the spec's targets and the report."""

    name: str
    shape: Shape
    nodes: tuple[str, ...]  # machine (node, file) names, sorted
    source: str  # the spec's `kubernetes:` or `detect:` value
    notes: tuple[str, ...] = ()  # what the report should say about these machines
    unit: str = "machine"  # what the report calls one of them ("node" for a cluster)
    # what a scheduler needs of each machine (a Kubernetes node's labels, resources, taints;
    # fleet/kubernetes.py's Placement), for the verification Jobs a cluster lock writes
    placement: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def count(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class FleetMember:
    """One target of a team spec, with its machine count (and its machines' shape group)."""

    target: Target
    count: int = 1
    source: str = "described"  # or the detect file's path as written in the spec
    group: ShapeGroup | None = None  # the machines of a `kubernetes:` or `detect: DIR/` shape


def group(
    machines: Iterable[tuple[str, Shape]],
    *,
    source: str,
    prefix: str | None = None,
    notes: dict[str, tuple[str, ...]] | None = None,
    unit: str = "machine",
    placement: Mapping[str, Any] | None = None,
) -> list[ShapeGroup]:
    """Group named machines by shape; names are the shapes' slugs, made unique and prefixed.

    Deterministic (sorted shapes and node names), so `lock --check` sees no change unless the
    fleet changed. ``notes`` maps a machine name to what the report should say about it.
    """
    by_shape: dict[Shape, list[str]] = {}
    for name, shape in machines:
        by_shape.setdefault(shape, []).append(name)
    shapes = sorted(by_shape, key=lambda s: (s.platform, s.slug(), _shape_order(s)))
    names = _unique_names(shapes)
    out = []
    for shape in shapes:
        nodes = tuple(sorted(by_shape[shape], key=_natural))
        said: dict[str, None] = {}
        for node in nodes:
            for note in (notes or {}).get(node, ()):
                said.setdefault(note, None)
        name = f"{prefix}-{names[shape]}" if prefix else names[shape]
        name = bounded_name(name, name)  # the full names are unique: so are their digests
        mine = {n: placement[n] for n in nodes if n in placement} if placement else {}
        out.append(ShapeGroup(name, shape, nodes, source, tuple(said), unit, mine))
    return out


def _shape_order(s: Shape) -> tuple[object, ...]:
    return (
        s.driver.key if s.driver else (),
        tuple((g.name, g.cc, g.count or 0) for g in s.gpus),
        s.mig or "",
        s.sharing or "",
        s.driver_os,
        s.unknown_gpus,
    )


def _unique_names(shapes: list[Shape]) -> dict[Shape, str]:
    """Slugs; where two shapes share one, the platform is added, then a number."""
    names = {s: s.slug() for s in shapes}
    for attempt in ("platform", "number"):
        seen: dict[str, list[Shape]] = {}
        for s in shapes:
            seen.setdefault(names[s], []).append(s)
        for clash in (v for v in seen.values() if len(v) > 1):
            for i, s in enumerate(clash):
                if attempt == "platform":
                    names[s] = f"{names[s]}-{s.platform}"
                else:
                    names[s] = f"{names[s]}-{i + 1}"
    return names


def _natural(name: str) -> tuple[object, ...]:
    """gpu-2 before gpu-10."""
    return tuple(int(p) if p.isascii() and p.isdigit() else p for p in re.split(r"([0-9]+)", name))


# --- a folder of `gpuresolve detect --json` files ------------------------------------------------


def profile_shapes(
    catalog: Catalog, records: Sequence[tuple[str, HostProfile]]
) -> list[tuple[str, Shape]]:
    """Recorded hosts (a folder of `detect --json` files: ``host.records.load_folder``) as
    (name, shape)."""
    from resolver.solve.target import target_from_profile

    out = []
    for stem, profile in records:
        target = target_from_profile(catalog, profile, stem)
        counts: dict[tuple[str, CC], int] = {}
        for g in target.gpus:
            key = (g.name or cc_sm(g.cc), g.cc)
            counts[key] = counts.get(key, 0) + 1
        mig = "enabled" if any(g.mig == "enabled" for g in profile.gpus) else None
        shape = Shape(
            platform=target.platform,
            driver=target.driver,
            driver_os=target.driver_os,
            gpus=tuple(ShapeGpu(n, cc, c) for (n, cc), c in sorted(counts.items())),
            nvidia=target.nvidia,
            unknown_gpus=tuple(sorted(target.unknown_gpus)),
            mig=mig,
        )
        out.append((stem, shape))
    return out
