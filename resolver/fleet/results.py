"""What a fleet's nodes answered: `verify --json` files, folders of them, `kubectl logs` output.

Everything here comes back from machines gpuresolve does not control: each file is bounded (size,
count of documents), each value read is checked for its type and shown only escaped. A log may
hold other lines (the start-up check's, a shell's): only JSON documents with a ``verify`` key
count; a document is either one line (``kubectl logs --prefix`` puts ``[pod/NAME/CONTAINER] ``
before it) or the indented form `verify --json` prints. Results of earlier releases have no
``host.hostname``, ``host.node`` or ``group``: the file's name stands for the node then.

Files are read as a stream, one line at a time (a 100,000-node fleet is several files of
hundreds of MiB): what is kept of each result is the little a report compares, so memory grows
with the nodes, never with their documents. A node whose verify did not run or did not finish
is a result too, a failed one, saying what it left (an empty file, an ``{"error": ...}``
document, a document cut short, other lines): only what cannot be read at all (no such file, a
file over the cap, a fleet report given as a result) is bad input.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from resolver.core.errors import UserError, escaped, unsafe_char
from resolver.core.fields import dig
from resolver.io.bounded import open_regular

MAX_RESULT_FILE = 256 << 20  # `kubectl logs` of a large Job: ~30 KB a node, 8,000 nodes
MAX_FILES = 100_000
MAX_RESULTS = 100_000
MAX_DOCUMENT = 16 << 20  # one indented verify report: ~40 KB with its probe data
STATUSES = ("pass", "warn", "fail")
KEPT = ("speed", "multigpu")  # checks kept whatever their verdict: they measured what differs
_PREFIX = re.compile(r"^\[pod/([A-Za-z0-9][A-Za-z0-9.-]{0,252})/[A-Za-z0-9.-]{1,63}\] ")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_SUFFIXES = (".json", ".jsonl", ".log")  # in a folder: text reports (.txt) are not read


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    status: str
    reason: str


@dataclass(slots=True)
class Result:
    """One node's verify result, reduced to what a fleet report compares: its checks that did
    not pass (and those in ``KEPT``), never its whole document."""

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
    left: str | None = None  # no verify result: what the node left instead (a failed node)
    lock_torch: str | None = None  # the lock check's line on torch, wherever it listed it

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)


def result_files(paths: list[str], planned: bool = False) -> list[Path]:
    """The files under ``paths`` (files or folders, in the order given); bad input is exit 2.
    ``planned`` (a plan names the nodes): a folder no node has written to yet is no error,
    every node is then missing (a job that never started); without a plan it is."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p for p in path.iterdir() if p.suffix.lower() in _SUFFIXES and p.is_file()
            )
            if not found and not planned:
                raise UserError(f"{escaped(raw)}: no *.json, *.jsonl or *.log files in the folder")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise UserError(f"{escaped(raw)}: no such file or folder")
        if len(files) > MAX_FILES:
            raise UserError(f"more than {MAX_FILES} result files")
    return files


def read_results(paths: list[str]) -> Iterator[Result]:
    """Every verify result under ``paths``, one at a time (every path is checked first)."""
    return read_files(result_files(paths))


def read_files(files: list[Path]) -> Iterator[Result]:
    """Every verify result of ``files``, one at a time, counted against ``MAX_RESULTS``."""
    count = 0
    for path in files:
        for result in read_file(path):
            count += 1
            if count > MAX_RESULTS:
                raise UserError(f"more than {MAX_RESULTS} verify results")
            yield result


def read_file(path: Path) -> Iterator[Result]:
    """The verify results of one file, streamed; a file that holds none is one failed node."""
    shown = escaped(str(path))
    try:
        fh = open_regular(path, what="verify results")
    except FileNotFoundError:
        raise UserError(f"{shown}: no such file (expected verify results)") from None
    except OSError as exc:
        raise UserError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    with fh:
        size = _size(fh)
        if size > MAX_RESULT_FILE:
            raise UserError(
                f"{shown}: larger than {MAX_RESULT_FILE >> 20} MiB: split the results into "
                "several files (one per node, or per Job)"
            )
        pending: tuple[int, Result] | None = None
        several = False
        seen = _Seen()
        for line_no, pod, doc in _documents(fh, shown, seen):
            found = _judged(doc, pod)
            if pending is not None:
                several = True
                yield _at(pending, shown, True)
            pending = (line_no, found)
        if pending is not None:
            result = _at(pending, shown, several)
            if result.left and result.node is None and not several:
                result.node = _stem(path)  # results/NODE.json of a node that stopped
            yield result
        else:
            yield _left(path, shown, seen.said(size))


