"""The solver: a pure function from (catalog, target, request) to a decision.

No I/O, no detection, no printing: everything it needs arrives in its arguments, so the same code
serves one machine, a described machine and a whole fleet, and is tested exhaustively.

Rules (see README "How gpuresolve decides"):
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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from resolver.catalog import ArchList, Catalog, Release, Variant
from resolver.db.evidence import DOCUMENTED, Fact, facts_grade, trusted
from resolver.versions import CC, cc_sm, cc_str, cuda_key, driver_key

if TYPE_CHECKING:  # packaging's specifiers cost ~20 ms to import: only a given --torch needs them
    from packaging.specifiers import SpecifierSet

COMPANIONS = ("torchvision", "torchaudio")
Policy = Literal["compat", "strict"]


@dataclass(frozen=True)
class TargetGpu:
    cc: CC
    name: str | None = None

    @property
    def label(self) -> str:
        return f"{cc_sm(self.cc)} ({self.name})" if self.name else cc_sm(self.cc)


@dataclass(frozen=True)
class Target:
    """The machine to resolve for: detected, described, or one member of a fleet."""

    platform: str
    python: str  # "3.12"
    driver: str | None = None  # None: unknown, not checked (the answer states what it needs)
    driver_os: str = "linux"  # whose driver floors apply ("windows" on Windows and WSL2)
    gpus: tuple[TargetGpu, ...] = ()
    nvidia: bool = False  # an NVIDIA GPU is there (even when its CC is unknown)
    name: str | None = None  # a label for fleets and reports
    unknown_gpus: tuple[str, ...] = ()  # GPUs seen whose compute capability nobody knows


@dataclass(frozen=True)
class Request:
    """What the user asks for."""

    torch: SpecifierSet | None = None  # None: any release
    companions: tuple[tuple[str, SpecifierSet | None], ...] = ()  # (name, specifier or None)
    cuda: str | None = None  # "12.8"
    variant: str | None = None  # "cu126": from a local version in a pin (torch==2.8.0+cu126)
    policy: Policy = "compat"
    allow_unconfirmed: bool = False  # the old flag: --evidence any
    cuda_on_gpu_less: bool = False  # a fleet's GPU-less members run its CUDA build on the CPU
    evidence: str = "documented"  # documented | observed | any: which builds rank first

    @property
    def level(self) -> str:
        return "any" if self.allow_unconfirmed else self.evidence


@dataclass(frozen=True)
class Reason:
    kind: str  # spec | python | cuda | variant | companion | cpu | nogpu | arch | driver | unknown
    text: str


# Reason kinds by who is at fault: the request, or the target's GPU side (kernels, driver).
REQUEST_KINDS = frozenset({"spec", "cuda", "variant", "companion"})
GPU_KINDS = frozenset({"arch", "driver", "unknown", "window"})


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


def solve(catalog: Catalog, target: Target, request: Request) -> Decision:
    """Resolve the best build for the target, with the runners-up, the rejects and hints."""
    cuda_wanted = target.nvidia or bool(target.gpus)
    evaluated = [
        _evaluate(catalog, target, request, rel, var, cuda_wanted)
        for rel in catalog.releases
        for var in rel.variants
        if target.platform in var.platforms and var.kind in ("cpu", "cuda")
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
                if v.kind == "cpu" and target.platform in v.platforms
            )
            if c.ok
        ]
        cpu_fallback = max(cpu_ok, key=lambda c: c.release.key, default=None)
    from resolver.solve.hints import build_hints  # it reads this module's types: imported here

    hints = build_hints(catalog, target, request, selection, ok, rejected)
    return Decision(target, request, selection, tuple(ok[1:]), rejected, hints, cpu_fallback)


# --- one candidate ---------------------------------------------------------------------------


def _evaluate(
    catalog: Catalog,
    target: Target,
    request: Request,
    rel: Release,
    var: Variant,
    cuda_wanted: bool,
) -> Candidate:
    reasons: list[Reason] = []
    warnings: list[str] = []
    if request.torch is not None and not request.torch.contains(rel.version, prereleases=True):
        reasons.append(Reason("spec", f"torch {rel.version} does not match {request.torch}"))
    pythons = rel.python.get(target.platform, ())
    if target.python not in pythons:
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

    packages = [("torch", _local(rel.version, var, target.platform))]
    for name, spec in request.companions:
        paired = rel.companion(name)
        if paired is None:
            reasons.append(Reason("companion", f"no {name} release pairs with torch {rel.version}"))
        elif spec is not None and not spec.contains(paired, prereleases=True):
            reasons.append(Reason("companion", f"{name} {paired} (paired) does not match {spec}"))
        else:
            untagged = name in rel.companion_untagged
            packages.append((name, paired if untagged else _local(paired, var, target.platform)))
            cprov = rel.companion_prov.get(name)
            if cprov is not None and not cprov.confirmed:
                warnings.append(
                    f"{name} {paired} with torch {rel.version}: the pairing is inferred, "
                    "no primary source states it"
                )

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
        arch = var.platforms.get(target.platform)
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
                    f"SASS {sass_text} for {target.platform}",
                )
            )
            for gpu in target.gpus:
                how = kernel_coverage(catalog, arch, gpu.cc)
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
        tk = catalog.toolkits.get(var.cuda or "")
        if tk is not None:
            driver_facts.append(
                Fact("driver floor", tk.prov.grade, tk.prov.source, f"CUDA {var.cuda} drivers")
            )
        if min_driver is None:
            reasons.append(
                Reason(
                    "driver",
                    f"the minimum {target.driver_os} driver for CUDA {var.cuda} is unknown",
                )
            )
        elif target.driver is not None and driver_key(target.driver) < driver_key(min_driver):
            reasons.append(_driver_reason(min_driver, why, target.driver))
    if var.kind == "cuda" and target.gpus:
        for reason, fact in window_reasons(catalog, target):
            reasons.append(reason)
            driver_facts.append(fact)
    evidence, worst = facts_grade(facts)
    doubt = describe_fact(worst) if worst is not None and evidence not in DOCUMENTED else None
    if request.level == "observed" and evidence != "observed" and worst is not None:
        reasons.append(
            Reason("evidence", f"--evidence observed: {describe_fact(worst)} is {evidence}")
        )
    return Candidate(
        release=rel,
        variant=var,
        platform=target.platform,
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
    )


_DRIVER_TEXT = frozenset({"driver", "window"})  # reason kinds whose text names the host's driver


def restated(decision: Decision) -> list[int]:
    """The positions of the rejected candidates whose reasons name the host's driver."""
    return [
        i for i, c in enumerate(decision.rejected) if any(r.kind in _DRIVER_TEXT for r in c.reasons)
    ]


