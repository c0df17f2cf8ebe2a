"""An observation against the curated database: which curated facts it contradicts.

Read from the parsed ``torch.yaml`` document, not from the loaded catalog, so the comparison
sees the curated values themselves (not values an overlay already replaced) and works with
both the list form of ``ptx:`` and the graded mapping form (``ptx: {ccs: [...], source}``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError


@dataclass(frozen=True)
class Curated:
    """The curated facts of one build on one platform (None: the database says nothing)."""

    torch: str
    variant: str
    platform: str
    cuda: str | None
    sass: tuple[str, ...] | None
    ptx: tuple[str, ...] | None
    arch_source: tuple[str, ...]
    cudnn: str | None
    cudnn_source: tuple[str, ...]
    nccl: str | None
    nccl_source: tuple[str, ...]


def read_torch_doc(directory: Path) -> dict[str, Any]:
    """The parsed torch.yaml of a database directory."""
    from resolver.db.yamlfile import read_yaml  # bounded: size, nesting, aliases, FIFOs

    path = directory / "torch.yaml"
    doc = read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("series"), list):
        raise UserError(f"{path}: not a gpuresolve torch.yaml")
    return doc


def builds(doc: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any], str, Any]]:
    """(release version, variant record, platform, arch entry) of every build in the database."""
    for series in doc.get("series") or []:
        variants = [v for v in series.get("variants") or [] if isinstance(v, dict)]
        for rel in series.get("releases") or []:
            built = rel.get("variants")
            for var in variants:
                if built is not None and var.get("name") not in built:
                    continue
                for platform, arch in (var.get("platforms") or {}).items():
                    yield str(rel["version"]), var, str(platform), arch


def find(doc: Mapping[str, Any], torch: str, variant: str | None, platform: str) -> Curated | None:
    """The curated build; ``variant`` None: the one the default index carries on ``platform``."""
    for version, var, plat, arch in builds(doc):
        if version != torch or plat != platform:
            continue
        if variant is None and platform not in (var.get("pypi") or []):
            continue
        if variant is not None and var.get("name") != variant:
            continue
        sass = ptx = None
        arch_source: tuple[str, ...] = ()
        if isinstance(arch, dict) and "sass" in arch:
            sass = tuple(str(c) for c in arch.get("sass") or [])
            raw_ptx = arch.get("ptx")
            if isinstance(raw_ptx, dict):
                raw_ptx = raw_ptx.get("ccs")
            ptx = tuple(str(c) for c in raw_ptx or [])
            arch_source = tuple(arch.get("source") or ())
        elif isinstance(arch, dict) and var.get("cuda") is None:
            sass, ptx = (), ()  # a CPU build: no kernels
        cudnn, cudnn_src = _pinned(var.get("cudnn"))
        nccl, nccl_src = _pinned(var.get("nccl"))
        return Curated(
            torch=torch,
            variant=str(var.get("name")),
            platform=platform,
            cuda=var.get("cuda"),
            sass=sass,
            ptx=ptx,
            arch_source=arch_source,
            cudnn=cudnn,
            cudnn_source=cudnn_src,
            nccl=nccl,
            nccl_source=nccl_src,
        )
    return None


def _pinned(value: Any) -> tuple[str | None, tuple[str, ...]]:
    if isinstance(value, dict):
        version = value.get("version")
        return (str(version) if version is not None else None), tuple(value.get("source") or ())
    if isinstance(value, str):
        return value, ()
    return None, ()


def _cc_key(cc: str) -> tuple[int, int, str]:
    major, _, rest = cc.partition(".")
    return int(major), int(rest.rstrip("af") or 0), rest[-1] if rest[-1:].isalpha() else ""


def _ccs(values: Any) -> str:
    return " ".join(sorted(values, key=_cc_key)) or "none"


def contradictions(entry: Mapping[str, Any], curated: Curated | None) -> list[dict[str, Any]]:
    """Each curated fact the observation disagrees with, as {fact, value, source, note}.

    ``value`` is the curated (losing) value; facts the observation does not give, or the
    database does not state, are not compared. cuDNN from ``verify`` is major.minor.patch
    (what torch reports), so it is compared as a prefix of the curated four-part version.
    """
    if curated is None:
        return [
            {
                "fact": "build",
                "value": "absent",
                "note": f"torch {entry['torch']} {entry['variant']} {entry['platform']} is not "
                "in the database",
            }
        ]
    out: list[dict[str, Any]] = []
    if curated.variant != entry["variant"]:
        out.append(
            {
                "fact": "variant",
                "value": curated.variant,
                "note": "the database names another build for this platform's default wheel",
            }
        )
        return out
    for fact in ("sass", "ptx"):
        seen, known = entry.get(fact), getattr(curated, fact)
        if seen is not None and known is not None and set(seen) != set(known):
            out.append(
                {
                    "fact": fact,
                    "value": _ccs(known),
                    "source": list(curated.arch_source),
                    "note": f"observed {_ccs(seen)}",
                }
            )
    if entry.get("cuda") and curated.cuda and entry["cuda"] != curated.cuda:
        out.append({"fact": "cuda", "value": curated.cuda, "note": f"observed {entry['cuda']}"})
    for fact, known, source in (
        ("cudnn", curated.cudnn, curated.cudnn_source),
        ("nccl", curated.nccl, curated.nccl_source),
    ):
        seen = entry.get(fact)
        if not seen or not known:
            continue
        same = (
            known == seen
            or (known + ".").startswith(seen + ".")
            or ((seen + ".").startswith(known + "."))
        )
        if not same:
            out.append(
                {"fact": fact, "value": known, "source": list(source), "note": f"observed {seen}"}
            )
    return out


def describe(entry: Mapping[str, Any], found: list[dict[str, Any]]) -> list[str]:
    """One line per contradiction, for summaries."""
    build = f"torch {entry['torch']} {entry['variant']} {entry['platform']}"
    lines = []
    for c in found:
        if c["fact"] == "build":
            lines.append(f"{build}: not in the database (run `gpuresolve db update` first)")
        elif c["fact"] == "variant":
            lines.append(f"{build}: the database says this wheel is {c['value']}")
        else:
            src = f" [{', '.join(c['source'])}]" if c.get("source") else ""
            lines.append(
                f"{build}: {c['fact']} {c.get('note', '')}; the database says {c['value']}{src}"
            )
    return lines
