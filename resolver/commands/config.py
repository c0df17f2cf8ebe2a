"""Defaults from files, for every command: ``[tool.gpuresolve.defaults]`` in the nearest
pyproject.toml and a user file in the platform's config folder (read and checked by
`resolver.flows.defaults`; a project file's value never names a program to run).

Keys: ``pytorch-index`` (a mirror of the PyTorch index), ``python`` (the Python version to
resolve for; not for `install`/`verify`, whose --python is an interpreter) and ``channel`` (the
conda channel). Precedence: the option > its ``GPURESOLVE_*`` variable > pyproject.toml > the
user file; `--no-config` reads neither. They reach each command through Click's
``default_map`` (set by an eager hidden option), which ranks exactly there (below the command
line and the environment), and are read only when a command looks one of those values up;
-vv names where each value came from. `lock --check` reads no config: the values a lock took
from a file are recorded in its inputs like any option, and re-resolving uses those.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import click

from resolver.commands.ui import debug, level, store_verbosity
from resolver.core.errors import escaped
from resolver.flows.defaults import CONFIG_ENV, FILE_KEYS, read_defaults, user_file
from resolver.flows.defaults import user_file_present as _user_file_present

F = TypeVar("F", bound=Callable[..., Any])
KEYS = {key: key.replace("-", "_") for key in FILE_KEYS}  # file key -> the option's name
# commands whose --python is an interpreter, not a version: the `python` key is not theirs
INTERPRETER_COMMANDS = {"install", "verify"}


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
