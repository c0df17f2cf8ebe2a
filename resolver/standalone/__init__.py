"""Scripts that run in another interpreter, never inside gpuresolve's own process.

Each imports nothing of gpuresolve (the contract test checks it) and keeps to the oldest Python it
may meet (each has its own target in the lint settings): ``probe.py`` (verify's probe, in the
user's interpreter), ``startup.py`` (the Dockerfile's start-up check, in the image's Python),
``nccl_worker.py`` (one per GPU, in the environment under test), ``ext_probe.py`` (`verify
--with`: one extension package at a time, in the user's interpreter) and ``rattler_child.py``
(the py-rattler solve, in a child of gpuresolve's own interpreter: py-rattler may crash at exit).
gpuresolve reads their constants by importing them and runs them by these paths.
"""

from pathlib import Path

__all__ = ["EXT_PROBE", "NCCL_WORKER", "PROBE", "RATTLER_CHILD", "STARTUP"]

_HERE = Path(__file__).resolve().parent
PROBE = _HERE / "probe.py"
STARTUP = _HERE / "startup.py"
NCCL_WORKER = _HERE / "nccl_worker.py"
RATTLER_CHILD = _HERE / "rattler_child.py"
EXT_PROBE = _HERE / "ext_probe.py"
