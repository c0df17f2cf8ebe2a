"""What a node's group expects of its machine, and the `group` check that holds the host to it.

A cluster lock's file can serve several node groups (``nodes_of`` in ``fleet.yaml``), and a CPU
set sits beside them, so a lock alone cannot tell a GPU node that lost its driver (a CPU torch
then passes as "a CPU build on a host without an NVIDIA GPU") from a CPU node. The Job or sbatch
script of each group names it (``--group``, ``GPURESOLVE_GROUP``), and verify reads what the
group expects from the plan the lock was written with: ``fleet.yaml`` beside the lock or in a
folder above it (Slurm: the lock's root; a Kubernetes Job mounts the group's entry beside the
lock), its ``expects`` entry: each GPU model (name, compute capability, count) and the driver.
The check compares the host as detected: no NVIDIA driver, other GPUs, another count, an older
driver fail; a newer driver warns (the lock was chosen for the group's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError, escaped
from resolver.core.hostprofile import HostProfile
from resolver.core.versions import Driver
from resolver.db.gpunames import name_words
from resolver.verify.result import FAIL, PASS, SKIP, WARN, Check, CheckResult

PLAN_FILE = "fleet.yaml"
PLAN_LEVELS = 3  # the lock's folder and up to 3 above: set/platform/lock beneath the plan
MAX_PLAN = 64 << 20
_CC = re.compile(r"^[0-9]{1,2}\.[0-9]{1,2}$")


@dataclass(frozen=True)
class ExpectedGpu:
    name: str
    cc: str | None
    count: int | None  # None: not published (a MIG "single" node lists slices, not GPUs)


@dataclass(frozen=True)
class Expects:
    """One node group's machine, as its lock was chosen for it."""

    group: str
    gpus: tuple[ExpectedGpu, ...]
    driver: Driver | None

    def text(self) -> str:
        gpus = " + ".join(
            f"{g.count} × {g.name}" if g.count is not None else g.name for g in self.gpus
        )
        driver = f" with driver {self.driver}" if self.driver is not None else ""
        return (gpus or "no GPU") + driver


def expects_json(gpus: Sequence[tuple[str, str | None, int | None]], driver: str | None) -> Any:
    """The ``expects`` entry a cluster lock writes in ``fleet.yaml`` for a node group."""
    return {
        "gpus": [{"name": n, "cc": cc, "count": count} for n, cc, count in gpus],
        "driver": driver,
    }


def find_expects(lock_file: str, group: str) -> Expects:
    """The expectation of ``group`` from the plan beside ``lock_file`` or above it."""
    from resolver.io.bounded import load_yaml, read_text

    if not group or len(group) > 200 or group != group.strip():  # compared, shown escaped
        raise UserError(f"--group {escaped(group[:60])!r}: not a node group's name")
    folder = Path(lock_file).absolute().parent
    for _ in range(PLAN_LEVELS + 1):
        path = folder / PLAN_FILE
        if path.is_file():
            text = read_text(path, limit=MAX_PLAN, what="a fleet plan")
            return _entry(load_yaml(text, path, max_nodes=MAX_PLAN), group, path)
        if folder.parent == folder:
            break
        folder = folder.parent
    raise UserError(
        f"--group {escaped(group)}: no {PLAN_FILE} beside {escaped(lock_file)} or in the "
        f"{PLAN_LEVELS} folders above it (the cluster lock writes it at the lock's root)"
    )


def _entry(doc: Any, group: str, path: Path) -> Expects:
    groups = doc.get("groups") if isinstance(doc, dict) and doc.get("fleet") == 1 else None
    if not isinstance(groups, list):
        raise UserError(f"{escaped(str(path))}: not a gpuresolve fleet plan (fleet: 1, groups)")
    entry = next(
        (g for g in groups if isinstance(g, dict) and g.get("nodes_of") == group),
        None,
    )
    if entry is None:
        raise UserError(
            f"--group {escaped(group)}: {escaped(str(path))} has no node group of that name"
        )
    where = f"{escaped(str(path))}: group {escaped(group)}"
    raw = entry.get("expects")
    if not isinstance(raw, dict) or not isinstance(raw.get("gpus"), list):
        raise UserError(
            f"{where} records no expects: (written by an older gpuresolve: rerun `gpuresolve lock`)"
        )
    gpus = []
    for g in raw["gpus"]:
        g = g if isinstance(g, dict) else {}
        name, cc, count = g.get("name"), g.get("cc"), g.get("count")
        if not isinstance(name, str) or not name or len(name) > 200:
            raise UserError(f"{where}: expects: a GPU without a name")
        if cc is not None and not (isinstance(cc, str) and _CC.fullmatch(cc)):
            raise UserError(f"{where}: expects: cc {cc!r}")
        if count is not None and (type(count) is not int or not 0 < count <= 100_000):
            raise UserError(f"{where}: expects: count {count!r}")
        gpus.append(ExpectedGpu(escaped(name), cc, count))
    driver = raw.get("driver")
    return Expects(
        escaped(group),
        tuple(gpus),
        Driver.parse(driver) if isinstance(driver, str) and driver else None,
    )


