"""The observations file: load (bounded, validated), merge, write atomically.

Two lists, in the format data/SCHEMA.md gives for ``observations.yaml``:

- ``observations:`` one entry per wheel read, named by file name and sha256 (the overlay the
  loader applies). Extra keys the loader ignores keep what was read: ``version``,
  ``git_version``, ``cuda``, ``arch_flags``, and ``contradicts`` (the curated values the wheel
  disagreed with when it was read).
- ``runtime:`` one entry per build ``gpuresolve verify`` saw running: torch's own
  ``__version__``, ``git_version``, ``get_arch_list()``, CUDA, cuDNN and NCCL, the platform and
  the Python. Machine-independent only: no host name, path, GPU or driver is ever written.

Every entry is validated key by key (unknown keys are refused), so an imported file cannot
carry anything else. Each change is written at once through a temporary file and a rename.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver import __version__
from resolver.core.errors import UserError
from resolver.core.platforms import PLATFORMS, PYTHON_RE
from resolver.db.yamlfile import dump_yaml
from resolver.io.atomic import atomic_write
from resolver.io.bounded import load_yaml, open_regular, read_optional_text
from resolver.io.filelock import locked, write_error

FILE = "observations.yaml"
MAX_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 20_000
HEADER = (
    "# gpuresolve observations: facts read from torch wheels (db inspect-wheel, db update\n"
    "# --read-wheels, suggest/lock --confirm) and from verified builds (verify). Format:\n"
    "# data/SCHEMA.md, observations.yaml. Written by gpuresolve; edits are kept if valid.\n"
)

_SHA = re.compile(r"^[0-9a-f]{64}$")
_GIT = re.compile(r"^[0-9a-f]{7,40}$")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_RELEASE = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$")
_VARIANT = re.compile(r"^(cpu|cu[0-9]{2,3}|rocm[0-9]{1,2}(\.[0-9]{1,2}){0,2}|xpu)$")
_CC = re.compile(r"^[0-9]{1,2}\.[0-9][af]?$")
_VERSION = re.compile(r"^[0-9]{1,4}(\.[0-9]{1,6}){0,4}$")
_TORCH_VERSION = re.compile(
    r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}([a-z0-9.]{0,20})?(\+[a-z0-9.]{1,30})?$"
)
_WHEEL = re.compile(
    r"^torch-[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(\+[a-z0-9.]{1,30})?(-[0-9][A-Za-z0-9_]{0,20})?-[A-Za-z0-9_.]{1,40}-"
    r"[A-Za-z0-9_.]{1,40}-[A-Za-z0-9_.]{1,80}\.whl$"
)
_ARCH_FLAGS = re.compile(
    r"^(?:(?:sm|compute)_[0-9]{2,3}[af]?)(?: (?:sm|compute)_[0-9]{2,3}[af]?){0,40}$"
)
_TOOL = re.compile(r"^[A-Za-z0-9 ._()/+-]{1,80}$")


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def tool_name(what: str) -> str:
    return f"gpuresolve {__version__} {what}"


# --- validation ------------------------------------------------------------------------------


def _text(pattern: re.Pattern[str], what: str) -> Callable[[Any, str], Any]:
    def check(value: Any, where: str) -> Any:
        if not isinstance(value, str) or not pattern.match(value):
            raise UserError(f"{where}: {what} expected, got {value!r:.80}")
        return value

    return check


def _optional(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def inner(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return inner


def _ccs(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or len(value) > 40:
        raise UserError(f'{where}: a list of compute capabilities ("8.6") expected')
    for item in value:
        if not isinstance(item, str) or not _CC.match(item):
            raise UserError(f'{where}: {item!r:.40} is not a compute capability such as "8.6"')
    return list(value)


def _one_of(choices: Iterable[str]) -> Callable[[Any, str], Any]:
    allowed = tuple(choices)

    def check(value: Any, where: str) -> Any:
        if value not in allowed:
            raise UserError(f"{where}: one of {', '.join(allowed)} expected, got {value!r:.40}")
        return value

    return check


def _contradicts(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > 20:
        raise UserError(f"{where}: a list of contradictions expected")
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"fact", "value", "source", "note"}:
            raise UserError(f"{where}: each contradiction is {{fact, value, source, note}}")
        fact = _one_of(("sass", "ptx", "cuda", "cudnn", "nccl", "variant", "build"))(
            item.get("fact"), where
        )
        val = item.get("value")
        if not isinstance(val, str) or len(val) > 200:
            raise UserError(f"{where}: a contradiction's value must be a short string")
        src = item.get("source", [])
        if not isinstance(src, list) or not all(
            isinstance(s, str) and re.match(r"^[A-Za-z0-9_.-]{1,60}$", s) for s in src
        ):
            raise UserError(f"{where}: a contradiction's source must list source keys")
        note = item.get("note")
        if note is not None and (not isinstance(note, str) or len(note) > 300):
            raise UserError(f"{where}: a contradiction's note must be a short string")
        pairs = (("fact", fact), ("value", val), ("source", src), ("note", note))
        out.append({k: v for k, v in pairs if v is not None})
    return out


_COMMON: dict[str, Callable[[Any, str], Any]] = {
    "torch": _text(_RELEASE, "a torch release such as 2.8.0"),
    "variant": _text(_VARIANT, "a variant such as cu128 or cpu"),
    "platform": _one_of(PLATFORMS),
    "version": _optional(_text(_TORCH_VERSION, "torch's __version__ such as 2.8.0+cu128")),
    "git_version": _optional(_text(_GIT, "a git commit id")),
    "cuda": _optional(_text(_VERSION, "a CUDA version such as 12.8")),
    "sass": _optional(_ccs),
    "ptx": _optional(_ccs),
    "cudnn": _optional(_text(_VERSION, "a cuDNN version")),
    "nccl": _optional(_text(_VERSION, "an NCCL version")),
    "tool": _optional(_text(_TOOL, "a tool name")),
    "contradicts": _optional(_contradicts),
}
WHEEL_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "wheel": _text(_WHEEL, "a torch wheel file name"),
    "sha256": _text(_SHA, "64 lower-case hex digits"),
    "read": _text(_DATE, "a date YYYY-MM-DD"),
    "arch_flags": _optional(_text(_ARCH_FLAGS, "the compiled-in arch string")),
    **_COMMON,
}
RUNTIME_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "seen": _text(_DATE, "a date YYYY-MM-DD"),
    "python": _optional(_text(PYTHON_RE, "a Python version such as 3.12")),
    **_COMMON,
}
WHEEL_REQUIRED = ("wheel", "sha256", "read", "torch", "variant", "platform")
RUNTIME_REQUIRED = ("seen", "torch", "version", "variant", "platform")
# the order keys are written in
WHEEL_ORDER = (
    *("wheel", "sha256", "read", "tool", "torch", "variant", "platform", "version"),
    *("git_version", "cuda", "sass", "ptx", "cudnn", "nccl", "arch_flags", "contradicts"),
)
RUNTIME_ORDER = (
    *("torch", "variant", "platform", "python", "version", "git_version", "cuda"),
    *("sass", "ptx", "cudnn", "nccl", "seen", "tool", "contradicts"),
)


def validate_entry(entry: Any, kind: str, where: str) -> dict[str, Any]:
    """One entry, checked key by key; the validated copy, keys in the written order."""
    keys, required, order = (
        (WHEEL_KEYS, WHEEL_REQUIRED, WHEEL_ORDER)
        if kind == "observations"
        else (RUNTIME_KEYS, RUNTIME_REQUIRED, RUNTIME_ORDER)
    )
    if not isinstance(entry, dict):
        raise UserError(f"{where}: expected a mapping")
    unknown = sorted(str(k) for k in entry if k not in keys)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)[:100]}")
    missing = [k for k in required if entry.get(k) is None]
    if missing:
        raise UserError(f"{where}: missing {', '.join(missing)}")
    checked = {k: keys[k](entry[k], f"{where} {k}") for k in entry}
    if kind == "observations":
        wheel = checked["wheel"]
        if not wheel.startswith(f"torch-{checked['torch']}"):
            raise UserError(f"{where}: wheel {wheel} is not torch {checked['torch']}")
    return {k: checked[k] for k in order if checked.get(k) is not None}


# --- the document ----------------------------------------------------------------------------


@dataclass
class Observations:
    """An observations document: wheels read and builds seen running."""

    wheels: list[dict[str, Any]] = field(default_factory=list)
    runtime: list[dict[str, Any]] = field(default_factory=list)

    def to_yaml(self) -> str:
        doc: dict[str, Any] = {"observations": self.wheels}
        if self.runtime:
            doc["runtime"] = self.runtime
        return HEADER + dump_yaml(doc)

    def observed_builds(self) -> set[tuple[str, str, str]]:
        """(torch, variant, platform) of every build whose arch list a wheel showed."""
        return {(e["torch"], e["variant"], e["platform"]) for e in self.wheels}

    def add(self, entry: dict[str, Any], kind: str) -> tuple[str, dict[str, Any] | None]:
        """Merge one validated entry: ("added" | "same" | "differs", the entry it met).

        Wheels are keyed by sha256 and build (the same bytes can only say the same thing: a
        difference means a reader changed, and both are kept for a person to judge); runtime by
        build (version, git_version, platform, python): a new date refreshes ``seen``.
        """
        items = self.wheels if kind == "observations" else self.runtime
        for i, old in enumerate(items):
            if _key(old, kind) != _key(entry, kind):
                continue
            if _facts(old) == _facts(entry):
                if kind == "runtime" and entry.get("seen", "") > old.get("seen", ""):
                    items[i] = {**old, "seen": entry["seen"]}
                return "same", old
            items.append(entry)
            return "differs", old
        items.append(entry)
        items.sort(key=lambda e: _sort_key(e, kind))
        return "added", None


def _key(entry: dict[str, Any], kind: str) -> tuple[Any, ...]:
    if kind == "observations":
        return (entry["sha256"], entry["torch"], entry["variant"], entry["platform"])
    return (entry["version"], entry.get("git_version"), entry["platform"], entry.get("python"))


def _facts(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        entry.get(k) for k in ("variant", "cuda", "sass", "ptx", "cudnn", "nccl", "version")
    )


def _sort_key(entry: dict[str, Any], kind: str) -> tuple[Any, ...]:
    release = tuple(int(p) for p in entry["torch"].split("."))
    return (release, entry["variant"], entry["platform"], entry.get("wheel") or "")


OBSERVATION_NODES = 500_000  # values after alias expansion: far above MAX_ENTRIES' worth


def parse(text: str, origin: str) -> Observations:
    """A validated document from YAML text; UserError naming ``origin`` and the entry."""
    # the shared bounded loader: no key given twice, nesting and alias expansion capped
    doc = load_yaml(text, origin, max_nodes=OBSERVATION_NODES)
    if doc is None:
        return Observations()
    if not isinstance(doc, dict) or set(doc) - {"observations", "runtime"}:
        raise UserError(f"{origin}: expected 'observations:' (and optionally 'runtime:') only")
    out = Observations()
    total = 0
    for kind, items in (("observations", out.wheels), ("runtime", out.runtime)):
        entries = doc.get(kind) or []
        if not isinstance(entries, list):
            raise UserError(f"{origin}: '{kind}' must be a list")
        total += len(entries)
        if total > MAX_ENTRIES:
            raise UserError(f"{origin}: more than {MAX_ENTRIES} entries")
        for i, entry in enumerate(entries):
            items.append(validate_entry(entry, kind, f"{origin}: {kind}[{i}]"))
    return out


def load(path: Path) -> Observations:
    """The file's observations; an absent file is an empty document."""
    text = read_optional_text(path, limit=MAX_BYTES, what="an observations file")
    return Observations() if text is None else parse(text, str(path))


