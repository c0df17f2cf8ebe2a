"""Hints: what would change a decision, read from the candidates the solver turned down.

solve() hands over its selection and every candidate it evaluated; these lines name the single
change that would bring a newer build (a driver upgrade, another Python, other companions, a
driver branch that drives the GPU, a weaker evidence level) and the target facts that were missing.
They never change the selection: a job of its own, apart from the solver's rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from resolver.catalog import Catalog
from resolver.core.platforms import PythonVersion
from resolver.core.versions import cuda_key
from resolver.core.vocab import EvidenceLevel
from resolver.db.evidence import trusted
from resolver.solve.ext_hints import extension_hints
from resolver.solve.extensions import Place
from resolver.solve.solver import (
    REQUEST_KINDS,
    Candidate,
    Decision,
    Request,
    Target,
    decide,
    floor_key,
    gpu_windows,
)


def _blocked_only_by(c: Candidate, kinds: set[str]) -> bool:
    return bool(c.reasons) and all(r.kind in kinds for r in c.reasons)


def solve(catalog: Catalog, target: Target, request: Request) -> Decision:
    """Resolve the best build for the target, with the runners-up, the rejects and hints."""
    decision = decide(catalog, target, request)
    selection = decision.selection
    ok = ([selection] if selection else []) + list(decision.alternatives)
    hints = build_hints(catalog, target, request, selection, ok, decision.rejected)
    return replace(decision, hints=hints)


def build_hints(
    catalog: Catalog,
    target: Target,
    request: Request,
    selection: Candidate | None,
    ok: Sequence[Candidate],
    rejected: Sequence[Candidate],
) -> tuple[str, ...]:
    """The hint lines of one decision, in a fixed order: a driver upgrade, the release that dropped
    a GPU's kernels, Python, a CUDA pin, companions, a build the evidence level held back, missing
    target facts, unknown or Tegra GPUs; when nothing runs, a driver outside the GPU's window first.
    """
    hints: list[str] = []
    allow = request.level
    floor = selection.release.key if selection else ()
    newer = [c for c in rejected if c.release.key > floor]

    def beats_selection(c: Candidate) -> bool:
        return selection is None or c.rank_key(allow) > selection.rank_key(allow)

    # Driver: the build a driver upgrade alone would make the answer (the best one, lowest driver).
    by_driver = [
        c
        for c in rejected
        if _blocked_only_by(c, {"driver"}) and c.min_driver and target.driver and beats_selection(c)
    ]
    if by_driver:
        top = max(c.rank_key(allow) for c in by_driver)[:3]
        best = min(
            (c for c in by_driver if c.rank_key(allow)[:3] == top),
            key=lambda c: floor_key(c.min_driver or "0"),
        )
        if selection is not None and best.release.key == selection.release.key:
            # the same release on a newer CUDA: say so, or it reads as if it did not run here
            hints.append(
                f"the {best.variant.name} build of torch {best.release.version} needs driver >= "
                f"{best.min_driver} ({best.min_driver_why}); this host has {target.driver}, "
                f"so its {selection.variant.name} build is the answer"
            )
        else:
            hints.append(
                f"torch {best.release.version} needs driver >= {best.min_driver} "
                f"({best.variant.name}, {best.min_driver_why}); this host has {target.driver}"
            )
    # Architecture: the newest release none of whose builds has kernels for a GPU of the target.
    by_release: dict[tuple[int, ...], list[Candidate]] = {}
    for c in newer:
        if c.variant.kind == "cuda" and not any(
            r.kind in REQUEST_KINDS or r.kind == "python" for r in c.reasons
        ):
            by_release.setdefault(c.release.key, []).append(c)
    ok_releases = {c.release.key for c in ok}

    def lacks_kernels(c: Candidate) -> bool:
        return any(r.kind in ("arch", "unknown") for r in c.reasons)

    dropped_in = [
        key
        for key, cands in by_release.items()
        if key not in ok_releases
        and all(lacks_kernels(c) for c in cands)
        and any(r.kind == "arch" for c in cands for r in c.reasons)
    ]
    if dropped_in:
        cands = by_release[max(dropped_in)]
        gpus = sorted({r.text.split(":")[0] for c in cands for r in c.reasons if r.kind == "arch"})
        unknown = sorted(
            c.variant.name for c in cands if any(r.kind == "unknown" for r in c.reasons)
        )
        version = cands[0].release.version
        if unknown:  # name the builds known to lack the kernels, apart from the unknown ones
            known = sorted(
                c.variant.name for c in cands if any(r.kind == "arch" for r in c.reasons)
            )
            hints.append(
                f"torch {version}: its {', '.join(known)} build{'s' if len(known) > 1 else ''} "
                f"{'have' if len(known) > 1 else 'has'} {'; '.join(gpus)}, and which GPUs its "
                f"{', '.join(unknown)} build{'s' if len(unknown) > 1 else ''} support is unknown"
            )
        else:
            hints.append(f"torch {version} builds have {'; '.join(gpus)}")
    # A newer release whose builds are held back only by unknown architecture lists: reading the
    # wheel (a stronger fact) may unlock it. Named when nothing newer is known to lack the kernels.
    unknown_only = [
        key
        for key, cands in by_release.items()
        if key not in ok_releases
        and all(_blocked_only_by(c, {"unknown"}) for c in cands)
        and (not dropped_in or key > max(dropped_in))
    ]
    if unknown_only:
        cands = by_release[max(unknown_only)]
        builds = ", ".join(sorted(c.variant.name for c in cands))
        hints.append(
            f"torch {cands[0].release.version} may run too: which GPUs its {builds} "
            f"build{'s' if len(cands) > 1 else ''} support on {target.platform} is unknown "
            "(gpuresolve db update --read-wheels reads the wheels)"
        )
    by_python = [c for c in newer if _blocked_only_by(c, {"python"})]
    if by_python:
        newest = max(by_python, key=lambda c: c.release.key)
        pys = newest.release.python.get(target.platform.name, ())
        if pys and all(target.python < PythonVersion.parse(p) for p in pys):
            hints.append(
                f"torch {newest.release.version} needs Python {pys[0]}+ "
                f"(this target has {target.python})"
            )
        else:
            hints.append(
                f"torch {newest.release.version} has no wheel for Python {target.python} on "
                f"{target.platform} (it has {', '.join(pys) or 'none'})"
            )
    if request.cuda and not any(c.variant.cuda == request.cuda for c in (*ok, *rejected)):
        have = sorted({c.variant.cuda for c in (*ok, *rejected) if c.variant.cuda}, key=cuda_key)
        hints.append(
            f"no build in the database is for CUDA {request.cuda} on {target.platform} "
            f"(there are builds for {', '.join(have) or 'none'})"
        )
    by_companion = [c for c in newer if _blocked_only_by(c, {"companion"})]
    if by_companion:
        newest = max(by_companion, key=lambda c: c.release.key)
        hints.append(
            f"torch {newest.release.version} is held back by the companions asked for: "
            + "; ".join(r.text for r in newest.reasons)
        )
    window = sorted({r.text for c in rejected for r in c.reasons if r.kind == "window"})
    if selection is None and window:  # the driver itself is the blocker: say so first
        for text in reversed(window):
            m = re.search(
                r"(?:supports|drives) (.+) GPUs \(dropped in R[0-9]+\).*R([0-9]+) is the last", text
            )
            n = re.search(r"(?:predates|drives) (.+) GPUs.*they need R([0-9]+)", text)
            if m:
                hints.insert(
                    0,
                    f"install an R{m[2]}-branch driver{_windows_numbers(catalog, target, m[2])}: "
                    f"later branches ignore {m[1]} GPUs",
                )
            elif n:
                hints.insert(0, f"install an R{n[2]} (or newer) driver: {n[1]} GPUs need it")
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
            hints.append(
                f"torch {best.release.version} {best.variant.name} probably runs too, but "
                f"{best.doubt or 'one of its facts'} rests on {best.evidence} evidence "
                "(--evidence any considers it)"
            )
    if selection is not None and selection.variant.kind == "cuda":
        # a machine without an NVIDIA GPU runs a fleet's CUDA build on the CPU: no driver needed
        if target.nvidia and target.driver is None and selection.min_driver:
            hints.append(
                f"no driver given: this build needs driver >= {selection.min_driver} "
                f"({selection.min_driver_why})"
            )
        if target.nvidia and not target.gpus and not target.unknown_gpus:
            hints.append("no GPU model given: architecture coverage was not checked (--gpu)")
    hints.extend(
        f"{name}: compute capability unknown to gpuresolve, so its kernels were not checked: "
        "give it with --gpu X.Y (or update the database: gpuresolve db update)"
        for name in target.unknown_gpus
    )
    tegra = [g for g in target.gpus if catalog.is_tegra(g.cc)]
    if selection is None and tegra:
        hints.append(
            f"{', '.join(g.label for g in tegra)} is a Tegra (Jetson) GPU: desktop and server "
            "builds do not run on it; use NVIDIA's PyTorch wheels for its JetPack release"
        )
    place = Place(target.platform, target.python, tuple((g.cc, g.label) for g in target.gpus))
    hints.extend(extension_hints(catalog, place, request, selection, rejected))
    return tuple(hints)


def _windows_numbers(catalog: Catalog, target: Target, branch: str) -> str:
    """' (Windows 580.88-582.66)': how a branch's drivers are numbered on Windows, where known."""
    if target.driver_os != "windows":
        return ""
    rec = next((w for w in catalog.windows_branches if str(w.branch) == branch), None)
    return f" (Windows {rec.first}-{rec.last})" if rec is not None else ""


def _last_branch_hints(catalog: Catalog, target: Target) -> list[str]:
    """A GPU on the last branch that drives it: upgrading the driver past it loses the GPU."""
    assert target.driver is not None
    branch = catalog.driver_branch(target.driver, target.driver_os)
    out: list[str] = []
    for gpu, arch, win in gpu_windows(catalog, target.gpus):
        if win.last is not None and branch.exact == win.last:
            out.append(
                f"R{win.last} is the last driver branch for {gpu.label} ({arch.name}): do not "
                f"upgrade the driver past it (R{win.cut} and later ignore {arch.name} GPUs)"
            )
    return out
