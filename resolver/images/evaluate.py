"""What an image holds and whether it runs on a target, by the solver's own rules.

An official pytorch/pytorch image installs one torch build of the database (its release and CUDA
variant, on linux-x86_64), so it runs exactly where that build runs: `solve` judges it (kernels for
every GPU, driver floors, the driver knows the GPU). An NGC container carries NVIDIA's own torch
build: its CUDA's driver floor is checked, its kernels are unknown and said to be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from resolver.catalog import Catalog, Release, Variant
from resolver.core.errors import UserError
from resolver.core.platforms import BY_NAME, Platform, PythonVersion
from resolver.core.versions import CudaVersion, Driver, cc_sm
from resolver.core.vocab import DriverPolicy
from resolver.images import findings as im
from resolver.images.facts import Fact, ImageFacts, weakest
from resolver.images.reference import ImageRef
from resolver.solve import Candidate, Policy, Request, Target, driver_need, evaluate, solve
from resolver.solve.findings import DriverTooOld, DriverWhy, FloorUnknown
from resolver.solve.findings import ReasonKind as K

if TYPE_CHECKING:
    from resolver.core.documents.decision import ImageContentsJson

FLAVOURS = ("runtime", "devel")
_OFFICIAL_TAG = re.compile(
    r"^(?P<torch>[0-9]+\.[0-9]+\.[0-9]+)-cuda(?P<cuda>[0-9]+\.[0-9]+)-cudnn(?P<cudnn>[0-9]+)-(?P<flavour>runtime|devel)$"
)
_NGC_TAG = re.compile(r"^(?P<release>[0-9]{2}\.[0-9]{2})-py3$")


@dataclass(frozen=True)
class Contents:
    """What an image holds; None where unknown."""

    torch: str | None
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str | None
    sass: tuple[str, ...] | None  # "sm_90"
    ptx: tuple[str, ...] | None  # "compute_90"
    variant: str | None = None  # the build variant ("cu128") of an official image
    wheel: bool = False  # installed from the PyTorch index (else conda, or not known)

    def to_json(self) -> ImageContentsJson:
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "python": self.python,
            "sass": list(self.sass) if self.sass is not None else None,
            "ptx": list(self.ptx) if self.ptx is not None else None,
        }


@dataclass(frozen=True)
class Evidence:
    fact: str
    value: str | im.InstalledBuild | None
    grade: str
    source: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class Suggestion:
    image: str
    contents: Contents
    why: im.NewestRuns


@dataclass
class Report:
    """The answer for one image (or, without one, the best image) on one target."""

    image: str | None
    contents: Contents | None
    runs: bool | None  # None: nothing to judge
    target: Target
    reasons: list[im.Said] = field(default_factory=list)  # why it does not run
    upgrades: list[im.Said] = field(default_factory=list)  # what would make it run
    notes: list[im.Said] = field(default_factory=list)  # how it runs, and what is unchecked
    evidence: list[Evidence] = field(default_factory=list)
    suggestion: Suggestion | None = None
    flavour_note: str | None = None
    forward_compat: bool = False  # runs only through NVIDIA's CUDA forward-compatibility package


@dataclass(frozen=True)
class Judge:
    """The rules' inputs that are the user's, not the image's."""

    catalog: Catalog
    facts: ImageFacts
    target: Target
    policy: Policy = DriverPolicy.COMPAT
    devel: bool = False


# --- official images ---------------------------------------------------------------------------


def official_tag(facts: ImageFacts, release: Release, variant: Variant, flavour: str) -> str:
    cudnn = variant.cudnn.version if variant.cudnn and variant.cudnn.version else None
    major = cudnn.split(".")[0] if cudnn else "9"
    tag = facts.official.tag.format(
        torch=release.version, cuda=variant.cuda, cudnn_major=major, flavour=flavour
    )
    return f"{facts.official.repository}:{tag}"


