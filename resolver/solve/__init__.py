"""Solving: from (catalog, target, request) to a decision, and explaining one.

``resolver.solve`` is the room's public face: the pure solver (solver.py) exports its names here,
so callers write ``from resolver.solve import Request, Target, solve``. The hints on a decision
(what would change it) are hints.py, whose solve() is decide() plus the hints. ``suggest
--explain`` is explain.py, imported only by that option.
"""

from resolver.solve.hints import solve
from resolver.solve.solver import (
    COMPANIONS,
    GPU_KINDS,
    REQUEST_KINDS,
    Candidate,
    Decision,
    Policy,
    Reason,
    Request,
    Target,
    TargetGpu,
    decide,
    describe_fact,
    driver_need,
    evaluate,
    gpu_names,
    is_jit,
    kernel_coverage,
    window_reasons,
)

__all__ = [
    "COMPANIONS",
    "GPU_KINDS",
    "REQUEST_KINDS",
    "Candidate",
    "Decision",
    "Policy",
    "Reason",
    "Request",
    "Target",
    "TargetGpu",
    "decide",
    "describe_fact",
    "driver_need",
    "evaluate",
    "gpu_names",
    "is_jit",
    "kernel_coverage",
    "solve",
    "window_reasons",
]
