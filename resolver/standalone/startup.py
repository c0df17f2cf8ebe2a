"""A container's start-up check, written beside a Dockerfile as ``gpuresolve-check.py``.

It runs with the image's own Python (standard library only, Python 3.9 syntax, nothing of
gpuresolve imported): the image needs no gpuresolve, so every step of the Dockerfile installs
only what the lock names. It runs the verify probe written beside it (``gpuresolve-probe.py``) in
a child process, judges the few facts that need no database — torch imports, every pinned
package has its pinned version, a CUDA build sees a GPU and computes a matmul and a conv2d
correctly on each model — then execs the container's command. On failure it prints the reasons
on stderr and exits 1; ``gpuresolve verify --lock`` run elsewhere gives the full report.

Launched as ``python gpuresolve-check.py LOCK [COMMAND...]``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

CHECK_NAME = "gpuresolve-check.py"  # this file's name beside the Dockerfile
PROBE_NAME = "gpuresolve-probe.py"
# A float32 result on the GPU against the float64 CPU reference: TF32 alone would give ~1e-3.
MAX_REL_ERR = 1e-3
TIMEOUT_S = 900
SKIP_ENV = "GPURESOLVE_STARTUP_CHECK"  # "0" skips the check (a CPU-only CI job, say)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(\\)?\s*$")


_UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def shown(text: object) -> str:
    """``text`` with each control, format or separator character escaped (``\\x1b``,
    ``\\u2028``): gpuresolve's one rule for what it prints (``core.errors.escaped``; this script
    imports nothing of gpuresolve, so tests/test_output_escape.py holds the two equal). What the
    environment says (an error, a device name) reaches a container's log, read in a terminal."""
    import unicodedata

    out = []
    for ch in str(text):
        bad = (ch < " " or ch == "\x7f") if ch.isascii() else unicodedata.category(ch) in _UNSAFE
        out.append(ch.encode("unicode_escape").decode("ascii") if bad else ch)
    return "".join(out)


def _say(line: str) -> None:
    sys.stderr.write(shown(line) + "\n")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(have: str, pinned: str) -> bool:
    """Equal, or the same release where the installed metadata carries no local tag."""
    have, pinned = have.strip().lower(), pinned.strip().lower()
    return have == pinned or ("+" not in have and have == pinned.split("+")[0])


def pins(path: str) -> dict[str, str]:
    """name -> version of the lock's exact pins (lines with a marker are another platform's)."""
    found: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = _PIN.match(line.strip())
            if m:
                found[canonical(m.group(1))] = m.group(2)
    return found


def judge(result: dict[str, Any], wanted: dict[str, str]) -> list[str]:
    """The reasons the environment fails (empty: it passes)."""
    if result.get("error"):
        return [f"the probe failed at {result.get('stage')}: {result['error'].get('message')}"]
    fails: list[str] = []
    torch = result.get("torch") or {}
    if not torch.get("imported"):
        err = torch.get("error") or {}
        return [f"torch does not import: {err.get('type')}: {err.get('message')}"]
    dists = result.get("dists") or {}
    for name, version in sorted(wanted.items()):
        have = (dists.get(name) or {}).get("version")
        if name == "torch":  # torch.__version__ carries the build tag its metadata may lack
            have = torch.get("version") or have
        if have is None:
            fails.append(f"{name}: not installed (the lock pins {version})")
        elif not same_version(str(have), version):
            fails.append(f"{name} {have} is installed, the lock pins {version}")
    if not torch.get("cuda"):
        return fails  # a CPU build: nothing to run on a GPU
    cuda = result.get("cuda") or {}
    if cuda.get("error"):
        fails.append(f"CUDA does not initialise: {cuda['error'].get('message')}")
    elif not cuda.get("devices"):
        fails.append(
            f"torch {torch.get('version')} (CUDA {torch.get('cuda')}) sees no GPU: start the "
            f"container with the GPUs (docker run --gpus all), or set {SKIP_ENV}=0 to skip this"
        )
    for test in result.get("gpu_tests") or []:
        fails += compute_failures(test, f"GPU {test.get('device')}")
    return fails


def first_line(text: object) -> str:
    """The first non-blank line of an error message (verify's checks print this too)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def compute_failures(test: dict[str, Any], label: str) -> list[str]:
    """What went wrong in one GPU's matmul and conv2d test (verify's compute check too)."""
    if test.get("error"):
        return [f"{label}: {first_line(test['error'].get('message', ''))}"]
    fails = []
    for op in ("matmul", "conv2d"):
        r = test.get(op) or {}
        if r.get("error"):
            fails.append(f"{label} {op}: {first_line(r['error'].get('message', ''))}")
        elif r.get("rel_err") is None or float(r["rel_err"]) > MAX_REL_ERR:
            fails.append(f"{label} {op}: wrong result (relative error {r.get('rel_err')})")
    return fails


def main(argv: list[str]) -> int:
    if not argv:
        _say("usage: python gpuresolve-check.py LOCK [COMMAND...]")
        return 2
    lock, command = argv[0], argv[1:]
    if os.environ.get(SKIP_ENV) != "0":
        try:
            wanted = pins(lock)
        except (OSError, UnicodeDecodeError) as exc:
            _say(f"gpuresolve start-up check: cannot read the lock {lock}: {exc}")
            return 2
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), PROBE_NAME)
        args = [sys.executable, "-I", probe]
        for name in sorted(wanted):
            args += ["--want", name]
        try:
            done = subprocess.run(
                args,
                capture_output=True,  # stderr: the probe's stage markers, kept off the log
                timeout=TIMEOUT_S,
                check=False,
            )
            result = json.loads(done.stdout.decode("utf-8"))
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            result = {"error": {"message": str(exc)}, "stage": "start"}
        if not isinstance(result, dict):
            result = {"error": {"message": "no JSON object from the probe"}, "stage": None}
        fails = judge(result, wanted)
        if fails:
            _say(f"gpuresolve start-up check FAILED for {lock}:")
            for line in fails:
                _say(f"  - {line}")
            _say("  (gpuresolve verify --lock gives the full report)")
            return 1
        devices = [d.get("name") for d in (result.get("cuda") or {}).get("devices") or []]
        torch = result.get("torch") or {}
        where = f" on {len(devices)} GPU(s): {', '.join(map(str, devices))}" if devices else ""
        _say(f"gpuresolve start-up check: torch {torch.get('version')} OK{where}")
    if not command:
        return 0
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:  # as a shell says it: 127 not found, 126 not runnable
        _say(f"gpuresolve start-up check: cannot run {command[0]}: {exc.strerror}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
