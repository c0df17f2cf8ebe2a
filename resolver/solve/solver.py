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
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from resolver.catalog import Architecture, ArchList, Catalog, DriverWindow, Release, Variant
from resolver.core.platforms import BY_NAME
from resolver.core.versions import CC, Driver, cc_sm, cc_str, cuda_key, driver_key
from resolver.core.vocab import DriverPolicy, EvidenceLevel, Grade
from resolver.db.evidence import DOCUMENTED, Fact, facts_grade, rank, trusted
from resolver.solve.extensions import ExtChoice, Misfit, Place, choose
from resolver.solve.target import Policy as Policy
from resolver.solve.target import Request as Request
from resolver.solve.target import Target as Target
from resolver.solve.target import TargetGpu as TargetGpu

if TYPE_CHECKING:  # packaging's specifiers cost ~20 ms to import: only a given --torch needs them
    from packaging.specifiers import SpecifierSet

COMPANIONS = ("torchvision", "torchaudio")
ReasonKind = Literal[
    "spec", "python", "cuda", "variant", "companion", "cpu", "nogpu", "arch", "driver",
    "unknown", "window", "evidence", "extension",
]  # fmt: skip


@dataclass(frozen=True)
class Reason:
    kind: ReasonKind
    text: str
    detail: Misfit | None = None  # an extension's gate and values (the text says them)


# Reason kinds by who is at fault: the request, or the target's GPU side (kernels, driver).
REQUEST_KINDS: frozenset[ReasonKind] = frozenset({"spec", "cuda", "variant", "companion"})
GPU_KINDS: frozenset[ReasonKind] = frozenset({"arch", "driver", "unknown", "window"})


@dataclass(frozen=True)
class Candidate:
    release: Release
    variant: Variant
    platform: str
    reasons: tuple[Reason, ...] = ()
    min_driver: str | None = None  # what this build needs on the target's driver OS
    min_driver_why: str | None = None
    confirmed: bool = True
    warnings: tuple[str, ...] = ()
    coverage: tuple[str, ...] = ()  # how each GPU is covered, for "why"
    packages: tuple[tuple[str, str], ...] = ()  # (name, version with local tag)
    jit: bool = False  # some GPU is reached only through PTX, JIT-compiled on first use
    doubt: str | None = None  # which of its facts rests on a secondary source, if any
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
        cuda = cuda_key(self.variant.cuda) if self.variant.cuda else (0, 0)
        tier = 0 if trusted(self.evidence, level) else -1
        return (not self.jit, tier, self.release.key, self.pypi, cuda)


@dataclass(frozen=True)
class Decision:
    target: Target
    request: Request
    selection: Candidate | None
    alternatives: tuple[Candidate, ...]
    rejected: tuple[Candidate, ...]
    hints: tuple[str, ...]
    cpu_fallback: Candidate | None = None  # shown when a GPU target has no GPU build


floor_key = functools.lru_cache(maxsize=1024)(driver_key)  # a few dozen floors, asked per build


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
        self.python = str(target.python)  # as the database lists a release's Pythons
        self._windows: tuple[list[tuple[Reason, Fact]], list[Fact]] | None = None
        self._coverage: dict[tuple[int, CC], str | None] = {}

    def older_than(self, floor: str) -> bool:
        return self.have is not None and self.have < floor_key(floor)

    def windows(self) -> tuple[list[tuple[Reason, Fact]], list[Fact]]:
        if self._windows is None:
            c, t = self.catalog, self.target
            self._windows = (window_reasons(c, t), window_facts(c, t))
        return self._windows

    def coverage(self, arch: ArchList, cc: CC) -> str | None:
        key = (id(arch), cc)  # the catalog holds every arch list for the whole solve
        if key not in self._coverage:
            self._coverage[key] = kernel_coverage(self.catalog, arch, cc)
        return self._coverage[key]


