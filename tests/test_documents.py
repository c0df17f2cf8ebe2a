"""The TypedDicts of the `--json` documents (resolver/core/documents/) and the published JSON
Schemas agree: every schema property is a key of its TypedDict and back, the required keys are
the schema's `required`, all the way down wherever a nested object has its own TypedDict (and
every nested object with properties has one). mypy checks the builders against the TypedDicts,
so a key written but not published, or published but not written, fails one or the other."""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest

from resolver import schemas
from resolver.core.documents import DOCUMENTS

# Output documents only: the team spec is read, and its reader checks it against the schema.
OUTPUTS = [name for name in schemas.NAMES if name != "team-spec"]
# Objects the code passes through open (dict[str, Any]): their schema publishes only some keys,
# the rest is diagnostic detail that may change. Every other nested object has a TypedDict.
OPEN = {
    "verify|0.benchmark": "the probe's measurements as judged; published: gpus[]",
    "verify|0.nccl_check": "the NCCL run, topology and bandwidths; published: peak",
}


def _resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its `$ref` followed; sibling keywords of a `$ref` (2020-12) merged."""
    if not isinstance(node, dict):
        return {}
    if "$ref" not in node:
        return node
    name = node["$ref"].removeprefix("#/$defs/")
    target = _resolve(root["$defs"][name], root)
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if "properties" in node:
        merged["properties"] = {**target.get("properties", {}), **node["properties"]}
        merged["required"] = [*target.get("required", []), *node.get("required", [])]
    return merged


def _objects(node: Any, root: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The object shapes a value may take, in order (None for a `null` alternative); arrays and
    maps are looked through to their items."""
    node = _resolve(node, root)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return [shape for alt in node[key] for shape in _objects(alt, root)]
    if "properties" in node:
        return [node]
    if isinstance(node.get("items"), dict):
        return _objects(node["items"], root)
    if isinstance(node.get("additionalProperties"), dict):
        return _objects(node["additionalProperties"], root)
    return [None] if node.get("type") == "null" else []


def _typeddicts(annotation: Any) -> list[Any]:
    """The TypedDicts an annotation names, in order (through unions, lists and dicts)."""
    if typing.is_typeddict(annotation):
        return [annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType, list, dict):
        return [td for arg in args for td in _typeddicts(arg)]
    return []


def _compare(shape: dict[str, Any], typed: Any, where: str, root: dict[str, Any]) -> list[str]:
    found: list[str] = []
    props = shape["properties"]
    hints = typing.get_type_hints(typed)
    if set(props) != set(hints):
        only_schema = sorted(set(props) - set(hints))
        only_typed = sorted(set(hints) - set(props))
        found.append(f"{where}: schema only {only_schema}, {typed.__name__} only {only_typed}")
    required = set(shape.get("required", ()))
    if required != set(typed.__required_keys__):
        found.append(
            f"{where}: required {sorted(required)} but {typed.__name__} requires "
            f"{sorted(typed.__required_keys__)}"
        )
    for key in sorted(set(props) & set(hints)):
        objects = [o for o in _objects(props[key], root) if o is not None]
        nested = _typeddicts(hints[key])
        if f"{where}.{key}" in OPEN:
            assert not nested, f"{where}.{key} has a TypedDict now: drop it from OPEN"
            continue
        if len(objects) != len(nested):
            names = [td.__name__ for td in nested]
            found.append(f"{where}.{key}: {len(objects)} object shapes in the schema, {names}")
            continue
        for i, (obj, td) in enumerate(zip(objects, nested, strict=True)):
            at = f"{where}.{key}" + (f"|{i}" if len(objects) > 1 else "")
            found += _compare(obj, td, at, root)
    return found


@pytest.mark.parametrize("name", OUTPUTS)
def test_typeddicts_and_schemas_agree(name: str) -> None:
    root = schemas.load(name)
    shapes = [s for s in _objects(root, root) if s is not None]
    typed = _typeddicts(DOCUMENTS[name])
    assert len(shapes) == len(typed) >= 1, (name, typed)
    problems = [
        p
        for i, (s, td) in enumerate(zip(shapes, typed, strict=True))
        for p in _compare(s, td, f"{name}|{i}", root)
    ]
    assert problems == []


def test_every_output_schema_has_a_document() -> None:
    assert sorted(DOCUMENTS) == sorted(OUTPUTS)


def test_the_check_finds_a_drift() -> None:
    """A key the schema lacks, a required key the TypedDict makes optional: both are named."""

    class Shape(typing.TypedDict, total=False):
        a: int
        b: int

    schema = {"properties": {"a": {"type": "integer"}}, "required": ["a"]}
    problems = _compare(schema, Shape, "x", {})
    assert len(problems) == 2 and "Shape only ['b']" in problems[0] and "requires" in problems[1]


def test_a_host_profile_writes_every_field_in_order() -> None:
    """`HostProfile.to_json` names each key (mypy checks them): it writes what the dataclass
    holds, in its order, then `driver_os`, as the generic conversion it replaced did."""
    import dataclasses
    import json

    from resolver.core.hostprofile import GpuInfo, HostProfile, LostGpu

    gpu = GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0", 81559, "0x2330", "disabled", {"cc": "nvml"})
    profile = HostProfile(
        "linux-x86_64",
        "3.12",
        python_full="3.12.3",
        glibc="2.39",
        driver="580.65.06",
        driver_cuda="13.0",
        driver_branch="580",
        driver_build_branch="r580_00",
        state="ok",
        gpus=[gpu],
        sources={"driver": "nvml"},
        messages=["a note"],
        probes={"nvml": "ok"},
        lost_gpus=[LostGpu("0000:17:00.0", "GPU is lost", "nvidia-smi")],
    )
    generic = {**dataclasses.asdict(profile), "driver_os": profile.driver_os}
    assert json.dumps(profile.to_json()) == json.dumps(generic)
