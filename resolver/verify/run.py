"""Launch the probe in the target interpreter, with a timeout; a crash or a hang becomes a result.

The probe runs in its own process group, so a hang is ended whole (with any helper processes
torch started) and a segfault inside a CUDA library is reported with its signal and the stage it
reached, never as gpuresolve's traceback. Starting and finishing are separate calls so the caller
can detect the host and load the database while torch imports in the child.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from resolver.core.errors import UserError, escaped
from resolver.io import subprocs
from resolver.standalone import PROBE
from resolver.standalone.probe import STAGE_PREFIX

PROBE_FILE = PROBE
DEFAULT_TIMEOUT_S = 120.0
_TAIL_LINES = 12
PROBE_OUTPUT_MAX = 16 * 2**20  # bytes per stream: its JSON is some kB; more is a flood
_FOREIGN_DEPTH = 32  # nesting kept from the probe's document (it has 4 levels)


def foreign(value: Any, depth: int = 0) -> Any:
    """The probe's document as input from the verified environment: every string (keys too)
    with control and bidi characters escaped (``\\x1b``, ``\\u202e``), as nvidia-smi's output
    is, so a hostile ``torch.__version__`` or device name never reaches a terminal raw;
    nesting past ``_FOREIGN_DEPTH`` is dropped."""
    if isinstance(value, str):
        return escaped(value)
    if depth >= _FOREIGN_DEPTH:
        return None
    if isinstance(value, dict):
        return {escaped(str(k)): foreign(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [foreign(v, depth + 1) for v in value]
    return value


@dataclass
class ProbeRun:
    """What came back from one probe process."""

    python: str
    data: dict[str, Any] | None = None  # the probe's JSON document
    returncode: int | None = None
    signal: str | None = None  # "SIGSEGV" when the process was killed by a signal
    timed_out: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    stage: str | None = None  # the last stage the probe announced
    stderr_tail: list[str] = field(default_factory=list)  # its last lines, stage marks dropped
    elapsed_s: float = 0.0
    overflow: str | None = None  # "stdout"/"stderr": it printed more than PROBE_OUTPUT_MAX
    damaged: str | None = None  # where its document has not the probe's shape ("cuda.devices")

    @property
    def started(self) -> bool:
        """Whether the probe's code ran at all (an interpreter too old to parse it never does)."""
        return self.stage is not None or self.data is not None or self.damaged is not None

    @property
    def failure(self) -> str | None:
        """One line saying why there is no usable result, or None when there is one."""
        where = f" during {self.stage!r}" if self.stage and self.stage != "done" else ""
        if self.overflow:
            return (
                f"the probe printed more than {PROBE_OUTPUT_MAX // 2**20} MiB on its "
                f"{self.overflow} and was stopped{where} (torch or a module it imports floods "
                "it; run `python -c 'import torch'` in that environment to see)"
            )
        if self.timed_out:
            return f"the probe did not finish within {self.timeout_s:g} s (hung{where})"
        if self.signal:
            return f"the probe crashed with {self.signal}{where}"
        if self.damaged:
            return (
                f"the probe's result is damaged ({self.damaged}): something in that environment "
                "changed it (a sitecustomize, or a module patching what the probe writes with)"
            )
        if self.data is None:
            last = self.stderr_tail[-1] if self.stderr_tail else "no output"
            return f"the probe exited with status {self.returncode} and no result{where}: {last}"
        if self.data.get("error"):
            err = self.data["error"]
            return f"the probe failed{where}: {err.get('type')}: {err.get('message')}"
        return None


class Each:
    """Shape of every value of an object (``of=dict``) or item of a list (``of=list``);
    ``nullable``: an item may be null (a companion that is not installed)."""

    def __init__(self, shape: Any, of: type = list, nullable: bool = False) -> None:
        self.shape, self.of, self.nullable = shape, of, nullable


_TEXT = (str, type(None))
_NUM = (int, float, type(None))
_SCALAR = (str, int, float, bool, type(None))
_TEXTS = Each((str,))
_ERROR = {"type": _SCALAR, "message": _SCALAR}
_RESULT = {"rel_err": _NUM, "error": _ERROR}
# The probe's document as `probe.py` writes it, as far as gpuresolve's checks index into it: a
# value of another type (a sitecustomize or a module patching what the probe writes with)
# makes the whole result damaged, never a TypeError deep in a check (exit
# 70). A key ending in "!" must be there; a tuple is the types a value may have; a dict is an
# object (its other keys unchecked). Leaves the checks only print stay any scalar.
SHAPE: dict[str, Any] = {
    "stage": _TEXT,
    "error": _ERROR,
    "timings": Each(_NUM, dict),
    "python": Each(_SCALAR, dict),
    "markers": Each(_TEXT, dict),
    "env": Each(_TEXT, dict),
    "site_dirs": _TEXTS,
    "dists": Each({"requires": _TEXTS}, dict),
    "companions": Each(Each(_SCALAR, dict), dict, nullable=True),
    "torch": {"arch_list": _TEXTS, "import_warnings": _TEXTS, "error": _ERROR},
    "cuda": {
        "device_count": _NUM,
        "warnings": _TEXTS,
        "error": _ERROR,
        "devices": Each({"index!": (int,), "cc!": _SCALAR}),
    },
    "cudnn": {"version": _NUM, "version_text": _TEXT},
    "nccl": {"version_text": _TEXT, "error": _ERROR},
    "gpu_tests": Each({"device": _NUM, "matmul": _RESULT, "conv2d": _RESULT}),
    "libraries": {
        "roots": _TEXTS,
        "driver": _TEXTS,
        "env_copies": Each(_TEXTS, dict),
        "loaded": Each({"family!": (str,), "path!": (str,)}),
    },
    "benchmark": (dict, type(None)),
}


