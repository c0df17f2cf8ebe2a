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

from collections.abc import Mapping, Sequence
from typing import Any

from resolver.catalog import Catalog
from resolver.core.hostprofile import HostProfile
from resolver.readers.pins import LockPins
from resolver.verify.build_checks import (
    ARCH_CHECK,
    BUILD_CHECK,
    CUDA_CHECK,
    DRIVER_CHECK,
    ENVIRONMENT_CHECK,
    IMPORT_CHECK,
    PROBE_CHECK,
    probe_failed,
)
from resolver.verify.compute import COMPUTE_CHECK
from resolver.verify.context import Context, build_variant, public_version
from resolver.verify.expects import GROUP_CHECK, Expects
from resolver.verify.package_checks import (
    COMPANIONS_CHECK,
    CUDNN_CHECK,
    LIBRARIES_CHECK,
    LOCK_CHECK,
    NCCL_CHECK,
    PACKAGES_CHECK,
)
from resolver.verify.result import SKIP, Check, CheckResult

# Every check, in report order; every id is in every report (SKIP, with its reason, where the
# check does not apply). A new check: its function and ``Check`` value in a module, one line here.
CHECKS: tuple[Check, ...] = (
    PROBE_CHECK,
    ENVIRONMENT_CHECK,
    IMPORT_CHECK,
    BUILD_CHECK,
    DRIVER_CHECK,
    GROUP_CHECK,
    CUDA_CHECK,
    ARCH_CHECK,
    CUDNN_CHECK,
    NCCL_CHECK,
    PACKAGES_CHECK,
    LIBRARIES_CHECK,
    COMPANIONS_CHECK,
    LOCK_CHECK,
    COMPUTE_CHECK,
)


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
    (but those that judge the host, not the probe)."""
    ctx = Context(probe or {}, host, catalog, catalog_error, lock, (probe or {}).get("torch") or {})
    ctx.expects = expects
    if probe is None or probe_failure:
        failed = probe_failed(probe, probe_failure or "the probe gave no result", stderr_tail)
        return [failed] + [
            c.judge(ctx)
            if c.host_only
            else c.result(SKIP, "the probe did not finish: no facts to judge")
            for c in CHECKS
            if c is not PROBE_CHECK
        ]
    version = public_version(ctx.torch.get("version"))
    if catalog is not None and version:
        ctx.release = catalog.release(version)
        name = build_variant(ctx.torch)
        if ctx.release is not None and name:
            ctx.variant = next((v for v in ctx.release.variants if v.name == name), None)
    return [c.judge(ctx) for c in CHECKS]
