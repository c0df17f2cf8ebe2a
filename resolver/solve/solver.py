"""The solver: a pure function from (catalog, target, request) to a decision.

No I/O, no detection, no printing: everything it needs arrives in its arguments, so the same code
serves one machine, a described machine and a whole fleet, and is tested exhaustively.

Rules (see docs/explanation/decisions.md, "How gpuresolve decides"):
- a build runs on a GPU when it has SASS of the GPU's major with a minor <= the GPU's (not
  across the desktop/Tegra divide: a Tegra GPU needs SASS for exactly its CC), or PTX for a
  CC <= the GPU's; PTX JIT needs a driver at least the toolkit's own minimum;
- driver policy ``compat``: a CUDA build runs on its major's minor-version-compatibility floor;
  ``strict``: on the toolkit's own minimum driver;
- every GPU of the target must be covered;
- the newest torch release wins; among its variants, the one the Python Package Index carries,
  then the newest CUDA; builds whose arch list no primary source confirms come last.

One concept: deciding, from each build judged to the hints on the decision (what would change it,
read from the records of the builds turned down); apart, the hints were the route's extra stay
and, reading the solver's types while being its entry, could not import it without a cycle.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from resolver.catalog import Architecture, ArchList, Catalog, DriverWindow, Release, Variant
from resolver.core.platforms import BY_NAME
from resolver.core.versions import CC, CudaVersion, Driver, cc_str
from resolver.core.vocab import DriverPolicy, EvidenceLevel, Grade
from resolver.db import evidence as ev
from resolver.db.evidence import DOCUMENTED, Fact, facts_grade, rank, trusted
from resolver.solve import findings as fd
from resolver.solve.extensions import FITS, ExtChoice, Place, choose
from resolver.solve.findings import REQUEST_KINDS
from resolver.solve.findings import ReasonKind as K
from resolver.solve.target import Policy as Policy
from resolver.solve.target import Request as Request
from resolver.solve.target import Target as Target
from resolver.solve.target import TargetGpu as TargetGpu

if TYPE_CHECKING:  # packaging's specifiers cost ~20 ms to import: only a given --torch needs them
    from packaging.specifiers import SpecifierSet

COMPANIONS = ("torchvision", "torchaudio")


@dataclass(frozen=True)
class Candidate:
    release: Release
    variant: Variant
    platform: str
    reasons: tuple[fd.Reason, ...] = ()
    min_driver: Driver | None = None  # what this build needs on the target's driver OS
    min_driver_why: fd.DriverWhy | None = None
    confirmed: bool = True
    warnings: tuple[fd.Warning, ...] = ()
    coverage: tuple[fd.Covered, ...] = ()  # how each GPU is covered, for "why"
    packages: tuple[tuple[str, str], ...] = ()  # (name, version with local tag)
    jit: bool = False  # some GPU is reached only through PTX, JIT-compiled on first use
    doubt: ev.About | None = None  # which of its facts rests on a secondary source, if any
    evidence: str = "observed"  # the weakest grade among the build's own facts
    facts: tuple[Fact, ...] = ()  # every graded fact it rests on (evidence_detail, --explain)
    driver_facts: tuple[Fact, ...] = ()  # driver floors and windows, graded on their own
    extensions: tuple[ExtChoice, ...] = ()  # the extension releases chosen with this build

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def pypi(self) -> bool:
        return self.platform in self.variant.pypi

    def rank_key(self, level: bool | str) -> tuple[object, ...]:
        """Native kernels before PTX JIT (the JIT compiles every kernel on first use, and an
        older toolkit's libraries lack the newer GPU); builds trusted at the evidence level
        (``documented`` by default; True is the old --allow-unconfirmed, ``any``) before the
        rest; then the newest torch, the build the Python Package Index carries, the newest CUDA."""
        if isinstance(level, bool):
            level = "any" if level else "documented"
        cuda = self.variant.cuda.key if self.variant.cuda else (0, 0)
        tier = 0 if trusted(self.evidence, level) else -1
        return (not self.jit, tier, self.release.key, self.pypi, cuda)


@dataclass(frozen=True)
class Decision:
    target: Target
    request: Request
    selection: Candidate | None
    alternatives: tuple[Candidate, ...]
    rejected: tuple[Candidate, ...]
    hints: tuple[fd.Hint, ...]
    cpu_fallback: Candidate | None = None  # shown when a GPU target has no GPU build


@functools.lru_cache(maxsize=4096)
def _allows(spec: SpecifierSet, version: str) -> bool:
    """``spec`` admits ``version`` (prereleases too): asked once per release, not per build and
    solve (packaging parses the version each time; a fleet's solves ask ~10,000 times)."""
    return spec.contains(version, prereleases=True)


class _Machine:
    """What the target alone decides, worked out once per solve, not for each of ~100 builds:
    its driver's sort key, its driver-window verdicts and facts, each GPU's kernel coverage."""

    def __init__(self, catalog: Catalog, target: Target) -> None:
        self.catalog, self.target = catalog, target
        self.have = target.driver.key if target.driver is not None else None
        self._windows: tuple[list[tuple[fd.OutsideWindow, Fact]], list[Fact]] | None = None
        self._coverage: dict[tuple[int, CC], fd.Reach | None] = {}

    def older_than(self, floor: Driver) -> bool:
        return self.have is not None and self.have < floor.key

    def windows(self) -> tuple[list[tuple[fd.OutsideWindow, Fact]], list[Fact]]:
        if self._windows is None:
            c, t = self.catalog, self.target
            self._windows = (window_reasons(c, t), window_facts(c, t))
        return self._windows

    def coverage(self, arch: ArchList, cc: CC) -> fd.Reach | None:
        key = (id(arch), cc)  # the catalog holds every arch list for the whole solve
        if key not in self._coverage:
            self._coverage[key] = kernel_coverage(self.catalog, arch, cc)
        return self._coverage[key]


def decide(catalog: Catalog, target: Target, request: Request) -> Decision:
    """Resolve the best build for the target, with the runners-up and the rejects; ``solve``
    adds the hints (the fleet memo makes them anew for a decision restated for other GPUs)."""
    cuda_wanted = target.nvidia or bool(target.gpus)
    machine = _Machine(catalog, target)
    evaluated = [
        _evaluate(catalog, target, request, rel, var, cuda_wanted, machine)
        for rel in catalog.releases
        for var in rel.variants
        if target.platform.name in var.platforms and var.kind in ("cpu", "cuda")
    ]
    ok = sorted(
        (c for c in evaluated if c.ok),
        key=lambda c: c.rank_key(request.level),
        reverse=True,
    )
    rejected = tuple(c for c in evaluated if not c.ok)
    selection = ok[0] if ok else None
    if selection is not None:
        notes = list(selection.warnings)
        if not trusted(selection.evidence, request.level):
            notes.append(fd.Undocumented(selection.doubt, selection.evidence))
        if selection.variant.kind == "cpu" and cuda_wanted:
            notes.append(fd.CpuAsAsked())
        if selection.jit:
            notes.append(fd.JitOnly())
        notes.extend(fd.CcUnknown(name) for name in target.unknown_gpus)
        selection = replace(selection, warnings=tuple(notes))
    cpu_fallback = None
    if selection is None and cuda_wanted:
        cpu_target = replace(target, gpus=(), nvidia=False)
        cpu_ok = [
            c
            for c in (
                _evaluate(
                    catalog, cpu_target, replace(request, cuda=None, variant=None), r, v, False
                )
                for r in catalog.releases
                for v in r.variants
                if v.kind == "cpu" and target.platform.name in v.platforms
            )
            if c.ok
        ]
        cpu_fallback = max(cpu_ok, key=lambda c: c.release.key, default=None)
    return Decision(target, request, selection, tuple(ok[1:]), rejected, (), cpu_fallback)


def solve(catalog: Catalog, target: Target, request: Request) -> Decision:
    """Resolve the best build for the target, with the runners-up, the rejects and hints."""
    decision = decide(catalog, target, request)
    selection = decision.selection
    ok = ([selection] if selection else []) + list(decision.alternatives)
    hints = build_hints(catalog, target, request, selection, ok, decision.rejected)
    return replace(decision, hints=hints)


# --- one candidate ---------------------------------------------------------------------------


def evaluate(
    catalog: Catalog, target: Target, request: Request, rel: Release, var: Variant
) -> Candidate:
    """One build judged on the target, with its reasons, without solving the others.

    resolvelib's provider idea: decide() ranks what this returns for every build, so a caller
    asking about one build (an image's torch) need not run or search a whole solve.
    """
    return _evaluate(catalog, target, request, rel, var, target.nvidia or bool(target.gpus))


def _evaluate(
    catalog: Catalog,
    target: Target,
    request: Request,
    rel: Release,
    var: Variant,
    cuda_wanted: bool,
    machine: _Machine | None = None,
) -> Candidate:
    machine = machine if machine is not None else _Machine(catalog, target)
    reasons: list[fd.Reason] = []
    warnings: list[fd.Warning] = []
    if request.torch is not None and not _allows(request.torch, rel.version):
        reasons.append(fd.SpecMiss(rel.version, str(request.torch)))
    pythons = rel.python.get(target.platform.name, ())
    if target.python not in pythons:
        reasons.append(fd.NoPythonWheel(rel.version, target.python, target.platform, pythons))
    if request.cuda and var.cuda != request.cuda:
        reasons.append(fd.CudaMiss(var.cuda, request.cuda))
    elif request.variant and var.name != request.variant:
        reasons.append(fd.VariantMiss(var.name, request.variant))

    packages = [("torch", _local(rel.version, var, target.platform.name))]
    for name, spec in request.companions:
        paired = rel.companion(name)
        if paired is None:
            reasons.append(fd.NoCompanion(name, rel.version))
        elif spec is not None and not spec.contains(paired, prereleases=True):
            pulled = (v for v in rel.yanked.get(name, ()) if spec.contains(v, prereleases=True))
            reasons.append(fd.CompanionMiss(name, paired, str(spec), tuple(pulled)))
        else:
            untagged = name in rel.companion_untagged
            packages.append(
                (name, paired if untagged else _local(paired, var, target.platform.name))
            )
            cprov = rel.companion_prov.get(name)
            if cprov is not None and not cprov.confirmed:
                warnings.append(fd.PairingInferred(name, paired, rel.version))

    chosen: list[ExtChoice] = []
    if request.extensions:
        place = Place(target.platform, target.python, tuple((g.cc, g.label) for g in target.gpus))
        for name, spec in request.extensions:
            got, why_not, _ = choose(
                catalog, place, rel, var, name, spec, lambda a, cc: kernel_coverage(catalog, a, cc)
            )
            if got is None:
                if why_not is not None:
                    reasons.append(fd.ExtensionMiss(why_not))
            else:
                chosen.append(got)
                warnings.extend(fd.ExtensionPassed(n, name, got.version) for n in got.notes)
    min_driver: Driver | None = None
    why: fd.DriverWhy | None = None
    needs_jit = False
    coverage: list[fd.Covered] = []
    facts = _build_facts(rel, var, target, request)
    driver_facts: list[Fact] = []
    if var.kind == "cpu":
        if cuda_wanted and request.variant != "cpu":  # by name (+cpu), it is no silent fallback
            reasons.append(fd.CpuBuild())
    elif not (cuda_wanted or request.cuda or request.variant or request.cuda_on_gpu_less):
        reasons.append(fd.CudaBuild())
    else:
        arch = var.platforms.get(target.platform.name)
        if target.gpus and arch is None:
            reasons.append(fd.ArchUnknown(var.name, target.platform))
        elif arch is not None and target.gpus:
            sass = ev.Kernels(False, arch.sass, target.platform.name)
            facts.append(Fact("sass", arch.prov.grade, arch.prov.source, sass))
            for gpu in target.gpus:
                how = machine.coverage(arch, gpu.cc)
                if how is None:
                    reasons.append(fd.NoKernels(gpu.label, gpu.cc, arch.sass, arch.ptx))
                else:
                    needs_jit = needs_jit or how.ptx
                    coverage.append(fd.Covered(gpu.label, gpu.cc, how))
            if needs_jit:  # PTX decides only where a GPU is reached through it
                ptx = arch.ptx_provenance
                facts.append(Fact("ptx", ptx.grade, ptx.source, ev.Kernels(True, arch.ptx)))
        assert var.cuda is not None
        driver_os, policy = target.driver_os, request.policy
        min_driver, why = driver_need(
            catalog, var.cuda, driver_os, policy=policy, needs_jit=needs_jit
        )
        floor = _floor_fact(catalog, target, var.cuda, min_driver)
        if floor is not None:
            driver_facts.append(floor)
        if min_driver is None:
            reasons.append(fd.FloorUnknown(target.driver_os, var.cuda))
        elif target.driver is not None and machine.older_than(min_driver):
            reasons.append(fd.DriverTooOld(min_driver, why, target.driver))
    if var.kind == "cuda" and target.gpus:
        windows, edges = machine.windows()
        for reason, fact in windows:
            reasons.append(reason)
            driver_facts.append(fact)
        if not any(r.kind == "window" for r in reasons):
            driver_facts.extend(edges)
    evidence, worst = facts_grade((*facts, *driver_facts))
    doubt = worst.what if worst is not None and evidence not in DOCUMENTED else None
    if request.level == EvidenceLevel.OBSERVED and evidence != Grade.OBSERVED and worst is not None:
        reasons.append(fd.TooWeak(worst.what, evidence))
    return Candidate(
        release=rel,
        variant=var,
        platform=target.platform.name,
        reasons=tuple(reasons),
        min_driver=min_driver,
        min_driver_why=why,
        confirmed=evidence in DOCUMENTED,
        warnings=tuple(warnings),
        coverage=tuple(coverage),
        packages=tuple(packages),
        jit=var.kind == "cuda" and needs_jit,
        doubt=doubt,
        evidence=evidence,
        facts=tuple(facts),
        driver_facts=tuple(driver_facts),
        extensions=tuple(chosen),
    )


def _build_facts(rel: Release, var: Variant, target: Target, request: Request) -> list[Fact]:
    """The build's own graded facts: existence, Python tags, companions asked for, cuDNN, NCCL
    (architectures are added where GPUs are checked)."""
    facts = [
        Fact("release", rel.prov.grade, rel.prov.source, ev.Exists(rel.version)),
        Fact("build", var.prov.grade, var.prov.source, ev.Exists(rel.version, var.name)),
    ]
    py = rel.python_prov or rel.prov
    facts.append(Fact("python", py.grade, py.source, ev.PythonTags(target.platform.name)))
    # Companions, cuDNN and NCCL describe the build (the wheel pins them): shown, never deciding.
    for name, _spec in request.companions:
        cprov = rel.companion_prov.get(name, rel.prov)
        facts.append(Fact(name, cprov.grade, cprov.source, ev.Pairing(name), False))
    for label, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
        if pinned is not None and pinned.version is not None:
            what = ev.Pinned(label, pinned.version)
            facts.append(Fact(label, pinned.prov.grade, pinned.prov.source, what, False))
    return facts


def _floor_fact(
    catalog: Catalog, target: Target, cuda: CudaVersion, need: Driver | None
) -> Fact | None:
    """The graded record the build's driver floor comes from: the major's minor-version
    compatibility floor, or the toolkit's own minimum where that is what applies (strict policy,
    PTX JIT, or a toolkit that shipped below its major's floor)."""
    tk = catalog.toolkits.get(cuda)
    mvc = catalog.compat_floors.get(cuda.major)
    if mvc is not None and need is not None and mvc.min_driver.get(target.driver_os) == need:
        return Fact("driver floor", mvc.prov.grade, mvc.prov.source, ev.Drivers(cuda, True))
    if tk is not None:
        return Fact("driver floor", tk.prov.grade, tk.prov.source, ev.Drivers(cuda, True))
    return None


def window_reasons(catalog: Catalog, target: Target) -> list[tuple[fd.OutsideWindow, Fact]]:
    """GPUs the target's driver does not drive at all (outside their architecture's window).

    The driver's branch decides, never its number: a Windows 581.57 driver is R580 (Windows
    numbers run above the branch's name). A Windows number the table does not place, where the
    answer depends on it, is turned away with the branch that is known to work named.
    """
    out: list[tuple[fd.OutsideWindow, Fact]] = []
    if target.driver is None:
        return out
    branch = catalog.driver_branch(target.driver, target.driver_os)
    for gpu in target.gpus:
        arch = catalog.architectures.get(gpu.cc)
        win = arch.drivers if arch is not None else None
        if win is None or arch is None:
            continue
        prov = win.prov
        fact = Fact("driver window", prov.grade, prov.source, ev.Drivers(arch.name, False))
        if branch.record is not None and rank(branch.record.prov.grade) > rank(prov.grade):
            rec = branch.record.prov
            what = ev.WindowsIs(target.driver, branch.lo)
            fact = Fact("driver window", rec.grade, rec.source, what)
        verdict = window_verdict(win, branch.lo, branch.hi)
        if verdict is not None:
            window = fd.OutsideWindow(
                gpu.label, target.driver, branch.lo, branch.hi, arch.name, verdict, win.cut,
                win.first, win.last,
            )  # fmt: skip
            out.append((window, fact))
    return out


def window_verdict(win: DriverWindow, lo: int, hi: int) -> fd.Verdict | None:
    """Where a branch known to lie in lo..hi falls against an architecture's window (None:
    inside it); the fleet memo keys a kind of machine on it."""
    if win.cut is not None and lo >= win.cut:
        return fd.Verdict.DROPPED
    if win.cut is not None and hi >= win.cut:
        return fd.Verdict.MAYBE_DROPPED
    if win.first is not None and hi < win.first:
        return fd.Verdict.PREDATES
    if win.first is not None and lo < win.first:
        return fd.Verdict.MAYBE_PREDATES
    return None


def gpu_windows(
    catalog: Catalog, gpus: Sequence[TargetGpu]
) -> list[tuple[TargetGpu, Architecture, DriverWindow]]:
    """Each architecture of ``gpus`` that has a driver window, once, with a GPU of it."""
    out: list[tuple[TargetGpu, Architecture, DriverWindow]] = []
    seen: set[str] = set()
    for gpu in gpus:
        arch = catalog.architectures.get(gpu.cc)
        if arch is None or arch.drivers is None or arch.name in seen:
            continue
        seen.add(arch.name)
        out.append((gpu, arch, arch.drivers))
    return out


def window_facts(catalog: Catalog, target: Target) -> list[Fact]:
    """The driver-window edges checked for a build whose driver is inside every GPU's window.

    The last edge decides. A first edge the driver has reached only describes: it is the branch
    of the first toolkit that targets the CC, whose driver NVIDIA's tables list; what may be
    inferred is only that older branches do not drive it, and those are turned away.
    """
    if target.driver is None:
        return []
    branch = catalog.driver_branch(target.driver, target.driver_os)
    out: list[Fact] = []
    for _gpu, arch, win in gpu_windows(catalog, target.gpus):
        if win.cut is None and win.first is None:
            continue
        edges = ev.Drivers(arch.name, False, win.first, win.cut, edges=True)
        out.append(
            Fact("driver window", win.prov.grade, win.prov.source, edges, win.cut is not None)
        )
        if win.cut is not None and branch.record is not None:
            rec = branch.record
            what = ev.WindowsIs(target.driver, rec.branch, (rec.first, rec.last))
            out.append(Fact("driver branch", rec.prov.grade, rec.prov.source, what))
    return out


def kernel_coverage(catalog: Catalog, arch: ArchList, cc: CC) -> fd.Reach | None:
    """How a build's kernels reach a GPU of this CC (SASS, or PTX JIT-compiled), or None.

    Public so that `gpuresolve verify` applies the very rule the solver chose with.
    """
    tegra = catalog.is_tegra(cc)
    sass = [s for s in arch.sass if (s == cc if tegra else s[0] == cc[0] and s[1] <= cc[1])]
    if sass:
        return fd.Reach(False, max(sass))
    ptx = [p for p in arch.ptx if p <= cc]
    if ptx:
        return fd.Reach(True, max(ptx))
    return None


def driver_need(
    catalog: Catalog,
    cuda: CudaVersion,
    driver_os: str,
    *,
    policy: Policy = DriverPolicy.COMPAT,
    needs_jit: bool,
) -> tuple[Driver | None, fd.DriverWhy]:
    """The lowest driver a CUDA ``cuda`` build needs on ``driver_os``, and why.

    Public so that `gpuresolve verify` judges an installed build by the solver's own rule.
    """
    own = catalog.toolkit_min_driver(cuda, driver_os)
    major = cuda.major
    if policy == DriverPolicy.STRICT:
        return own, fd.DriverWhy(cuda, fd.Basis.TOOLKIT, major)
    if needs_jit:
        return own, fd.DriverWhy(cuda, fd.Basis.JIT, major)
    compat = catalog.compat_min_driver(cuda, driver_os)
    if compat is not None and own is not None and compat == own:
        return compat, fd.DriverWhy(cuda, fd.Basis.TOOLKIT, major)
    return compat, fd.DriverWhy(cuda, fd.Basis.COMPAT, major)


def _local(version: str, var: Variant, platform: str) -> str:
    """The version as the PyTorch index spells it: local tag except for untagged macOS wheels."""
    if BY_NAME[platform].sys_platform == "darwin" and var.name == "cpu":  # no local tag there
        return version
    return f"{version}+{var.name}"


def gpu_names(target: Target) -> list[str]:
    return [g.name or cc_str(g.cc) for g in target.gpus]


# --- hints: what would change the decision, read from the builds it turned down ------------------


def _key(cuda: CudaVersion) -> tuple[int, int]:
    return cuda.key


def _blocked_only_by(c: Candidate, kinds: set[K]) -> bool:
    return bool(c.reasons) and all(r.kind in kinds for r in c.reasons)


def build_hints(
    catalog: Catalog,
    target: Target,
    request: Request,
    selection: Candidate | None,
    ok: Sequence[Candidate],
    rejected: Sequence[Candidate],
) -> tuple[fd.Hint, ...]:
    """The hints of one decision, in a fixed order: a driver upgrade, the release that dropped
    a GPU's kernels, Python, a CUDA pin, companions, a build the evidence level held back, missing
    target facts, unknown or Tegra GPUs; when nothing runs, a driver outside the GPU's window first.
    They never change the selection: a job of its own, apart from the solver's rules.
    """
    hints: list[fd.Hint] = []
    allow = request.level
    floor = selection.release.key if selection else ()
    newer = [c for c in rejected if c.release.key > floor]

    def beats_selection(c: Candidate) -> bool:
        return selection is None or c.rank_key(allow) > selection.rank_key(allow)

    # Driver: the build a driver upgrade alone would make the answer (the best one, lowest driver).
    by_driver = [
        (c.min_driver, c)
        for c in rejected
        if _blocked_only_by(c, {K.DRIVER}) and c.min_driver and target.driver and beats_selection(c)
    ]
    if by_driver and target.driver is not None:
        top = max(c.rank_key(allow) for _, c in by_driver)[:3]
        need, best = min(
            ((n, c) for n, c in by_driver if c.rank_key(allow)[:3] == top), key=lambda p: p[0]
        )
        same = selection is not None and best.release.key == selection.release.key
        hints.append(
            fd.NeedsDriver(
                best.release.version, best.variant.name, need, best.min_driver_why,
                target.driver, selection.variant.name if same and selection else None,
            )
        )  # fmt: skip
    # Architecture: the newest release none of whose builds has kernels for a GPU of the target.
    by_release: dict[tuple[int, ...], list[Candidate]] = {}
    for c in newer:
        if c.variant.kind == "cuda" and not any(
            r.kind in REQUEST_KINDS or r.kind == K.PYTHON for r in c.reasons
        ):
            by_release.setdefault(c.release.key, []).append(c)
    ok_releases = {c.release.key for c in ok}

    def lacks_kernels(c: Candidate) -> bool:
        return any(r.kind in (K.ARCH, K.UNKNOWN) for r in c.reasons)

    dropped_in = [
        key
        for key, cands in by_release.items()
        if key not in ok_releases
        and all(lacks_kernels(c) for c in cands)
        and any(r.kind == K.ARCH for c in cands for r in c.reasons)
    ]
    if dropped_in:
        cands = by_release[max(dropped_in)]
        gpus = sorted({r.gpu for c in cands for r in c.reasons if isinstance(r, fd.NoKernels)})
        unknown = sorted(
            c.variant.name for c in cands if any(r.kind == K.UNKNOWN for r in c.reasons)
        )
        known = sorted(c.variant.name for c in cands if any(r.kind == K.ARCH for r in c.reasons))
        hints.append(
            fd.KernelsDropped(cands[0].release.version, tuple(gpus), tuple(known), tuple(unknown))
        )
    # A newer release whose builds are held back only by unknown architecture lists: reading the
    # wheel (a stronger fact) may unlock it. Named when nothing newer is known to lack the kernels.
    unknown_only = [
        key
        for key, cands in by_release.items()
        if key not in ok_releases
        and all(_blocked_only_by(c, {K.UNKNOWN}) for c in cands)
        and (not dropped_in or key > max(dropped_in))
    ]
    if unknown_only:
        cands = by_release[max(unknown_only)]
        builds = tuple(sorted(c.variant.name for c in cands))
        hints.append(fd.MayRun(cands[0].release.version, builds, target.platform))
    by_python = [c for c in newer if _blocked_only_by(c, {K.PYTHON})]
    if by_python:
        newest = max(by_python, key=lambda c: c.release.key)
        pys = newest.release.python.get(target.platform.name, ())
        if pys and all(target.python < p for p in pys):
            hints.append(fd.NeedsPython(newest.release.version, pys[0], target.python))
        else:
            version = newest.release.version
            hints.append(fd.NoPythonHint(version, target.python, target.platform, tuple(pys)))
    if request.cuda and not any(c.variant.cuda == request.cuda for c in (*ok, *rejected)):
        have = sorted({c.variant.cuda for c in (*ok, *rejected) if c.variant.cuda}, key=_key)
        hints.append(fd.NoCudaBuild(request.cuda, target.platform, tuple(have)))
    by_companion = [c for c in newer if _blocked_only_by(c, {K.COMPANION})]
    if by_companion:
        newest = max(by_companion, key=lambda c: c.release.key)
        hints.append(fd.HeldByCompanions(newest.release.version, newest.reasons))
    if selection is None:  # the driver itself is the blocker: say so first
        window = tuple(
            dict.fromkeys(r for c in rejected for r in c.reasons if isinstance(r, fd.OutsideWindow))
        )
        if window:
            hints.insert(0, fd.InstallBranch(window, _windows_numbers(catalog, target, window)))
    if selection is not None and target.driver is not None:
        hints.extend(_last_branch_hints(catalog, target))
    if allow != EvidenceLevel.ANY:
        weaker = [
            c
            for c in ok
            if not trusted(c.evidence, allow) and c.release.key > floor and c is not selection
        ]
        if selection is not None and trusted(selection.evidence, allow) and weaker:
            best = max(weaker, key=lambda c: c.rank_key("any"))
            version, name = best.release.version, best.variant.name
            hints.append(fd.WeakerRuns(version, name, best.doubt, best.evidence))
    if selection is not None and selection.variant.kind == "cuda":
        # a machine without an NVIDIA GPU runs a fleet's CUDA build on the CPU: no driver needed
        if target.nvidia and target.driver is None and selection.min_driver:
            hints.append(fd.NoDriverGiven(selection.min_driver, selection.min_driver_why))
        if target.nvidia and not target.gpus and not target.unknown_gpus:
            hints.append(fd.NoGpuModel())
    hints.extend(fd.CcUnknownHint(name) for name in target.unknown_gpus)
    tegra = [g for g in target.gpus if catalog.is_tegra(g.cc)]
    if selection is None and tegra:
        hints.append(fd.Tegra(tuple(g.label for g in tegra)))
    place = Place(target.platform, target.python, tuple((g.cc, g.label) for g in target.gpus))
    hints.extend(_extension_hints(catalog, place, request, selection, rejected))
    return tuple(hints)


def _windows_numbers(
    catalog: Catalog, target: Target, windows: Sequence[fd.OutsideWindow]
) -> tuple[tuple[int, Driver, Driver], ...]:
    """How each branch a GPU's window ends with is numbered on Windows, where known."""
    if target.driver_os != "windows":
        return ()
    lasts = {w.last for w in windows if w.last is not None}
    return tuple((w.branch, w.first, w.last) for w in catalog.windows_branches if w.branch in lasts)


def _last_branch_hints(catalog: Catalog, target: Target) -> list[fd.Hint]:
    """A GPU on the last branch that drives it: upgrading the driver past it loses the GPU."""
    assert target.driver is not None
    branch = catalog.driver_branch(target.driver, target.driver_os)
    return [
        fd.LastBranch(gpu.label, arch.name, win.last, win.cut)
        for gpu, arch, win in gpu_windows(catalog, target.gpus)
        if win.last is not None and branch.exact == win.last
    ]


def _extension_hints(
    catalog: Catalog,
    place: Place,
    request: Request,
    selection: Candidate | None,
    rejected: Sequence[Candidate],
) -> list[fd.Hint]:
    """The extension packages asked for (--with xformers): which one holds torch back, and, when
    no set fits, which package cannot run here and why. Judged on the ``place`` (platform,
    Python, GPUs), as the extensions are: the driver plays no part, so it is not passed."""
    if not request.extensions:
        return []
    floor = selection.release.key if selection else ()
    held = [
        c
        for c in rejected
        if c.release.key > floor and c.reasons and all(r.kind == K.EXTENSION for r in c.reasons)
    ]
    hints: list[fd.Hint] = []
    if held and selection is not None:
        top = max(held, key=lambda c: c.rank_key(request.level))
        blockers = [r for r in top.reasons if isinstance(r, fd.ExtensionMiss)]
        held_by = {b.miss.package for b in blockers}
        names = tuple(n for n, _ in request.extensions if n in held_by)
        hints.append(fd.ExtHeldBack(top.release.version, names, tuple(blockers)))
    if selection is not None:
        return hints
    return hints + _why_no_set(catalog, place, request, rejected)


def _why_no_set(
    catalog: Catalog, place: Place, request: Request, rejected: Sequence[Candidate]
) -> list[fd.Hint]:
    """Per package, the torch releases it fits alone among the builds that run here. A package
    that fits none: the reason of the torch build it came closest with (no kernels for a GPU,
    no wheel for the platform), or, where it fits a torch build that does not run here, that."""
    request_side = {K.EXTENSION, K.COMPANION, K.SPEC, K.CUDA, K.VARIANT}
    runs = [c for c in rejected if all(r.kind in request_side for r in c.reasons)]
    if not runs:
        return []
    cuda = [c for c in rejected if c.variant.kind == "cuda"]
    fits: dict[str, list[str]] = {}
    out: list[fd.Hint] = []
    for name, spec in request.extensions:
        fits[name] = []
        closest: tuple[int, fd.Misfit | None, Candidate | None] = (-1, None, None)
        for c in sorted(cuda, key=lambda c: c.rank_key(request.level), reverse=True):
            got, miss, stage = choose(
                catalog,
                place,
                c.release,
                c.variant,
                name,
                spec,
                lambda a, cc: kernel_coverage(catalog, a, cc),
            )
            if got is not None and c in runs:
                if c.release.version not in fits[name]:
                    fits[name].append(c.release.version)
            elif stage > closest[0]:
                closest = (stage, miss, c)
        if fits[name]:
            continue
        stage, missed, near = closest
        if stage == FITS and near is not None:
            torch_why = tuple(r for r in near.reasons if r.kind != K.EXTENSION)
            version, variant = near.release.version, near.variant.name
            out.append(fd.ExtFitsElsewhere(name, version, variant, torch_why))
        elif missed is not None:
            out.append(fd.ExtCannotRun(name, missed))
    if not out and len(fits) > 1:
        out.append(fd.ExtNoCommonTorch(tuple((n, tuple(v)) for n, v in fits.items())))
    return out