def misshapen(value: Any, shape: Any, where: str = "", nullable: bool = False) -> str | None:
    """Where ``value`` departs from ``shape`` ("cuda.devices[0]: expected an object"), or None.

    An absent key, or a key's null object or list, is fine (an older probe, a stage not
    reached); a null item of a list is not."""
    if isinstance(shape, tuple):
        return None if isinstance(value, shape) else f"{where or 'result'}: unexpected value"
    if value is None and nullable:
        return None
    if isinstance(shape, Each):
        if not isinstance(value, shape.of):
            return f"{where}: expected {'an object' if shape.of is dict else 'a list'}"
        seq: Any = value  # a dict or a list, as checked
        items: list[tuple[str, Any]] = (
            [(f"{where}.{k}", v) for k, v in seq.items()]
            if shape.of is dict
            else [(f"{where}[{i}]", v) for i, v in enumerate(seq)]
        )
        return next(
            (m for w, v in items if (m := misshapen(v, shape.shape, w, shape.nullable))), None
        )
    if not isinstance(value, dict):
        return f"{where or 'result'}: expected an object"
    for key, sub in shape.items():
        name = key.rstrip("!")
        here = f"{where}.{name}" if where else name
        if name not in value:
            if key.endswith("!"):
                return f"{here}: missing"
            continue
        found = misshapen(value[name], sub, here, nullable=True)
        if found:
            return found
    return None


class ProbeProcess:
    """A started probe; `finish` waits for it (within what is left of the timeout)."""

    def __init__(
        self,
        python: str,
        *,
        want: Iterable[str] = (),
        benchmark: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.python = python
        self.timeout_s = timeout_s
        self.source = PROBE_FILE.read_text(encoding="utf-8")
        args = [python, "-I", "-c", self.source]
        for name in sorted(set(want)):
            args += ["--want", name]
        if benchmark:
            args.append("--benchmark")
        env = dict(os.environ if environ is None else environ)
        env["PYTHONNOUSERSITE"] = "1"
        self.started_at = time.monotonic()
        try:
            # its own process group: a hang, Ctrl-C or SIGTERM kills it whole (subprocs)
            self.proc = subprocs.start(args, stdout=subprocs.PIPE, stderr=subprocs.PIPE, env=env)
        except OSError as exc:
            raise UserError(f"cannot run {python}: {exc.strerror or exc}") from None

    def finish(self) -> ProbeRun:
        left = max(self.timeout_s - (time.monotonic() - self.started_at), 0.1)
        try:  # bounded: a torch that floods its output is stopped, never read to MemoryError
            got = subprocs.collect(self.proc, timeout=left, limit=PROBE_OUTPUT_MAX)
        except BaseException:  # Ctrl-C, SIGTERM: the probe and its children end with us
            subprocs.kill_group(self.proc)
            raise
        out, err, timed_out = got.stdout, got.stderr, got.timed_out
        subprocs.forget(self.proc)
        run = ProbeRun(
            python=self.python,
            returncode=self.proc.returncode,
            timed_out=timed_out,
            timeout_s=self.timeout_s,
            elapsed_s=round(time.monotonic() - self.started_at, 3),
            overflow=got.overflow,
        )
        rc = self.proc.returncode
        if rc is not None and rc < 0 and not timed_out and not got.overflow:
            try:
                run.signal = signal.Signals(-rc).name
            except ValueError:
                run.signal = f"signal {-rc}"
        # Not a Python (`--python /bin/ls`) may echo its arguments: never the probe's source.
        _read_stderr(run, err.decode("utf-8", "replace").replace(self.source, "<probe>"))
        if not timed_out and not got.overflow and out.strip():
            try:
                data = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
                run.data = foreign(data) if isinstance(data, dict) else None
            except (ValueError, IndexError, RecursionError):
                run.data = None
            run.damaged = None if run.data is None else misshapen(run.data, SHAPE)
            if run.damaged:
                run.data = None
        if run.data is not None and not run.signal:
            stage = run.data.get("stage")
            run.stage = stage if isinstance(stage, str) else run.stage
        return run


_LINE_MAX = 300


def _read_stderr(run: ProbeRun, text: str) -> None:
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(STAGE_PREFIX):
            run.stage = escaped(line[len(STAGE_PREFIX) :].strip()[:_LINE_MAX])
        elif line.strip():
            line = line.rstrip()
            line = line if len(line) <= _LINE_MAX else f"{line[: _LINE_MAX - 3]}..."
            lines.append(escaped(line))
    run.stderr_tail = lines[-_TAIL_LINES:]


def run_probe(
    python: str,
    *,
    want: Iterable[str] = (),
    benchmark: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
) -> ProbeRun:
    """Start the probe and wait for it."""
    return ProbeProcess(
        python, want=want, benchmark=benchmark, timeout_s=timeout_s, environ=environ
    ).finish()