def _driver_reason(min_driver: str, why: str | None, driver: str) -> Reason:
    return Reason("driver", f"needs driver >= {min_driver} ({why}); this host has {driver}")


def rebind(
    catalog: Catalog, decision: Decision, target: Target, which: Sequence[int] | None = None
) -> Decision:
    """``decision`` restated for ``target``, a machine of the same kind with another driver build.

    Same kind means the same everything but the driver build, which meets and misses the same
    driver floors and falls in the same branch windows (resolver/solve/memo.py keys on exactly
    that): the verdicts are the same, only the texts naming the host's driver differ. A fleet of
    10,000 driver builds costs its few kinds of solver runs this way, not 10,000. ``which``
    (from ``restated``) spares finding the rejected candidates whose texts name the driver.
    """
    old = decision.target
    if old == target:
        return decision
    if old.driver is None or target.driver is None or replace(old, driver=target.driver) != target:
        raise ValueError("rebind: the targets differ in more than their driver build")
    windows = [r for r, _ in window_reasons(catalog, target)]
    driver = target.driver
    rejected = list(decision.rejected)
    for i in restated(decision) if which is None else which:
        c = rejected[i]
        left = iter(windows)
        reasons = tuple(
            _driver_reason(c.min_driver, c.min_driver_why, driver)
            if r.kind == "driver" and c.min_driver is not None
            else next(left)
            if r.kind == "window"
            else r
            for r in c.reasons
        )
        # dataclasses.replace re-runs __init__ (~10 us): a 10,000-machine fleet restates
        # ~200,000 candidates, so the copy is made directly (one field differs)
        new = object.__new__(Candidate)
        new.__dict__.update(c.__dict__)
        object.__setattr__(new, "reasons", reasons)
        rejected[i] = new
    # The one hint naming the host's driver (hints.py): "...; this host has <driver>".
    was, now = f"this host has {old.driver}", f"this host has {target.driver}"
    return replace(
        decision,
        target=target,
        rejected=tuple(rejected),
        hints=tuple(h.replace(was, now) for h in decision.hints),
    )


