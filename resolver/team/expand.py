"""Spec target entries that stand for many machines: `kubernetes: FILE` and `detect: DIR/`.

Each expands into one fleet member per machine shape, named from the shape (after the entry's
optional ``name:`` prefix), with ``count`` = its number of machines and the machine names kept for
the report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped, unsafe_char
from resolver.core.platforms import PythonVersion
from resolver.core.versions import Driver
from resolver.host.records import load_folder
from resolver.solve.shapes import (
    FleetMember,
    ShapeGroup,
    bounded_name,
    group,
    profile_shapes,
)

if TYPE_CHECKING:
    from resolver.fleet.slurm import ModelRule

# The CLI's progress bars: (label, total) -> what to tell of each part done.
ProgressBars = Callable[[str, int], Callable[[int], None]]

KUBERNETES_KEYS = {"kubernetes", "selector", "name", "include_unavailable"}
DETECT_DIR_KEYS = {"detect", "name"}
# Slurm does not report the driver (`driver:` may) nor, for `Gres=gpu:8`, the model (`gpu_model:`)
SLURM_KEYS = {"slurm", "driver", "name", "gpu_model", "include_unavailable"}


def is_many(entry: dict[str, Any], spec_dir: Path) -> bool:
    """Whether a target entry stands for many machines (a node list or a folder of detect files)."""
    if "kubernetes" in entry or "slurm" in entry:
        return True
    detect = entry.get("detect")
    return isinstance(detect, str) and bool(detect.strip()) and (spec_dir / detect).is_dir()


def expand_entry(
    spec_path: Path,
    entry: dict[str, Any],
    key: str,
    catalog: Catalog,
    python: PythonVersion,
    progress: ProgressBars | None = None,
) -> list[FleetMember]:
    """The fleet members of one entry; every problem is one UserError naming the spec and key."""

    def fail(sub: str, msg: str) -> UserError:
        return UserError(f"{spec_path}: {key}.{sub}: {msg}")

    kind = next((k for k in ("kubernetes", "slurm") if k in entry), "detect")
    allowed = {"kubernetes": KUBERNETES_KEYS, "slurm": SLURM_KEYS}.get(kind, DETECT_DIR_KEYS)
    extra = sorted(str(k) for k in entry if k not in allowed)
    if extra:
        what = "a folder of detect files" if kind == "detect" else "a node list"
        counted = " (it counts the machines)" if extra[0] == "count" else ""
        raise fail(extra[0], f"not with `{kind}:`: {what} describes the machines{counted}")
    rel = entry[kind]
    if not isinstance(rel, str) or not rel.strip():
        raise fail(kind, "expected a path relative to the spec")
    rel = rel.strip()
    prefix = entry.get("name")
    if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
        raise fail("name", "expected a string (the prefix of the group names)")
    path = spec_path.parent / rel
    try:
        if kind == "kubernetes":
            groups = _kubernetes(path, rel, entry, catalog, prefix, fail, progress)
        elif kind == "slurm":
            groups = _slurm(path, rel, entry, catalog, prefix, fail)
        else:
            machines = profile_shapes(catalog, load_folder(path))
            groups = group(machines, source=rel, prefix=prefix and prefix.strip())
    except UserError as exc:
        raise fail(kind, str(exc)) from None
    return [FleetMember(g.shape.target(python, g.name), g.count, rel, g) for g in groups]


def _kubernetes(
    path: Path,
    rel: str,
    entry: dict[str, Any],
    catalog: Catalog,
    prefix: str | None,
    fail: Any,
    progress: ProgressBars | None = None,
) -> list[ShapeGroup]:
    from resolver.fleet.kubernetes import read_node_list

    selector = entry.get("selector")
    include = entry.get("include_unavailable", False)
    if not isinstance(include, bool):
        raise fail("include_unavailable", f"expected true or false, got {include!r}")
    wanted: dict[str, str] = {}
    if selector is not None:
        if not isinstance(selector, dict) or not selector:
            raise fail("selector", "expected a mapping of label: value (all must match)")
        for label, value in selector.items():
            if isinstance(value, bool):  # `nvidia.com/gpu.present: true`: labels are strings
                value = "true" if value else "false"
            elif isinstance(value, int):
                value = str(value)
            if not isinstance(label, str) or not isinstance(value, str):
                raise fail(f"selector.{label}", f"expected a string value, got {value!r}")
            wanted[label] = value
    if not path.is_file():
        raise fail("kubernetes", f"no such file: {rel} (write it with `kubectl get nodes -o json`)")
    nodes = read_node_list(
        path, catalog, wanted, shown=rel, progress=progress, include_unavailable=include
    )
    return group(
        nodes.machines,
        source=rel,
        prefix=prefix and prefix.strip(),
        notes=nodes.notes,
        unit="node",
        placement=nodes.placement,
    )


def _slurm(
    path: Path, rel: str, entry: dict[str, Any], catalog: Catalog, prefix: str | None, fail: Any
) -> list[ShapeGroup]:
    from dataclasses import replace

    from resolver.fleet.slurm import read_nodes

    driver = entry.get("driver")
    if driver is not None:
        if not isinstance(driver, str):
            raise fail("driver", f"expected a quoted driver version ('550.54.15'), got {driver!r}")
        try:
            driver = Driver.parse(driver)
        except UserError as exc:
            raise fail("driver", str(exc)) from None
    include = entry.get("include_unavailable", False)
    if not isinstance(include, bool):
        raise fail("include_unavailable", f"expected true or false, got {include!r}")
    rules = _model_rules(entry.get("gpu_model"), catalog, fail)
    if not path.is_file():
        raise fail("slurm", f"no such file: {rel} (write it with `scontrol show node --oneliner`)")
    groups = read_nodes(path, catalog, rel, driver, rules, include)
    if prefix and prefix.strip():
        named = ((g, f"{prefix.strip()}-{g.name}") for g in groups)
        groups = [replace(g, name=bounded_name(name, name)) for g, name in named]
    return groups


def _model_rules(value: Any, catalog: Catalog, fail: Any) -> list[ModelRule]:
    """`gpu_model:` of a `slurm:` entry: a model for every untyped GRES, or a list of
    ``{partition: P, model: M}`` / ``{nodes: PATTERN, model: M}`` rules, the first match wins."""
    from resolver.fleet.slurm import ModelRule

    if value is None:
        return []
    items = [{"model": value}] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise fail("gpu_model", "expected a model (h100) or a list of {partition|nodes, model}")
    rules = []
    for i, item in enumerate(items):
        key = "gpu_model" if isinstance(value, str) else f"gpu_model[{i}]"
        if not isinstance(item, dict) or set(item) - {"model", "partition", "nodes"}:
            raise fail(key, "expected {model: M} with partition: P or nodes: PATTERN")
        texts = {k: v for k, v in item.items() if v is not None}
        if not all(isinstance(v, str) and v.strip() for v in texts.values()):
            raise fail(key, "expected strings")
        model = texts.get("model")
        if model is None:
            raise fail(key, "model: missing (the GPU model, h100 or NVIDIA H100 80GB HBM3)")
        if unsafe_char(model) or catalog.gpu_by_name(model.replace("_", " ")) is None:
            raise fail(f"{key}.model", f"{escaped(model)!r} names no GPU gpuresolve knows")
        for k in ("partition", "nodes"):
            if k in texts and unsafe_char(texts[k]):
                raise fail(f"{key}.{k}", "a control character")
        rules.append(ModelRule(model, texts.get("partition"), texts.get("nodes")))
    return rules
