"""The `gpuresolve` command line: parses options, calls the library, renders. Nothing else.

Subcommands live in ``resolver/commands/`` and are imported only when invoked, so that
`gpuresolve suggest` pays for nothing it does not use.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from resolver import __version__
from resolver.errors import UserError

# command name -> "module:attribute"
COMMANDS = {
    "detect": "resolver.commands.detect:detect",
    "suggest": "resolver.commands.suggest:suggest",
    "db": "resolver.commands.db:db",
    "verify": "resolver.commands.verify:verify",
    "install": "resolver.commands.install:install",
    "lock": "resolver.commands.lock:lock",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), attr)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuresolve")
def cli() -> None:
    """Pick the PyTorch + CUDA + cuDNN wheels that really run on this machine's GPUs."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: a UserError becomes one line on stderr and exit code 2, never a traceback."""
    try:
        cli.main(args=argv, prog_name="gpuresolve", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("gpuresolve: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"gpuresolve: error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(0)