def _build_facts(rel: Release, var: Variant, target: Target, request: Request) -> list[Fact]:
    """The build's own graded facts: existence, Python tags, companions asked for, cuDNN, NCCL
    (architectures are added where GPUs are checked)."""
    facts = [
        Fact("release", rel.prov.grade, rel.prov.source, f"torch {rel.version} exists"),
        Fact("build", var.prov.grade, var.prov.source, f"its {var.name} build exists"),
    ]
    py = rel.python_prov or rel.prov
    facts.append(Fact("python", py.grade, py.source, f"Python tags on {target.platform}"))
    for name, _spec in request.companions:
        cprov = rel.companion_prov.get(name, rel.prov)
        facts.append(Fact(name, cprov.grade, cprov.source, f"the {name} pairing"))
    for label, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
        if pinned is not None and pinned.version is not None:
            facts.append(
                Fact(
                    label,
                    pinned.prov.grade,
                    pinned.prov.source,
                    f"{'cuDNN' if label == 'cudnn' else 'NCCL'} {pinned.version}",
                )
            )
    return facts


def describe_fact(fact: Fact) -> str:
    return fact.what


def window_reasons(catalog: Catalog, target: Target) -> list[tuple[Reason, Fact]]:
    """GPUs the target's driver does not drive at all (outside their architecture's window)."""
    out: list[tuple[Reason, Fact]] = []
    if target.driver is None:
        return out
    major = driver_key(target.driver)[0]
    for gpu in target.gpus:
        arch = catalog.architectures.get(gpu.cc)
        win = arch.drivers if arch is not None else None
        if win is None or arch is None:
            continue
        fact = Fact("driver window", win.prov.grade, win.prov.source, f"{arch.name} drivers")
        if win.last is not None and major > win.last:
            out.append(
                (
                    Reason(
                        "window",
                        f"{gpu.label}: driver {target.driver} no longer supports {arch.name} "
                        f"GPUs; R{win.last} is the last branch that does",
                    ),
                    fact,
                )
            )
        elif win.first is not None and major < win.first:
            out.append(
                (
                    Reason(
                        "window",
                        f"{gpu.label}: driver {target.driver} predates {arch.name} GPUs; "
                        f"they need R{win.first} or newer",
                    ),
                    fact,
                )
            )
    return out


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
    catalog: Catalog, cuda: str, driver_os: str, *, policy: Policy = "compat", needs_jit: bool
) -> tuple[str | None, str]:
    """The lowest driver a CUDA ``cuda`` build needs on ``driver_os``, and why.

    Public so that `gpuresolve verify` judges an installed build by the solver's own rule.
    """
    own = catalog.toolkit_min_driver(cuda, driver_os)
    if policy == "strict":
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
    if platform == "macos-arm64" and var.name == "cpu":
        return version
    return f"{version}+{var.name}"


def gpu_names(target: Target) -> list[str]:
    return [g.name or cc_str(g.cc) for g in target.gpus]
