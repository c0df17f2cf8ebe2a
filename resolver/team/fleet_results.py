"""What a fleet's nodes answered: `verify --json` files, folders of them, `kubectl logs` output.

Everything here comes back from machines gpuresolve does not control: each file is bounded (size,
count of documents), each value read is checked for its type and shown only escaped. A log may
hold other lines (the start-up check's, a shell's): only JSON documents with a ``verify`` key
count; a document is either one line (``kubectl logs --prefix`` puts ``[pod/NAME/CONTAINER] ``
before it) or the indented form `verify --json` prints. Results of earlier releases have no
``host.hostname``, ``host.node`` or ``group``: the file's name stands for the node then.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError, escaped
from resolver.io.bounded import read_text

MAX_RESULT_FILE = 256 << 20  # `kubectl logs` of a large Job: ~30 KB a node, 8,000 nodes
MAX_FILES = 100_000
MAX_RESULTS = 100_000
MAX_DOCUMENT = 16 << 20  # one indented verify report: ~40 KB with its probe data
STATUSES = ("pass", "warn", "fail")
_PREFIX = re.compile(r"^\[pod/([A-Za-z0-9][A-Za-z0-9.-]{0,252})/[A-Za-z0-9.-]{1,63}\] ")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_UNINDENTED = re.compile(r"\n(?=[^ \t\r\n])")  # a line that starts in column 0
_SUFFIXES = (".json", ".jsonl", ".log")  # in a folder: text reports (.txt) are not read


@dataclass(frozen=True)
class Check:
    id: str
    status: str
    reason: str


@dataclass
class Result:
    """One node's verify result, reduced to what a fleet report compares."""

    file: str  # the file (and line, for a file of several documents) it came from
    status: str
    node: str | None  # host.node, else host.hostname, else None (the file names it)
    group: str | None
    gpu: str  # "NVIDIA H100 80GB HBM3" or "2x NVIDIA H200"; "" for no GPU seen
    facts: dict[str, str | None]  # torch, variant, driver, cuDNN, NCCL
    checks: tuple[Check, ...]
    speed: dict[str, float] = field(default_factory=dict)  # benchmark case -> TFLOP/s
    nccl_busbw: float | None = None  # the best all-reduce bus bandwidth, GB/s
    nccl_env: dict[str, str] = field(default_factory=dict)  # NCCL_* set in its NCCL workers

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)


def read_results(paths: list[str]) -> list[Result]:
    """Every verify result under ``paths`` (files or folders, in the order given)."""
    return read_files(result_files(paths))