def _official_build(judge: Judge, tag: str) -> tuple[Release, Variant, str]:
    m = _OFFICIAL_TAG.match(tag)
    if m is None:
        raise UserError(
            f"unknown pytorch/pytorch tag {tag!r}: gpuresolve knows "
            "TORCH-cudaX.Y-cudnnN-runtime|devel "
            "(e.g. 2.9.0-cuda12.8-cudnn9-runtime)"
        )
    cat = judge.catalog
    rel = cat.release(m["torch"])
    if rel is None:
        span = f"{cat.releases[-1].version}–{cat.releases[0].version}" if cat.releases else "none"
        raise UserError(f"unknown torch {m['torch']} in {tag!r}: the database covers {span}")
    platform = judge.facts.official.platform
    cudas = [v for v in rel.variants if v.kind == "cuda" and platform in v.platforms]
    var = next((v for v in cudas if v.cuda == m["cuda"]), None)
    if var is None:
        known = sorted((v.cuda for v in cudas if v.cuda is not None), key=lambda c: c.key)
        have = ", ".join(known) or "none"
        raise UserError(
            f"no official image {tag!r}: torch {rel.version} has no CUDA {m['cuda']} build "
            f"(its CUDA builds: {have})"
        )
    cudnn = var.cudnn.version if var.cudnn and var.cudnn.version else None
    if cudnn and cudnn.split(".")[0] != m["cudnn"]:
        raise UserError(
            f"no official image {tag!r}: torch {rel.version} CUDA {var.cuda} ships cuDNN {cudnn}, "
            f"so its images are tagged cudnn{cudnn.split('.')[0]}"
        )
    return rel, var, m["flavour"]


def _python_for(facts: ImageFacts, rel: Release) -> Fact:
    era = facts.official.era(rel.version)
    if era is None:
        return Fact(None, "inferred", (), "no build recipe recorded for this release")
    return era.python


def _official_contents(judge: Judge, rel: Release, var: Variant) -> Contents:
    era = judge.facts.official.era(rel.version)
    arch = var.platforms.get(judge.facts.official.platform)
    return Contents(
        torch=rel.version,
        cuda=var.cuda,
        cudnn=var.cudnn.version if var.cudnn else None,
        nccl=var.nccl.version if var.nccl else None,
        python=_python_for(judge.facts, rel).value,
        sass=tuple(cc_sm(c) for c in arch.sass) if arch else None,
        ptx=tuple(cc_sm(c).replace("sm_", "compute_") for c in arch.ptx) if arch else None,
        variant=var.name,
        wheel=bool(era and era.install.value == "wheel"),
    )


def _record_grade(confirmed: bool) -> str:
    """A database record's grade: confirmed by a primary source, or not."""
    return "official" if confirmed else "inferred"


def _official_evidence(judge: Judge, rel: Release, var: Variant) -> list[Evidence]:
    off = judge.facts.official
    era = off.era(rel.version)
    install = era.install if era else Fact(None, "inferred", (), None)
    link_grade = weakest(off.link.grade, install.grade)
    if install.value != "wheel":
        link_grade = "inferred"  # a conda package (or unknown): the wheel's facts carried over
    link_src = off.link.source + install.source
    by = None if install.value == "wheel" else str(install.value)
    out = [
        Evidence(
            "build",
            im.InstalledBuild(rel.version, var.name, var.cuda, by),
            weakest(off.link.grade, install.grade),
            link_src,
            era.note if era else None,
        ),
        Evidence("torch", rel.version, off.link.grade, off.link.source, "named by the tag"),
        Evidence("cuda", var.cuda, off.link.grade, off.link.source, "named by the tag"),
    ]
    for name, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
        if pinned is None or pinned.version is None:
            out.append(Evidence(name, None, "inferred", (), "unknown: the database has no pin"))
            continue
        grade = weakest(link_grade, _record_grade(pinned.prov.confirmed))
        out.append(Evidence(name, pinned.version, grade, link_src + pinned.prov.source))
    arch = var.platforms.get(off.platform)
    if arch is None:
        out.append(Evidence("kernels", None, "inferred", (), "unknown architecture list"))
    else:
        value = " ".join(cc_sm(c) for c in arch.sass) or "none"
        grade = weakest(link_grade, _record_grade(arch.prov.confirmed))
        out.append(Evidence("kernels", value, grade, link_src + arch.prov.source))
    python = _python_for(judge.facts, rel)
    out.append(Evidence("python", python.value, python.grade, python.source, python.note))
    return out


def _platform_reason(judge: Judge, platform: str, ref: str | None) -> im.PlatformOnly | None:
    """Why a Linux host of another architecture cannot run the image (None: the official CUDA
    image; else the database's record of ``ref``) at all, or None."""
    host = judge.target.platform
    if host.os == "linux" and host.name != platform:
        docker = BY_NAME[platform].docker if platform in BY_NAME else None
        return im.PlatformOnly(ref, docker or platform, host)
    return None


