"""The sentences of a decision's records: its reasons, coverage, warnings and hints.

One function a family (``reason``, ``covered``, ``driver_why``, ``warning``, ``hint_lines``,
``conflict``, ``unlock``), each a dispatch on the record's type ending in an assert, so a new
record without its sentence fails here, and nothing else formats them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from resolver.core.versions import CC, cc_sm
from resolver.db import evidence as ev
from resolver.present import ext_words
from resolver.solve import findings as fd

if TYPE_CHECKING:  # a fleet's what-ifs: suggest imports nothing of the fleet at run time
    from resolver.solve.whatif import Blocker, Unlock


def abbreviate(names: tuple[str, ...], keep: int = 6) -> str:
    """`a, b, c, … (+97 more), z`: node names for a report line."""
    if len(names) <= keep + 1:
        return ", ".join(names)
    head = ", ".join(names[: keep - 1])
    return f"{head}, … (+{len(names) - keep} more), {names[-1]}"


def _sms(ccs: Iterable[CC]) -> str:
    return " ".join(cc_sm(c) for c in ccs) or "none"


def about(what: ev.About, bare: bool = False) -> str:
    """What a graded fact is about ("SASS sm_80 sm_90 for linux-x86_64"; ``bare``: without
    the platform)."""
    if isinstance(what, ev.Exists):
        return f"its {what.variant} build exists" if what.variant else f"torch {what.torch} exists"
    if isinstance(what, ev.PythonTags):
        return f"Python tags on {what.platform}"
    if isinstance(what, ev.Pairing):
        return f"the {what.name} pairing"
    if isinstance(what, ev.Pinned):
        return f"{'cuDNN' if what.library == 'cudnn' else 'NCCL'} {what.version}"
    if isinstance(what, ev.Kernels):
        if what.ptx:
            return f"PTX {_sms(what.ccs)}"
        return f"SASS {_sms(what.ccs)}" + ("" if bare else f" for {what.platform}")
    if isinstance(what, ev.Drivers):
        if what.cuda:
            return f"CUDA {what.of} drivers"
        if not what.edges:
            return f"{what.of} drivers"
        edges = ([f"first in R{what.first}"] if what.first is not None else []) + (
            [f"dropped in R{what.cut}"] if what.cut is not None else []
        )
        return f"{what.of} drivers: {', '.join(edges)}"
    assert isinstance(what, ev.WindowsIs)
    if what.numbers is None:
        return f"Windows {what.driver} is R{what.branch}"
    first, last = what.numbers
    return f"Windows driver {what.driver} is R{what.branch} (Windows {first}-{last})"


def driver_why(why: fd.DriverWhy | None) -> str | None:
    """Why a build needs its driver ("CUDA 12.x minor-version compatibility")."""
    if why is None:
        return None
    if why.basis is fd.Basis.TOOLKIT:
        return f"CUDA {why.cuda} toolkit minimum"
    if why.basis is fd.Basis.JIT:
        return f"CUDA {why.cuda} toolkit minimum, for PTX JIT"
    return f"CUDA {why.major}.x minor-version compatibility"


def reach(how: fd.Reach) -> str:
    """How kernels reach a GPU: "SASS sm_86", "PTX sm_90 (JIT-compiled on first use)"."""
    if how.ptx:
        return f"PTX {cc_sm(how.via)} (JIT-compiled on first use)"
    return f"SASS {cc_sm(how.via)}"


def covered(c: fd.Covered) -> str:
    return f"{c.gpu}: {reach(c.reach)}"


def coverage(cs: Iterable[fd.Covered | fd.LoaderPick | fd.CeilingFallback]) -> list[str]:
    """How each GPU is reached (an extension's own way where its ceiling or loader decides)."""
    return [covered(c) if isinstance(c, fd.Covered) else ext_words.reached(c) for c in cs]


def reason(r: fd.Reason) -> str:
    """Why a build does not run, in one clause."""
    if isinstance(r, fd.SpecMiss):
        return f"torch {r.torch} does not match {r.spec}"
    if isinstance(r, fd.NoPythonWheel):
        span = f"{r.have[0]}–{r.have[-1]}" if r.have else "none"
        return f"no torch {r.torch} wheel for Python {r.python} on {r.platform} (it has {span})"
    if isinstance(r, fd.CudaMiss):
        what = f"CUDA {r.cuda}" if r.cuda else "CPU"
        return f"{what} build; CUDA {r.asked} was asked for"
    if isinstance(r, fd.VariantMiss):
        return f"{r.variant} build; {r.asked} was asked for"
    if isinstance(r, fd.NoCompanion):
        return f"no {r.name} release pairs with torch {r.torch}"
    if isinstance(r, fd.CompanionMiss):
        gone = f"; {', '.join(r.yanked)} is yanked on the Package Index" if r.yanked else ""
        return f"{r.name} {r.paired} (paired) does not match {r.spec}{gone}"
    if isinstance(r, fd.CpuBuild):
        return "CPU build: this target has an NVIDIA GPU"
    if isinstance(r, fd.CudaBuild):
        return "CUDA build: this target has no NVIDIA GPU"
    if isinstance(r, fd.ArchUnknown):
        return f"which GPUs {r.variant} supports on {r.platform} is unknown"
    if isinstance(r, fd.NoKernels):
        return f"no kernels for {r.gpu}: build has SASS {_sms(r.sass)}; PTX {_sms(r.ptx)}"
    if isinstance(r, fd.FloorUnknown):
        return f"the minimum {r.driver_os} driver for CUDA {r.cuda} is unknown"
    if isinstance(r, fd.DriverTooOld):
        return f"needs driver >= {r.need} ({driver_why(r.why)}); this host has {r.have}"
    if isinstance(r, fd.OutsideWindow):
        return _window(r)
    if isinstance(r, fd.TooWeak):
        return f"--evidence observed: {about(r.what)} is {r.grade}"
    assert isinstance(r, fd.ExtensionMiss)
    return ext_words.misfit(r.miss)


def reasons(rs: Iterable[fd.Reason]) -> str:
    return "; ".join(reason(r) for r in rs)


def _branch(w: fd.OutsideWindow) -> str:
    return f"R{w.lo}" if w.lo == w.hi else f"R{w.lo}..R{w.hi} (not certain)"


def _window(w: fd.OutsideWindow) -> str:
    shown = f"driver {w.driver} ({_branch(w)})"
    keep = f"; R{w.last} is the last branch that does" if w.last is not None else ""
    if w.verdict is fd.Verdict.DROPPED:
        return f"{w.gpu}: {shown} no longer supports {w.arch} GPUs (dropped in R{w.cut}){keep}"
    if w.verdict is fd.Verdict.MAYBE_DROPPED:
        return (
            f"{w.gpu}: which branch Windows driver {w.driver} belongs to is unknown "
            f"({_branch(w)}), so whether it still drives {w.arch} GPUs (dropped in "
            f"R{w.cut}) is unknown{keep}"
        )
    if w.verdict is fd.Verdict.PREDATES:
        return f"{w.gpu}: {shown} predates {w.arch} GPUs; they need R{w.first} or newer"
    return (
        f"{w.gpu}: which branch Windows driver {w.driver} belongs to is unknown "
        f"({_branch(w)}), so whether it drives {w.arch} GPUs is unknown; they need "
        f"R{w.first} or newer"
    )


def windows(rs: Iterable[fd.Reason]) -> list[str]:
    """The driver-window reasons among ``rs``, each once, in their sentences' order."""
    return sorted({reason(r) for r in rs if isinstance(r, fd.OutsideWindow)})


def warning(w: fd.Warning) -> str:
    """A warning on a build that runs (stderr, a lock's header, ``--json``)."""
    if isinstance(w, fd.PairingInferred):
        return (
            f"{w.name} {w.paired} with torch {w.torch}: the pairing is inferred, "
            "no primary source states it"
        )
    if isinstance(w, fd.ExtensionPassed):
        return f"{ext_words.misfit(w.note)}; took {w.package} {w.version}"
    if isinstance(w, fd.Undocumented):
        doubt = about(w.doubt) if w.doubt else None
        return f"nothing documented fits: {doubt} (evidence: {w.evidence})"
    if isinstance(w, fd.CpuAsAsked):
        return "a CPU build, as asked: this target's NVIDIA GPU stays unused"
    if isinstance(w, fd.JitOnly):
        return (
            "a GPU runs this build only through PTX JIT: slow first use, and the "
            "build's CUDA libraries may lack that GPU's kernels"
        )
    assert isinstance(w, fd.CcUnknown)
    return f"{w.gpu}: compute capability unknown, kernels not checked (give it with --gpu X.Y)"


def warnings(ws: Iterable[fd.Warning]) -> list[str]:
    return [warning(w) for w in ws]


def _plural(names: Sequence[str], one: str, many: str) -> str:
    return one if len(names) == 1 else many


def hint_lines(h: fd.Hint) -> list[str]:
    """A hint's lines: one, except the driver branches to install (one per GPU window)."""
    if isinstance(h, fd.InstallBranch):
        return _install_branch(h)
    return [_hint(h)]


def hints(hs: Iterable[fd.Hint]) -> list[str]:
    return [line for h in hs for line in hint_lines(h)]


def _install_branch(h: fd.InstallBranch) -> list[str]:
    numbers = {branch: f" (Windows {first}-{last})" for branch, first, last in h.numbers}
    said = {reason(w): w for w in h.windows}
    out: list[str] = []
    for text in sorted(said):
        w = said[text]
        if w.verdict in (fd.Verdict.DROPPED, fd.Verdict.MAYBE_DROPPED) and w.last is not None:
            out.append(
                f"install an R{w.last}-branch driver{numbers.get(w.last, '')}: "
                f"later branches ignore {w.arch} GPUs"
            )
        elif w.verdict in (fd.Verdict.PREDATES, fd.Verdict.MAYBE_PREDATES):
            out.append(f"install an R{w.first} (or newer) driver: {w.arch} GPUs need it")
    return out


def _hint(h: fd.Hint) -> str:
    if isinstance(h, fd.NeedsDriver):
        why = driver_why(h.why)
        if h.selected is not None:
            return (
                f"the {h.variant} build of torch {h.torch} needs driver >= {h.need} ({why}); "
                f"this host has {h.have}, so its {h.selected} build is the answer"
            )
        return (
            f"torch {h.torch} needs driver >= {h.need} ({h.variant}, {why}); this host has {h.have}"
        )
    if isinstance(h, fd.KernelsDropped):
        gpus = "; ".join(f"no kernels for {g}" for g in h.gpus)
        if h.unknown:
            known, unknown = h.known, h.unknown
            return (
                f"torch {h.torch}: its {', '.join(known)} {_plural(known, 'build', 'builds')} "
                f"{_plural(known, 'has', 'have')} {gpus}, and which GPUs its "
                f"{', '.join(unknown)} {_plural(unknown, 'build', 'builds')} support is unknown"
            )
        return f"torch {h.torch} builds have {gpus}"
    if isinstance(h, fd.MayRun):
        return (
            f"torch {h.torch} may run too: which GPUs its {', '.join(h.builds)} "
            f"{_plural(h.builds, 'build', 'builds')} support on {h.platform} is unknown "
            "(gpuresolve db update --read-wheels reads the wheels)"
        )
    if isinstance(h, fd.NeedsPython):
        return f"torch {h.torch} needs Python {h.oldest}+ (this target has {h.python})"
    if isinstance(h, fd.NoPythonHint):
        return (
            f"torch {h.torch} has no wheel for Python {h.python} on "
            f"{h.platform} (it has {', '.join(map(str, h.have)) or 'none'})"
        )
    if isinstance(h, fd.NoCudaBuild):
        return (
            f"no build in the database is for CUDA {h.cuda} on {h.platform} "
            f"(there are builds for {', '.join(h.have) or 'none'})"
        )
    if isinstance(h, fd.HeldByCompanions):
        return f"torch {h.torch} is held back by the companions asked for: {reasons(h.reasons)}"
    if isinstance(h, fd.LastBranch):
        return (
            f"R{h.last} is the last driver branch for {h.gpu} ({h.arch}): do not "
            f"upgrade the driver past it (R{h.cut} and later ignore {h.arch} GPUs)"
        )
    if isinstance(h, fd.WeakerRuns):
        return (
            f"torch {h.torch} {h.variant} probably runs too, but "
            f"{about(h.doubt) if h.doubt else 'one of its facts'} rests on {h.evidence} evidence "
            "(--evidence any considers it)"
        )
    if isinstance(h, fd.NoDriverGiven):
        return f"no driver given: this build needs driver >= {h.need} ({driver_why(h.why)})"
    if isinstance(h, fd.NoGpuModel):
        return "no GPU model given: architecture coverage was not checked (--gpu)"
    if isinstance(h, fd.CcUnknownHint):
        return (
            f"{h.gpu}: compute capability unknown to gpuresolve, so its kernels were not checked: "
            "give it with --gpu X.Y (or update the database: gpuresolve db update)"
        )
    if isinstance(h, fd.Tegra):
        return (
            f"{', '.join(h.gpus)} is a Tegra (Jetson) GPU: desktop and server "
            "builds do not run on it; use NVIDIA's PyTorch wheels for its JetPack release"
        )
    if isinstance(h, fd.ExtHeldBack):
        names = " and ".join(h.names)
        return (
            f"torch {h.torch} is held back by {names}: {reasons(h.blockers)}"
            f" (a release of {names} built for torch {h.torch} would release it)"
        )
    if isinstance(h, fd.ExtFitsElsewhere):
        return (
            f"{h.name} fits torch {h.torch} {h.variant} at the newest here, "
            f"which does not run on this target: {reasons(h.reasons)}"
        )
    if isinstance(h, fd.ExtCannotRun):
        return f"{h.name} cannot run on this target: {ext_words.misfit(h.miss)}"
    assert isinstance(h, fd.ExtNoCommonTorch)
    spans = "; ".join(f"{n} fits torch {_span(v)}" for n, v in h.fits)
    return f"no torch release suits every package asked for: {spans}"


def _span(versions: Sequence[str]) -> str:
    from packaging.version import Version

    ordered = sorted(versions, key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]} to {ordered[-1]}"


