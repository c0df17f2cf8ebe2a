"""Hints about the extension packages asked for (--with xformers): which one holds torch back
and what would release it, and, when no set fits, which package cannot run here and why."""

from __future__ import annotations

from collections.abc import Sequence

from resolver.catalog import Catalog
from resolver.solve.extensions import FITS, Place, choose
from resolver.solve.solver import Candidate, Request, kernel_coverage


def extension_hints(
    catalog: Catalog,
    place: Place,
    request: Request,
    selection: Candidate | None,
    rejected: Sequence[Candidate],
) -> list[str]:
    """Judged on the ``place`` (platform, Python, GPUs), as the extensions are: the driver and
    the rest of the machine play no part, so they are not passed."""
    if not request.extensions:
        return []
    floor = selection.release.key if selection else ()
    held = [
        c
        for c in rejected
        if c.release.key > floor and c.reasons and all(r.kind == "extension" for r in c.reasons)
    ]
    hints: list[str] = []
    if held and selection is not None:
        top = max(held, key=lambda c: c.rank_key(request.level))
        blockers = [r.text for r in top.reasons if r.kind == "extension"]
        names = [
            n
            for n, _ in request.extensions
            if any(t.startswith((f"{n} ", f"{n}:")) for t in blockers)
        ]
        hints.append(
            f"torch {top.release.version} is held back by {' and '.join(names)}: "
            + "; ".join(blockers)
            + f" (a release of {' and '.join(names)} built for torch {top.release.version} "
            "would release it)"
        )
    if selection is not None:
        return hints
    return hints + _why_no_set(catalog, place, request, rejected)


def _why_no_set(
    catalog: Catalog, place: Place, request: Request, rejected: Sequence[Candidate]
) -> list[str]:
    """Per package, the torch releases it fits alone among the builds that run here. A package
    that fits none: the reason of the torch build it came closest with (no kernels for a GPU,
    no wheel for the platform), or, where it fits a torch build that does not run here, that."""
    request_side = {"extension", "companion", "spec", "cuda", "variant"}
    runs = [c for c in rejected if all(r.kind in request_side for r in c.reasons)]
    if not runs:
        return []
    cuda = [c for c in rejected if c.variant.kind == "cuda"]
    fits: dict[str, list[str]] = {}
    out: list[str] = []
    for name, spec in request.extensions:
        fits[name] = []
        closest: tuple[int, str, Candidate | None] = (-1, "", None)
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
            text = miss.text if miss is not None else ""
            if got is not None and c in runs:
                if c.release.version not in fits[name]:
                    fits[name].append(c.release.version)
            elif stage > closest[0]:
                closest = (stage, text, c)
        if fits[name]:
            continue
        stage, text, near = closest
        if stage == FITS and near is not None:
            torch_why = "; ".join(r.text for r in near.reasons if r.kind != "extension")
            out.append(
                f"{name} fits torch {near.release.version} {near.variant.name} at the newest here, "
                f"which does not run on this target: {torch_why}"
            )
        elif text:
            out.append(f"{name} cannot run on this target: {text}")
    if not out and len(fits) > 1:
        spans = [f"{n} fits torch {_span(v)}" for n, v in fits.items()]
        out.append("no torch release suits every package asked for: " + "; ".join(spans))
    return out


def _span(versions: list[str]) -> str:
    from packaging.version import Version

    ordered = sorted(versions, key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]} to {ordered[-1]}"
