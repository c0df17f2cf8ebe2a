"""Which nodes a pod's node selection admits, with Kubernetes' documented semantics.

A cluster lock proves each verification Job's selection picks exactly its group's nodes (and the
tests replay the examples of Kubernetes' documentation through it). The rules, from "Assigning Pods
to Nodes" (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node) and the API reference
of ``NodeSelectorTerm`` / ``NodeSelectorRequirement``:

- ``nodeSelector`` (a map) and ``nodeAffinity``'s required terms must both be satisfied;
- the ``nodeSelectorTerms`` are ORed; a null or empty term matches no node;
- a term's ``matchExpressions`` (and ``matchFields``) are ANDed;
- ``In``: the label is present and its value is one of ``values``; ``NotIn``: it is not one of
  them (a node without the label matches); ``Exists`` / ``DoesNotExist``: the key is present /
  absent (no values); ``Gt`` / ``Lt``: ``values`` holds one integer, and the label's value, parsed
  as an integer, is greater / less than it (a missing or non-integer label does not match);
- ``matchFields`` selects on ``metadata.name`` with ``In`` / ``NotIn``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INT = re.compile(r"^[+-]?[0-9]{1,18}$")


def requirement(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One ``NodeSelectorRequirement`` against a node's labels."""
    key, op = expr.get("key"), expr.get("operator")
    values = list(expr.get("values") or [])
    present = key in labels
    value = labels.get(key) if isinstance(key, str) else None
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if len(values) != 1 or not _INT.fullmatch(str(values[0])):
            raise ValueError(f"{op} needs exactly one integer value, got {values!r}")
        if value is None or not _INT.fullmatch(value):
            return False
        have, limit = int(value), int(values[0])
        return have > limit if op == "Gt" else have < limit
    raise ValueError(f"unknown operator {op!r}")


def term(t: Mapping[str, Any] | None, name: str, labels: Mapping[str, str]) -> bool:
    """One ``NodeSelectorTerm``: every expression and field holds; empty matches nothing."""
    exprs = list((t or {}).get("matchExpressions") or [])
    fields = list((t or {}).get("matchFields") or [])
    if not exprs and not fields:
        return False
    if not all(requirement(e, labels) for e in exprs):
        return False
    for f in fields:
        if f.get("key") != "metadata.name":
            raise ValueError(f"matchFields on {f.get('key')!r}: only metadata.name is supported")
        if not requirement(f, {"metadata.name": name}):
            return False
    return True


def pod_admits(pod_spec: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a pod's ``nodeSelector`` and required node affinity admit the node."""
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(term(t, name, labels) for t in required.get("nodeSelectorTerms") or [])
