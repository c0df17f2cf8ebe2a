"""Defaults from files: ``[tool.gpuresolve.defaults]`` in the nearest pyproject.toml, and a user
file in the platform's config folder, as uv and ruff read theirs.

Keys: ``pytorch-index`` (a mirror of the PyTorch index), ``python`` (the Python version to
resolve for; not for `install`/`verify`, whose --python is an interpreter) and ``channel`` (the
conda channel). Precedence: the option > its ``GPURESOLVE_*`` variable > pyproject.toml > the
user file; `--no-config` reads neither. They reach each command through Click's
``default_map`` (set by an eager hidden option), which ranks exactly there (below the command
line and the environment), and are read only when a command looks one of those values up.
`lock --check` reads no config: the values a lock took from a file are recorded in its inputs
like any option, and re-resolving uses those.

A project's pyproject.toml is input gpuresolve did not write (CI runs it on repositories it
did not write): a value read from it never names a program to run or a place to write, so its
``python`` is a version, never an interpreter path (`PROJECT_RULES`). The user's own file and
the command line may name an interpreter.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from resolver.commands.ui import debug, level, store_verbosity
from resolver.core.errors import UserError, escaped, shown, unsafe_char
from resolver.core.platforms import python_option

F = TypeVar("F", bound=Callable[..., Any])
KEYS = {"pytorch-index": "pytorch_index", "python": "python", "channel": "channel"}
# commands whose --python is an interpreter, not a version: the `python` key is not theirs
INTERPRETER_COMMANDS = {"install", "verify"}
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
# written to. A key added to KEYS that names a program or a path gets its rule here.
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


def _user_file_present(path: Path) -> bool:
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
        if key not in KEYS:
            raise UserError(f"{named}: unknown key (known: {', '.join(KEYS)})")
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
    if _user_file_present(user):
        for key, value in _defaults(user, _parse(user), USER_TABLE, project=False).items():
            merged[key], origin[key] = value, str(user)
    project = nearest_pyproject(cwd or Path.cwd())
    if project is not None:
        tool = _parse(project, "gpuresolve").get("tool", {})
        table = tool.get("gpuresolve", {}) if isinstance(tool, Mapping) else {}
        section = table.get("defaults") if isinstance(table, Mapping) else None
        if section is not None:
            for key, value in _defaults(project, section, PROJECT_TABLE, project=True).items():
                merged[key], origin[key] = value, f"{project} ({PROJECT_TABLE}.{key})"
    return merged, origin


class _Lazy(Mapping[str, Any]):
    """One command's default_map: the files are read on the first value looked up."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._values: dict[str, str] | None = None
        self._origin: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        if self._values is None:
            merged, origin = read_defaults()
            self._values = {}
            for key, value in merged.items():
                if key == "python" and self.command in INTERPRETER_COMMANDS:
                    continue
                self._values[KEYS[key]] = value
                self._origin[KEYS[key]] = origin[key]
        return self._values

    def where(self, name: str) -> str | None:
        """The file (and table) a value looked up came from; None when none did."""
        return self._origin.get(name)

    def __getitem__(self, name: str) -> Any:
        if name not in KEYS.values():  # other options never read the files
            raise KeyError(name)
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


_OFF = "gpuresolve.no_config"


def _install(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Eager callback run for every command: its defaults come from the files (lazily), unless
    --no-config or `lock --check` (eager, and first when given) said no. A $GPURESOLVE_CONFIG
    that names no regular file is refused here, by every command (a stat: cheap)."""
    if not ctx.meta.get(_OFF):
        if os.environ.get(CONFIG_ENV):
            _user_file_present(user_file())
        ctx.default_map = _Lazy(ctx.info_name or "")  # type: ignore[assignment]


def no_config(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Eager callback of `--no-config` (and of `lock --check`): no file is read."""
    if value:
        ctx.meta[_OFF] = True
        ctx.default_map = None
    return value


def source_of(ctx: click.Context, name: str) -> str | None:
    """Where the value of the parameter ``name`` came from, as the user would look for it: its
    flag, its environment variable, the file and key, or None for the built-in default."""
    param = next((p for p in ctx.command.params if p.name == name), None)
    if param is None:
        return None
    kinds = click.core.ParameterSource
    source = ctx.get_parameter_source(name)
    if source == kinds.COMMANDLINE:
        return param.opts[0] if param.opts else name
    if source == kinds.ENVIRONMENT:
        return param.envvar if isinstance(param.envvar, str) else "the environment"
    if source == kinds.DEFAULT_MAP:
        files = ctx.default_map
        where = files.where(name) if isinstance(files, _Lazy) else None
        return escaped(where) if where else "a configuration file"
    return None


def _say_sources(ctx: click.Context) -> None:
    """-vv: each value the files could set, with where it really came from (an option or its
    variable overrides a file's value: the file is then not named)."""
    for key, name in KEYS.items():
        value = ctx.params.get(name)
        where = source_of(ctx, name)
        if value is not None and where is not None:
            debug(f"{key} = {escaped(repr(value))} from {where}")


NO_CONFIG_OPTION = click.option(
    "--no-config",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=no_config,
    help="Read no defaults from pyproject.toml's [tool.gpuresolve.defaults] or the user file.",
)


def standard_options(func: F) -> F:
    """Every command's -q/--quiet, -v/--verbose (counted; read with `level()`) and --no-config."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        if level() >= 2:
            _say_sources(click.get_current_context())
        return func(*args, **kwargs)

    quiet = click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=store_verbosity,
        help="No notes, warnings about defaults or progress on stderr (errors still print).",
    )
    verbose = click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=store_verbosity,
        help="More detail in the output; -vv adds debug notes on stderr.",
    )
    hook = click.option(
        "--defaults-from-files",
        is_flag=True,
        hidden=True,
        is_eager=True,
        expose_value=False,
        callback=_install,
    )
    return quiet(verbose(NO_CONFIG_OPTION(hook(command))))  # type: ignore[return-value]
