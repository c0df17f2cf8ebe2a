"""The inputs a lock file was made from, recorded in the file itself.

Every generated file carries one machine-readable comment line (the last of its header)::

    # gpuresolve-inputs: {"database": "2026-11-22", "request": {...}, "sha256": "...", ...}

It holds the target (platform, Python, driver, GPUs, glibc), the request (torch specifier,
companions, CUDA pin, policy, evidence level, formats, index) and the database's version, so
`gpuresolve lock --check` re-resolves from the file alone, on any machine. ``sha256`` is the
digest of the file without that line: a file whose digest does not match was edited by hand
(drift), one that matches was written by gpuresolve and is judged on its pins (stale or current).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError, unsafe_char
from resolver.core.platforms import PYTHON_RE, Platform, PythonVersion
from resolver.core.versions import GLIBC_RE, Driver, parse_cc
from resolver.core.vocab import CondaSource, DriverPolicy, EvidenceLevel, LockFormat, words
from resolver.io import credentials
from resolver.io.bounded import parse_json
from resolver.solve import Target, TargetGpu

KEY = "gpuresolve-inputs:"
VERSION = 1
_MARKDOWN = (".md",)
MAX_LINE = 1024 * 1024  # a recorded line longer than this is not ours (GPUs are counted)
MAX_GPUS = 100_000  # per target, counted; more is not a machine
_DRIVER_OS = ("linux", "windows")
_PYPROJECT = "pyproject.toml"
MAX_PYPROJECT = 4 * 1024 * 1024  # a uv project's pyproject.toml, read whole


def _comment(name: str) -> tuple[str, str]:
    return ("<!-- ", " -->") if name.endswith(_MARKDOWN) else ("# ", "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pyproject(name: str) -> bool:
    """A uv project's pyproject.toml: the user's file, its record in [tool.gpuresolve]."""
    return name.rsplit("/", 1)[-1] == _PYPROJECT


_URL = re.compile(r"\b(?:https?|file)://[^\s\"'<>`\\]+")
LOGINS = "logins"  # the record's key: URL -> what the installer supplies (io.credentials.KINDS)


def _urls(text: str) -> list[str]:
    return [u.rstrip(".,;:)]}") for u in _URL.findall(text)]


def login_notes(urls: Mapping[str, str]) -> list[str]:
    """How the installer gets each login a file does not hold (``urls``: prefix -> kind)."""
    notes = []
    for url, kind in urls.items():
        if kind == credentials.TOKEN:
            notes.append(
                f"login: the channel {url} is written without its token: conda adds it after "
                "`anaconda login`, or name the channel with its /t/<token>/ in .condarc"
            )
        elif kind == credentials.VARIABLES:
            notes.append(
                f"login: {url} names ${{VARIABLES}}: pip fills them from the environment when "
                "it installs (uv: UV_INDEX_<NAME>_USERNAME and _PASSWORD, or netrc)"
            )
        else:
            notes.append(
                f"login: {url} is written without its login: pip takes it from netrc or keyring, "
                "or from ${VARIABLES} written in the URL (https://${USER}:${TOKEN}@host/...); "
                "uv from netrc or UV_INDEX_<NAME>_USERNAME and _PASSWORD"
            )
    return notes


def _with_logins(name: str, text: str, inputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The text with a note for each URL in it whose login it does not hold, and the record
    with every such URL of the lock (``--check`` marks them again: the same notes)."""
    if not credentials.any_private():  # no login given or recorded: nothing to say
        return text, dict(inputs)
    logins = credentials.private_of([*_urls(text), *_urls(json.dumps(dict(inputs)))])
    if not logins:
        return text, dict(inputs)
    record = {**inputs, LOGINS: logins}
    here = credentials.private_of(_urls(text))
    if not here or _pyproject(name):
        return text, record
    start, end = _comment(name)
    block = "".join(f"{start}{note}{end}\n" for note in login_notes(here))
    lines = text.splitlines(keepends=True)
    if name.endswith(_MARKDOWN) or not lines:
        return text + ("" if text.endswith("\n") or not text else "\n") + block, record
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    return "".join(lines[:n]) + block + "".join(lines[n:]), record


