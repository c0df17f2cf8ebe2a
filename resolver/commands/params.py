"""Click parameter types and callbacks the commands share: index URLs and conda channels
validated, seconds that are numbers, paths and path-like text without control or bidi
characters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from resolver.core.errors import unsafe_char

__all__ = [
    "SAFE_TEXT",
    "FormatChoice",
    "SafePath",
    "SafeText",
    "Seconds",
    "check_channel",
    "check_url",
    "lazy_complete",
]


class FormatChoice(click.Choice[str]):
    """--format's choices: the registered lock formats and ``all`` (writers/lockformats.py),
    read when Click asks, so that a format registered is a choice without naming it here."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from resolver.writers import lockformats

        return lockformats.choices()

    @choices.setter
    def choices(self, value: object) -> None:
        """Click's constructor sets them: the registry's are read instead."""


def lazy_complete(name: str) -> Callable[[click.Context, click.Parameter, str], list[Any]]:
    """A completion callback of resolver.commands.completion, imported only when completing."""

    def callback(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from resolver.commands import completion

        result: list[Any] = getattr(completion, name)(ctx, param, incomplete)
        return result

    return callback


def _source_name(ctx: click.Context, param: click.Parameter) -> str:
    """How the user gave a value: the option's flag, the environment variable or the
    configuration file (and key) it came from."""
    from resolver.commands.config import source_of

    where = source_of(ctx, param.name or "")
    return where or (param.opts[0] if param.opts else str(param.name))


def check_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: an index URL (http, https, or file: for a local mirror), validated (the
    validator imported only for a value: URL parsing is no part of a plain `suggest`)."""
    if value is None:
        return None
    from resolver.io.urls import index_url

    return index_url(value, _source_name(ctx, param))


def check_channel(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a conda channel name or URL, validated."""
    if value is None:
        return None
    from resolver.io.urls import channel

    return channel(value, _source_name(ctx, param))


class Seconds(click.FloatRange):
    """Seconds within [low, high]; ``nan`` (which every range comparison lets through) refused."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__(min=low, max=high)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


def _refuse_unsafe(
    kind: SafePath | SafeText, value: Any, param: click.Parameter | None, ctx: click.Context | None
) -> None:
    """A control or bidi character in a path is exit 2, before anything is created or printed:
    `-o $'out\\a'` made a folder whose name rang the terminal's bell in every later message."""
    ch = unsafe_char(value) if isinstance(value, str) else None
    if ch is not None:
        kind.fail(f"holds the control or bidi character U+{ord(ch):04X}: refused", param, ctx)


class SafePath(click.Path):
    """A path option or argument (click.Path) that refuses control and bidi characters."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _refuse_unsafe(self, value, param, ctx)
        return super().convert(value, param, ctx)


class SafeText(click.types.StringParamType):
    """A string naming a path (``--python X.Y|PATH``, ``URL|PATH``, ``FILE``) that refuses
    control and bidi characters."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _refuse_unsafe(self, value, param, ctx)
        return super().convert(value, param, ctx)


SAFE_TEXT = SafeText()


class DriverParam(click.ParamType):  # type: ignore[type-arg,unused-ignore]  # generic from click 8.3
    """``--driver``: parsed by the driver's one grammar (``core.versions.Driver``) where Click
    reads it, so the target flow gets a `Driver`; a bad one is that grammar's UserError (exit 2)."""

    name = "driver"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from resolver.core.versions import Driver

        return value if isinstance(value, Driver) else Driver.parse(value)


DRIVER = DriverParam()