def _words(name: str) -> set[str]:
    return set(name_words(name))  # the one GPU-name normaliser


def _same_model(want: ExpectedGpu, name: str | None, cc: str | None) -> bool:
    """The host's GPU is the model expected: the same compute capability (where both are
    known) and the expected name's words among the device's (``NVIDIA A100`` is the device
    ``NVIDIA A100-SXM4-80GB``; a GFD label ``NVIDIA-H100-80GB-HBM3`` is ``NVIDIA H100 80GB
    HBM3``), so an H200 (also 9.0) is not an H100."""
    if want.cc and cc and want.cc != cc:
        return False
    return bool(name) and _words(want.name) <= _words(name or "")


def check_group(expects: Expects | None, host: HostProfile | None) -> CheckResult:
    """The host against its node group's expectation (SKIP without ``--group``)."""
    if expects is None:
        return GROUP_CHECK.result(SKIP, "no node group given (--group)")
    want = f"this node's group expects {expects.text()} (node group {expects.group})"
    fix = "drain the node and check its GPUs and driver (`nvidia-smi`), or move it to its group"
    if not expects.gpus:
        if host is not None and host.gpus:
            return GROUP_CHECK.result(WARN, f"{want}; this host has {_host(host)}")
        return GROUP_CHECK.result(PASS, f"no GPU, as group {expects.group} expects")
    if host is None or not host.driver:
        lost = f" ({len(host.lost_gpus)} GPU(s) lost)" if host and host.lost_gpus else ""
        said = f"{want}; this host has no NVIDIA driver{lost}"
        return GROUP_CHECK.result(FAIL, said, fix)
    wrong = False
    for g in expects.gpus:
        found = sum(1 for h in host.gpus if _same_model(g, h.name, h.cc))
        wrong = wrong or (found != g.count if g.count is not None else not found)
    if all(g.count is not None for g in expects.gpus):  # and no GPU besides them
        wrong = wrong or len(host.gpus) != sum(g.count or 0 for g in expects.gpus)
    if wrong:
        return GROUP_CHECK.result(FAIL, f"{want}; this host has {_host(host)}", fix)
    have = Driver.parse(host.driver) if _driver_ok(host.driver) else None
    if expects.driver is not None and have is not None and have != expects.driver:
        said = f"{want}; this host's driver is {host.driver}"
        if have < expects.driver:
            return GROUP_CHECK.result(FAIL, said, fix)
        newer = " (newer: the lock was chosen for the older one)"
        return GROUP_CHECK.result(WARN, said + newer)
    return GROUP_CHECK.result(PASS, f"{_host(host)}, as group {expects.group} expects")


def _driver_ok(text: str) -> bool:
    try:
        Driver.parse(text)
    except UserError:
        return False
    return True


def _host(host: HostProfile) -> str:
    """The host's GPUs and driver as the check says them (and the GPUs the driver lost)."""
    lost = host.lost_gpus
    said = f" ({len(lost)} lost: {escaped(lost[0].error)})" if lost else ""
    if not host.gpus:
        return f"an NVIDIA driver ({host.driver}) but no usable GPU{said}"
    counts: dict[str, int] = {}
    for g in host.gpus:
        name = escaped(g.name or f"GPU of CC {g.cc}")
        counts[name] = counts.get(name, 0) + 1
    gpus = " + ".join(f"{n} × {name}" for name, n in sorted(counts.items()))
    return gpus + (f" with driver {host.driver}" if host.driver else "") + said


def judge_group(ctx: Any) -> CheckResult:
    """``check_group`` on a ``verify.context.Context`` (its expects and host; the probe is not
    needed, so it judges even when the probe failed)."""
    return check_group(ctx.expects, ctx.host)


GROUP_CHECK = Check("group", "node group", judge_group, host_only=True)
