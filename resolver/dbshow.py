"""What the database knows, for `gpuresolve db show`: a compact table and a JSON view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resolver.catalog import Catalog, Provenance, Release, Variant
from resolver.core.platforms import PLATFORMS
from resolver.core.versions import cc_str
from resolver.db.evidence import GRADE_TEXT, GRADES
from resolver.db.extensions import describe as describe_extensions
from resolver.db.models import ExtRelease

if TYPE_CHECKING:
    from resolver.core.documents.reports import DbShowDoc

PYPI_MARK = "*"  # the build the Python Package Index carries for that platform
UNCONFIRMED_MARK = "?"  # its architecture list (or the variant) is not documented (weaker grade)
UNKNOWN_MARK = "!"  # its architecture list is unknown: never used for a described GPU


def _provenances(cat: Catalog) -> tuple[list[tuple[str, Provenance]], int]:
    """Every graded fact once (shared records counted once) with its kind, and the unknown arch
    lists. Kinds that decide whether a build runs come first (see "How gpuresolve decides",
    docs/explanation/decisions.md); cuDNN, NCCL and companions only describe a build."""
    provs: list[tuple[str, Provenance]] = []
    provs += [("driver floor", t.prov) for t in cat.toolkits.values()]
    provs += [("driver floor", f.prov) for f in cat.compat_floors.values()]
    provs += [("windows branch", w.prov) for w in cat.windows_branches]
    for a in cat.architectures.values():
        provs.append(("architecture", a.prov))
        if a.drivers is not None:
            provs.append(("driver window", a.drivers.prov))
    provs += [("gpu model", g.prov) for g in cat.gpus]
    seen_python: set[int] = set()
    for r in cat.releases:
        provs.append(("release", r.prov))
        provs += [("companion", p) for p in r.companion_prov.values()]
        if r.python_prov is not None and id(r.python_prov) not in seen_python:
            seen_python.add(id(r.python_prov))
            provs.append(("python", r.python_prov))
    unknown = 0
    for var in _unique_variants(cat):
        provs.append(("build", var.prov))
        for label, pin in (("cudnn", var.cudnn), ("nccl", var.nccl)):
            if pin is not None and pin.version is not None:
                provs.append((label, pin.prov))
        for arch in var.platforms.values():
            if arch is not None:
                provs.append(("sass", arch.prov))
                if arch.ptx_prov is not None:
                    provs.append(("ptx", arch.ptx_prov))
            elif var.kind == "cuda":
                unknown += 1
    return provs, unknown


FACT_KINDS = (
    "release",
    "build",
    "python",
    "sass",
    "ptx",
    "driver floor",
    "driver window",
    "windows branch",
    "cudnn",
    "nccl",
    "companion",
    "architecture",
    "gpu model",
)
DESCRIBING = frozenset({"cudnn", "nccl", "companion"})  # pinned by the wheel: never decide


def grade_counts(cat: Catalog) -> dict[str, int]:
    """How many facts stand at each evidence grade, strongest first."""
    provs, _ = _provenances(cat)
    return {g: sum(1 for _k, p in provs if p.grade == g) for g in GRADES}


def grade_counts_by_kind(cat: Catalog) -> dict[str, dict[str, int]]:
    """Per kind of fact (release, build, sass, cudnn, ...): how many facts at each grade."""
    provs, _ = _provenances(cat)
    out: dict[str, dict[str, int]] = {}
    for kind in FACT_KINDS:
        grades = [p.grade for k, p in provs if k == kind]
        if grades:
            out[kind] = {g: grades.count(g) for g in GRADES}
    return out


def fact_counts(cat: Catalog) -> dict[str, int]:
    """Records with provenance: how many, how many sourced, unconfirmed, and unknown arch lists."""
    provs, unknown = _provenances(cat)
    len(cat.extensions)  # their sources join cat.sources when they load (db/extdefer)
    return {
        "releases": len(cat.releases),
        "variants": sum(len(r.variants) for r in cat.releases),
        "toolkits": len(cat.toolkits),
        "architectures": len(cat.architectures),
        "gpus": len(cat.gpus),
        "sources": len(cat.sources),
        "facts": len(provs),
        "sourced": sum(1 for _k, p in provs if p.source),
        "unconfirmed": sum(1 for _k, p in provs if not p.confirmed),
        "unknown_arch": unknown,
        "contradictions": sum(len(p.contradicts) for _k, p in provs),
    }


def _unique_variants(cat: Catalog) -> list[Variant]:
    seen: dict[int, Variant] = {}
    for rel in cat.releases:
        for var in rel.variants:
            seen.setdefault(id(var), var)
    return list(seen.values())


def _cell(var: Variant, platform: str) -> str | None:
    if platform not in var.platforms:
        return None
    mark = ""
    if var.kind == "cuda":
        arch = var.platforms[platform]
        if arch is None:
            mark = UNKNOWN_MARK
        elif not (arch.prov.confirmed and var.prov.confirmed):
            mark = UNCONFIRMED_MARK
    elif not var.prov.confirmed:
        mark = UNCONFIRMED_MARK
    return var.name + mark + (PYPI_MARK if platform in var.pypi else "")


def _python_span(rel: Release) -> str:
    versions = sorted({v for vs in rel.python.values() for v in vs})
    return f"{versions[0]}–{versions[-1]}" if versions else "-"


def show_text(cat: Catalog, with_: tuple[str, ...] | None = None) -> str:
    """Releases × platforms: the variants built for each, newest release first; the extension
    packages ``with_`` names release by release (the others in one line each)."""
    platforms = [p for p in PLATFORMS if any(p in v.platforms for v in _unique_variants(cat))]
    header = ["torch", "date", "vision", "audio", "python", *platforms]
    rows = [header]
    for rel in cat.releases:
        cells = [
            " ".join(c for v in rel.variants if (c := _cell(v, plat)) is not None) or "-"
            for plat in platforms
        ]
        rows.append(
            [
                rel.version + ("" if rel.prov.confirmed else UNCONFIRMED_MARK),
                rel.date or "-",
                rel.torchvision or "-",
                rel.torchaudio or "-",
                _python_span(rel),
                *cells,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"database: {cat.origin} (updated {cat.updated or 'unknown'})"]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    counts = fact_counts(cat)
    lines.append(
        f"{PYPI_MARK} the Python Package Index's build; {UNCONFIRMED_MARK} unconfirmed "
        f"architecture list; {UNKNOWN_MARK} architecture list unknown"
    )
    lines.append(
        f"{counts['releases']} releases, {counts['variants']} builds, {counts['toolkits']} CUDA "
        f"toolkits, {counts['architectures']} architectures, {counts['gpus']} GPU models, "
        f"{counts['sources']} sources"
    )
    lines.append(
        f"{counts['facts']} facts: {counts['sourced']} sourced, {counts['unconfirmed']} "
        f"unconfirmed, {counts['unknown_arch']} architecture lists unknown, "
        f"{counts['contradictions']} contradictions recorded"
    )
    grades = grade_counts(cat)
    lines.append("evidence grades (strongest first; the solver trusts the first three by default):")
    width = max(len(g) for g in GRADES)
    lines += [f"  {g.ljust(width)}  {grades[g]:5d}  {GRADE_TEXT[g]}" for g in GRADES]
    by_kind = grade_counts_by_kind(cat)
    kw = max(len(k) for k in by_kind)
    lines.append("grades per kind of fact (* describes a build, never decides whether it runs):")
    lines.append("  " + " " * (kw + 1) + "  ".join(g[:6].rjust(6) for g in GRADES))
    lines += [
        f"  {(k + ('*' if k in DESCRIBING else ' ')).ljust(kw + 1)}"
        + "  ".join(f"{n[g]:6d}" for g in GRADES)
        for k, n in by_kind.items()
    ]
    lines += _packages_text(cat, with_ or ())
    return "\n".join(lines)


def _packages_text(cat: Catalog, with_: tuple[str, ...]) -> list[str]:
    """Extension packages (extensions.yaml): one line each (releases, how many prebuilt), and
    for those ``with_`` names (``db show --with``) each release, the torch it requires, its CUDA
    and platforms, where its wheels are, and its gates."""
    if not cat.extensions:
        return []
    lines = ["extension packages (--with; extensions.yaml):"]
    for pkg in cat.extensions.values():
        if pkg.name not in with_:
            built = sum(1 for rel in pkg.releases if rel.builds)
            span = (
                f"{pkg.releases[-1].version} to {pkg.releases[0].version}" if pkg.releases else "-"
            )
            lines.append(
                f"  {pkg.name}: {len(pkg.releases)} releases ({span}), {built} with prebuilt "
                f"builds (db show --with {pkg.name} lists them)"
            )
            continue
        for rel in pkg.releases:
            if not rel.builds:
                lines.append(f"  {pkg.name} {rel.version}: source distribution only")
                continue
            torch = sorted({b.torch or "any" for b in rel.builds})
            cudas = sorted({b.cuda for b in rel.builds if b.cuda})
            plats = sorted({p for b in rel.builds for p in b.platforms})
            where = sorted({b.index for b in rel.builds})
            code = "device code" if any(b.device_code for b in rel.builds) else "no device code"
            lines.append(
                f"  {pkg.name} {rel.version}: torch {' | '.join(torch)}; "
                f"CUDA {', '.join(cudas) or '-'}; {', '.join(plats)}; {code}; "
                f"{', '.join(where)} index [{rel.builds[0].prov.grade}]{_gates_text(rel)}"
            )
    return lines


def _gates_text(rel: ExtRelease) -> str:
    """The gates a release's builds record beyond the torch requirement (extensions.yaml)."""
    said: list[str] = []
    for b in rel.builds:
        if b.import_gate is not None:
            said.append(f"its import loads its kernels with torch {b.import_gate.torch}")
        if b.ceiling is not None:
            said.append(f"its kernels refuse CC above {cc_str(b.ceiling.cc)}")
    runtimes = sorted({b.cudart for b in rel.builds if b.cudart is not None})
    if runtimes:
        said.append("links libcudart.so." + "/".join(str(n) for n in runtimes))
    if any(b.cuda_match == "nearest" for b in rel.builds):
        said.append("its loader takes the nearest CUDA library of torch's major")
    return "".join(f"; {s}" for s in dict.fromkeys(said))


