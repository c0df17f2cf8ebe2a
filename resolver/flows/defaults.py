"""Reading the defaults files: ``[tool.gpuresolve.defaults]`` in the nearest pyproject.toml
and the user file in the platform's config folder (as uv and ruff read theirs), each value
checked where it is read; `resolver.commands.config` hands them to the commands.

A project's pyproject.toml is input gpuresolve did not write (CI runs it on repositories it
did not write): a value read from it never names a program to run or a place to write, so its
``python`` is a version, never an interpreter path (`PROJECT_RULES`). The user's own file and
the command line may name an interpreter. A file named by $GPURESOLVE_CONFIG must be a regular
file (as uv requires of UV_CONFIG_FILE).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError, escaped, shown, unsafe_char
from resolver.core.platforms import python_option

__all__ = ["CONFIG_ENV", "FILE_KEYS", "read_defaults", "user_file", "user_file_present"]

FILE_KEYS = ("pytorch-index", "python", "channel")
CONFIG_ENV = "GPURESOLVE_CONFIG"  # a user file elsewhere (tests, CI images)
LIMIT = 1024 * 1024
MAX_PARENTS = 64
PROJECT_TABLE = "tool.gpuresolve.defaults"
USER_TABLE = "(top)"


def _version_only(value: str) -> str | None:
    if python_option(value) is not None:
        return None
    return (
        "a project file names a Python version ('3.12', '3.13t'), never an interpreter to run "
        "(give one with --python or in your user configuration file)"
    )


# What a project file may not say, key by key (None: the value is fine). Each key was audited
# for naming a program or a place to write: `python` could name an interpreter (run to read its
# version); `pytorch-index` and `channel` are URLs or a channel name, read from, never run or
# written to. A key added to FILE_KEYS that names a program or a path gets its rule here.
PROJECT_RULES: dict[str, Callable[[str], str | None]] = {"python": _version_only}


def user_file() -> Path:
    """The user file: $GPURESOLVE_CONFIG, else config.toml in the platform's config folder."""
    forced = os.environ.get(CONFIG_ENV)
    if forced:
        return Path(forced)
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        from resolver.db.location import xdg_dir  # the XDG rule the data and cache follow

        base = xdg_dir("XDG_CONFIG_HOME", Path.home() / ".config")
    return base / "gpuresolve" / "config.toml"


def user_file_present(path: Path) -> bool:
    """Whether the user file is there to read. The platform's default may be absent (nothing
    to read); a file named by $GPURESOLVE_CONFIG must be a regular file (as uv requires of
    UV_CONFIG_FILE): missing, a folder or a FIFO is exit 2 naming it. Judged by stat, never
    by opening it (a FIFO would wait for a writer)."""
    from resolver.io.bounded import refuse_special

    if not os.environ.get(CONFIG_ENV):
        return path.is_file()
    named = f"{CONFIG_ENV}={escaped(str(path))}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"{named}: no such file (expected the user configuration file)") from None
    except OSError as exc:
        raise UserError(f"{named}: cannot read: {exc.strerror or exc}") from None
    refuse_special(mode, named, "the user configuration file")
    return True


def nearest_pyproject(start: Path) -> Path | None:
    """The first pyproject.toml in ``start`` or a folder above it."""
    here = start
    for _ in range(MAX_PARENTS):
        candidate = here / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if here.parent == here:
            return None
        here = here.parent
    return None


def _check_owner(project: Path, cwd: Path) -> None:
    """A pyproject.toml above the working folder owned by another user is refused, as git
    refuses a repository another user owns: anyone can leave one in a shared folder (/tmp)
    for everyone who works below it, and its pytorch-index or channel would then choose where
    their torch comes from. One of yours or root's is read; so is the working folder's own,
    whoever owns it (a checkout made by CI's user), and root reads any."""
    if not hasattr(os, "geteuid") or project.parent == cwd.absolute():
        return
    me = os.geteuid()
    try:
        owner = project.stat().st_uid
    except OSError:
        return
    if me != 0 and owner not in (me, 0):
        raise UserError(
            f"{escaped(str(project))}: owned by another user (uid {owner}), in a folder above "
            "this one: its [tool.gpuresolve.defaults] is not read (anyone can leave one in a "
            "shared folder); run from your own folder, or give --no-config"
        )