def stamp(name: str, text: str, inputs: Mapping[str, Any]) -> str:
    """``text`` with the inputs line closing its leading comment block (ending a Markdown file;
    in a pyproject.toml, the ``[tool.gpuresolve]`` table). A URL whose login the file does not
    hold gets a note saying how the installer gets it, and the record names it."""
    text, inputs = _with_logins(name, text, inputs)
    if _pyproject(name):
        from resolver.writers.formats.uvproject import stamp_inputs

        record = {**inputs, "v": VERSION, "sha256": _digest("\n".join(_managed(text) or []))}
        if len(json.dumps(record)) > MAX_LINE:
            raise UserError(f"{name}: the recorded inputs would exceed {MAX_LINE} bytes")
        return stamp_inputs(text, record)
    record = {**inputs, "v": VERSION, "sha256": _digest(text)}
    start, end = _comment(name)
    line = f"{start}{KEY} {json.dumps(record, sort_keys=True, separators=(',', ':'))}{end}"
    if len(line) > MAX_LINE:  # what `--check` could not read back is never written
        raise UserError(f"{name}: the recorded inputs would exceed {MAX_LINE} bytes")
    lines = text.splitlines(keepends=True)
    if name.endswith(_MARKDOWN) or not lines:
        return text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    return "".join(lines[:n]) + line + "\n" + "".join(lines[n:])


def _split(name: str, text: str) -> tuple[str, dict[str, Any]] | None:
    """(the text without the inputs line, the record), or None when there is none."""
    start, end = _comment(name)
    prefix = f"{start}{KEY} "
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if body.startswith(prefix) and body.endswith(end) and len(body) <= MAX_LINE:
            raw = body[len(prefix) : len(body) - len(end)] if end else body[len(prefix) :]
            try:
                record = parse_json(raw, name, what="a record of inputs")
            except UserError:  # not one of ours: as if there were none
                return None
            if not isinstance(record, dict):
                return None
            return "".join(lines[:i] + lines[i + 1 :]), record
    return None


def read(name: str, text: str) -> dict[str, Any] | None:
    """The recorded inputs of a file's text (None: none recorded, or unreadable). The URLs it
    names as needing a login the installer supplies are marked so (``io.credentials``), so the
    files re-rendered from it carry the same notes whoever runs `--check`."""
    if _pyproject(name):
        from resolver.writers.formats.uvproject import read_inputs

        record = read_inputs(text) if len(text) <= MAX_PYPROJECT else None
        if record is None or len(json.dumps(record)) > MAX_LINE:
            return None
    else:
        found = _split(name, text)
        if not found:
            return None
        record = found[1]
    credentials.mark(record.get(LOGINS))
    return record


def intact(name: str, text: str) -> bool:
    """Whether the file is as gpuresolve wrote it (its recorded digest matches its text; in a
    pyproject.toml, the entries gpuresolve manages)."""
    if _pyproject(name):
        record, managed = read(name, text), _managed(text)
        if record is None or managed is None:
            return False
        return record.get("sha256") == _digest("\n".join(managed))
    found = _split(name, text)
    if found is None:
        return False
    rest, record = found
    return record.get("sha256") == _digest(rest)


# Lines that only say which gpuresolve and database wrote the file: report.md shows its
# provenance as text ("Generated by gpuresolve from the compatibility database of ..."), but a
# newer database date alone changes nothing a reader acts on.
_PROVENANCE = ("#", "<!--", "Generated by gpuresolve ")


def payload(text: str, name: str = "") -> list[str]:
    """The lines that are not comments or provenance: what an installer or a reader acts on
    (pins, indexes, hashes, the report's decisions; in a pyproject.toml, the managed entries)."""
    if _pyproject(name):
        return _managed(text) or []
    return [
        ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(_PROVENANCE)
    ]


def _managed(text: str) -> list[str] | None:
    from resolver.writers.formats.uvproject import managed_lines

    return managed_lines(text) if len(text) <= MAX_PYPROJECT else None


# --- targets as JSON -----------------------------------------------------------------------


def target_record(target: Target, glibc: str | None) -> dict[str, Any]:
    """The target as the lock saw it (no label: the same machine under another name locks alike)."""
    return {
        "platform": str(target.platform),
        "python": str(target.python),
        "driver": None if target.driver is None else str(target.driver),
        "driver_os": target.driver_os,
        "gpus": [  # a run of the same GPU is one entry with its count (6,000 GPUs fit a line)
            {
                "cc": f"{g.cc[0]}.{g.cc[1]}",
                **({"name": g.name} if g.name else {}),
                **({"count": n} if n > 1 else {}),
            }
            for g, n in ((g, len(list(run))) for g, run in itertools.groupby(target.gpus))
        ],
        "nvidia": target.nvidia,
        "unknown_gpus": list(target.unknown_gpus),
        "glibc": glibc,
    }