def _fits(f: fd.Fits) -> str:
    if not f.variants:
        return "no build at all"
    return f"{', '.join(f.variants)} (torch {f.oldest}–{f.newest})"


def conflict(c: fd.Conflict) -> str:
    """Why no build set fits a fleet: a member, or a pair of members, or the platforms."""
    if isinstance(c, fd.NothingRuns):
        why = reasons(c.reasons) if c.reasons else "nothing in the database"
        return f"{c.member} has no compatible build: {why}"
    if isinstance(c, fd.NothingShared):
        return (
            f"{c.a} needs {_fits(c.a_fits)}; {c.b} needs {_fits(c.b_fits)}; no torch build has both"
        )
    fits = "; ".join(
        f"{plat}{' (no GPU)' if cpu else ''}: torch {', '.join(versions) or 'none'}"
        for plat, cpu, versions in c.fits
    )
    return f"the platforms share no torch release ({fits})"


def conflicts(cs: Iterable[fd.Conflict]) -> list[str]:
    return [conflict(c) for c in cs]


def alternative(version: str, confirmed: bool) -> str:
    """A fleet's other common torch release, and whether its evidence is weak."""
    if confirmed:
        return version
    return f"{version} (weakly evidenced: a fact rests on a transcription or is inferred)"


def fleet_hints(pairs: Iterable[tuple[str, fd.Hint]]) -> list[str]:
    """Each member's hint lines after its name, each line once."""
    seen: dict[str, None] = {}
    said: dict[int, list[str]] = {}  # a kind's members share most of their hints' records
    for member, h in pairs:
        lines = said.get(id(h))
        if lines is None:
            lines = said[id(h)] = hint_lines(h)
        for line in lines:
            seen.setdefault(f"{member}: {line}", None)
    return list(seen)