def _size(fh: IO[bytes]) -> int:
    return os.fstat(fh.fileno()).st_size


def _at(pending: tuple[int, Result], shown: str, several: bool) -> Result:
    line, result = pending
    result.file = f"{shown}:{line}" if several else shown
    return result


class _Seen:
    """What a file held besides verify results: said when it holds none."""

    def __init__(self) -> None:
        self.results = 0
        self.lines = 0
        self.last = ""
        self.cut = False  # a document began and did not end

    def said(self, size: int) -> str:
        if size == 0 or not self.lines:
            return "an empty file: verify did not run, or was stopped before it printed"
        if self.cut:
            return (
                f"a verify report cut short ({size} bytes, {self.lines} line(s)): verify did "
                "not finish"
            )
        last = self.last.strip()
        last = last if len(last) <= 120 else last[:119] + "…"
        return f"no verify result in {self.lines} line(s); the last: '{escaped(last)}'"


def _judged(doc: dict[str, Any], pod: str | None) -> Result:
    """A verify document's result; a damaged one, or an ``error`` document, a failed node."""
    if "verify" not in doc:
        err = doc.get("error")
        message = err.get("message") if isinstance(err, dict) else err
        said = _text(message, 240) or "no message"
        return _failed(pod, f"verify stopped with an error: {said}")
    try:
        return _result(doc, pod)
    except _Damaged as exc:
        return _failed(pod, f"a damaged verify result: {exc}")


class _Damaged(Exception):
    """A verify document whose version or status cannot be read."""


def _failed(node: str | None, left: str) -> Result:
    return Result("", "fail", node, None, "", dict.fromkeys(_FACTS), (), left=left)


def _left(path: Path, shown: str, left: str) -> Result:
    """The one failed node a file without any result stands for, named after the file (Slurm
    jobs write ``results/NODE.json``)."""
    found = _failed(_stem(path), left)
    found.file = shown
    return found


def _stem(path: Path) -> str | None:
    stem = path.name.rsplit(".", 1)[0] if "." in path.name else path.name
    return stem if _NAME.fullmatch(stem) else None


def _documents(fh: IO[bytes], shown: str, seen: _Seen) -> Iterator[tuple[int, str | None, Any]]:
    """(line number, pod from a kubectl prefix, document) of each verify or error document.

    A document is one line (after an optional ``[pod/NAME/CONTAINER] `` prefix), or the
    indented form `verify --json` prints: a ``{`` line, indented lines, a ``}`` line. An
    indented span is held until its ``}`` line (at most ``MAX_DOCUMENT``); when it proves not
    to be one (an unindented line, a decoding error, the end of the file), the lines after its
    ``{`` are read again one by one (none of them starts a span), so each line is read at most
    twice: linear in the file, whatever it holds."""
    decoder = json.JSONDecoder()
    line_no = 0
    span: list[str] = []
    start = size = 0
    again: list[tuple[int, str]] = []  # lines to read again, the next one last
    lines = _lines(fh)

    def reread(tail: list[tuple[int, str]]) -> None:
        again.extend(reversed([(start + i, ln) for i, ln in enumerate(span) if i] + tail))

    while True:
        if again:
            number, line = again.pop()
        else:
            got = next(lines, None)
            if got is None:
                if not span:
                    return
                seen.cut = True
                reread([])
                span = []
                continue
            line_no += 1
            number, line = line_no, got
            if not seen.results and not line.isspace():
                seen.lines += 1
                seen.last = line
        if span:
            if line.startswith("}"):
                try:
                    doc = decoder.decode("".join(span) + "}")
                except (ValueError, RecursionError):
                    doc = None
                if isinstance(doc, dict) and _wanted(doc, shown, start):
                    seen.results += 1
                    span = []
                    yield start, None, doc
                else:
                    reread([(number, line)])
                    span = []
                continue
            size += len(line)
            if line[:1] in (" ", "\t", "\r", "\n") and size <= MAX_DOCUMENT:
                span.append(line)
            else:
                reread([(number, line)])
                span = []
            continue
        if line[:1] == "{":
            if len(line) <= 3 and line.rstrip("\r\n") == "{":  # (no copy of a long line)
                span, start, size = ["{\n"], number, 2
                continue
            pod, body = None, line
        else:
            m = _PREFIX.match(line)
            pod, body = (m.group(1), line[m.end() :]) if m else (None, line)
            body = body.lstrip()
            if body[:1] != "{":
                continue
        try:
            doc, _ = decoder.raw_decode(body)
        except (ValueError, RecursionError):
            seen.cut = seen.cut or body.startswith('{"verify"')
            continue
        if isinstance(doc, dict) and _wanted(doc, shown, number):
            seen.results += 1
            yield number, pod, doc