def target_from_record(record: Mapping[str, Any], where: str) -> tuple[Target, str | None]:
    """The recorded target and glibc; a damaged record is one clear error."""
    try:
        gpus: list[TargetGpu] = []
        for g in record.get("gpus") or []:
            count = g.get("count", 1)
            if type(count) is not int or not 1 <= count <= MAX_GPUS - len(gpus):
                raise ValueError(count)
            name = _text(g["name"]) if g.get("name") else None
            gpus.extend([TargetGpu(parse_cc(_text(g["cc"])), name)] * count)
        # the grammar `lock --driver` accepted: every value written reads back
        driver = Driver.parse(_text(record["driver"])) if record.get("driver") else None
        python = _text(record["python"])
        if not PYTHON_RE.match(python):
            raise ValueError(python)
        target = Target(
            platform=Platform.parse(_text(record["platform"])),
            python=PythonVersion.parse(python),
            driver=driver,
            driver_os=_text(record.get("driver_os") or "linux"),
            gpus=tuple(gpus),
            nvidia=bool(record.get("nvidia")),
            unknown_gpus=tuple(_text(u) for u in record.get("unknown_gpus") or ()),
        )
        if target.driver_os not in _DRIVER_OS:
            raise ValueError(target.driver_os)
        glibc = record.get("glibc")
        if glibc is not None and not GLIBC_RE.match(str(glibc)):
            raise ValueError(glibc)
    except (KeyError, TypeError, ValueError, AttributeError, UserError):
        raise UserError(
            f"{where}: the recorded target is damaged; rerun `gpuresolve lock`"
        ) from None
    return target, str(glibc) if glibc else None


def _text(value: Any) -> str:
    """A recorded string as an option would take it: a short string, no control or bidi
    character (they would reach the terminal and the files another tool reads)."""
    if not isinstance(value, str) or len(value) > 200:
        raise ValueError("not a short string")
    if unsafe_char(value) is not None:
        raise ValueError("a control character")
    return value


def lock_group(path: str | Path) -> str | None:
    """The ``group`` a lock file records among its inputs (a team lock writes it: the set's
    name, with its platform folder when it has several); None for an unreadable file or one
    that records none (an older lock, a single-machine lock)."""
    from resolver.io.bounded import LOCK_LIMIT, read_text

    p = Path(path)
    try:
        text = read_text(p, limit=LOCK_LIMIT, what="a lock file")
    except UserError:
        return None
    group = (read(p.name, text) or {}).get("group")
    return group if isinstance(group, str) else None


# --- the lock's inputs: one model, one JSON form ---------------------------------------------

# a request's fields as the options name them -> a team record's keys (the spec's words)
_TEAM_REQUEST = {"torch_spec": "torch", "with_": "with", "pip": "pip", "evidence": "evidence"}
_FLAGS = {
    "with_": "--with",
    "torch_spec": "--torch",
    "env_name": "--name",
    "formats": "--format",
    "gpus": "--gpu",
    "host_file": "--host",
}


def flag(name: str) -> str:
    """The option that sets a recorded field (``with_`` -> ``--with``)."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


@dataclass(frozen=True)
class LockRequest:
    """The request as given: one machine's options, or a team spec's packages (``pip``)."""

    torch_spec: str | None = None
    with_: tuple[str, ...] = ()
    cuda: str | None = None
    driver_policy: str = "compat"
    allow_unconfirmed: bool = False
    evidence: str = "documented"
    pytorch_index: str | None = None
    pip: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileOptions:
    """lock's own options for the files, as given (``formats`` in the order given)."""

    formats: tuple[str, ...] = (LockFormat.REQUIREMENTS.value,)
    hashes: bool | None = None
    top_level: bool = False
    conda_source: str = "pip"
    channel: str | None = None
    env_name: str | None = None
    default_index: str | None = None


_SINGLE_REQUEST = tuple(f.name for f in fields(LockRequest) if f.name != "pip")
FILE_KEYS = tuple(f.name for f in fields(FileOptions))