def result_files(paths: list[str]) -> list[Path]:
    """The files ``read_results`` reads: each file given, each result file of a folder."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p for p in path.iterdir() if p.suffix.lower() in _SUFFIXES and p.is_file()
            )
            if not found:
                raise UserError(f"{raw}: no *.json, *.jsonl or *.log files in the folder")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise UserError(f"{raw}: no such file or folder")
        if len(files) > MAX_FILES:
            raise UserError(f"more than {MAX_FILES} result files")
    return files


def read_files(files: list[Path]) -> list[Result]:
    """The verify results of ``files``, in order."""
    out: list[Result] = []
    for path in files:
        out.extend(read_file(path))
        if len(out) > MAX_RESULTS:
            raise UserError(f"more than {MAX_RESULTS} verify results")
    return out


def read_file(path: Path) -> list[Result]:
    """The verify results of one file; a file that holds none is bad input."""
    text = read_text(path, limit=MAX_RESULT_FILE, what="verify results")
    shown = escaped(str(path))
    docs = list(_documents(text, shown))
    if not docs:
        raise UserError(
            f"{shown}: no `gpuresolve verify --json` result in it (a JSON object with a "
            "'verify' key)"
        )
    several = len(docs) > 1
    results = []
    for line, pod, doc in docs:
        where = f"{shown}:{line}" if several else shown
        results.append(_result(doc, where, pod))
    return results


def _documents(text: str, shown: str) -> Any:
    """(line number, pod from a kubectl prefix, document) of each verify document in ``text``.

    A document is one line (after an optional ``[pod/NAME/CONTAINER] `` prefix), or the
    indented form `verify --json` prints: a ``{`` line, indented lines, a ``}`` line. Each
    candidate is decoded on its own span, and spans do not overlap (an indented span holds no
    ``{`` line of its own): linear in the file, whatever it holds."""
    decoder = json.JSONDecoder()
    pos, line_no, close = 0, 1, -1
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        m = _PREFIX.match(line)
        body = line[m.end() :] if m else line
        doc, stop = None, end
        if not m and line.rstrip("\r") == "{":
            if close < end:  # the next `}` line, found once for all the `{` lines before it
                close = text.find("\n}", end)
                close = len(text) + MAX_DOCUMENT + 1 if close < 0 else close
            if close - pos <= MAX_DOCUMENT and not _UNINDENTED.search(text, end, close):
                try:
                    doc, size = decoder.raw_decode(text[pos : close + 2])
                    stop = pos + size
                except (ValueError, RecursionError):
                    doc = None
        elif body.lstrip().startswith("{"):
            try:
                doc, _ = decoder.raw_decode(body, len(body) - len(body.lstrip()))
            except (ValueError, RecursionError):
                doc = None
        if isinstance(doc, dict) and "verify" in doc:
            yield line_no, m.group(1) if m else None, doc
        elif isinstance(doc, dict) and "fleet_report" in doc:
            raise UserError(f"{shown}:{line_no}: a fleet report, not a verify result")
        else:
            stop = end
        next_nl = text.find("\n", stop)
        if next_nl < 0:
            break
        line_no += text.count("\n", pos, next_nl) + 1
        pos = next_nl + 1


def _text(value: Any, limit: int = 300) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return None
    text = str(value)
    return escaped(text if len(text) <= limit else text[: limit - 1] + "…")


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def _result(doc: dict[str, Any], where: str, pod: str | None) -> Result:
    version = doc.get("verify")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"{where}: 'verify' is {version!r}, not a report version")
    status = doc.get("status")
    if status not in STATUSES:
        raise UserError(f"{where}: 'status' is {_text(status)!r}: expected pass, warn or fail")
    host: dict[str, Any] = doc["host"] if isinstance(doc.get("host"), dict) else {}
    node = _name(host.get("node")) or _name(host.get("hostname")) or pod
    group = doc.get("group")
    group = group if isinstance(group, str) and _GROUP.fullmatch(group) else None
    checks = []
    raw_checks = doc.get("checks")
    for c in raw_checks if isinstance(raw_checks, list) else []:
        if isinstance(c, dict) and c.get("status") in (*STATUSES, "skip"):
            checks.append(
                Check(_text(c.get("id"), 40) or "?", str(c["status"]), _text(c.get("reason")) or "")
            )
    probe: dict[str, Any] = doc["probe"] if isinstance(doc.get("probe"), dict) else {}
    facts = {
        "torch": _text(doc.get("torch"), 60),
        "variant": _text(doc.get("variant"), 40),
        "driver": _text(host.get("driver"), 40),
        "cuDNN": _text(_get(probe, "cudnn", "version_text"), 40),
        "NCCL": _text(_get(probe, "nccl", "version_text"), 40),
    }
    return Result(
        file=where,
        status=str(status),
        node=node,
        group=group,
        gpu=_gpus(host.get("gpus")),
        facts=facts,
        checks=tuple(checks),
        speed=_speed(doc.get("benchmark")),
        nccl_busbw=_busbw(doc.get("nccl_check")),
        nccl_env=_nccl_env(doc.get("nccl_check")),
    )


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _gpus(gpus: Any) -> str:
    names = [
        _text(g.get("name"), 80) or "unknown GPU"
        for g in (gpus if isinstance(gpus, list) else [])
        if isinstance(g, dict)
    ]
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{c}x {n}" if c > 1 else n for n, c in sorted(counts.items()))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < 1e9 else None


def _speed(bench: Any) -> dict[str, float]:
    """TFLOP/s of each benchmark case on the node's slowest GPU: the top-level figures (one
    GPU) and, where verify measured every GPU (``benchmark.gpus``), each GPU's ``figures``."""
    if not isinstance(bench, dict) or bench.get("error"):
        return {}
    tables = [bench]
    gpus = bench.get("gpus")
    for g in gpus if isinstance(gpus, list) else []:
        if isinstance(g, dict) and isinstance(g.get("figures"), dict):
            tables.append(g["figures"])
    out: dict[str, float] = {}
    for table in tables:
        for case, r in table.items():
            tflops = _number(r.get("tflops")) if isinstance(r, dict) else None
            if tflops is not None and isinstance(case, str) and _NAME.fullmatch(case):
                out[case] = min(out.get(case, tflops), tflops)
    return out


def _busbw(doc: Any) -> float | None:
    """The best all-reduce bus bandwidth NCCL reached (GB/s), None without a multi-GPU run."""
    rows = doc.get("bandwidth") if isinstance(doc, dict) else None
    best = [
        _number(r.get("busbw"))
        for r in (rows if isinstance(rows, list) else [])
        if isinstance(r, dict) and r.get("op") == "all_reduce"
    ]
    found = [b for b in best if b is not None]
    return max(found) if found else None


def _nccl_env(doc: Any) -> dict[str, str]:
    """The NCCL_* variables set in the first NCCL worker (verify records what changes NCCL)."""
    ranks = _get(doc, "run", "ranks")
    env = _get(ranks[0], "result", "env") if isinstance(ranks, list) and ranks else None
    out: dict[str, str] = {}
    for key, value in (env if isinstance(env, dict) else {}).items():
        if isinstance(key, str) and key.startswith("NCCL_") and _NAME.fullmatch(key):
            text = _text(value, 60)
            if text is not None:
                out[key] = text
    return out
