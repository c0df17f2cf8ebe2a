"""A decision rendered whole: the `--json` contract and the five-second human answer."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from resolver.catalog import Catalog
from resolver.core.versions import cc_str
from resolver.core.vocab import Grade
from resolver.present import findings as words
from resolver.solve import GPU_KINDS, Candidate, Decision, Target
from resolver.solve.extensions import requirement
from resolver.solve.findings import ExtensionMiss
from resolver.solve.findings import ReasonKind as K

if TYPE_CHECKING:  # types only: suggest imports nothing more at run time
    from resolver.core.documents.decision import (
        BuildJson,
        DecisionJson,
        EvidenceFactJson,
        TargetJson,
    )
    from resolver.core.platforms import PythonVersion


def shown_index(catalog: Catalog, variant: str, pytorch_index: str | None) -> str:
    """The variant's index URL as output shows it: a mirror's login masked (``user:****@``)."""
    from resolver.io.credentials import shown

    return shown(catalog.index_url(variant, pytorch_index))


def pip_command(catalog: Catalog, cand: Candidate, pytorch_index: str | None = None) -> str:
    pins = " ".join(shlex.quote(f"{n}=={v}") for n, v in cand.packages)
    url = shown_index(catalog, cand.variant.name, pytorch_index)
    return f"pip install {pins} --index-url {url}"


def extension_command(catalog: Catalog, cand: Candidate, python: PythonVersion) -> str | None:
    """The second command, for the extension packages asked for: installed after torch, from
    the default index (or their own release downloads), with torch already in place so that
    pip keeps it (each one's torch requirement holds for it: the solver checked)."""
    if not cand.extensions:
        return None
    reqs = [requirement(catalog, c, cand.release, python) for c in cand.extensions]
    return "pip install " + " ".join(shlex.quote(r) for r in reqs)


def target_json(target: Target) -> TargetJson:
    return {
        "name": target.name,
        "platform": str(target.platform),
        "python": str(target.python),
        "driver": None if target.driver is None else str(target.driver),
        "driver_os": target.driver_os,
        "nvidia": target.nvidia,
        "gpus": [{"cc": cc_str(g.cc), "name": g.name} for g in target.gpus],
        "unknown_gpus": list(target.unknown_gpus),
    }


def candidate_json(
    catalog: Catalog,
    cand: Candidate,
    pytorch_index: str | None = None,
    python: PythonVersion | None = None,
) -> BuildJson:
    var = cand.variant
    return {
        "torch": cand.release.version,
        "variant": var.name,
        "cuda": var.cuda,
        "cudnn": var.cudnn.version if var.cudnn else None,
        "nccl": var.nccl.version if var.nccl else None,
        "index_url": shown_index(catalog, var.name, pytorch_index),
        "packages": dict(cand.packages),
        "pypi": cand.pypi,
        "min_driver": None if cand.min_driver is None else str(cand.min_driver),
        "min_driver_reason": words.driver_why(cand.min_driver_why),
        "confirmed": cand.confirmed,
        "evidence": cand.evidence,
        "evidence_detail": evidence_detail(cand),
        "coverage": words.coverage(cand.coverage),
        "warnings": words.warnings(cand.warnings),
        "pip": pip_command(catalog, cand, pytorch_index),
        "extensions": [
            {
                "package": c.package,
                "version": c.version,
                "index": c.build.index,
                "requires_torch": c.build.torch,
                "cuda": c.build.cuda,
                "cuda_match": c.build.cuda_match,
                "device_code": c.build.device_code,
                "requirement": requirement(catalog, c, cand.release, python),
                "grade": c.build.prov.grade,
                "coverage": words.coverage(c.coverage),
            }
            for c in cand.extensions
        ],
    }


def evidence_detail(cand: Candidate) -> list[EvidenceFactJson]:
    """fact -> grade -> source keys, and whether it decides (sets `evidence`) or only describes."""
    return [
        {
            "fact": f.name,
            "grade": f.grade,
            "source": list(f.source),
            "what": words.about(f.what),
            "decides": f.decides,
        }
        for f in (*cand.facts, *cand.driver_facts)
    ]


def evidence_line(cand: Candidate) -> str | None:
    """'evidence: official (SASS ... from ...)' when a deciding fact is not observed."""
    if cand.evidence == Grade.OBSERVED:
        return None
    from resolver.db.evidence import GRADE_TEXT, deciding_grade

    weak = [
        f
        for f in (*cand.facts, *cand.driver_facts)
        if f.decides and deciding_grade(f) == cand.evidence
    ]
    what = ", ".join(words.about(f.what, bare=True) for f in weak)
    tail = "; no wheel read yet" if any(f.name in ("sass", "ptx") for f in weak) else ""
    return f"evidence: {cand.evidence} ({what}: {GRADE_TEXT.get(cand.evidence, '')}){tail}"


def described_line(cand: Candidate) -> str | None:
    """The grades of what only describes the build (cuDNN, NCCL, companions) where not observed:
    shown beside the evidence, never a reason to rank lower."""
    weak = [f for f in cand.facts if not f.decides and f.grade != Grade.OBSERVED]
    if not weak:
        return None
    said = ", ".join(f"{words.about(f.what)} {f.grade}" for f in weak)
    return f"described by (does not decide): {said}"


def decision_json(
    catalog: Catalog, decision: Decision, pytorch_index: str | None = None
) -> DecisionJson:
    sel = decision.selection
    py = decision.target.python
    return {
        "target": target_json(decision.target),
        "selection": candidate_json(catalog, sel, pytorch_index, py) if sel else None,
        "alternatives": [
            candidate_json(catalog, c, pytorch_index, py) for c in decision.alternatives
        ],
        "rejected": [
            {
                "torch": c.release.version,
                "variant": c.variant.name,
                "reasons": [words.reason(r) for r in c.reasons],
                "kinds": sorted({r.kind.value for r in c.reasons}),
                "gates": [
                    {
                        "package": r.miss.package,
                        "version": r.miss.version,
                        "gate": r.miss.gate.value,
                        "values": dict(r.miss.values),
                    }
                    for r in c.reasons
                    if isinstance(r, ExtensionMiss)
                ],
            }
            for c in decision.rejected
        ],
        "hints": words.hints(decision.hints),
        "cpu_fallback": (
            candidate_json(catalog, decision.cpu_fallback, pytorch_index)
            if decision.cpu_fallback
            else None
        ),
        "database": {"origin": catalog.origin, "updated": catalog.updated},
    }


def describe_build(cand: Candidate) -> str:
    var = cand.variant
    if var.cuda is None:
        return f"torch {cand.release.version} (CPU build, {var.name})"
    cudnn = f", cuDNN {var.cudnn.version}" if var.cudnn and var.cudnn.version else ""
    return f"torch {cand.release.version} + CUDA {var.cuda} ({var.name}{cudnn})"


def target_line(target: Target) -> str:
    """The target in one line: platform, Python, GPUs, driver."""
    gpus = ", ".join(g.label for g in target.gpus) or (
        "NVIDIA GPU (model not given)" if target.nvidia else "no NVIDIA GPU"
    )
    driver = f"driver {target.driver}" if target.driver else "driver not given"
    if not target.nvidia and not target.gpus:
        driver = ""
    parts = [str(target.platform), f"Python {target.python}", gpus] + ([driver] if driver else [])
    return (f"{target.name}: " if target.name else "") + ", ".join(parts)


def why_text(decision: Decision, sel: Candidate) -> str:
    """Why this build: the rules it passed on this target, in one line."""
    t = decision.target
    reasons = [f"newest torch release that runs on {t.platform} with Python {t.python}"]
    if sel.coverage:
        reasons.append("; ".join(words.coverage(sel.coverage)))
    if sel.min_driver and decision.target.driver:
        why = words.driver_why(sel.min_driver_why)
        reasons.append(f"driver {decision.target.driver} >= {sel.min_driver} ({why})")
    if sel.pypi:
        reasons.append("the build the Python Package Index carries")
    return "; ".join(reasons)


def decision_text(
    catalog: Catalog, decision: Decision, pytorch_index: str | None = None, detail: bool = False
) -> str:
    """The short answer a person reads in five seconds (stdout). The selection's warnings are
    not in it: commands print them on stderr (`commands.ui.warning`), as every warning."""
    lines = [f"target: {target_line(decision.target)}"]
    sel = decision.selection
    if sel is not None:
        lines.append(f"install: {describe_build(sel)}")
        lines.append(f"  {pip_command(catalog, sel, pytorch_index)}")
        then = extension_command(catalog, sel, decision.target.python)
        if then:
            lines.append(f"  then: {then}")
            lines.extend(
                f"  {c.package} {c.version}: {'; '.join(words.coverage(c.coverage))}"
                for c in sel.extensions
                if c.coverage
            )
        lines.append(f"why: {why_text(decision, sel)}")
        lines.extend(line for line in (evidence_line(sel), described_line(sel)) if line)
        if decision.alternatives:
            lines.append(f"runner-up: {describe_build(decision.alternatives[0])}")
    else:
        newest, by_target = _closest_rejects(decision)
        window = words.windows(r for c in decision.rejected for r in c.reasons)
        if window:  # the driver does not drive the GPU: no build can help
            lines += [f"no compatible build: {w}" for w in window]
            newest = []
        elif by_target:
            lines.append("no compatible build: nothing in the database runs on this target")
        elif newest:
            lines.append("no compatible build: nothing in the database matches the request")
        else:
            lines.append(
                f"no compatible build: the database has no {decision.target.platform} build"
            )
        for c in newest:
            lines.append(f"  {c.release.version} {c.variant.name}: " + words.reasons(c.reasons))
        if decision.cpu_fallback is not None:
            fb = decision.cpu_fallback
            lines.append(f"CPU-only fallback (no GPU use): {describe_build(fb)}")
            lines.append(f"  {pip_command(catalog, fb, pytorch_index)}")
    lines.extend(f"hint: {h}" for h in words.hints(decision.hints))
    if detail:
        for c in decision.alternatives[1:]:  # already in ranking order
            lines.append(f"also fits: {describe_build(c)} [{c.evidence}]")
        for c in decision.rejected:
            lines.append(
                f"rejected {c.release.version} {c.variant.name}: " + words.reasons(c.reasons)
            )
    return "\n".join(lines)


def _closest_rejects(decision: Decision, n: int = 3) -> tuple[list[Candidate], bool]:
    """The rejects that say most, and whether the target (not the request) is what fails.

    Builds that fail only on the target's GPU side first, then on the target at all (Python),
    newest first; where every build also fails the request (--torch, --cuda, --with), those.
    """
    target_kinds = GPU_KINDS | {K.PYTHON, K.CPU}
    fitting = [c for c in decision.rejected if all(r.kind in target_kinds for r in c.reasons)]
    by_target = bool(fitting)
    fitting = [c for c in fitting if all(r.kind in GPU_KINDS for r in c.reasons)] or fitting
    if not fitting:  # the request rules everything out: show why, fewest reasons first
        fitting = sorted(decision.rejected, key=lambda c: len(c.reasons))[:n]
        return sorted(fitting, key=lambda c: c.release.key, reverse=True), False
    fitting.sort(key=lambda c: (c.release.key, c.variant.cuda or ""), reverse=True)
    return fitting[:n], by_target
