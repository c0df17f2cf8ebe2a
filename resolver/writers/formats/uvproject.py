"""`--format uv`: the torch set in a uv project's pyproject.toml, edited in place.

uv installs PyTorch's CUDA builds from an explicit index per variant, mapped to torch (and its
companions) in ``[tool.uv.sources]``, with platform markers when a fleet mixes platforms. This
writer manages exactly three things and keeps every other byte of an existing file (comments,
formatting, other tables) through tomlkit, a round-trip TOML library:

- ``[[tool.uv.index]]`` entries named ``pytorch-<variant>`` (``explicit = true``);
- ``[tool.uv.sources]`` entries for torch, torchvision and torchaudio;
- their pins in ``[project].dependencies`` (other dependencies are left as they are);

and records its inputs in ``[tool.gpuresolve]`` (``inputs``: the JSON record every other lock
file carries in its ``# gpuresolve-inputs:`` line). The record's ``sha256`` covers only the
managed entries, so a user's own edits elsewhere are no drift, while a hand edit of the torch
pin (or its index, or its source) is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from resolver.core import secrets
from resolver.core.errors import UserError
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.vocab import LockFormat
from resolver.writers.formats.unit import LockFormatUnit, TeamWrite

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.solve import Decision
    from resolver.writers.formats.unit import Options, RenderContext, TeamContext

NAME = "pyproject.toml"
MANAGED = ("torch", "torchvision", "torchaudio")
INDEX_PREFIX = "pytorch-"
TOOL = "gpuresolve"  # [tool.gpuresolve]: the recorded inputs
_PROJECT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PlatformSet:
    """One platform's pins, and the PyTorch index they come from (None: the default index)."""

    platform: Platform
    pins: tuple[tuple[str, str], ...]  # (name, version) as the index has it
    variant: str
    index_url: str | None


def _marker(platform: Platform, several: bool) -> str | None:
    return platform.marker if several else None


def _managed_name(item: str) -> str | None:
    try:
        name = str(canonicalize_name(Requirement(item).name))
    except InvalidRequirement:
        return None
    return name if name in MANAGED else None


def _new_document(name: str, python: PythonVersion) -> Any:
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment("Written by `gpuresolve lock --format uv`; edit freely: gpuresolve"))
    doc.add(tomlkit.comment("manages only the torch pins, their [tool.uv.sources] and indexes."))
    project = tomlkit.table()
    project.add("name", _PROJECT_NAME.sub("-", name).strip("-._") or "environment")
    project.add("version", "0.1.0")
    project.add("requires-python", f">={python.plain}")
    deps = tomlkit.array()
    deps.multiline(True)
    project.add("dependencies", deps)
    doc.add("project", project)
    return doc


