"""`suggest --explain BUILD`: every check one build passes or fails on a target, with evidence.

The answer to "why not the newest?": the solver's own verdicts (request, Python, kernels, driver,
driver window, evidence) for that build, each fact's grade and source keys, and where it ranks.
"""

from __future__ import annotations

import re

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.db.evidence import Fact, trusted
from resolver.present import findings as say
from resolver.solve import Candidate, Decision
from resolver.solve.findings import REQUEST_KINDS
from resolver.solve.findings import ReasonKind as K

_BUILD_RE = re.compile(r"^(?:torch\s*==\s*)?([0-9]+\.[0-9]+\.[0-9]+)(?:\+([a-z0-9.]+))?$")
_CHECKS = (
    ("request", REQUEST_KINDS | {K.CPU, K.NOGPU}),
    ("python", frozenset({K.PYTHON})),
    ("kernels", frozenset({K.ARCH, K.UNKNOWN})),
    ("driver", frozenset({K.DRIVER})),
    ("driver window", frozenset({K.WINDOW})),
    ("evidence", frozenset({K.EVIDENCE})),
    ("packages", frozenset({K.EXTENSION})),
)


def parse_build(text: str) -> tuple[str, str | None]:
    """'torch==2.15.0+cu132', '2.15.0+cu132' or '2.15.0' -> (version, variant or None)."""
    m = _BUILD_RE.match(text.strip())
    if m is None:
        raise UserError(f"--explain {text!r}: expected a build like torch==2.15.0+cu132 or 2.15.0")
    return m[1], m[2]


def explain(catalog: Catalog, decision: Decision, build: str) -> tuple[str, bool]:
    """The report, and whether the named build (some variant of it) fits the target."""
    version, variant = parse_build(build)
    if catalog.release(version) is None:
        raise UserError(f"--explain: torch {version} is not in the database")
    ranked = [c for c in (decision.selection, *decision.alternatives) if c is not None]
    pool = [*ranked, *decision.rejected]
    cands = [
        c
        for c in pool
        if c.release.version == version and (variant is None or c.variant.name == variant)
    ]
    if not cands:
        where = decision.target.platform
        what = f"{version}+{variant}" if variant else version
        raise UserError(f"--explain: no torch {what} build for {where} in the database")
    level = decision.request.level
    lines: list[str] = []
    for cand in cands:
        lines += _one(cand, ranked, decision, level)
    return "\n".join(lines), any(c.ok for c in cands)


def _one(cand: Candidate, ranked: list[Candidate], decision: Decision, level: str) -> list[str]:
    name = f"torch {cand.release.version}+{cand.variant.name}"
    verdict = "fits" if cand.ok else "does not fit"
    lines = [f"{name} on {decision.target.platform}: {verdict}"]
    for check, kinds in _CHECKS:
        failed = [say.reason(r) for r in cand.reasons if r.kind in kinds]
        if failed:
            lines += [f"  FAIL {check}: {t}" for t in failed]
        elif check == "kernels" and cand.coverage:
            lines += [f"  ok   kernels: {c}" for c in say.coverage(cand.coverage)]
        elif check == "driver" and cand.min_driver:
            have = decision.target.driver or "not given"
            lines.append(
                f"  ok   driver: needs >= {cand.min_driver} "
                f"({say.driver_why(cand.min_driver_why)}); host {have}"
            )
        elif check == "evidence":
            ok = "ok  " if trusted(cand.evidence, level) else "weak"
            lines.append(
                f"  {ok} evidence: {cand.evidence} (trusted at --evidence {level}: "
                f"{'yes' if trusted(cand.evidence, level) else 'no'})"
            )
        elif check in ("request", "python"):
            lines.append(f"  ok   {check}")
        elif check == "packages":
            for c in cand.extensions:
                reach = "; ".join(say.coverage(c.coverage)) or "no device code decides"
                lines.append(
                    f"  ok   packages: {c.package} {c.version} ({c.build.index} index, "
                    f"torch{c.build.torch or ' (any)'}; {reach}) "
                    f"[{c.build.prov.grade}: {', '.join(c.build.prov.source)}]"
                )
    lines += [f"    {_fact(f)}" for f in (*cand.facts, *cand.driver_facts)]
    if cand.ok:
        pos = next(i for i, c in enumerate(ranked) if c is cand)
        if pos == 0:
            lines.append("  ranking: selected")
        else:
            top = ranked[0]
            lines.append(
                f"  ranking: #{pos + 1} of {len(ranked)} that fit; the selection "
                f"torch {top.release.version}+{top.variant.name} ranks first "
                f"({_why_first(top, cand, level)})"
            )
    return lines


def _fact(f: Fact) -> str:
    tail = "" if f.decides else " (describes the build; does not decide)"
    return f"{f.name}: {say.about(f.what)} [{f.grade}: {', '.join(f.source) or 'no source'}]{tail}"


def _why_first(top: Candidate, cand: Candidate, level: str) -> str:
    if top.jit != cand.jit:
        return "native kernels before PTX JIT"
    if trusted(top.evidence, level) != trusted(cand.evidence, level):
        return f"documented evidence before {cand.evidence}"
    if top.release.key != cand.release.key:
        return "newer torch"
    if top.pypi != cand.pypi:
        return "the Python Package Index's build"
    return "newer CUDA"