def _wanted(doc: dict[str, Any], shown: str, line: int) -> bool:
    """A verify document, or the ``{"error": ...}`` one gpuresolve prints when it stops."""
    if "verify" in doc:
        return True
    if "fleet_report" in doc:
        raise UserError(f"{shown}:{line}: a fleet report, not a verify result")
    err = doc.get("error")
    return len(doc) == 1 and isinstance(err, dict) and "message" in err


def _lines(fh: IO[bytes]) -> Iterator[str]:
    """The file's lines as text (a BOM dropped, bytes that are not UTF-8 replaced: a node's
    garbage is what it left, not bad input), a line past ``MAX_DOCUMENT`` cut there."""
    first = True
    while True:
        raw = fh.readline(MAX_DOCUMENT + 1)
        if not raw:
            return
        if len(raw) > MAX_DOCUMENT and not raw.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
        first, text = False, raw.decode("utf-8-sig" if first else "utf-8", "replace")
        yield text  # with its newline: dropping it would copy every line


def _text(value: Any, limit: int = 300) -> str | None:
    if (
        type(value) is str
        and len(value) <= limit
        and value.isascii()
        and unsafe_char(value) is None
    ):
        return value  # the common case, and what escaping would return unchanged
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return None
    text = str(value)
    return escaped(text if len(text) <= limit else text[: limit - 1] + "…")


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


_FACTS = ("torch", "variant", "driver", "cuDNN", "NCCL")
_intern = sys.intern  # the same torch, driver, GPU and check names on every node: stored once


def _result(doc: dict[str, Any], pod: str | None) -> Result:
    version = doc.get("verify")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _Damaged(f"'verify' is {_text(str(version), 40)!r}, not a report version")
    status = doc.get("status")
    if status not in STATUSES:
        raise _Damaged(f"'status' is {_text(str(status), 40)!r}: expected pass, warn or fail")
    host: dict[str, Any] = doc["host"] if isinstance(doc.get("host"), dict) else {}
    node = _name(host.get("node")) or _name(host.get("hostname")) or pod
    group = doc.get("group")
    group = _intern(group) if isinstance(group, str) and _GROUP.fullmatch(group) else None
    checks = []
    lock_torch = None
    raw_checks = doc.get("checks")
    for c in raw_checks if type(raw_checks) is list else ():
        if type(c) is not dict:
            continue
        state = c.get("status")
        if state == "pass" or state == "skip":
            if state == "skip" or c.get("id") not in KEPT:
                continue
        elif state != "fail" and state != "warn":
            continue
        raw_id = c.get("id")
        cid = _intern(_text(raw_id, 40) or "?")
        checks.append(_check(cid, str(state), _text(c.get("reason")) or ""))
        if cid == "lock" and state == "fail":
            lock_torch = _torch_line(c)
    probe = doc.get("probe")
    probe = probe if type(probe) is dict else {}
    cudnn, nccl = probe.get("cudnn"), probe.get("nccl")
    facts = _facts(
        _fact(doc.get("torch"), 60),
        _fact(doc.get("variant"), 40),
        _fact(host.get("driver"), 40),
        _fact(cudnn.get("version_text"), 40) if type(cudnn) is dict else None,
        _fact(nccl.get("version_text"), 40) if type(nccl) is dict else None,
    )
    return Result(
        file="",
        status=_intern(str(status)),
        node=node,
        group=group,
        gpu=_intern(_gpus(host.get("gpus"))),
        facts=facts,
        checks=tuple(checks),
        speed=_speed(doc.get("benchmark")),
        nccl_busbw=_busbw(doc.get("nccl_check")),
        nccl_env=_nccl_env(doc.get("nccl_check")),
        lock_torch=lock_torch,
    )