def decide(catalog: Catalog, target: Target, request: Request) -> Decision:
    """Resolve the best build for the target, with the runners-up and the rejects; hints.solve
    adds the hints (hints.py reads this module's types, so it calls this one, not the reverse)."""
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
            notes.append(
                f"nothing documented fits: {selection.doubt} (evidence: {selection.evidence})"
            )
        if selection.variant.kind == "cpu" and cuda_wanted:
            notes.append("a CPU build, as asked: this target's NVIDIA GPU stays unused")
        if selection.jit:
            notes.append(
                "a GPU runs this build only through PTX JIT: slow first use, and the "
                "build's CUDA libraries may lack that GPU's kernels"
            )
        notes.extend(
            f"{name}: compute capability unknown, kernels not checked (give it with --gpu X.Y)"
            for name in target.unknown_gpus
        )
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
    reasons: list[Reason] = []
    warnings: list[str] = []
    if request.torch is not None and not _allows(request.torch, rel.version):
        reasons.append(Reason("spec", f"torch {rel.version} does not match {request.torch}"))
    pythons = rel.python.get(target.platform.name, ())
    if machine.python not in pythons:
        span = f"{pythons[0]}–{pythons[-1]}" if pythons else "none"
        reasons.append(
            Reason(
                "python",
                f"no torch {rel.version} wheel for Python {target.python} on {target.platform}"
                f" (it has {span})",
            )
        )
    if request.cuda and var.cuda != request.cuda:
        what = f"CUDA {var.cuda}" if var.cuda else "CPU"
        reasons.append(Reason("cuda", f"{what} build; CUDA {request.cuda} was asked for"))
    elif request.variant and var.name != request.variant:
        reasons.append(Reason("variant", f"{var.name} build; {request.variant} was asked for"))

    packages = [("torch", _local(rel.version, var, target.platform.name))]
    for name, spec in request.companions:
        paired = rel.companion(name)
        if paired is None:
            reasons.append(Reason("companion", f"no {name} release pairs with torch {rel.version}"))
        elif spec is not None and not spec.contains(paired, prereleases=True):
            pulled = [v for v in rel.yanked.get(name, ()) if spec.contains(v, prereleases=True)]
            gone = f"; {', '.join(pulled)} is yanked on the Package Index" if pulled else ""
            reasons.append(
                Reason("companion", f"{name} {paired} (paired) does not match {spec}{gone}")
            )
        else:
            untagged = name in rel.companion_untagged
            packages.append(
                (name, paired if untagged else _local(paired, var, target.platform.name))
            )
            cprov = rel.companion_prov.get(name)
            if cprov is not None and not cprov.confirmed:
                warnings.append(
                    f"{name} {paired} with torch {rel.version}: the pairing is inferred, "
                    "no primary source states it"
                )

    chosen: list[ExtChoice] = []
    if request.extensions:
        place = Place(target.platform, target.python, tuple((g.cc, g.label) for g in target.gpus))
        for name, spec in request.extensions:
            got, why_not, _ = choose(
                catalog, place, rel, var, name, spec, lambda a, cc: kernel_coverage(catalog, a, cc)
            )
            if got is None:
                if why_not is not None:
                    reasons.append(Reason("extension", why_not.text, why_not))
            else:
                chosen.append(got)
                warnings.extend(f"{n}; took {name} {got.version}" for n in got.notes)
    min_driver = why = None
    needs_jit = False
    coverage: list[str] = []
    facts = _build_facts(rel, var, target, request)
    driver_facts: list[Fact] = []
    if var.kind == "cpu":
        if cuda_wanted and request.variant != "cpu":  # by name (+cpu), it is no silent fallback
            reasons.append(Reason("cpu", "CPU build: this target has an NVIDIA GPU"))
    elif not (cuda_wanted or request.cuda or request.variant or request.cuda_on_gpu_less):
        reasons.append(Reason("nogpu", "CUDA build: this target has no NVIDIA GPU"))
    else:
        arch = var.platforms.get(target.platform.name)
        if target.gpus and arch is None:
            reasons.append(
                Reason("unknown", f"which GPUs {var.name} supports on {target.platform} is unknown")
            )
        elif arch is not None and target.gpus:
            sass_text = " ".join(cc_sm(c) for c in arch.sass) or "none"
            facts.append(
                Fact(
                    "sass",
                    arch.prov.grade,
                    arch.prov.source,
                    f"SASS {sass_text} for {target.platform.name}",
                )
            )
            for gpu in target.gpus:
                how = machine.coverage(arch, gpu.cc)
                if how is None:
                    reasons.append(
                        Reason("arch", f"no kernels for {gpu.label}: {_arch_text(arch)}")
                    )
                else:
                    needs_jit = needs_jit or is_jit(how)
                    coverage.append(f"{gpu.label}: {how}")
            if needs_jit:  # PTX decides only where a GPU is reached through it
                ptx = arch.ptx_provenance
                ptx_text = " ".join(cc_sm(c) for c in arch.ptx) or "none"
                facts.append(Fact("ptx", ptx.grade, ptx.source, f"PTX {ptx_text}"))
        min_driver, why = _driver_need(catalog, target, request, var, needs_jit)
        floor = _floor_fact(catalog, target, var.cuda or "", min_driver)
        if floor is not None:
            driver_facts.append(floor)
        if min_driver is None:
            reasons.append(
                Reason(
                    "driver",
                    f"the minimum {target.driver_os} driver for CUDA {var.cuda} is unknown",
                )
            )
        elif target.driver is not None and machine.older_than(min_driver):
            reasons.append(driver_reason(min_driver, why, target.driver))
    if var.kind == "cuda" and target.gpus:
        windows, edges = machine.windows()
        for reason, fact in windows:
            reasons.append(reason)
            driver_facts.append(fact)
        if not any(r.kind == "window" for r in reasons):
            driver_facts.extend(edges)
    evidence, worst = facts_grade((*facts, *driver_facts))
    doubt = describe_fact(worst) if worst is not None and evidence not in DOCUMENTED else None
    if request.level == EvidenceLevel.OBSERVED and evidence != Grade.OBSERVED and worst is not None:
        reasons.append(
            Reason("evidence", f"--evidence observed: {describe_fact(worst)} is {evidence}")
        )
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


