"""The verify checks: pure functions of (probe JSON, host profile, database, lock pins).

No I/O: the probe reported facts from inside the environment, detection described the host, and
here each fact is judged by the solver's own rules (`solve.kernel_coverage`, `solve.driver_need`)
into PASS / WARN / FAIL with one line of reason and one line of fix. Recorded probe documents
replay here unchanged, which is how the GPU cases are tested on machines without one.

``evaluate`` runs them in report order: the result type is in ``result``, what they read in
``context``, the checks themselves in ``build_checks`` (probe, import, build, driver, CUDA, GPU
kernels), ``package_checks`` (cuDNN, NCCL, packages, libraries, companions, lock) and ``compute``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from resolver.catalog import Catalog
from resolver.core.hostprofile import HostProfile
from resolver.readers.pins import LockPins
from resolver.verify.build_checks import (
    check_arch,
    check_build,
    check_cuda_available,
    check_driver,
    check_environment,
    check_import,
    check_probe,
    probe_failed,
)
from resolver.verify.compute import check_gpu_compute
from resolver.verify.context import Context, build_variant, public_version
from resolver.verify.expects import Expects, check_group
from resolver.verify.package_checks import (
    check_companions,
    check_cudnn,
    check_libraries,
    check_lock,
    check_nccl,
    check_packages,
)
from resolver.verify.result import CHECKS, SKIP, CheckResult


def evaluate(
    probe: Mapping[str, Any] | None,
    host: HostProfile | None,
    catalog: Catalog | None,
    *,
    lock: LockPins | None = None,
    probe_failure: str | None = None,
    catalog_error: str | None = None,
    stderr_tail: Sequence[str] = (),
    expects: Expects | None = None,
) -> list[CheckResult]:
    """Every check of ``CHECKS``, in its order; a failed probe is one FAIL, the others SKIP
    (but the node group's, which judges the host, not the probe)."""
    if probe is None or probe_failure:
        failed = probe_failed(probe, probe_failure or "the probe gave no result", stderr_tail)
        return [failed] + [
            check_group(expects, host)
            if key == "group"
            else CheckResult(key, title, SKIP, "the probe did not finish: no facts to judge")
            for key, title in CHECKS.items()
            if key != "probe"
        ]
    ctx = Context(probe, host, catalog, catalog_error, lock, probe.get("torch") or {})
    ctx.expects = expects
    version = public_version(ctx.torch.get("version"))
    if catalog is not None and version:
        ctx.release = catalog.release(version)
        name = build_variant(ctx.torch)
        if ctx.release is not None and name:
            ctx.variant = next((v for v in ctx.release.variants if v.name == name), None)
    checks: list[Callable[[Context], CheckResult]] = [
        check_probe,
        check_environment,
        check_import,
        check_build,
        check_driver,
        lambda c: check_group(c.expects, c.host),
        check_cuda_available,
        check_arch,
        check_cudnn,
        check_nccl,
        check_packages,
        check_libraries,
        check_companions,
        check_lock,
        check_gpu_compute,
    ]
    return [c(ctx) for c in checks]
