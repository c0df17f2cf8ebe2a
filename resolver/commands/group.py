"""The click group every `gpuresolve` command group is: a mistyped subcommand gets the close
names, whatever click's version and whether the group's commands are imported yet."""

from __future__ import annotations

import click


class SuggestingGroup(click.Group):
    """A group that answers `No such command 'sugest'. Did you mean 'suggest'?`.

    Click suggests only from the commands it holds (and only from 8.4 on): a lazy group holds
    none until one is imported, so the names are matched here, from ``list_commands``.
    """

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        known = self.list_commands(ctx)
        unknown = name not in known and self.get_command(ctx, name) is None
        if name and not name.startswith("-") and unknown and not ctx.resilient_parsing:
            ctx.fail(no_such_command(name, known))
        return super().resolve_command(ctx, args)


def no_such_command(name: str, known: list[str]) -> str:
    """The one line for an unknown subcommand, with the close names (difflib's ratio)."""
    from difflib import get_close_matches

    close = get_close_matches(name, known)
    message = f"No such command {name!r}."
    if len(close) == 1:
        return f"{message} Did you mean {close[0]!r}?"
    if close:
        return f"{message} Did you mean one of: {', '.join(map(repr, close))}?"
    return message