def render_pyproject(
    existing: str | None,
    sets: Sequence[PlatformSet],
    *,
    name: str,
    python: PythonVersion,
    extra_requirements: Sequence[str] = (),
) -> str:
    """The pyproject.toml text: ``existing`` with the managed entries added or replaced.

    ``extra_requirements`` (a team spec's other packages) are added to the dependencies when
    no dependency of that name is there yet; gpuresolve never rewrites a user's own entry.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(existing) if existing is not None else _new_document(name, python)
    except TOMLKitError as exc:
        raise UserError(f"pyproject.toml: not valid TOML ({exc}); fix it or move it away") from None
    several = len({s.platform for s in sets}) > 1
    project = doc.get("project")
    if project is None:
        project = tomlkit.table()
        doc.add("project", project)
    if not isinstance(project, dict):
        raise UserError("pyproject.toml: [project] is not a table")
    deps = project.get("dependencies")
    if deps is None:
        deps = tomlkit.array()
        project["dependencies"] = deps
    if not isinstance(deps, list):
        raise UserError("pyproject.toml: [project].dependencies is not a list")

    wanted: list[str] = []
    for s in sets:
        marker = _marker(s.platform, several)
        for pkg, version in s.pins:
            wanted.append(f"{pkg}=={version}" + (f"; {marker}" if marker else ""))
    current = [str(d) for d in deps if _managed_name(str(d))]
    if current != wanted:
        positions = [i for i, d in enumerate(deps) if _managed_name(str(d))]
        at = positions[0] if positions else len(deps)
        for i in reversed(positions):
            del deps[i]
        for offset, item in enumerate(wanted):
            deps.insert(at + offset, item)
    present = {_name(str(d)) for d in deps}
    for item in extra_requirements:
        if _name(item) not in present:
            deps.append(item)
            present.add(_name(item))

    tool = _table(doc, "tool", super_table=True)
    uv = _table(tool, "uv", super_table=True)
    _set_indexes(uv, sets, blank_line=existing is not None)
    _set_sources(uv, sets, several)
    return tomlkit.dumps(doc)


def _name(item: str) -> str:
    try:
        return str(canonicalize_name(Requirement(item).name))
    except InvalidRequirement:
        return item.strip().lower()


def _table(parent: Any, key: str, super_table: bool = False) -> Any:
    import tomlkit

    if key not in parent:
        parent.add(key, tomlkit.table(is_super_table=super_table))
    value = parent[key]
    if not isinstance(value, dict):
        raise UserError(f"pyproject.toml: [{key}] is not a table")
    return value


def _index_name(variant: str) -> str:
    return f"{INDEX_PREFIX}{variant}"


def _set_indexes(uv: Any, sets: Sequence[PlatformSet], blank_line: bool) -> None:
    """Add or replace the ``pytorch-<variant>`` indexes; other indexes stay as they are."""
    import tomlkit

    wanted: dict[str, str] = {}
    for s in sets:
        if s.index_url is not None:  # uv takes a login from UV_INDEX_<NAME>_*, not ${VAR}s
            wanted.setdefault(_index_name(s.variant), secrets.without_login(s.index_url))
    indexes = uv.get("index")
    if indexes is None:
        if not wanted:
            return
        indexes = tomlkit.aot()
        uv.append("index", indexes)
    if not isinstance(indexes, list):
        raise UserError("pyproject.toml: [tool.uv].index is not an array of tables")
    seen: set[str] = set()
    for i in reversed(range(len(indexes))):
        entry = indexes[i]
        name = str(entry.get("name", ""))
        if not name.startswith(INDEX_PREFIX):
            continue
        if name not in wanted or name in seen:
            del indexes[i]
            continue
        seen.add(name)
        if entry.get("url") != wanted[name]:
            entry["url"] = wanted[name]
        if entry.get("explicit") is not True:
            entry["explicit"] = True
    for name, url in wanted.items():
        if name not in seen:
            table = tomlkit.table()
            if blank_line:  # before a new [[tool.uv.index]] in the user's file
                table.trivia.indent = "\n"
            table.add("name", name)
            table.add("url", url)
            table.add("explicit", True)
            indexes.append(table)


def _set_sources(uv: Any, sets: Sequence[PlatformSet], several: bool) -> None:
    """torch and its companions from their variant's index (by platform marker in a fleet)."""
    import tomlkit

    entries: dict[str, list[dict[str, str]]] = {}
    for s in sets:
        if s.index_url is None:
            continue  # the default index (macOS): no source entry
        marker = _marker(s.platform, several)
        for pkg, _ in s.pins:
            entry = {"index": _index_name(s.variant)}
            if marker:
                entry["marker"] = marker
            entries.setdefault(pkg, []).append(entry)
    sources = uv.get("sources")
    if sources is None:
        if not entries:
            return
        sources = tomlkit.table()
        uv.add("sources", sources)
    for pkg in MANAGED:
        want = entries.get(pkg)
        have = sources.get(pkg)
        if want is None:
            if have is not None:
                del sources[pkg]
            continue
        plain: Any = want[0] if len(want) == 1 else want
        if have is not None and _unwrap(have) == plain:
            continue
        sources[pkg] = _toml_value(plain)


def _unwrap(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _toml_value(value: Any) -> Any:
    import tomlkit

    if isinstance(value, dict):
        inline = tomlkit.inline_table()
        inline.update(value)
        return inline
    arr = tomlkit.array()
    for item in value:
        arr.append(_toml_value(item))
    if len(arr) > 1:
        arr.multiline(True)
    return arr


# --- the recorded inputs ([tool.gpuresolve]) ---------------------------------------------------


def _parse(text: str) -> Any | None:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError):
        return None