def driver_reason(min_driver: str, why: str | None, driver: Driver) -> Reason:
    return Reason("driver", f"needs driver >= {min_driver} ({why}); this host has {driver}")


def _build_facts(rel: Release, var: Variant, target: Target, request: Request) -> list[Fact]:
    """The build's own graded facts: existence, Python tags, companions asked for, cuDNN, NCCL
    (architectures are added where GPUs are checked)."""
    facts = [
        Fact("release", rel.prov.grade, rel.prov.source, f"torch {rel.version} exists"),
        Fact("build", var.prov.grade, var.prov.source, f"its {var.name} build exists"),
    ]
    py = rel.python_prov or rel.prov
    facts.append(Fact("python", py.grade, py.source, f"Python tags on {target.platform.name}"))
    # Companions, cuDNN and NCCL describe the build (the wheel pins them): shown, never deciding.
    for name, _spec in request.companions:
        cprov = rel.companion_prov.get(name, rel.prov)
        facts.append(Fact(name, cprov.grade, cprov.source, f"the {name} pairing", False))
    for label, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
        if pinned is not None and pinned.version is not None:
            facts.append(
                Fact(
                    label,
                    pinned.prov.grade,
                    pinned.prov.source,
                    f"{'cuDNN' if label == 'cudnn' else 'NCCL'} {pinned.version}",
                    False,
                )
            )
    return facts


def _floor_fact(catalog: Catalog, target: Target, cuda: str, need: str | None) -> Fact | None:
    """The graded record the build's driver floor comes from: the major's minor-version
    compatibility floor, or the toolkit's own minimum where that is what applies (strict policy,
    PTX JIT, or a toolkit that shipped below its major's floor)."""
    tk = catalog.toolkits.get(cuda)
    mvc = catalog.compat_floors.get(cuda_key(cuda)[0]) if cuda else None
    if mvc is not None and need is not None and mvc.min_driver.get(target.driver_os) == need:
        return Fact("driver floor", mvc.prov.grade, mvc.prov.source, f"CUDA {cuda} drivers")
    if tk is not None:
        return Fact("driver floor", tk.prov.grade, tk.prov.source, f"CUDA {cuda} drivers")
    return None


def describe_fact(fact: Fact) -> str:
    return fact.what