def load_required(path: Path) -> Observations:
    """Like ``load``, but a missing file is an error (a file the user named)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return load(path)


def save(path: Path, doc: Observations) -> None:
    """Write atomically (a reader sees the old file or the new one); a file that already holds
    the same text is left as it is: every `verify` of a build seen today rewrote it, and the
    new time made the next command's catalog cache (keyed on it) a miss."""
    text = doc.to_yaml()
    if _holds(path, text):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    except OSError as exc:  # a full or read-only disk: the old file stands, no temporary left
        raise write_error(path, exc) from None


def _holds(path: Path, text: str) -> bool:
    """Whether the regular file at ``path`` holds exactly ``text`` (False when unreadable)."""
    data = text.encode()
    try:
        with open_regular(path) as fh:
            return fh.read(len(data) + 1) == data
    except (OSError, UserError):
        return False


def written_by_us(path: Path) -> bool:
    """Whether ``path`` is an observations file gpuresolve wrote (safe to replace)."""
    try:
        with open_regular(path) as fh:
            return fh.read(len(HEADER.encode())) == HEADER.encode()
    except (OSError, UserError):
        return False


def record(path: Path, entry: dict[str, Any], kind: str) -> tuple[str, dict[str, Any] | None]:
    """Validate ``entry``, merge it into the file at ``path`` and write it back atomically,
    under the lock of the folder holding it (the database folder: `db update` takes the same
    one), so that concurrent runs each add to what the last one wrote."""
    checked = validate_entry(entry, kind, f"{kind} entry")
    with locked(path.parent):
        doc = load(path)
        status, old = doc.add(checked, kind)
        if status != "same" or kind == "runtime":
            save(path, doc)
    return status, old