def managed_lines(text: str) -> list[str] | None:
    """The entries gpuresolve manages, one canonical line each: what an installer reads from
    the file on gpuresolve's behalf (None: not a TOML document)."""
    doc = _parse(text)
    if doc is None:
        return None
    plain: dict[str, Any] = doc.unwrap()
    project = _dict(plain.get("project"))
    deps = _list(project.get("dependencies"))
    uv = _dict(_dict(plain.get("tool")).get("uv"))
    indexes = _list(uv.get("index"))
    sources = _dict(uv.get("sources"))
    out = [f"dependency {d}" for d in deps if isinstance(d, str) and _managed_name(d)]
    out += [
        "index " + json.dumps(e, sort_keys=True, default=str)
        for e in indexes
        if isinstance(e, dict) and str(e.get("name", "")).startswith(INDEX_PREFIX)
    ]
    out += [
        f"source {pkg} " + json.dumps(sources[pkg], sort_keys=True, default=str)
        for pkg in MANAGED
        if pkg in sources
    ]
    return out


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def stamp_inputs(text: str, record: Mapping[str, Any]) -> str:
    """``text`` with ``[tool.gpuresolve] inputs`` set to the record (JSON, as the other files)."""
    import tomlkit

    doc = _parse(text)
    if doc is None:
        raise ValueError("pyproject.toml: not TOML")
    tool = _table(doc, "tool", super_table=True)
    table = _table(tool, TOOL)
    value = json.dumps(record, sort_keys=True, separators=(",", ":"))
    # A literal string reads as the JSON it is (no escaped quotes) where it can be one.
    table["inputs"] = tomlkit.string(value, literal="'" not in value)
    logins = record.get("logins")
    names = uv_index_names(tool, logins) if isinstance(logins, dict) and logins else []
    if names:
        table["login"] = login_note(names)
    elif "login" in table:
        del table["login"]
    if "note" not in table:
        table["note"] = "written by gpuresolve lock; gpuresolve lock --check compares it"
    return str(tomlkit.dumps(doc))


def uv_index_names(tool: Any, logins: Mapping[str, str]) -> list[str]:
    """The names of the ``[[tool.uv.index]]`` entries whose URL needs one of ``logins``."""
    uv = tool.get("uv") if isinstance(tool, dict) else None
    indexes = uv.get("index") if isinstance(uv, dict) else None
    names = []
    for entry in indexes if isinstance(indexes, list) else []:
        url = str(entry.get("url", "")).rstrip("/") if isinstance(entry, dict) else ""
        keys = [secrets.without_login(key).rstrip("/") for key in logins]
        if any(url == key or url.startswith(key + "/") for key in keys):
            names.append(str(entry.get("name", "")))
    return names


def login_note(names: Sequence[str]) -> str:
    """How uv gets the login of the named indexes, which this file does not hold."""
    variables = ", ".join(
        f"UV_INDEX_{re.sub('[^A-Z0-9]', '_', n.upper())}_USERNAME and _PASSWORD" for n in names
    )
    return f"the index login is never written here: uv reads {variables} (or netrc, a keyring)"


def read_inputs(text: str) -> dict[str, Any] | None:
    """The record in ``[tool.gpuresolve] inputs`` (None: none, or not one we can read)."""
    doc = _parse(text)
    if doc is None:
        return None
    tool = doc.get("tool")
    table = tool.get(TOOL) if isinstance(tool, dict) else None
    raw = table.get("inputs") if isinstance(table, dict) else None
    if not isinstance(raw, str):
        return None
    from resolver.io.bounded import parse_json

    try:
        record = parse_json(str(raw), "pyproject.toml", what="a record of inputs")
    except UserError:  # not one of ours: as if there were none
        return None
    return record if isinstance(record, dict) else None


def render_project(
    catalog: Catalog,
    decisions: Sequence[Decision],
    options: Options,
    existing: str | None,
) -> str:
    """pyproject.toml with the torch set of every decision (one per platform, with markers)."""
    sets: list[PlatformSet] = []
    for decision in decisions:
        cand = decision.selection
        if cand is None:
            raise ValueError("no build selected: nothing to lock")
        tagged = any("+" in version for _, version in cand.packages)
        url = catalog.index_url(cand.variant.name, options.pytorch_index) if tagged else None
        sets.append(
            PlatformSet(decision.target.platform, tuple(cand.packages), cand.variant.name, url)
        )
    python = decisions[0].target.python if decisions else PythonVersion(3, 12)
    return render_pyproject(
        existing,
        sets,
        name=options.name or "environment",
        python=python,
        extra_requirements=options.extra_requirements,
    )


def render(ctx: RenderContext) -> Mapping[str, str]:
    """The user's pyproject.toml with the target's torch set (the file edited in place)."""
    return {NAME: render_project(ctx.catalog, [ctx.decision], ctx.options, ctx.existing.get(NAME))}


def render_team(team: TeamContext) -> str:
    """One pyproject.toml for a group: its sets' torch builds by platform marker."""
    return render_project(team.catalog, team.decisions, team.options, team.existing)


FORMAT = LockFormatUnit(
    LockFormat.UV,
    (NAME,),
    render,
    needs_wheels=True,
    in_place=True,
    team=TeamWrite.PER_GROUP,
    render_team=render_team,
    summary="the torch set in pyproject.toml for uv",
)