def window_reasons(catalog: Catalog, target: Target) -> list[tuple[Reason, Fact]]:
    """GPUs the target's driver does not drive at all (outside their architecture's window).

    The driver's branch decides, never its number: a Windows 581.57 driver is R580 (Windows
    numbers run above the branch's name). A Windows number the table does not place, where the
    answer depends on it, is turned away with the branch that is known to work named.
    """
    out: list[tuple[Reason, Fact]] = []
    if target.driver is None:
        return out
    branch = catalog.driver_branch(target.driver, target.driver_os)
    shown = f"driver {target.driver} ({branch.text})"
    for gpu in target.gpus:
        arch = catalog.architectures.get(gpu.cc)
        win = arch.drivers if arch is not None else None
        if win is None or arch is None:
            continue
        prov = win.prov
        fact = Fact("driver window", prov.grade, prov.source, f"{arch.name} drivers")
        if branch.record is not None and rank(branch.record.prov.grade) > rank(prov.grade):
            rec = branch.record.prov
            fact = Fact(
                "driver window", rec.grade, rec.source, f"Windows {target.driver} is R{branch.lo}"
            )
        cut, last = win.cut, win.last
        keep = f"R{last} is the last branch that does" if last is not None else ""
        text: str | None = None
        if cut is not None and branch.lo >= cut:
            text = (
                f"{gpu.label}: {shown} no longer supports {arch.name} GPUs (dropped in R{cut}); "
                + keep
            )
        elif cut is not None and branch.hi >= cut:
            text = (
                f"{gpu.label}: which branch Windows driver {target.driver} belongs to is unknown "
                f"({branch.text}), so whether it still drives {arch.name} GPUs (dropped in "
                f"R{cut}) is unknown; " + keep
            )
        elif win.first is not None and branch.hi < win.first:
            text = (
                f"{gpu.label}: {shown} predates {arch.name} GPUs; they need R{win.first} or newer"
            )
        elif win.first is not None and branch.lo < win.first:
            text = (
                f"{gpu.label}: which branch Windows driver {target.driver} belongs to is unknown "
                f"({branch.text}), so whether it drives {arch.name} GPUs is unknown; they need "
                f"R{win.first} or newer"
            )
        if text is not None:
            out.append((Reason("window", text.rstrip("; ")), fact))
    return out


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
        out.append(
            Fact(
                "driver window",
                win.prov.grade,
                win.prov.source,
                f"{arch.name} drivers: {_window_text(win.first, win.cut)}",
                win.cut is not None,
            )
        )
        if win.cut is not None and branch.record is not None:
            rec = branch.record
            out.append(
                Fact(
                    "driver branch",
                    rec.prov.grade,
                    rec.prov.source,
                    f"Windows driver {target.driver} is R{rec.branch} "
                    f"(Windows {rec.first}-{rec.last})",
                )
            )
    return out


def _window_text(first: int | None, cut: int | None) -> str:
    parts = ([f"first in R{first}"] if first is not None else []) + (
        [f"dropped in R{cut}"] if cut is not None else []
    )
    return ", ".join(parts)


def kernel_coverage(catalog: Catalog, arch: ArchList, cc: CC) -> str | None:
    """How a build's kernels reach a GPU of this CC ("SASS sm_86", "PTX sm_90 (...)"), or None.

    Public so that `gpuresolve verify` applies the very rule the solver chose with.
    """
    tegra = catalog.is_tegra(cc)
    sass = [s for s in arch.sass if (s == cc if tegra else s[0] == cc[0] and s[1] <= cc[1])]
    if sass:
        return f"SASS {cc_sm(max(sass))}"
    ptx = [p for p in arch.ptx if p <= cc]
    if ptx:
        return f"PTX {cc_sm(max(ptx))} (JIT-compiled on first use)"
    return None


def _arch_text(arch: ArchList) -> str:
    sass = " ".join(cc_sm(c) for c in arch.sass) or "none"
    ptx = " ".join(cc_sm(c) for c in arch.ptx) or "none"
    return f"build has SASS {sass}; PTX {ptx}"


def is_jit(coverage: str) -> bool:
    """Whether a `kernel_coverage` answer reaches the GPU only through PTX (JIT-compiled)."""
    return coverage.startswith("PTX")


def driver_need(
    catalog: Catalog,
    cuda: str,
    driver_os: str,
    *,
    policy: Policy = DriverPolicy.COMPAT,
    needs_jit: bool,
) -> tuple[str | None, str]:
    """The lowest driver a CUDA ``cuda`` build needs on ``driver_os``, and why.

    Public so that `gpuresolve verify` judges an installed build by the solver's own rule.
    """
    own = catalog.toolkit_min_driver(cuda, driver_os)
    if policy == DriverPolicy.STRICT:
        return own, f"CUDA {cuda} toolkit minimum"
    if needs_jit:
        return own, f"CUDA {cuda} toolkit minimum, for PTX JIT"
    compat = catalog.compat_min_driver(cuda, driver_os)
    major = cuda_key(cuda)[0]
    if compat is not None and own is not None and compat == own:
        return compat, f"CUDA {cuda} toolkit minimum"
    return compat, f"CUDA {major}.x minor-version compatibility"


def _driver_need(
    catalog: Catalog, target: Target, request: Request, var: Variant, needs_jit: bool
) -> tuple[str | None, str | None]:
    """The lowest driver this CUDA build needs on the target, and why."""
    assert var.cuda is not None
    return driver_need(
        catalog, var.cuda, target.driver_os, policy=request.policy, needs_jit=needs_jit
    )


def _local(version: str, var: Variant, platform: str) -> str:
    """The version as the PyTorch index spells it: local tag except for untagged macOS wheels."""
    if BY_NAME[platform].sys_platform == "darwin" and var.name == "cpu":  # no local tag there
        return version
    return f"{version}+{var.name}"


def gpu_names(target: Target) -> list[str]:
    return [g.name or cc_str(g.cc) for g in target.gpus]