def show_json(cat: Catalog, with_: tuple[str, ...] | None = None) -> DbShowDoc:
    """The same, complete, as a JSON document (keys stable); ``with_``: ``packages`` holds only
    those extension packages."""

    def variant_json(var: Variant) -> dict[str, Any]:
        platforms: dict[str, Any] = {}
        for plat, arch in var.platforms.items():
            if var.kind != "cuda":
                platforms[plat] = {}
            elif arch is None:
                platforms[plat] = None
            else:
                platforms[plat] = {
                    "sass": [cc_str(c) for c in arch.sass],
                    "ptx": [cc_str(c) for c in arch.ptx],
                    "confirmed": arch.prov.confirmed,
                    "source": list(arch.prov.source),
                    "grade": arch.prov.grade,
                    "ptx_grade": arch.ptx_provenance.grade,
                    "contradicts": _contradicts(arch.prov) + _contradicts(arch.ptx_prov),
                }
        return {
            "name": var.name,
            "cuda": var.cuda,
            "cudnn": var.cudnn.version if var.cudnn else None,
            "nccl": var.nccl.version if var.nccl else None,
            "pypi": [p for p in PLATFORMS if p in var.pypi],
            "confirmed": var.prov.confirmed,
            "source": list(var.prov.source),
            "grade": var.prov.grade,
            "cudnn_grade": var.cudnn.prov.grade if var.cudnn and var.cudnn.version else None,
            "nccl_grade": var.nccl.prov.grade if var.nccl and var.nccl.version else None,
            "platforms": platforms,
        }

    return {
        "origin": cat.origin,
        "updated": cat.updated,
        "index_url": cat.index_url_template,
        "counts": fact_counts(cat),
        "grades": [
            {"grade": g, "meaning": GRADE_TEXT[g], "facts": n} for g, n in grade_counts(cat).items()
        ],
        "grades_by_kind": [
            {"kind": k, "decides": k not in DESCRIBING, "grades": n}
            for k, n in grade_counts_by_kind(cat).items()
        ],
        "releases": [
            {
                "version": rel.version,
                "date": rel.date,
                "torchvision": rel.torchvision,
                "torchaudio": rel.torchaudio,
                "python": {p: [str(x) for x in v] for p, v in rel.python.items()},
                "confirmed": rel.prov.confirmed,
                "source": list(rel.prov.source),
                "grade": rel.prov.grade,
                "variants": [variant_json(v) for v in rel.variants],
            }
            for rel in cat.releases
        ],
        "packages": {
            k: v for k, v in describe_extensions(cat).items() if with_ is None or k in with_
        },
    }


def _contradicts(prov: Provenance | None) -> list[dict[str, Any]]:
    if prov is None:
        return []
    return [{"value": c.value, "source": list(c.source), "note": c.note} for c in prov.contradicts]