def _blocker(torch: str, b: Blocker) -> str:
    if b.member is None:
        return f"no torch {torch} build for {b.platform}"
    if b.reason is None:
        return f"{b.member}: no torch {torch} {b.variant} build for {b.platform}"
    return f"{b.member}: {reason(b.reason)}"


def unlock(u: Unlock, noun: str = "machine") -> str:
    """One line for report.md: the upgrades (grouped by the driver they need), or the blocker."""
    builds = "/".join(dict.fromkeys(u.variants))
    if u.blocker is not None:
        return f"torch {u.torch}: no driver upgrade is enough — {_blocker(u.torch, u.blocker)}"
    doubt = " (an architecture list rests on a secondary source)" if u.unconfirmed else ""
    if not u.upgrades:
        if u.unconfirmed:
            doubt = doubt[:-1] + "; `allow_unconfirmed: true` takes it)"
        return f"torch {u.torch} ({builds}) already runs everywhere{doubt}"
    parts = []
    for need in sorted({x.needed for x in u.upgrades}):
        these = [x for x in u.upgrades if x.needed == need]
        total = sum(x.machines for x in these)
        who = abbreviate(
            tuple(
                f"{x.member} ({x.machines}" + (f", from {x.driver})" if x.driver else ")")
                for x in these
            )
        )  # a fleet of 10,000 driver builds: one line, not 10,000 names
        parts.append(f"the {total} {noun}{'s' if total != 1 else ''} of {who} to driver ≥ {need}")
    return f"upgrading {'; '.join(parts)} would allow torch {u.torch} ({builds}) everywhere{doubt}"