_FALLBACK_PYTHON = PythonVersion(3, 11)


def _image_target(judge: Judge, python: PythonVersion) -> Target:
    """The target as the image sees it: a Linux container on the host's driver and GPUs (the
    database's platform and Python)."""
    platform = Platform.parse(judge.facts.official.platform)
    return replace(judge.target, platform=platform, python=python)


def _solver_python(rel: Release, platform: str, image_python: str | None) -> PythonVersion:
    have = rel.python.get(platform, ())
    named = next((p for p in have if str(p) == image_python), None)
    if named is not None:
        return named
    plain = [p for p in have if not p.free_threaded]
    return plain[len(plain) // 2] if plain else (have[0] if have else _FALLBACK_PYTHON)


def _judge_build(judge: Judge, rel: Release, var: Variant) -> Candidate:
    from packaging.specifiers import SpecifierSet

    python = _solver_python(rel, judge.facts.official.platform, _python_for(judge.facts, rel).value)
    target = _image_target(judge, python)
    request = Request(
        torch=SpecifierSet(f"=={rel.version}"),
        variant=var.name,
        policy=judge.policy,
        allow_unconfirmed=True,
        cuda_on_gpu_less=True,
    )
    return evaluate(judge.catalog, target, request, rel, var)


def _verdict(report: Report, judge: Judge, cand: Candidate) -> None:
    report.runs = cand.ok
    host = judge.target.platform
    if host.os == "windows":
        report.notes.append(im.Plain.WSL)
    elif host.os == "macos":
        report.notes.append(im.Plain.MACOS)
    report.reasons = list(cand.reasons)
    report.notes.extend(cand.coverage)
    why, have = cand.min_driver_why, judge.target.driver
    if cand.min_driver and have and cand.ok:
        report.notes.append(im.DriverMet(have, cand.min_driver, why))
    if cand.min_driver and not have and judge.target.nvidia:
        report.notes.append(im.DriverNotGiven(cand.min_driver, why))
    if cand.jit:
        report.notes.append(im.Plain.JIT)
    if not cand.confirmed:
        report.notes.append(im.Doubt(cand.doubt))
    if not judge.target.nvidia and not judge.target.gpus:
        report.notes.append(im.Plain.CPU_ONLY)
    if judge.target.nvidia and not judge.target.gpus and not judge.target.unknown_gpus:
        report.notes.append(im.Plain.NO_MODEL)
    kinds = {r.kind for r in cand.reasons}
    if K.DRIVER in kinds and cand.min_driver and not kinds - {K.DRIVER}:
        report.upgrades.append(im.Upgrade(cand.min_driver, why))


def official_report(judge: Judge, ref: ImageRef) -> Report:
    assert ref.tag is not None
    if ref.tag == "latest":
        return _latest_report(judge, ref)
    rel, var, flavour = _official_build(judge, ref.tag)
    report = Report(str(ref), _official_contents(judge, rel, var), None, judge.target)
    report.evidence = _official_evidence(judge, rel, var)
    report.flavour_note = _flavour_note(judge, rel.version, flavour)
    if ref.digest:
        report.notes.append(im.Plain.DIGEST)
    _verdict(report, judge, _judge_build(judge, rel, var))
    arch = _platform_reason(judge, judge.facts.official.platform, None)
    if arch:
        report.runs = False
        report.reasons = [arch]
        report.notes.clear()
        report.upgrades[:] = [im.Plain.ARCH_FIX]
    report.suggestion = best(replace(judge, devel=flavour == "devel"))
    return report


def _latest_report(judge: Judge, ref: ImageRef) -> Report:
    """`latest` is retagged by each release: what can be known is the newest release's images."""
    platform = judge.facts.official.platform
    rel = next(
        (r for r in judge.catalog.releases if any(v.kind == "cuda" for v in r.variants)), None
    )
    if rel is None:
        raise UserError("the database has no release with a CUDA build")
    builds = [v for v in rel.variants if v.kind == "cuda" and platform in v.platforms]
    report = Report(
        str(ref),
        Contents(rel.version, None, None, None, _python_for(judge.facts, rel).value, None, None),
        None,
        judge.target,
    )
    report.notes.append(im.LatestMoves(judge.catalog.updated, rel.version))
    report.evidence.append(
        Evidence("torch", rel.version, "inferred", (), "the newest release in the database")
    )
    fails: list[im.Said] = []
    for var in builds:
        cand = _judge_build(judge, rel, var)
        if not cand.ok:
            fails.append(im.CudaFails(var.cuda, cand.reasons))
    report.runs = not fails
    report.reasons = fails
    report.suggestion = best(judge)
    return report


def best(judge: Judge) -> Suggestion | None:
    """The official image to use: the newest torch whose CUDA build runs on the target."""
    platform = judge.facts.official.platform
    if _platform_reason(judge, platform, None):
        return None
    target = _image_target(judge, _FALLBACK_PYTHON)
    decision = solve(
        judge.catalog,
        target,
        Request(policy=judge.policy, cuda_on_gpu_less=True),
    )
    flavour = "devel" if judge.devel else "runtime"
    for cand in (decision.selection, *decision.alternatives):
        if cand is None or cand.variant.kind != "cuda" or platform not in cand.variant.platforms:
            continue
        if judge.facts.official.era(cand.release.version) is None:
            continue
        rel, var = cand.release, cand.variant
        have, need = judge.target.driver, cand.min_driver
        met = im.DriverMet(have, need, cand.min_driver_why) if need and have else None
        why = im.NewestRuns(cand.coverage, met)
        return Suggestion(
            official_tag(judge.facts, rel, var, flavour), _official_contents(judge, rel, var), why
        )
    return None


def best_report(judge: Judge) -> Report:
    """No image named: the best official image for the target, with its contents and evidence."""
    sug = best(judge)
    if sug is None:
        report = Report(None, None, False, judge.target)
        decision = solve(
            judge.catalog,
            _image_target(judge, _FALLBACK_PYTHON),
            Request(policy=judge.policy, cuda_on_gpu_less=True),
        )
        arch = _platform_reason(judge, judge.facts.official.platform, None)
        hints: list[im.Said] = list(decision.hints)
        report.reasons = [arch] if arch else hints or [im.Plain.NONE_RUNS]
        if arch:
            report.upgrades.append(im.Plain.ARCH_FIX)
        return report
    rel = judge.catalog.release(sug.contents.torch or "")
    assert rel is not None
    var = next(v for v in rel.variants if v.name == sug.contents.variant)
    report = Report(sug.image, sug.contents, True, judge.target, suggestion=sug)
    report.evidence = _official_evidence(judge, rel, var)
    report.flavour_note = _flavour_note(judge, rel.version, "devel" if judge.devel else "runtime")
    _verdict(report, judge, _judge_build(judge, rel, var))
    return report


# --- NGC ---------------------------------------------------------------------------------------


def ngc_report(judge: Judge, ref: ImageRef) -> Report:
    assert ref.tag is not None
    m = _NGC_TAG.match(ref.tag)
    ngc = judge.facts.ngc
    if m is None:
        raise UserError(
            f"unknown {ngc.repository} tag {ref.tag!r}: expected YY.MM-py3 (e.g. 25.12-py3)"
        )
    rel = ngc.release(m["release"])
    if rel is None:
        known = ", ".join(r.release for r in ngc.releases) or "none"
        raise UserError(
            f"unknown NGC release {m['release']}: its contents are not in the database "
            f"(known: {known}); NVIDIA's PyTorch release notes list them"
        )
    contents = Contents(
        rel.torch.value,
        rel.cuda.value,
        rel.cudnn.value,
        rel.nccl.value,
        rel.python.value,
        None,
        None,
    )
    python = rel.python_version or judge.target.python
    seen = replace(judge.target, platform=Platform.parse(ngc.platform), python=python)
    report = Report(str(ref), contents, None, seen)
    for name, f in (
        ("torch", rel.torch),
        ("cuda", rel.cuda),
        ("cudnn", rel.cudnn),
        ("nccl", rel.nccl),
        ("python", rel.python),
    ):
        report.evidence.append(Evidence(name, f.value, f.grade, f.source, f.note))
    report.evidence.append(
        Evidence("kernels", None, "inferred", (), "NVIDIA's own build: architectures not published")
    )
    if rel.note:
        report.notes.append(rel.note)
    reasons: list[im.Said] = []
    arch = _platform_reason(judge, ngc.platform, str(ref))
    if arch:
        reasons.append(arch)
    cuda = rel.cuda_version
    target = judge.target
    if cuda and (target.nvidia or target.gpus):
        need, why = driver_need(
            judge.catalog, cuda, target.driver_os, policy=judge.policy, needs_jit=False
        )
        if need is None:
            reasons.append(FloorUnknown(target.driver_os, cuda))
        elif target.driver and target.driver < need:
            fc, why_not = _forward_compat(judge, cuda, need, why)
            if fc is None:
                reasons.append(DriverTooOld(need, why, target.driver))
                report.upgrades.append(im.Upgrade(need, why))
                if why_not:
                    report.notes.append(why_not)
            else:
                report.forward_compat = True
                report.notes.append(fc[0])
                report.evidence.append(fc[1])
        elif target.driver:
            report.notes.append(im.DriverMet(target.driver, need, why))
        else:
            report.notes.append(im.DriverNotGiven(need, why))
    if target.gpus:
        report.notes.append(im.KernelsUnchecked(tuple(g.label for g in target.gpus)))
    report.runs = not reasons
    report.reasons = reasons
    report.suggestion = best(judge)
    return report


def _forward_compat(
    judge: Judge, cuda: CudaVersion, need: Driver, why: DriverWhy | None
) -> tuple[tuple[im.ForwardCompat, Evidence] | None, im.ForwardCompat | None]:
    """How an NGC container runs below its CUDA's driver floor, if it does: NVIDIA's CUDA
    forward-compatibility package in the image, on a Linux driver of a branch NVIDIA supports for
    that CUDA major, where every GPU is a data-center one the driver itself drives. Else None,
    and why not where the branch would have allowed it."""
    fc = judge.facts.ngc.forward_compat
    target = judge.target
    if fc is None or not target.driver or target.driver_os != "linux":
        return None, None
    branch = judge.catalog.driver_branch(target.driver, "linux").exact
    row = fc.branch(cuda.major, branch) if branch is not None else None
    if row is None:
        return None, None
    mode = im.ForwardCompat(row.branch, cuda.major)
    if not target.gpus:
        return None, mode._replace(why=im.NoForwardCompat.NO_GPU)
    for gpu in target.gpus:
        model = judge.catalog.gpu_by_name(gpu.name) if gpu.name else None
        if model is None or model.kind not in fc.kinds:
            return None, mode._replace(
                why=im.NoForwardCompat.NOT_DATA_CENTER, gpu=gpu.name, cc=gpu.cc
            )
        arch = judge.catalog.architectures.get(gpu.cc)
        window = arch.drivers if arch is not None else None
        if window is not None and window.first is not None and row.branch < window.first:
            no = im.NoForwardCompat.NOT_DRIVEN
            return None, mode._replace(why=no, gpu=gpu.name, first=window.first)
    gpus = tuple(g.name or cc_sm(g.cc) for g in target.gpus)
    grade = weakest(fc.gpu_kinds.grade, row.fact.grade)
    source = tuple(dict.fromkeys((*fc.gpu_kinds.source, *row.fact.source)))
    runs = mode._replace(
        driver=target.driver, need=need, need_why=why, gpus=gpus, grade=grade, source=source
    )
    return (runs, Evidence("forward_compat", f"R{row.branch}", grade, source, row.fact.note)), None


# --- entry -------------------------------------------------------------------------------------


def report_for(judge: Judge, ref: ImageRef | None) -> Report:
    """The report for a reference (None: the best official image). Raises UserError for a
    reference gpuresolve cannot answer for (unknown repository or tag, digest only)."""
    if ref is None:
        return best_report(judge)
    facts = judge.facts
    name = ref.name
    if ref.tag is None:
        raise UserError(
            f"{ref}: a digest names bytes, not a release; what it holds cannot be known without "
            "pulling it; give its tag (`docker image inspect` lists its RepoTags)"
            if ref.digest
            else f"{ref}: no tag; give one (e.g. {facts.official.repository}:"
            "2.9.0-cuda12.8-cudnn9-runtime)"
        )
    if name in facts.official.names:
        return official_report(judge, ref)
    if name == facts.ngc.repository:
        return ngc_report(judge, ref)
    known: Sequence[str] = (*facts.official.names, facts.ngc.repository)
    raise UserError(f"unknown image {name!r}: gpuresolve knows {', '.join(known)}")


def _flavour_note(judge: Judge, version: str, flavour: str) -> str | None:
    """What the flavour holds for this release: the era's account, else the general one."""
    era = judge.facts.official.era(version)
    own = era.flavour_note(flavour) if era is not None else None
    return own or judge.facts.official.flavours.get(flavour)
