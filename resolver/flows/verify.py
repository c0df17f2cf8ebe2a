"""A verify run's steps on values: the database and this host read beside the probe, the NCCL
workers across the GPUs, the speed judged against the datasheet peaks, the observation
recorded. `commands/verify.py` keeps the options, the report and the exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.core.documents.reports import VerifyDoc
    from resolver.core.hostprofile import HostProfile
    from resolver.observe.runtime import Recorded
    from resolver.verify.expects import Expects
    from resolver.verify.result import CheckResult
    from resolver.verify.run import ProbeRun

__all__ = [
    "curated_builds",
    "detect",
    "extension_names",
    "group_expects",
    "identify",
    "judge_speed",
    "load_catalog",
    "nccl_check",
    "record",
    "visible",
]


def identify(data: VerifyDoc, lock_file: str | None) -> None:
    """host.hostname, host.node and group: how `gpuresolve fleet report` names and groups it."""
    import os

    from resolver.verify.identity import add_identity
    from resolver.writers.recorded import lock_group

    add_identity(data, lock_group(lock_file) if lock_file else None, os.environ)


def group_expects(lock_file: str | None, group: str) -> Expects:
    """What the node group expects of this machine, from the plan its lock was written with."""
    from resolver.core.errors import UserError, escaped
    from resolver.verify.expects import find_expects

    if not lock_file:
        raise UserError(
            f"--group {escaped(group)}: give the lock too (--lock): its fleet.yaml says what "
            "the group expects"
        )
    return find_expects(lock_file, group)


def visible(run: ProbeRun) -> int:
    """The GPUs the probe saw (0 without CUDA)."""
    cuda = (run.data or {}).get("cuda") or {}
    return int(cuda.get("device_count") or 0) if cuda.get("available") else 0


def nccl_check(
    interpreter: str,
    run: ProbeRun,
    results: list[CheckResult],
    timeout: float,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One NCCL worker per visible GPU (after the probe: both use the GPUs), judged."""
    from resolver.host import topology
    from resolver.verify import nccl_check as nccl_judge
    from resolver.verify import nccl_run

    gpus = visible(run)
    topo = topology.collect() if gpus > 1 else None
    ran = (
        nccl_run.run_nccl(interpreter, gpus, timeout_s=min(timeout, nccl_run.DEFAULT_TIMEOUT_S))
        if gpus > 1
        else None
    )
    check, doc = nccl_judge.judge(ran, topo, run.data, gpus, state)
    results.append(check)
    return doc


def curated_builds() -> dict[str, Any] | None:
    """The curated torch.yaml an observation is compared with, read ahead (None: unreadable)."""
    from resolver import catalog as catalog_mod
    from resolver.core.errors import UserError
    from resolver.observe import compare, runtime  # noqa: F401 - imported while torch imports

    try:
        return compare.read_torch_doc(catalog_mod.data_dir())
    except UserError:
        return None


def record(probe: dict[str, Any] | None, curated: dict[str, Any] | None) -> Recorded:
    """The probed build's facts into the user's observations (machine-independent only)."""
    from resolver import catalog as catalog_mod
    from resolver.observe.runtime import record_verified
    from resolver.observe.store import FILE

    return record_verified(probe, catalog_mod.user_data_dir() / FILE, curated)


def judge_speed(
    run: ProbeRun,
    bench: Any,
    catalog: Catalog | None,
    results: list[CheckResult],
    state: dict[str, Any] | None = None,
) -> Any:
    """Each measurement as a fraction of the GPU's datasheet peak, and the `speed` check with
    the causes it could observe."""
    from resolver.core.errors import UserError
    from resolver.verify import speed
    from resolver.verify.result import SKIP, CheckResult

    if not isinstance(bench, dict) or bench.get("error"):
        results.append(speed.judge(bench, None))
        return bench
    try:
        peaks = speed.load(speed.data_file(catalog.origin if catalog else None))
    except UserError as exc:  # a damaged peaks file: measured, not judged
        results.append(CheckResult("speed", "GPU speed", SKIP, str(exc)))
        return bench
    from resolver.verify import node_speed

    others = (run.data or {}).get("benchmark_others") or []
    benches = [bench, *(b for b in others if isinstance(b, dict))]
    annotated, check = node_speed.judge_node(run.data, benches, peaks, results, state)
    results.append(check)
    return annotated


def load_catalog() -> tuple[Catalog | None, str | None]:
    """The database, or why not: verify still checks what needs no database."""
    from resolver import catalog as catalog_mod
    from resolver.core.errors import UserError

    try:
        return catalog_mod.load(), None
    except UserError as exc:
        return None, str(exc)


def detect(catalog: Catalog | None) -> HostProfile | None:
    """This host's profile (its CUDA from the database where the driver did not say), or None:
    detection never aborts verify, the checks then say the host is unknown."""
    from resolver.host import detect as probe_host

    def lookup(name: str) -> str | None:
        model = catalog.gpu_by_name(name) if catalog else None
        return f"{model.cc[0]}.{model.cc[1]}" if model else None

    try:
        profile = probe_host(lookup_cc=lookup)
    except Exception:  # detection never aborts verify: the checks say "host unknown"
        return None
    if not profile.driver_cuda and profile.driver and catalog is not None:
        profile.driver_cuda = catalog.driver_max_cuda(profile.driver, profile.driver_os)
    return profile


def extension_names(given: tuple[str, ...]) -> list[str]:
    """--with's names, canonical, each once; exit 2 for one verify has no operation for (the
    package probe's own table, ``standalone/ext_probe.OPS``)."""
    from resolver.core.errors import UserError
    from resolver.standalone.ext_probe import OPS

    known = tuple(OPS)
    names: list[str] = []
    for item in given:
        name = item.strip().lower().replace("_", "-")
        if name not in known:
            raise UserError(f"--with {item!r}: verify runs {', '.join(known)}")
        if name not in names:
            names.append(name)
    return names


def import_gates(catalog: Catalog | None, packages: list[str]) -> dict[tuple[str, str], str]:
    """(package, version) -> the torch its own import loads its kernels with, for the packages
    verify runs (extensions.yaml's ``import_gate``; torchao's): the judge names that gate."""
    gates: dict[tuple[str, str], str] = {}
    if catalog is None:
        return gates
    for name in packages:
        pkg = catalog.extensions.get(name)
        for rel in pkg.releases if pkg else ():
            for build in rel.builds:
                if build.import_gate is not None:
                    gates.setdefault((name, rel.version), build.import_gate.torch)
    return gates
