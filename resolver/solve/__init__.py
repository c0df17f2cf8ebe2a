"""Solving: from (catalog, target, request) to a decision, and explaining one.

``resolver.solve`` is the room's public face: the pure solver (solver.py) exports its names here,
so callers write ``from resolver.solve import Request, Target, solve``. The hints on a decision
(what would change it) are solver.py's too: solve() is decide() plus the hints. What a decision
found (reasons, coverage, warnings, hints) is data (findings.py), said in ``resolver.present``.
"""

from resolver.solve.findings import GPU_KINDS, REQUEST_KINDS
from resolver.solve.solver import (
    COMPANIONS,
    Candidate,
    Decision,
    Policy,
    Request,
    Target,
    TargetGpu,
    decide,
    driver_need,
    evaluate,
    gpu_names,
    kernel_coverage,
    solve,
    window_reasons,
)

__all__ = [
    "COMPANIONS",
    "GPU_KINDS",
    "REQUEST_KINDS",
    "Candidate",
    "Decision",
    "Policy",
    "Request",
    "Target",
    "TargetGpu",
    "decide",
    "driver_need",
    "evaluate",
    "gpu_names",
    "kernel_coverage",
    "solve",
    "window_reasons",
]