# A fleet is a few builds on a few kinds of machine: results share their facts and their checks
# (never changed once read), so 100,000 nodes keep a few thousand of each, not 100,000.
_SHARED_MAX = 50_000
_SHARED_FACTS: dict[tuple[str | None, ...], dict[str, str | None]] = {}
_SHARED_CHECKS: dict[tuple[str, str, str], Check] = {}
_NO_ENV: dict[str, str] = {}


def _facts(*values: str | None) -> dict[str, str | None]:
    found = _SHARED_FACTS.get(values)
    if found is None:
        found = dict(zip(_FACTS, values, strict=True))
        if len(_SHARED_FACTS) < _SHARED_MAX:
            _SHARED_FACTS[values] = found
    return found


def _check(cid: str, status: str, reason: str) -> Check:
    key = (cid, status, reason)
    found = _SHARED_CHECKS.get(key)
    if found is None:
        found = Check(_intern(cid), _intern(status), reason)
        if len(_SHARED_CHECKS) < _SHARED_MAX:
            _SHARED_CHECKS[key] = found
    return found


def _fact(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = _text(value, limit)
    return None if text is None else _intern(text)


def _torch_line(check: dict[str, Any]) -> str | None:
    """What the lock check said of torch: from its details (every pin that differs, where it
    listed more than its reason shows), else from its reason."""
    lines = check.get("details")
    items = [d for d in lines if isinstance(d, str)] if isinstance(lines, list) else []
    found = next((i for i in items if i.startswith(("torch ", "pytorch "))), None)
    reason = check.get("reason")
    if found is None and isinstance(reason, str):
        m = _TORCH_PIN.search(reason)
        found = m.group(1) if m else None
    return _text(found, 200)


# one item of the lock check's reason: "torch X installed; the lock pins torch==Y" or "torch is
# not installed; the lock pins ...", items joined by "; "
_TORCH_PIN = re.compile(
    r"(?:^|; )((?:py)?torch [^;]{0,120}?(?:; the lock pins [^;]{1,120})?)(?:; |$)"
)


def _gpus(gpus: Any) -> str:
    if type(gpus) is list and len(gpus) == 1 and type(gpus[0]) is dict:  # most nodes
        return _text(gpus[0].get("name"), 80) or "unknown GPU"
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
    if type(bench) is not dict or bench.get("error"):
        return {}
    tables = [bench]
    gpus = bench.get("gpus")
    for g in gpus if type(gpus) is list else ():
        if type(g) is dict and type(g.get("figures")) is dict:
            tables.append(g["figures"])
    out: dict[str, float] = {}
    for table in tables:
        for case, r in table.items():
            if type(r) is not dict:
                continue
            tflops: Any = r.get("tflops")  # a number, by its exact type (a bool is none)
            if type(tflops) in _NUMBERS and 0 < tflops < 1e9 and (case in _CASES or _case(case)):
                prev = out.get(case)
                out[case] = float(tflops) if prev is None or tflops < prev else prev
    return out


_NUMBERS = (float, int)  # by exact type: a bool is no measurement
_CASES: set[str] = set()  # benchmark case names seen valid: every node has the same few


def _case(name: Any) -> bool:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return False
    if len(_CASES) < 1000:
        _CASES.add(name)
    return True


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
    if doc is None:
        return _NO_ENV
    ranks = dig(doc, "run", "ranks")
    env = dig(ranks[0], "result", "env") if isinstance(ranks, list) and ranks else None
    out: dict[str, str] = {}
    for key, value in (env if isinstance(env, dict) else {}).items():
        if isinstance(key, str) and key.startswith("NCCL_") and _NAME.fullmatch(key):
            text = _text(value, 60)
            if text is not None:
                out[key] = text
    return out
