"""`verify --with PKG`: each extension package imported and one small real operation run on the
GPU, each in its own child process capped in time, judged into the `extensions` check.

A mismatch is named by what was raised: the undefined C++ symbol of an extension built for
another torch (``undefined symbol: _ZN3c10...``), the package's own "built for PyTorch ..."
message (xformers), or the exception's first line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from resolver.core.errors import escaped
from resolver.io import subprocs
from resolver.present.ext_words import torch_words
from resolver.standalone import EXT_PROBE
from resolver.verify.result import EXTENSIONS_CHECK, FAIL, PASS, SKIP, CheckResult

PROBE_FILE = EXT_PROBE
TOLERANCE = {"bitsandbytes": 0.1, "torchao": 0.1}  # quantized: a coarse match is right
DEFAULT_TOLERANCE = 0.02  # fp16 attention and exact adds
_SYMBOL = re.compile(r"undefined symbol: ([A-Za-z0-9_]+)")
MAX_OUTPUT = 64 * 1024


def run_one(python: str, package: str, timeout_s: float) -> dict[str, Any]:
    """The probe's JSON for one package, or a record of how the child failed."""
    source = PROBE_FILE.read_text(encoding="utf-8")
    try:
        done = subprocs.run(
            [python, "-I", "-c", source, package],
            timeout=timeout_s,
            env={**_env(), "PYTHONNOUSERSITE": "1"},
        )
    except OSError as exc:
        return {"package": package, "error": {"type": "OSError", "message": str(exc)}}
    tail = [ln for ln in done.stderr[-MAX_OUTPUT:].splitlines() if ln.strip()][-20:]
    if done.timed_out:
        return {"package": package, "timed_out": timeout_s, "stderr": tail}
    for line in reversed(done.stdout[-MAX_OUTPUT:].splitlines()):
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # the environment's words: nested past the stack
            continue
        if isinstance(data, dict):
            data["stderr"] = tail
            return data
    return {"package": package, "returncode": done.returncode, "stderr": tail}


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def judge(
    results: Sequence[dict[str, Any]], gates: Mapping[tuple[str, str], str] | None = None
) -> CheckResult:
    """One `extensions` check: FAIL naming each package that did not run, PASS otherwise.
    ``gates``: (package, version) -> the torch its own import loads its kernels with (the
    database's ``import_gate``), to name that gate when the kernels were skipped."""
    key, title = EXTENSIONS_CHECK
    if not results:
        return CheckResult(key, title, SKIP, "no extension package asked for (--with)")
    lines: list[str] = []
    failed: list[str] = []
    for r in results:
        name = str(r.get("package"))
        ok, line = _gated(r, gates or {}) or _one(r)
        lines.append(f"{name}: {line}")
        if not ok:
            failed.append(f"{name}: {line}")
    if failed:
        return CheckResult(
            key,
            title,
            FAIL,
            "; ".join(failed),
            "install the package's build for this torch (gpuresolve suggest --with NAME)",
            tuple(lines),
        )
    return CheckResult(
        "extensions", title, PASS, f"{len(results)} ran on the GPU", None, tuple(lines)
    )


def _gated(r: dict[str, Any], gates: Mapping[tuple[str, str], str]) -> tuple[bool, str] | None:
    """A package whose own import check left its kernels out for this torch (torchao): FAIL,
    naming the gate. Where the probe did not say whether they loaded, the database's gate
    decides; where it says they loaded, it is believed (None: judged as any other)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    version, torch = str(r.get("version") or ""), str(r.get("torch") or "")
    spec = gates.get((str(r.get("package")), version))
    if spec is None or not torch or r.get("native") is True:
        return None
    public = torch.split("+", 1)[0]
    try:
        inside = SpecifierSet(spec).contains(Version(public), prereleases=True)
    except (InvalidSpecifier, ValueError):  # InvalidVersion, or digits past the limit
        return None
    if inside:  # skipped for a reason of its own, if at all: judged as any other
        return None
    return False, (
        f"{escaped(version)} loads its kernels only with torch {torch_words(spec)}: "
        f"this environment has {escaped(public)}"
    )


def _native_why(r: dict[str, Any]) -> str:
    """Why a package's compiled library did not load, in its own words, on one line: xformers'
    message runs over several lines and puts the mismatch ("PyTorch 2.10.0+cu128 with CUDA 1208
    (you have 2.11.0+cu130)") on the second, so that line is picked when there is one."""
    text = str(r.get("native_error") or "")[:2000]
    lines = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    built = [ln for ln in lines if "(you have " in ln and "PyTorch" in ln]
    sym = _SYMBOL.search(text)
    if sym:
        why = f"undefined symbol {sym.group(1)}"
    elif built:
        why = f"built for {built[0][built[0].index('PyTorch') :]}"
    else:
        why = lines[0] if lines else "its C++/CUDA library did not load"
    return escaped(why[:400])


def _one(r: dict[str, Any]) -> tuple[bool, str]:
    name = str(r.get("package"))
    version = escaped(str(r.get("version"))) if r.get("version") else "not installed"
    if r.get("timed_out"):
        return False, f"{version}: did not finish in {r['timed_out']:g} s"
    err = r.get("error")
    if r.get("native") is False:  # the cause: name it before whatever failed after it
        line = f"{version}: its compiled library did not load: {_native_why(r)}"
        if isinstance(err, dict):
            head = str(err.get("message") or "").strip().splitlines()[:1]
            said = escaped(head[0][:200]) if head else ""
            line += f"; then {escaped(str(r.get('op') or 'the operation'))[:200]} failed: "
            line += f"{escaped(str(err.get('type')))}: {said}"
        return False, line
    stage = r.get("stage")
    if isinstance(err, dict):
        message = str(err.get("message") or "")
        sym = _SYMBOL.search(message)
        first = message.splitlines()[0][:300] if message else ""
        what = (
            f"undefined symbol {sym.group(1)} (built for another torch than "
            f"{escaped(str(r.get('torch')))})"
            if sym
            else f"{escaped(str(err.get('type')))}: {escaped(first)}"
        )
        where = {
            "torch": "torch did not import",
            "import": "import failed",
            "op": "the operation failed",
        }
        return False, f"{version}: {where.get(str(stage), 'failed')}: {what}"
    if "stage" not in r:
        tail = escaped(str((r.get("stderr") or ["no output"])[-1])[:300])
        return False, f"the probe gave no result (exit {r.get('returncode')}): {tail}"
    err_val = r.get("max_rel_err")
    limit = TOLERANCE.get(name, DEFAULT_TOLERANCE)
    if not isinstance(err_val, (int, float)) or err_val > limit:
        return False, f"{version}: {r.get('op')} gave a wrong result (max rel. error {err_val})"
    return (
        True,
        f"{version}: {r.get('op')} ok (max rel. error {err_val:.1e}, {r.get('elapsed_s')} s)",
    )
