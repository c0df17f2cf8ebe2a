"""The `gpuresolve` command line: parses options, calls the library, renders. Nothing else.

Subcommands live in ``resolver/commands/`` and are imported only when invoked, so that
`gpuresolve suggest` pays for nothing it does not use.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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
    "image": "resolver.commands.image:image",
}


class _ReaderGone(Exception):
    """stdout's reader went away (`gpuresolve suggest --json | head -1`)."""


@contextmanager
def _reader_gone() -> Iterator[None]:
    """Carry a broken pipe past click, which would make it exit 1 ("no compatible build")."""
    try:
        yield
    except BrokenPipeError:
        raise _ReaderGone from None


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _reader_gone():  # --help, --version
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _reader_gone():
            return super().invoke(ctx)

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
    """Entry point: a UserError becomes one line on stderr and exit code 2, never a traceback.

    A reader that stops early (`| head -1`) ends it with 141, as a shell reports a writer killed
    by SIGPIPE, never 1 (which means "no compatible build"), and without a traceback.
    """
    try:
        code = _run(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe cannot be handled
    except (BrokenPipeError, _ReaderGone):
        # Python's recipe (docs: "Note on SIGPIPE"): stdout to devnull, so that the flush at
        # exit does not fail again.
        with suppress(AttributeError, OSError, ValueError):  # not a file: nothing to flush
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    sys.exit(code)


def _run(argv: list[str] | None) -> int | str | None:
    """Run the CLI; the exit code (``sys.exit``'s argument) it ends with."""
    try:
        cli.main(args=argv, prog_name="gpuresolve", standalone_mode=False)
    except SystemExit as exc:  # commands end with sys.exit(code)
        return exc.code
    except click.exceptions.Abort:
        click.echo("gpuresolve: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except UserError as exc:
        click.echo(f"gpuresolve: error: {exc}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0