def _parse(path: Path, key: str | None = None) -> dict[str, Any]:
    """The TOML file at ``path``; with ``key``, {} when no key of that name can be in it.

    A project's pyproject.toml is not ours to judge and is read on every command: the text
    is parsed only when it holds ``key`` ("gpuresolve") or a \\u escape that could spell it in a
    quoted key. That also spares tomllib's import and parse (a few ms) on most starts."""
    from resolver.io.bounded import read_text

    text = read_text(path, limit=LIMIT, what="a configuration file")
    if key is not None and key not in text and "\\u" not in text and "\\U" not in text:
        return {}
    try:
        if sys.version_info >= (3, 11):
            import tomllib

            return tomllib.loads(text)
        import tomlkit

        data: dict[str, Any] = tomlkit.parse(text).unwrap()
        return data
    except Exception as exc:  # tomllib's TOMLDecodeError, tomlkit's ParseError family
        if "integer string conversion" in str(exc):  # Python's int-conversion limit
            raise UserError(
                f"{escaped(str(path))}: {_long_number_key(text)}: a number far too long to be "
                "real: refused"
            ) from None
        detail = " ".join(str(exc).split())[:160]
        raise UserError(f"{escaped(str(path))}: not valid TOML: {escaped(detail)}") from None


_LONG_NUMBER = re.compile(r"[0-9][0-9_]{640,}")  # Python's limit is 4,300 digits
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")


def _long_number_key(text: str) -> str:
    """The dotted key (table and key) on the line of the first very long number in ``text``,
    for a message naming it: tomllib's own error only advises raising Python's limit."""
    found = _LONG_NUMBER.search(text)
    if found is None:
        return "a value"
    start = text.rfind("\n", 0, found.start()) + 1
    line = text[start : found.start()]
    key = line.split("=", 1)[0].strip() if "=" in line else ""
    table = ""
    for header in reversed(text[:start].splitlines()):
        match = _HEADER.match(header)
        if match:
            table = match.group(1)
            break
    dotted = ".".join(part for part in (table, key) if part) or "a value"
    number = text.count("\n", 0, found.start()) + 1
    return f"line {number}: {escaped(shown(dotted, 80)[1:-1])}"


def _defaults(path: Path, table: Mapping[str, Any], where: str, *, project: bool) -> dict[str, str]:
    """The known keys of one defaults table, validated; an unknown key is an error, and so is,
    in a project file (``project``), a value that names a program or a place (`PROJECT_RULES`)."""
    if not isinstance(table, Mapping):
        raise UserError(f"{escaped(str(path))}: {where}: expected a table")
    out: dict[str, str] = {}
    for key, value in table.items():
        named = f"{escaped(str(path))}: {where}.{escaped(shown(key, 60)[1:-1])}"
        if key not in FILE_KEYS:
            raise UserError(f"{named}: unknown key (known: {', '.join(FILE_KEYS)})")
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{named}: expected a non-empty string")
        ch = unsafe_char(value)
        if ch is not None:
            raise UserError(f"{named}: holds the control or bidi character U+{ord(ch):04X}")
        rule = PROJECT_RULES.get(key) if project else None
        refused = rule(value) if rule is not None else None
        if refused is not None:
            raise UserError(f"{named}: {shown(value.strip())}: refused: {refused}")
        out[key] = value.strip()
    return out


def read_defaults(cwd: Path | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The merged defaults (pyproject.toml over the user file) and where each key was read
    (the file and its table)."""
    merged: dict[str, str] = {}
    origin: dict[str, str] = {}
    user = user_file()
    if user_file_present(user):
        for key, value in _defaults(user, _parse(user), USER_TABLE, project=False).items():
            merged[key], origin[key] = value, str(user)
    project = nearest_pyproject(cwd or Path.cwd())
    if project is not None:
        tool = _parse(project, "gpuresolve").get("tool", {})
        table = tool.get("gpuresolve", {}) if isinstance(tool, Mapping) else {}
        section = table.get("defaults") if isinstance(table, Mapping) else None
        if section is not None:
            _check_owner(project, cwd or Path.cwd())
            for key, value in _defaults(project, section, PROJECT_TABLE, project=True).items():
                merged[key], origin[key] = value, f"{project} ({PROJECT_TABLE}.{key})"
    return merged, origin