@dataclass(frozen=True)
class LockInputs:
    """What a lock was made from, as every file of it records it (``to_json``) and `--check`
    reads it back (``from_json``, older forms included): one machine's (the target, the request
    as given, the file options) or a team's (the spec, its split, the group a file belongs to;
    report.md adds the spec's Python and its targets), and the database's version.

    ``present`` names the request and file fields a record held (``request.cuda``): a field an
    older gpuresolve did not record is taken from the command line, not from a default."""

    request: LockRequest | None = None
    files: FileOptions | None = None
    target: Target | None = None
    glibc: str | None = None
    database: str | None = None
    spec: str | None = None  # a team lock: the spec file's name
    split: str | None = None
    group: str | None = None
    python: str | None = None  # report.md: the spec's Python
    targets: Mapping[str, Any] | None = None  # report.md: every member, or their digests
    present: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """The record every file carries (``stamp`` adds its version and digest)."""
        out: dict[str, Any] = {"database": self.database}
        if self.target is not None:
            out["target"] = target_record(self.target, self.glibc)
        r, f = self.request, self.files
        if self.spec is not None:
            out["spec"], out["split"] = self.spec, self.split
        if r is not None and self.spec is None:
            out["request"] = {n: _plain(getattr(r, n)) for n in _SINGLE_REQUEST}
        elif r is not None:
            out["request"] = {v: _plain(getattr(r, k)) for k, v in _TEAM_REQUEST.items()}
        if f is not None:
            files = {n: _plain(getattr(f, n)) for n in FILE_KEYS}
            if self.spec is not None:  # a team's: the formats sorted, its mirror among them
                del files["env_name"]
                files["formats"] = sorted(f.formats)
                files["pytorch_index"] = r.pytorch_index if r is not None else None
            out["files"] = files
        if self.group is not None:
            out["group"] = self.group
        if self.python is not None:
            out["python"] = self.python
        if self.targets is not None:
            out["targets"] = dict(self.targets)
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any], where: str) -> LockInputs:
        """The inputs a file records, each value checked as its option checks it (a record is
        input like any other: an edited requirements.txt whose record carries an
        ``--extra-index-url`` line in ``pytorch_index`` must not re-derive as "current").
        Older forms: a record without ``top_level`` meant top-level pins where it had no
        hashes; a field not recorded is absent from ``present``."""
        team = isinstance(record.get("spec"), str)
        raw_request = record.get("request")
        raw_files = record.get("files")
        present: set[str] = set()
        request = files = None
        if isinstance(raw_request, dict):
            keys = _TEAM_REQUEST if team else {n: n for n in _SINGLE_REQUEST}
            values = {k: raw_request[v] for k, v in keys.items() if v in raw_request}
            if team and isinstance(raw_files, dict) and "pytorch_index" in raw_files:
                values["pytorch_index"] = raw_files["pytorch_index"]
            present |= {f"request.{k}" for k in values}
            request = LockRequest(**{k: _checked(where, k, v) for k, v in values.items()})
        if isinstance(raw_files, dict):
            given = {k: raw_files[k] for k in FILE_KEYS if k in raw_files}
            if not team and "top_level" not in given and "hashes" in given:
                # recorded before full locks were the default: no hashes meant top-level pins
                given["top_level"] = given["hashes"] is False
            present |= {f"files.{k}" for k in given}
            files = FileOptions(**{k: _checked(where, k, v) for k, v in given.items()})
        target, glibc = None, None
        if isinstance(record.get("target"), dict):
            target, glibc = target_from_record(record["target"], where)
        group, python = record.get("group"), record.get("python")
        targets = record.get("targets")
        return cls(
            request,
            files,
            target,
            glibc,
            _opt_text(record.get("database")),
            str(record["spec"]) if team else None,
            _opt_text(record.get("split")),
            group if isinstance(group, str) else None,
            python if isinstance(python, str) else None,
            targets if isinstance(targets, dict) else None,
            frozenset(present),
        )

    def knows(self, part: str, name: str) -> bool:
        """Whether the record held ``part.name`` (``request.cuda``, ``files.formats``)."""
        return f"{part}.{name}" in self.present


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _opt_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_BOOLS = {"allow_unconfirmed", "top_level"}
_CHOICES = {
    "driver_policy": words(DriverPolicy),
    "evidence": words(EvidenceLevel),
    "conda_source": words(CondaSource),
}


def _checked(where: str, name: str, value: Any) -> Any:
    """A recorded value as its option takes it (type, choices, the URL and channel checks), with
    no control or bidi character; one line when not."""
    from resolver.io.urls import channel, index_url

    def refuse(detail: str | None = None) -> UserError:
        if detail is None:
            return UserError(
                f"{where}: the recorded {flag(name)} is not one the option takes; rerun "
                "`gpuresolve lock` (or restore the file from version control)"
            )
        return UserError(
            f"{where}: the recorded {flag(name)} is not valid ({' '.join(detail.split())[:160]});"
            " rerun `gpuresolve lock` (or restore the file from version control)"
        )

    if name in _BOOLS or name == "hashes":
        if isinstance(value, bool) or (value is None and name == "hashes"):
            return value
        raise refuse()
    many = name in ("with_", "pip", "formats")
    if value is None and not many:
        return None
    items = value if many and isinstance(value, list) else [value]
    if (many and not isinstance(value, list)) or not all(
        isinstance(v, str) and unsafe_char(v) is None for v in items
    ):
        raise refuse()
    choices = _CHOICES.get(name)
    if name == "formats":  # the registered formats, read when asked
        from resolver.writers import lockformats

        choices = lockformats.choices()
    for v in items:
        if choices is not None and v not in choices:
            raise refuse(f"{v!r} is not one of {', '.join(map(repr, choices))}")
    if name == "formats" and not items:
        raise refuse("no format")
    try:
        if name in ("pytorch_index", "default_index"):
            return index_url(value, flag(name))
        if name == "channel":
            return channel(value, flag(name))
    except UserError as exc:
        raise refuse(str(exc)) from None
    return tuple(items) if many else value
