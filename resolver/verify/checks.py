"""The verify checks: pure functions of (probe JSON, host profile, database, lock pins).

No I/O: the probe reported facts from inside the environment, detection described the host, and
here each fact is judged by the solver's own rules (`solve.kernel_coverage`, `solve.driver_need`)
into PASS / WARN / FAIL with one line of reason and one line of fix. Recorded probe documents
replay here unchanged, which is how the GPU cases are tested on machines without one.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from resolver.catalog import ArchList, Catalog, Provenance, Release, Variant
from resolver.host.profile import STATE_MISMATCH, STATE_OK, HostProfile
from resolver.lockpins import (
    FORMAT_CONDA_LOCK,
    FORMAT_ENVIRONMENT,
    LockPins,
    Pin,
    canonical,
    variant_of_local,
)
from resolver.solve import driver_need, is_jit, kernel_coverage
from resolver.versions import CC, cc_sm, driver_key, parse_cc

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
# A float32 result on the GPU against the float64 CPU reference: TF32 alone would give ~1e-3.
MAX_REL_ERR = 1e-3
# The packages whose versions torch pins and whose libraries it loads.
_PINNED_PREFIXES = ("nvidia-", "cuda-")
_PINNED_NAMES = ("triton",)
_COMPANIONS = ("torchvision", "torchaudio")
# A library torch could not load -> the word in its package's name or cuda-toolkit extra.
_LIB_PACKAGES = (
    ("libcudnn", "cudnn"),
    ("libcublas", "cublas"),
    ("libcudart", "cudart"),
    ("libnccl", "nccl"),
    ("libcusparselt", "cusparselt"),
    ("libcusparse", "cusparse"),
    ("libcufft", "cufft"),
    ("libcurand", "curand"),
    ("libcusolver", "cusolver"),
    ("libnvjitlink", "nvjitlink"),
    ("libnvrtc", "nvrtc"),
    ("libcupti", "cupti"),
    ("libnvshmem", "nvshmem"),
    ("libcufile", "cufile"),
    ("libnvtoolsext", "nvtx"),
)
# Every check, in report order: id (a stable key of `verify --json`) -> title. Every id is in
# every report: SKIP, with its reason, where the check does not apply.
CHECKS: dict[str, str] = {
    "probe": "probe ran",
    "environment": "environment",
    "import": "torch imports",
    "build": "build vs host",
    "driver": "driver",
    "cuda": "CUDA available",
    "arch": "GPU kernels",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "packages": "CUDA packages",
    "libraries": "loaded libraries",
    "companions": "companions",
    "lock": "lock",
    "compute": "GPU compute",
}
_EMPTY_CATALOG = Catalog(
    sources={},
    toolkits={},
    compat_floors={},
    architectures={},
    gpus=(),
    releases=(),
    index_url_template="",
)


@dataclass(frozen=True)
class CheckResult:
    id: str  # stable key for --json
    title: str
    status: str  # pass | warn | fail | skip
    reason: str
    fix: str | None = None
    details: tuple[str, ...] = ()  # extra lines (library paths, per-GPU coverage)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "details": list(self.details),
        }


@dataclass
class Context:
    """Everything the checks read, with the lookups they share computed once."""

    probe: Mapping[str, Any]
    host: HostProfile | None
    catalog: Catalog | None
    catalog_error: str | None = None
    lock: LockPins | None = None
    torch: Mapping[str, Any] = field(default_factory=dict)
    release: Release | None = None
    variant: Variant | None = None

    @property
    def imported(self) -> bool:
        return bool(self.torch.get("imported"))

    @property
    def cuda_build(self) -> bool:
        return bool(self.torch.get("cuda"))

    @property
    def host_gpu(self) -> bool:
        h = self.host
        return h is not None and (h.state in (STATE_OK, STATE_MISMATCH) or bool(h.gpus))

    @property
    def dists(self) -> Mapping[str, Mapping[str, Any]]:
        d = self.probe.get("dists")
        return d if isinstance(d, dict) else {}

    @property
    def markers(self) -> dict[str, str]:
        m = self.probe.get("markers")
        return {str(k): str(v) for k, v in m.items()} if isinstance(m, dict) else {}

    @property
    def db(self) -> Catalog:
        return self.catalog or _EMPTY_CATALOG

    def db_note(self) -> str:
        return (
            f"the database could not be loaded ({self.catalog_error})"
            if self.catalog_error
            else ("the database has no record of this build")
        )


# --- entry point ---------------------------------------------------------------------------------


def evaluate(
    probe: Mapping[str, Any] | None,
    host: HostProfile | None,
    catalog: Catalog | None,
    *,
    lock: LockPins | None = None,
    probe_failure: str | None = None,
    catalog_error: str | None = None,
    stderr_tail: Sequence[str] = (),
) -> list[CheckResult]:
    """Every check of ``CHECKS``, in its order; a failed probe is one FAIL, the others SKIP."""
    if probe is None or probe_failure:
        failed = _probe_failed(probe, probe_failure or "the probe gave no result", stderr_tail)
        return [failed] + [
            CheckResult(key, title, SKIP, "the probe did not finish: no facts to judge")
            for key, title in CHECKS.items()
            if key != "probe"
        ]
    ctx = Context(probe, host, catalog, catalog_error, lock, probe.get("torch") or {})
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


def overall(results: Iterable[CheckResult]) -> str:
    statuses = {r.status for r in results}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else PASS


def summary(results: Iterable[CheckResult]) -> dict[str, int]:
    out = {PASS: 0, WARN: 0, FAIL: 0, SKIP: 0}
    for r in results:
        out[r.status] += 1
    return out


# --- helpers -------------------------------------------------------------------------------------


def public_version(version: Any) -> str | None:
    if not version:
        return None
    try:
        return Version(str(version)).public
    except InvalidVersion:
        return str(version).split("+", 1)[0]


def local_tag(version: Any) -> str | None:
    if not version or "+" not in str(version):
        return None
    return str(version).split("+", 1)[1]


def build_variant(torch: Mapping[str, Any]) -> str | None:
    """The variant name of an imported torch: its local tag, else from its CUDA/HIP version."""
    if not torch.get("version"):
        return None
    tag = variant_of_local(local_tag(torch.get("version")))
    if tag:
        return tag
    if torch.get("hip"):
        return "rocm" + ".".join(str(torch["hip"]).split(".")[:2])
    if torch.get("cuda"):
        major, _, minor = str(torch["cuda"]).partition(".")
        return f"cu{major}{minor.split('.')[0] or '0'}"
    return "cpu"


def version_tuple(text: str | None, n: int = 3) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = re.findall(r"\d+", str(text))
    return tuple(int(p) for p in parts[:n]) if parts else None


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _req_pins(ctx: Context) -> list[Requirement]:
    """torch's own unconditional requirements (extras off), as this interpreter evaluates them."""
    torch_dist = ctx.dists.get("torch") or {}
    out: list[Requirement] = []
    for text in torch_dist.get("requires") or []:
        req = _requirement(text)
        if req is not None and _marker_ok(req.marker, ctx.markers, ("",)):
            out.append(req)
    return out


