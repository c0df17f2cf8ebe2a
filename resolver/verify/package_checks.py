"""The checks on what torch runs with: cuDNN and NCCL, its pinned packages, its loaded libraries.

cuDNN and NCCL are compared with the database's entry for the build; the CUDA packages with torch's
own pins; each loaded library must come from the environment; torchvision/torchaudio must be the
ones paired with this torch; and every pin of a lock file must be what is installed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import Requirement
from packaging.version import Version

from resolver.readers.pins import (
    FORMAT_CONDA_LOCK,
    FORMAT_ENVIRONMENT,
    FORMAT_PYLOCK,
    LockPins,
    Pin,
    canonical,
    variant_of_local,
)
from resolver.standalone.startup import first_line
from resolver.verify.context import (
    Context,
    build_variant,
    local_tag,
    marker_ok,
    public_version,
    quote_req,
    req_pins,
    requirement,
    skipped,
    version_tuple,
)
from resolver.verify.result import FAIL, PASS, SKIP, WARN, Check, CheckResult

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


def missing_lib_fix(ctx: Context, lib: str) -> str:
    """The pinned package that ships a library torch could not find."""
    base = lib.lower()
    word = next((w for prefix, w in _LIB_PACKAGES if base.startswith(prefix)), None)
    if word:
        for req in req_pins(ctx):
            name = canonical(req.name)
            if word in name.replace("-", "") or word in {e.lower() for e in req.extras}:
                return f"install the package torch pins for it: pip install {quote_req(req)}"
    version = (ctx.dists.get("torch") or {}).get("version")
    pin = f"torch=={version}" if version else "torch"
    return (
        f"reinstall torch with its dependencies: pip install --force-reinstall {shlex.quote(pin)}"
    )


def check_cudnn(ctx: Context) -> CheckResult:
    skip = skipped(ctx, CUDNN_CHECK)
    if skip is not None:
        return skip
    c = ctx.probe.get("cudnn") or {}
    pinned = _pinned_req(ctx, "cudnn")
    fix_pkg = (
        f"pip install {quote_req(pinned)}"
        if pinned
        else "reinstall torch with its dependencies (`gpuresolve suggest`)"
    )
    if c.get("error"):
        return CUDNN_CHECK.result(
            FAIL,
            f"cuDNN does not load: {first_line(c['error'].get('message', ''))}",
            fix_pkg,
        )
    if not c.get("compiled", c.get("available")):
        return CUDNN_CHECK.result(FAIL, "this CUDA build has no cuDNN", fix_pkg)
    if not c.get("available"):
        return CUDNN_CHECK.result(FAIL, "cuDNN is not available", fix_pkg)
    if not c.get("enabled", True):
        return CUDNN_CHECK.result(
            FAIL,
            "cuDNN is disabled at start-up (torch.backends.cudnn.enabled is False)",
            "find what sets it (sitecustomize, a startup hook) and remove it",
        )
    have = c.get("version_text")
    db = ctx.variant.cudnn.version if ctx.variant and ctx.variant.cudnn else None
    if not have:
        return CUDNN_CHECK.result(WARN, "cuDNN loads, but reports no version")
    if not db:
        return CUDNN_CHECK.result(PASS, f"cuDNN {have} ({ctx.db_note()})")
    have_k, db_k = version_tuple(have), version_tuple(db)
    if have_k is None:  # the environment's own text: anything at all
        return CUDNN_CHECK.result(WARN, f"cuDNN reports a version unlike one: {have}")
    assert db_k is not None
    n = min(len(have_k), len(db_k))
    where = f"{ctx.release.version if ctx.release else ''} {build_variant(ctx.torch)}".strip()
    if have_k[:n] == db_k[:n]:
        return CUDNN_CHECK.result(PASS, f"cuDNN {have} (the database lists {db})")
    if have_k[:n] < db_k[:n]:
        return CUDNN_CHECK.result(
            FAIL,
            f"cuDNN {have} is older than the {db} torch {where} was built with",
            fix_pkg,
        )
    return CUDNN_CHECK.result(
        WARN,
        f"cuDNN {have} is newer than the {db} torch {where} was released with",
        f"usually fine; to match the release: {fix_pkg}",
    )


def check_nccl(ctx: Context) -> CheckResult:
    skip = skipped(ctx, NCCL_CHECK)
    if skip is not None:
        return skip
    n = ctx.probe.get("nccl") or {}
    have = n.get("version_text")
    if not n.get("available") or not have:
        system = ctx.markers.get("platform_system", "")
        if system == "Windows":
            return NCCL_CHECK.result(SKIP, "Windows builds have no NCCL")
        why = f": {first_line(n['error'].get('message', ''))}" if n.get("error") else ""
        return NCCL_CHECK.result(
            WARN,
            f"NCCL is not available{why}: multi-GPU training cannot use it",
            "reinstall torch with its dependencies (`gpuresolve suggest`)",
        )
    db = ctx.variant.nccl.version if ctx.variant and ctx.variant.nccl else None
    if not db:
        return NCCL_CHECK.result(PASS, f"NCCL {have} ({ctx.db_note()})")
    if version_tuple(have) == version_tuple(db):
        return NCCL_CHECK.result(PASS, f"NCCL {have}")
    pinned = _pinned_req(ctx, "nccl")
    fix = f"pip install {quote_req(pinned)}" if pinned else "reinstall torch's NCCL package"
    return NCCL_CHECK.result(WARN, f"NCCL {have}; the database lists {db} for this build", fix)


def _pinned_req(ctx: Context, word: str) -> Requirement | None:
    for req in req_pins(ctx):
        if word in canonical(req.name).replace("-", ""):
            return req
    return None


def check_packages(ctx: Context) -> CheckResult:
    torch_dist = ctx.dists.get("torch")
    if not torch_dist:
        if ctx.imported:
            return PACKAGES_CHECK.result(
                SKIP, "torch has no package metadata (a source or conda build?)"
            )
        return PACKAGES_CHECK.result(SKIP, "torch is not installed")
    problems: list[str] = []
    fixes: list[str] = []
    ok: list[str] = []
    seen: set[str] = set()
    queue: list[tuple[Requirement, str]] = [(r, "torch") for r in req_pins(ctx)]
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
            fixes.append(quote_req(req))
            continue
        try:
            good = req.specifier.contains(Version(str(dist["version"])), prereleases=True)
        except ValueError:  # InvalidVersion, or digits past Python's limit
            good = False
        if not good:
            problems.append(f"{name} {dist['version']} installed; {wants}")
            fixes.append(quote_req(req))
            continue
        ok.append(f"{name} {dist['version']}")
        # What it pins in turn (cuda-toolkit[cublas,...] pins nvidia-cublas): its base
        # requirements and those of the extras asked for.
        extras = ("", *sorted(req.extras))
        for text in dist.get("requires") or []:
            sub = requirement(text)
            if sub is not None and marker_ok(sub.marker, ctx.markers, extras):
                queue.append((sub, name))
    if problems:
        return PACKAGES_CHECK.result(
            FAIL,
            "; ".join(problems[:3])
            + (f"; and {len(problems) - 3} more" if len(problems) > 3 else ""),
            "pip install " + " ".join(fixes),
            tuple(problems) if len(problems) > 3 else (),
        )
    if not ok:
        return PACKAGES_CHECK.result(
            PASS, f"torch {torch_dist.get('version')} pins no CUDA packages"
        )
    return PACKAGES_CHECK.result(
        PASS,
        f"{len(ok)} pinned packages match torch {torch_dist.get('version')}",
        None,
        tuple(ok),
    )


def check_libraries(ctx: Context) -> CheckResult:
    skip = skipped(ctx, LIBRARIES_CHECK, cuda=False)
    if skip is not None:
        return skip
    libs = ctx.probe.get("libraries") or {}
    if not libs.get("maps_readable"):
        return LIBRARIES_CHECK.result(SKIP, "no /proc/self/maps on this system")
    loaded = [(str(x["family"]), str(x["path"])) for x in libs.get("loaded") or []]
    if not loaded:
        if ctx.cuda_build:
            return LIBRARIES_CHECK.result(WARN, "no CUDA library was loaded")
        return LIBRARIES_CHECK.result(SKIP, "CPU build: no CUDA libraries")
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
        return LIBRARIES_CHECK.result(
            FAIL, "; ".join(fails[:2]), "; ".join(dict.fromkeys(fixes)), details
        )
    if warns:
        return LIBRARIES_CHECK.result(
            WARN,
            "; ".join(warns[:2]),
            "a system copy is used: make sure it matches the build, or install torch's CUDA "
            "library packages",
            details,
        )
    return LIBRARIES_CHECK.result(
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
    present = [(n, *_installed(ctx, n)) for n in _COMPANIONS]
    present = [p for p in present if p[1]]
    if not present:
        return COMPANIONS_CHECK.result(SKIP, "neither torchvision nor torchaudio is installed")
    torch_v = public_version(
        ctx.torch.get("version") or (ctx.dists.get("torch") or {}).get("version")
    )
    torch_var = build_variant(ctx.torch) if ctx.torch.get("version") else None
    if not torch_v:
        return COMPANIONS_CHECK.result(SKIP, "torch is not installed")
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
        return COMPANIONS_CHECK.result(FAIL, "; ".join(fails), "; ".join(fixes))
    if ctx.release is None:
        return COMPANIONS_CHECK.result(
            WARN, f"{', '.join(notes)}: pairing not checked ({ctx.db_note()})"
        )
    return COMPANIONS_CHECK.result(PASS, f"{', '.join(notes)} with torch {torch_v}")


def _index_for(ctx: Context, variant: str | None) -> str:
    if not variant or ctx.catalog is None:
        return ""
    return f" --index-url {ctx.catalog.index_url(variant)}"


def _pin_applies(ctx: Context, pin: Pin) -> bool:
    if not pin.marker:
        return True
    try:
        return marker_ok(Marker(pin.marker), ctx.markers, ("",))
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
            except ValueError:  # InvalidVersion, or digits past Python's limit
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
    if lock is None:
        return LOCK_CHECK.result(SKIP, "no lock file given (--lock)")
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
    if bad:  # torch and its companions first: a wrong torch explains the nvidia-* lines after it
        bad.sort(key=lambda line: _LOCK_ORDER.get(line.split(" ", 1)[0], len(_LOCK_ORDER)))
        return LOCK_CHECK.result(
            FAIL,
            "; ".join(bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else ""),
            _lock_fix(lock),
            tuple(bad) if len(bad) > 3 else (),
        )
    if not good:
        return LOCK_CHECK.result(WARN, f"{lock.path} pins nothing that applies here")
    return LOCK_CHECK.result(
        PASS,
        f"{len(good)} pin{'s' if len(good) != 1 else ''} match ({', '.join(good[:3])}"
        + (", …)" if len(good) > 3 else ")"),
        None,
        tuple(good),
    )


_LOCK_ORDER = {name: i for i, name in enumerate(("torch", *_COMPANIONS))}


def _lock_fix(lock: LockPins) -> str:
    path = shlex.quote(lock.path)
    if lock.format == FORMAT_CONDA_LOCK:
        return f"reinstall from the lock: conda-lock install --name ENV {path}"
    if lock.format == FORMAT_ENVIRONMENT:
        return f"reinstall from the lock: conda env update --prune --file {path}"
    if lock.format == FORMAT_PYLOCK:  # uv, or pip 26.1+: install picks one and checks it
        return f"reinstall from the lock: gpuresolve install --lock {path}"
    return f"reinstall from the lock: pip install -r {path}"


# The checks of this module (verify/checks.py orders every check in one tuple).
CUDNN_CHECK = Check("cudnn", "cuDNN", check_cudnn)
NCCL_CHECK = Check("nccl", "NCCL", check_nccl)
PACKAGES_CHECK = Check("packages", "CUDA packages", check_packages)
LIBRARIES_CHECK = Check("libraries", "loaded libraries", check_libraries)
COMPANIONS_CHECK = Check("companions", "companions", check_companions)
LOCK_CHECK = Check("lock", "lock", check_lock)
