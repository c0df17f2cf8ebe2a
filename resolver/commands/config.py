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
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from resolver.commands.ui import debug, store_verbosity
from resolver.core.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])
KEYS = {"pytorch-index": "pytorch_index", "python": "python", "channel": "channel"}
# commands whose --python is an interpreter, not a version: the `python` key is not theirs
INTERPRETER_COMMANDS = {"install", "verify"}
CONFIG_ENV = "GPURESOLVE_CONFIG"  # a user file elsewhere (tests, CI images)
LIMIT = 1024 * 1024
MAX_PARENTS = 64


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
        raise UserError(f"{path}: not valid TOML: {exc}") from None


def _defaults(path: Path, table: Mapping[str, Any], where: str) -> dict[str, str]:
    """The known keys of one defaults table, validated; an unknown key is an error."""
    if not isinstance(table, Mapping):
        raise UserError(f"{path}: {where}: expected a table")
    out: dict[str, str] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise UserError(f"{path}: {where}.{key}: unknown key (known: {', '.join(KEYS)})")
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{path}: {where}.{key}: expected a non-empty string")
        out[key] = value.strip()
    return out


def read_defaults(cwd: Path | None = None) -> tuple[dict[str, str], dict[str, Path]]:
    """The merged defaults (pyproject.toml over the user file) and the file behind each key."""
    merged: dict[str, str] = {}
    origin: dict[str, Path] = {}
    user = user_file()
    if user.is_file():
        for key, value in _defaults(user, _parse(user), "(top)").items():
            merged[key], origin[key] = value, user
    project = nearest_pyproject(cwd or Path.cwd())
    if project is not None:
        tool = _parse(project, "gpuresolve").get("tool", {})
        table = tool.get("gpuresolve", {}) if isinstance(tool, Mapping) else {}
        section = table.get("defaults") if isinstance(table, Mapping) else None
        if section is not None:
            for key, value in _defaults(project, section, "tool.gpuresolve.defaults").items():
                merged[key], origin[key] = value, project
    return merged, origin


class _Lazy(Mapping[str, Any]):
    """One command's default_map: the files are read on the first value looked up."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._values: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._values is None:
            merged, origin = read_defaults()
            self._values = {}
            for key, value in merged.items():
                if key == "python" and self.command in INTERPRETER_COMMANDS:
                    continue
                self._values[KEYS[key]] = value
                debug(f"{key} = {value!r} from {origin[key]}")
        return self._values

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
    --no-config or `lock --check` (eager, and first when given) said no."""
    if not ctx.meta.get(_OFF):
        ctx.default_map = _Lazy(ctx.info_name or "")  # type: ignore[assignment]


def no_config(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Eager callback of `--no-config` (and of `lock --check`): no file is read."""
    if value:
        ctx.meta[_OFF] = True
        ctx.default_map = None
    return value


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
    return quiet(verbose(NO_CONFIG_OPTION(hook(func))))