def _requirement(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _marker_ok(marker: Marker | None, env: Mapping[str, str], extras: Sequence[str]) -> bool:
    if marker is None:
        return True
    if not env:
        return True  # no environment reported: do not drop pins on a guess
    for extra in extras:
        try:
            if marker.evaluate({**env, "extra": extra}):
                return True
        except Exception:  # an odd marker is not ours to reject
            return True
    return False


def _quote_req(req: Requirement) -> str:
    name = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")
    return shlex.quote(f"{name}{req.specifier}")


def _index_for(ctx: Context, variant: str | None) -> str:
    if not variant or ctx.catalog is None:
        return ""
    return f" --index-url {ctx.catalog.index_url(variant)}"


def _skip(ctx: Context, key: str, *, cuda: bool = True) -> CheckResult | None:
    """The SKIP of a check with nothing to judge: torch did not import or (``cuda``) is no CUDA
    build; None when it applies."""
    if not ctx.imported:
        return CheckResult(key, CHECKS[key], SKIP, "torch did not import")
    if cuda and not ctx.cuda_build:
        return CheckResult(key, CHECKS[key], SKIP, f"not a CUDA build ({build_variant(ctx.torch)})")
    return None


# --- the checks ----------------------------------------------------------------------------------


def _probe_failed(
    probe: Mapping[str, Any] | None, failure: str, stderr_tail: Sequence[str]
) -> CheckResult:
    stage = (probe or {}).get("stage") if probe else None
    if "crashed" in failure or "signal" in failure:
        fix = (
            "a library crashed the interpreter: check LD_LIBRARY_PATH / LD_PRELOAD, then reinstall "
            "torch in a clean environment (`gpuresolve suggest` gives the command)"
        )
    elif "did not finish" in failure:
        fix = (
            "something blocked (a GPU held by a stuck process, a driver problem?): check "
            "`nvidia-smi`, then run again (or raise --timeout)"
        )
    else:
        fix = "run the interpreter by hand (`python -c 'import torch'`) to see the error"
    details = tuple(f"stderr: {line}" for line in stderr_tail[-5:])
    if stage:
        details = (f"last stage: {stage}", *details)
    return CheckResult("probe", CHECKS["probe"], FAIL, failure, fix, details)


def check_probe(ctx: Context) -> CheckResult:
    elapsed = ctx.probe.get("elapsed_s")
    took = f" in {elapsed:.1f} s" if isinstance(elapsed, int | float) else ""
    return CheckResult("probe", CHECKS["probe"], PASS, f"the probe finished{took}")


def check_environment(ctx: Context) -> CheckResult:
    py = ctx.probe.get("python") or {}
    where = py.get("executable") or "?"
    prefix = py.get("prefix")
    elapsed = ctx.probe.get("elapsed_s")
    took = f", probe took {elapsed:.1f} s" if isinstance(elapsed, int | float) else ""
    reason = f"Python {py.get('version', '?')} at {where}{took}"
    details = (f"prefix: {prefix}",) if prefix else ()
    return CheckResult("environment", CHECKS["environment"], PASS, reason, None, details)


def check_import(ctx: Context) -> CheckResult:
    t = ctx.torch
    title = CHECKS["import"]
    if t.get("imported"):
        return CheckResult(
            "import", title, PASS, f"torch {t.get('version')} from {t.get('file')}", None
        )
    err = t.get("error") or {}
    etype, message = str(err.get("type", "")), str(err.get("message", ""))
    if etype == "ModuleNotFoundError" and "'torch'" in message:
        return CheckResult(
            "import",
            title,
            FAIL,
            "torch is not installed in this environment",
            "install the build for this machine: `gpuresolve suggest` prints the pip command",
        )
    missing = re.search(r"(lib[\w.+-]+?\.so(?:\.\d+)*): cannot open shared object file", message)
    if missing:
        lib = missing.group(1)
        return CheckResult(
            "import",
            title,
            FAIL,
            f"torch cannot load {lib}: not found",
            _missing_lib_fix(ctx, lib),
            (f"{etype}: {_first_line(message)}",),
        )
    undefined = re.search(r"undefined symbol: (\S+)", message)
    if undefined:
        ld = (ctx.probe.get("env") or {}).get("LD_LIBRARY_PATH")
        fix = (
            f"a library from LD_LIBRARY_PATH ({ld}) shadows the one torch was built with: unset it"
            if ld
            else "a library torch loads does not match it: reinstall torch with its dependencies"
        )
        return CheckResult(
            "import",
            title,
            FAIL,
            f"a library torch loaded does not match it (undefined symbol {undefined.group(1)})",
            fix,
            (f"{etype}: {_first_line(message)}",),
        )
    return CheckResult(
        "import",
        title,
        FAIL,
        f"import torch failed: {etype}: {_first_line(message)}",
        "reinstall torch (`gpuresolve suggest` prints the command for this machine)",
    )


def _missing_lib_fix(ctx: Context, lib: str) -> str:
    """The pinned package that ships a library torch could not find."""
    base = lib.lower()
    word = next((w for prefix, w in _LIB_PACKAGES if base.startswith(prefix)), None)
    if word:
        for req in _req_pins(ctx):
            name = canonical(req.name)
            if word in name.replace("-", "") or word in {e.lower() for e in req.extras}:
                return f"install the package torch pins for it: pip install {_quote_req(req)}"
    version = (ctx.dists.get("torch") or {}).get("version")
    pin = f"torch=={version}" if version else "torch"
    return (
        f"reinstall torch with its dependencies: pip install --force-reinstall {shlex.quote(pin)}"
    )


def check_build(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "build", cuda=False)
    if skip is not None:
        return skip
    t, title = ctx.torch, CHECKS["build"]
    variant = build_variant(t) or "?"
    gpus = _host_gpu_text(ctx.host)
    if t.get("hip"):
        status = FAIL if ctx.host_gpu else PASS
        fix = "install a CUDA build: `gpuresolve suggest`" if ctx.host_gpu else None
        return CheckResult("build", title, status, f"ROCm build ({variant}); host: {gpus}", fix)
    if not t.get("cuda"):
        if ctx.host_gpu:
            return CheckResult(
                "build",
                title,
                FAIL,
                f"CPU build ({variant}) on a host with {gpus}: torch will not use the GPU",
                "install a CUDA build: `gpuresolve suggest` prints the command for this machine",
            )
        return CheckResult("build", title, PASS, "CPU build on a host without an NVIDIA GPU")
    if ctx.host_gpu:
        return CheckResult(
            "build", title, PASS, f"CUDA {t['cuda']} build ({variant}) on a host with {gpus}"
        )
    note = (ctx.host.messages[0] if ctx.host and ctx.host.messages else "") or ""
    return CheckResult(
        "build",
        title,
        WARN,
        f"CUDA {t['cuda']} build ({variant}) on a host without a usable NVIDIA GPU: CPU only",
        _first_line(note) or "the CPU build is much smaller: `gpuresolve suggest`",
    )


def _host_gpu_text(host: HostProfile | None) -> str:
    if host is None:
        return "unknown host"
    if not host.gpus:
        return "an NVIDIA driver but no usable GPU" if host.driver else "no NVIDIA GPU"
    names = sorted({g.name or f"CC {g.cc}" for g in host.gpus})
    count = len(host.gpus)
    return f"{count} NVIDIA GPU{'s' if count > 1 else ''} ({', '.join(names)})"


def _gpus(ctx: Context) -> list[tuple[str, str]]:
    """(label, CC) of every visible GPU: torch's view when it has one, else the host's."""
    devices = (ctx.probe.get("cuda") or {}).get("devices") or []
    if devices:
        return [(f"GPU {d['index']} {d.get('name') or ''}".strip(), str(d["cc"])) for d in devices]
    if ctx.host is None:
        return []
    return [(f"GPU {g.index} {g.name or ''}".strip(), g.cc) for g in ctx.host.gpus if g.cc]


def _arch_list(ctx: Context) -> ArchList | None:
    names = ctx.torch.get("arch_list") or []
    sass: list[CC] = []
    ptx: list[CC] = []
    for name in names:
        try:
            cc = parse_cc(str(name))
        except Exception:
            continue
        (ptx if str(name).startswith("compute_") else sass).append(cc)
    if not sass and not ptx:
        return None
    return ArchList(tuple(sorted(set(sass))), tuple(sorted(set(ptx))), Provenance(("torch",)))


def _coverage(ctx: Context) -> tuple[list[str], list[str], bool]:
    """Per GPU: covered lines, uncovered lines, and whether any GPU needs the PTX JIT."""
    arch = _arch_list(ctx)
    covered: list[str] = []
    missing: list[str] = []
    jit = False
    if arch is None:
        return covered, missing, jit
    for label, cc_text in _gpus(ctx):
        cc = parse_cc(cc_text)
        how = kernel_coverage(ctx.db, arch, cc)
        if how is None:
            missing.append(f"{cc_sm(cc)} ({label})")
        else:
            jit = jit or is_jit(how)
            covered.append(f"{cc_sm(cc)} ({label}): {how}")
    return covered, missing, jit


def check_driver(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "driver")
    if skip is not None:
        return skip
    title = CHECKS["driver"]
    host = ctx.host
    cuda = str(ctx.torch["cuda"])
    if host is None or not host.driver:
        if not ctx.host_gpu:
            return CheckResult("driver", title, SKIP, "no NVIDIA driver on this host")
        return CheckResult("driver", title, WARN, "the host's driver version is unknown")
    _, _, jit = _coverage(ctx)
    need, why = driver_need(ctx.db, cuda, host.driver_os, needs_jit=jit)
    if need is None:
        return CheckResult(
            "driver",
            title,
            WARN,
            f"the minimum {host.driver_os} driver for CUDA {cuda} is unknown ({ctx.db_note()})",
            "update the database: `gpuresolve db update`",
        )
    if driver_key(host.driver) < driver_key(need):
        return CheckResult(
            "driver",
            title,
            FAIL,
            f"CUDA {cuda} build needs driver >= {need} ({why}); this host has {host.driver}",
            f"upgrade the NVIDIA driver to >= {need}, or install a build this driver runs "
            "(`gpuresolve suggest`)",
        )
    return CheckResult(
        "driver", title, PASS, f"driver {host.driver} >= {need} ({why}) for CUDA {cuda}"
    )


def check_cuda_available(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "cuda")
    if skip is not None:
        return skip
    title = CHECKS["cuda"]
    cuda = ctx.probe.get("cuda") or {}
    if cuda.get("available") and not cuda.get("error"):
        n = cuda.get("device_count", len(cuda.get("devices") or []))
        return CheckResult("cuda", title, PASS, f"True, {n} device{'s' if n != 1 else ''}")
    if not ctx.host_gpu:
        return CheckResult("cuda", title, SKIP, "no usable NVIDIA GPU on this host")
    said = [str((cuda.get("error") or {}).get("message") or ""), *(cuda.get("warnings") or [])]
    why = next((_first_line(s) for s in said if s.strip()), "")
    reason = "False" + (f": {why}" if why else " although the host has an NVIDIA GPU")
    visible = (ctx.probe.get("env") or {}).get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip(","):
        fix = f"CUDA_VISIBLE_DEVICES is {visible!r}: unset it or name a GPU"
    elif "too old" in why.lower() or "driver" in why.lower():
        fix = "the driver cannot run this build: upgrade the driver or `gpuresolve suggest`"
    else:
        fix = "`gpuresolve detect` shows what the host has; see the driver check above"
    return CheckResult("cuda", title, FAIL, reason, fix)


def check_arch(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "arch")
    if skip is not None:
        return skip
    title = CHECKS["arch"]
    gpus = _gpus(ctx)
    if not gpus:
        return CheckResult("arch", title, SKIP, "no GPU to check")
    if _arch_list(ctx) is None:
        return CheckResult("arch", title, WARN, "torch reports no compiled architecture list")
    covered, missing, _ = _coverage(ctx)
    listed = " ".join(ctx.torch.get("arch_list") or [])
    if missing:
        return CheckResult(
            "arch",
            title,
            FAIL,
            f"no kernels for {', '.join(missing)}: the build has {listed}",
            "install a build with kernels for this GPU: `gpuresolve suggest`",
            tuple(covered),
        )
    return CheckResult("arch", title, PASS, "; ".join(covered), None, (f"build: {listed}",))


def check_cudnn(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "cudnn")
    if skip is not None:
        return skip
    title = CHECKS["cudnn"]
    c = ctx.probe.get("cudnn") or {}
    pinned = _pinned_req(ctx, "cudnn")
    fix_pkg = (
        f"pip install {_quote_req(pinned)}"
        if pinned
        else "reinstall torch with its dependencies (`gpuresolve suggest`)"
    )
    if c.get("error"):
        return CheckResult(
            "cudnn",
            title,
            FAIL,
            f"cuDNN does not load: {_first_line(c['error'].get('message', ''))}",
            fix_pkg,
        )
    if not c.get("compiled", c.get("available")):
        return CheckResult("cudnn", title, FAIL, "this CUDA build has no cuDNN", fix_pkg)
    if not c.get("available"):
        return CheckResult("cudnn", title, FAIL, "cuDNN is not available", fix_pkg)
    if not c.get("enabled", True):
        return CheckResult(
            "cudnn",
            title,
            FAIL,
            "cuDNN is disabled at start-up (torch.backends.cudnn.enabled is False)",
            "find what sets it (sitecustomize, a startup hook) and remove it",
        )
    have = c.get("version_text")
    db = ctx.variant.cudnn.version if ctx.variant and ctx.variant.cudnn else None
    if not have:
        return CheckResult("cudnn", title, WARN, "cuDNN loads, but reports no version")
    if not db:
        return CheckResult("cudnn", title, PASS, f"cuDNN {have} ({ctx.db_note()})")
    have_k, db_k = version_tuple(have), version_tuple(db)
    assert have_k is not None and db_k is not None
    n = min(len(have_k), len(db_k))
    where = f"{ctx.release.version if ctx.release else ''} {build_variant(ctx.torch)}".strip()
    if have_k[:n] == db_k[:n]:
        return CheckResult("cudnn", title, PASS, f"cuDNN {have} (the database lists {db})")
    if have_k[:n] < db_k[:n]:
        return CheckResult(
            "cudnn",
            title,
            FAIL,
            f"cuDNN {have} is older than the {db} torch {where} was built with",
            fix_pkg,
        )
    return CheckResult(
        "cudnn",
        title,
        WARN,
        f"cuDNN {have} is newer than the {db} torch {where} was released with",
        f"usually fine; to match the release: {fix_pkg}",
    )


def check_nccl(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "nccl")
    if skip is not None:
        return skip
    title = CHECKS["nccl"]
    n = ctx.probe.get("nccl") or {}
    have = n.get("version_text")
    if not n.get("available") or not have:
        system = ctx.markers.get("platform_system", "")
        if system == "Windows":
            return CheckResult("nccl", title, SKIP, "Windows builds have no NCCL")
        why = f": {_first_line(n['error'].get('message', ''))}" if n.get("error") else ""
        return CheckResult(
            "nccl",
            title,
            WARN,
            f"NCCL is not available{why}: multi-GPU training cannot use it",
            "reinstall torch with its dependencies (`gpuresolve suggest`)",
        )
    db = ctx.variant.nccl.version if ctx.variant and ctx.variant.nccl else None
    if not db:
        return CheckResult("nccl", title, PASS, f"NCCL {have} ({ctx.db_note()})")
    if version_tuple(have) == version_tuple(db):
        return CheckResult("nccl", title, PASS, f"NCCL {have}")
    pinned = _pinned_req(ctx, "nccl")
    fix = f"pip install {_quote_req(pinned)}" if pinned else "reinstall torch's NCCL package"
    return CheckResult(
        "nccl", title, WARN, f"NCCL {have}; the database lists {db} for this build", fix
    )


def _pinned_req(ctx: Context, word: str) -> Requirement | None:
    for req in _req_pins(ctx):
        if word in canonical(req.name).replace("-", ""):
            return req
    return None


def check_packages(ctx: Context) -> CheckResult:
    title = CHECKS["packages"]
    torch_dist = ctx.dists.get("torch")
    if not torch_dist:
        if ctx.imported:
            return CheckResult(
                "packages", title, SKIP, "torch has no package metadata (a source or conda build?)"
            )
        return CheckResult("packages", title, SKIP, "torch is not installed")
    problems: list[str] = []
    fixes: list[str] = []
    ok: list[str] = []
    seen: set[str] = set()
    queue: list[tuple[Requirement, str]] = [(r, "torch") for r in _req_pins(ctx)]
    while queue:
        req, parent = queue.pop(0)
        name = canonical(req.name)
        if name in seen or not (name.startswith(_PINNED_PREFIXES) or name in _PINNED_NAMES):
            continue
        seen.add(name)
        dist = ctx.dists.get(name)
        wants = f"{parent} requires {req.specifier or 'it'}"
        if not dist or not dist.get("version"):
            problems.append(f"{name} is not installed ({wants})")
            fixes.append(_quote_req(req))
            continue
        try:
            good = req.specifier.contains(Version(str(dist["version"])), prereleases=True)
        except InvalidVersion:
            good = False
        if not good:
            problems.append(f"{name} {dist['version']} installed; {wants}")
            fixes.append(_quote_req(req))
            continue
        ok.append(f"{name} {dist['version']}")
        # What it pins in turn (cuda-toolkit[cublas,...] pins nvidia-cublas): its base
        # requirements and those of the extras asked for.
        extras = ("", *sorted(req.extras))
        for text in dist.get("requires") or []:
            sub = _requirement(text)
            if sub is not None and _marker_ok(sub.marker, ctx.markers, extras):
                queue.append((sub, name))
    if problems:
        return CheckResult(
            "packages",
            title,
            FAIL,
            "; ".join(problems[:3])
            + (f"; and {len(problems) - 3} more" if len(problems) > 3 else ""),
            "pip install " + " ".join(fixes),
            tuple(problems) if len(problems) > 3 else (),
        )
    if not ok:
        return CheckResult(
            "packages", title, PASS, f"torch {torch_dist.get('version')} pins no CUDA packages"
        )
    return CheckResult(
        "packages",
        title,
        PASS,
        f"{len(ok)} pinned packages match torch {torch_dist.get('version')}",
        None,
        tuple(ok),
    )


def check_libraries(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "libraries", cuda=False)
    if skip is not None:
        return skip
    title = CHECKS["libraries"]
    libs = ctx.probe.get("libraries") or {}
    if not libs.get("maps_readable"):
        return CheckResult("libraries", title, SKIP, "no /proc/self/maps on this system")
    loaded = [(str(x["family"]), str(x["path"])) for x in libs.get("loaded") or []]
    if not loaded:
        if ctx.cuda_build:
            return CheckResult("libraries", title, WARN, "no CUDA library was loaded")
        return CheckResult("libraries", title, SKIP, "CPU build: no CUDA libraries")
    roots = [str(r).rstrip(os.sep) for r in libs.get("roots") or [] if r]
    copies: Mapping[str, list[str]] = libs.get("env_copies") or {}

    def inside(path: str) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    ld_dirs = [
        d.rstrip("/")
        for d in ((ctx.probe.get("env") or {}).get("LD_LIBRARY_PATH") or "").split(":")
        if d
    ]
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    by_name: dict[str, set[str]] = {}
    for fam, path in loaded:
        by_name.setdefault(os.path.basename(path), set()).add(path)
        if inside(path):
            continue
        folder = os.path.dirname(path)
        if copies.get(fam):
            fails.append(f"{os.path.basename(path)} from {folder}, not the environment's copy")
            if folder in ld_dirs:
                fixes.append(f"remove {folder} from LD_LIBRARY_PATH")
            else:
                fixes.append(f"find what puts {folder} first (LD_PRELOAD, ld.so.conf)")
        else:
            warns.append(f"{os.path.basename(path)} from {folder} (outside the environment)")
    for name, paths in by_name.items():
        if len(paths) > 1:
            fails.append(f"{name} is loaded twice: {', '.join(sorted(paths))}")
            fixes.append("one copy per library: check LD_LIBRARY_PATH and LD_PRELOAD")
    details = tuple(f"{os.path.basename(p)}: {p}" for _, p in loaded)
    families = ", ".join(dict.fromkeys(f for f, _ in loaded))
    if fails:
        return CheckResult(
            "libraries", title, FAIL, "; ".join(fails[:2]), "; ".join(dict.fromkeys(fixes)), details
        )
    if warns:
        return CheckResult(
            "libraries",
            title,
            WARN,
            "; ".join(warns[:2]),
            "a system copy is used: make sure it matches the build, or install torch's CUDA "
            "library packages",
            details,
        )
    return CheckResult(
        "libraries",
        title,
        PASS,
        f"{families} from the environment, none from outside",
        None,
        details,
    )


def _installed(ctx: Context, name: str) -> tuple[str | None, str | None]:
    """(public version, variant) of an installed distribution, torch and companions included."""
    if name == "torch" and ctx.torch.get("version"):
        return public_version(ctx.torch["version"]), build_variant(ctx.torch)
    if name in _COMPANIONS:
        comp = (ctx.probe.get("companions") or {}).get(name) or {}
        text = comp.get("version") or (ctx.dists.get(name) or {}).get("version")
        if text:
            tag = variant_of_local(local_tag(text)) or variant_of_local(
                local_tag((ctx.dists.get(name) or {}).get("version"))
            )
            if not tag and comp.get("cuda"):
                tag = "cu" + str(comp["cuda"]).replace(".", "")
            return public_version(text), tag
        return None, None
    dist = ctx.dists.get(name) or {}
    text = dist.get("version")
    return public_version(text), variant_of_local(local_tag(text))


def check_companions(ctx: Context) -> CheckResult:
    title = CHECKS["companions"]
    present = [(n, *_installed(ctx, n)) for n in _COMPANIONS]
    present = [p for p in present if p[1]]
    if not present:
        return CheckResult(
            "companions", title, SKIP, "neither torchvision nor torchaudio is installed"
        )
    torch_v = public_version(
        ctx.torch.get("version") or (ctx.dists.get("torch") or {}).get("version")
    )
    torch_var = build_variant(ctx.torch) if ctx.torch.get("version") else None
    if not torch_v:
        return CheckResult("companions", title, SKIP, "torch is not installed")
    fails: list[str] = []
    fixes: list[str] = []
    notes: list[str] = []
    for name, version, variant in present:
        paired = ctx.release.companion(name) if ctx.release else None
        if ctx.release is not None and paired is None:
            fails.append(f"{name} {version}: no {name} release pairs with torch {torch_v}")
            fixes.append(f"pip uninstall {name}")
            continue
        if paired is not None and paired != version:
            fails.append(f"{name} {version} installed; torch {torch_v} pairs with {paired}")
            local = f"+{torch_var}" if torch_var else ""
            fixes.append(f"pip install {name}=={paired}{local}{_index_for(ctx, torch_var)}")
            continue
        if variant and torch_var and variant != torch_var:
            fails.append(f"{name} is a {variant} build; torch is {torch_var}")
            fixes.append(f"pip install {name}=={version}+{torch_var}{_index_for(ctx, torch_var)}")
            continue
        notes.append(f"{name} {version}" + (f"+{variant}" if variant else ""))
    if fails:
        return CheckResult("companions", title, FAIL, "; ".join(fails), "; ".join(fixes))
    if ctx.release is None:
        return CheckResult(
            "companions", title, WARN, f"{', '.join(notes)}: pairing not checked ({ctx.db_note()})"
        )
    return CheckResult("companions", title, PASS, f"{', '.join(notes)} with torch {torch_v}")


def _pin_applies(ctx: Context, pin: Pin) -> bool:
    if not pin.marker:
        return True
    try:
        return _marker_ok(Marker(pin.marker), ctx.markers, ("",))
    except InvalidMarker:
        return True


def _pin_matches(pin: Pin, version: str, variant: str | None) -> bool:
    if pin.version is not None:
        if pin.spec.endswith(".*"):
            if not (version == pin.version or version.startswith(pin.version + ".")):
                return False
        else:
            try:
                if Version(version) != Version(pin.version):
                    return False
            except InvalidVersion:
                if version != pin.version:
                    return False
    else:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            if not SpecifierSet(pin.spec).contains(version, prereleases=True):
                return False
        except InvalidSpecifier:
            return True
    if pin.variant and variant:
        if pin.variant == "cuda":
            return variant.startswith("cu")
        return pin.variant == variant
    return True


def check_lock(ctx: Context) -> CheckResult:
    lock = ctx.lock
    title = CHECKS["lock"]
    if lock is None:
        return CheckResult("lock", title, SKIP, "no lock file given (--lock)")
    bad: list[str] = []
    good: list[str] = []
    for pin in lock.pins:
        if not _pin_applies(ctx, pin):
            continue
        version, variant = _installed(ctx, pin.name)
        if version is None:
            if pin.manager == "conda" and pin.name not in ("torch", *_COMPANIONS):
                continue  # a conda package that is no Python distribution: nothing to compare
            bad.append(f"{pin.name} is not installed; the lock pins {pin.text}")
            continue
        shown = f"{pin.name} {version}" + (f"+{variant}" if variant else "")
        if _pin_matches(pin, version, variant):
            good.append(shown)
        else:
            bad.append(f"{shown} installed; the lock pins {pin.text}")
    if bad:
        return CheckResult(
            "lock",
            title,
            FAIL,
            "; ".join(bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else ""),
            _lock_fix(lock),
            tuple(bad) if len(bad) > 3 else (),
        )
    if not good:
        return CheckResult("lock", title, WARN, f"{lock.path} pins nothing that applies here")
    return CheckResult(
        "lock",
        title,
        PASS,
        f"{len(good)} pin{'s' if len(good) != 1 else ''} match ({', '.join(good[:3])}"
        + (", …)" if len(good) > 3 else ")"),
        None,
        tuple(good),
    )


def _lock_fix(lock: LockPins) -> str:
    path = shlex.quote(lock.path)
    if lock.format == FORMAT_CONDA_LOCK:
        return f"reinstall from the lock: conda-lock install --name ENV {path}"
    if lock.format == FORMAT_ENVIRONMENT:
        return f"reinstall from the lock: conda env update --prune --file {path}"
    return f"reinstall from the lock: pip install -r {path}"


def check_gpu_compute(ctx: Context) -> CheckResult:
    skip = _skip(ctx, "compute")
    if skip is not None:
        return skip
    title = CHECKS["compute"]
    tests = ctx.probe.get("gpu_tests")
    if not tests:
        cuda = ctx.probe.get("cuda") or {}
        why = "CUDA is not available" if ctx.host_gpu else "no GPU on this host"
        if cuda.get("available"):
            why = "no device was tested"
        return CheckResult("compute", title, SKIP, why)
    names = {d["index"]: d.get("name") for d in (ctx.probe.get("cuda") or {}).get("devices") or []}
    fails: list[str] = []
    lines: list[str] = []
    cudnn_used = False
    for t in tests:
        label = f"GPU {t.get('device')}" + (
            f" ({names[t['device']]})" if names.get(t.get("device")) else ""
        )
        if t.get("error"):
            fails.append(f"{label}: {_first_line(t['error'].get('message', ''))}")
            continue
        for op in ("matmul", "conv2d"):
            r = t.get(op) or {}
            if r.get("error"):
                fails.append(f"{label} {op}: {_first_line(r['error'].get('message', ''))}")
            elif r.get("rel_err") is None or float(r["rel_err"]) > MAX_REL_ERR:
                fails.append(f"{label} {op}: wrong result (relative error {r.get('rel_err')})")
        backend = str(t.get("conv_backend") or "")
        used = "cudnn" in backend.lower() if backend else bool(t.get("cudnn_libs_loaded"))
        cudnn_used = cudnn_used or (bool(t.get("cudnn_acceptable", True)) and used)
        lines.append(
            f"{label}: matmul rel. error {_err(t, 'matmul')}, conv2d fwd+bwd {_err(t, 'conv2d')}"
            + (f", conv backend {backend}" if backend else "")
        )
    if fails:
        return CheckResult(
            "compute",
            title,
            FAIL,
            "; ".join(fails[:2]),
            "see the checks above (kernels, driver, libraries); reinstall torch for this machine",
            tuple(lines),
        )
    if not cudnn_used:
        return CheckResult(
            "compute",
            title,
            FAIL,
            "results are right, but cuDNN did not run the convolution (slow fallback kernels)",
            "see the cuDNN and library checks above",
            tuple(lines),
        )
    return CheckResult(
        "compute",
        title,
        PASS,
        f"{len(tests)} GPU model{'s' if len(tests) != 1 else ''}: float32 results within "
        f"{MAX_REL_ERR:g} of float64 CPU; cuDNN ran the convolution",
        None,
        tuple(lines),
    )


def _err(t: Mapping[str, Any], op: str) -> str:
    v = (t.get(op) or {}).get("rel_err")
    return f"{float(v):.1e}" if v is not None else "?"
