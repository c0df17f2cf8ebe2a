"""The `gpuresolve` command line: parses options, calls the library, renders. Nothing else.

Subcommands live in ``resolver/commands/`` and are imported only when invoked, so that
`gpuresolve suggest` pays for nothing it does not use.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import click

from resolver.commands.group import SuggestingGroup
from resolver.core.errors import EXIT_INTERNAL, GpuresolveError, escaped, escaped_lines, exit_code

if TYPE_CHECKING:
    from resolver.core.documents.reports import ErrorDoc

# command name -> "module:attribute"
COMMANDS = {
    "detect": "resolver.commands.detect:detect",
    "suggest": "resolver.commands.suggest:suggest",
    "db": "resolver.commands.db:db",
    "verify": "resolver.commands.verify:verify",
    "install": "resolver.commands.install:install",
    "lock": "resolver.commands.lock:lock",
    "image": "resolver.commands.image:image",
    "fleet": "resolver.commands.fleet:fleet",
    "schema": "resolver.commands.schema:schema",
    "completion": "resolver.commands.completion:completion",
}
# command name -> the first paragraph of its help, what `gpuresolve --help` lists, so that the
# list imports no command (importing all ten was most of `--help`'s time); a test holds each to
# its command's own help.
SUMMARIES = {
    "detect": "Report platform, Python, glibc, NVIDIA driver and each GPU (with the source of "
    "each fact).",
    "suggest": "Say what to install: the pip command, why, and the runner-up.",
    "db": "The compatibility database: check it, show it, update it.",
    "verify": "Check that torch in an environment imports, matches this host and really uses "
    "the GPU.",
    "install": "Install the build that runs here (or a lock) into an environment, then verify it.",
    "lock": "Write the build for this machine (or a described one) as files to commit and "
    "install from.",
    "image": "Say what an image holds (torch, CUDA, cuDNN, NCCL, Python, kernels) and whether "
    "it runs.",
    "fleet": "Verify a whole fleet: read back what its nodes' `verify --json` runs answered.",
    "schema": "Print the JSON Schema (draft 2020-12) of a `--json` document or of the team spec.",
    "completion": "Print the shell completion script Click generates for gpuresolve.",
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


class LazyGroup(SuggestingGroup):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy
        self._listing = False  # writing --help's list of commands

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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's list of commands, each not imported yet summarised from ``SUMMARIES`` (a
        stand-in command with that help, which click shortens by its own rule)."""
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            if self._listing and cmd_name in SUMMARIES and module not in sys.modules:
                return click.Command(cmd_name, help=SUMMARIES[cmd_name])
            command: click.Command = getattr(importlib.import_module(module), attr)
            return command
        return super().get_command(ctx, cmd_name)


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from resolver.commands.version import version_line

        click.echo(escaped(version_line()))
        ctx.exit()


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and the database's date, and exit.",
)
def cli() -> None:
    """Pick the PyTorch + CUDA + cuDNN wheels that really run on this machine's GPUs."""


DEBUG_ENV = "GPURESOLVE_DEBUG"


def main(argv: list[str] | None = None) -> None:
    """Entry point: every way out is an exit code and at most one line on stderr.

    - a GpuresolveError is one line and its concept's exit code (``core.errors.EXIT_CODES``:
      bad input 2), never a traceback;
    - a reader that stops early (`| head -1`) ends it with 141, as a shell reports a writer killed
      by SIGPIPE, never 1 (which means "no compatible build");
    - output that cannot be written (`> /dev/full`, a read-only folder) or a closed stdout
      (`>&-`) is one line, exit 2;
    - anything else is a bug: one line naming it and exit 70, with the traceback only when
      GPURESOLVE_DEBUG=1 asks for it.
    """
    if sys.stdout is None:  # `gpuresolve suggest >&-`: nowhere to say anything
        if sys.stderr is not None:
            click.echo(
                "gpuresolve: error: standard output is closed; redirect it to a file or "
                "/dev/null instead",
                err=True,
            )
        sys.exit(2)
    _escape_unencodable()
    try:
        code = _run(argv)
        sys.stdout.flush()  # here, not at exit, where a failed write cannot be handled
    except (BrokenPipeError, _ReaderGone):
        _silence_stdout()
        sys.exit(141)
    except OSError as exc:
        _silence_stdout()
        click.echo(f"gpuresolve: error: {escaped(_os_error_text(exc))}", err=True)
        sys.exit(2)
    finally:
        _forget_caught_interrupt()
    sys.exit(code)


def _forget_caught_interrupt() -> None:
    """Clear CPython's "unhandled Ctrl-C" mark, so that the exit code is ours (130), not -2.

    CPython sets that mark whenever a KeyboardInterrupt leaves an ``exec``/``eval`` of source
    text, caught later or not, and ``python -m`` kills itself with SIGINT at exit while it is
    set. Creating a dataclass or a namedtuple runs such text, so a Ctrl-C that lands in one of
    the imports a command makes after starting a child (verify's probe) ended in signal 2 after
    "aborted". Running any source text resets the mark; every interrupt has been handled here."""
    exec("None")


def _escape_unencodable() -> None:
    """A character the terminal's encoding lacks is written escaped (``\\xe9``), never a crash:
    under PYTHONIOENCODING=ascii (or a C locale's ASCII) a diff or a GPU name holding "é"
    ended in UnicodeEncodeError, exit 70."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            with suppress(AttributeError, OSError, ValueError):
                stream.reconfigure(errors="backslashreplace")


def entry() -> None:
    """The console script (and `python -m resolver`): ``main()``, then out without the
    interpreter's teardown.

    Freeing ~150 modules at exit cost ~11 ms, a tenth of a `suggest --json`. What must happen at
    exit happens first: ``main`` has flushed stdout (and turned a failure into its exit code),
    the atexit hooks run (weakref finalizers: temporary folders), stderr is flushed.
    """
    try:
        main()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    import atexit

    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):  # sys.exit("text"): printed, status 1
        with suppress(OSError, ValueError, AttributeError):
            print(escaped(code), file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code or 0)


def _silence_stdout() -> None:
    """stdout to devnull, so that the flush at exit does not fail again.

    Python's recipe (docs: "Note on SIGPIPE"); also after a write to a full disk.
    """
    with suppress(AttributeError, OSError, ValueError):  # not a file: nothing to flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _os_error_text(exc: OSError) -> str:
    """``path: reason`` for an OSError, or where there is no path, what failed."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        name = str(exc.filename)
        return f"{name if len(name) <= 200 else name[:197] + '...'}: {reason}"
    return f"cannot write output: {reason}"


def _wants_json(argv: list[str] | None) -> bool:
    """Whether the command line asks for JSON (`--json` before any `--`)."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _error(message: str, code: int, as_json: bool) -> int:
    """The error's one line on stderr; under --json also ``{"error": {"code", "message"}}`` on
    stdout, so a pipeline reading stdout gets a JSON document whatever happened. The line is
    escaped by ``core.errors``' rule: a message quotes files, nodes and options (the JSON is
    ASCII, its escapes JSON's). A URL's login in it is masked (``core.secrets``), whichever
    layer wrote the message."""
    from resolver.core import secrets  # URL parsing: only where a line is written

    message = secrets.redact(message)
    click.echo(f"gpuresolve: {escaped(message)}", err=True)
    if as_json:
        import json

        with suppress(OSError, ValueError):
            doc: ErrorDoc = {"error": {"code": code, "message": message}}
            sys.stdout.write(json.dumps(doc) + "\n")
    return code


def _run(argv: list[str] | None) -> int | str | None:
    """Run the CLI; the exit code (``sys.exit``'s argument) it ends with."""
    _forget_logins()  # logins are this command's only (the tests run many in one process)
    try:
        return _run_command(argv)
    finally:
        _forget_logins()


def _forget_logins() -> None:
    """Empty the store of logins where a command imported it (not imported: it is empty, and
    importing it would bring URL parsing into every command's start)."""
    credentials = sys.modules.get("resolver.io.credentials")
    if credentials is not None:
        credentials.forget()


def _run_command(argv: list[str] | None) -> int | str | None:
    as_json = _wants_json(argv)
    refused = _bad_completion()
    if refused is not None:
        return _error(f"error: {refused}", 2, as_json)
    try:
        with sigterm_raises() as terminated:  # SIGTERM unwinds like Ctrl-C: children die too
            try:
                cli.main(args=argv, prog_name="gpuresolve", standalone_mode=False)
            finally:
                _kill_children()
    except SystemExit as exc:  # commands end with sys.exit(code)
        return exc.code
    except click.exceptions.Abort as exc:
        code = 143 if terminated() or isinstance(exc.__cause__, Terminated) else 130
        return _error("aborted", code, as_json)
    except click.UsageError as exc:  # one line, as for every other bad input
        if _no_args_help(exc):  # `gpuresolve`, `gpuresolve db`: the help, as pip and uv do
            click.echo(escaped_lines(exc.ctx.get_help() if exc.ctx else exc.format_message()))
            return 0
        where = exc.ctx.command_path if exc.ctx is not None else "gpuresolve"
        message = _one_line(exc.format_message())
        return _error(f"error: {message} (see `{where} --help`)", exc.exit_code, as_json)
    except click.ClickException as exc:
        return _error(f"error: {_one_line(exc.format_message())}", exc.exit_code, as_json)
    except GpuresolveError as exc:  # bad input (2), a source that cannot be read (2), ...
        return _error(f"error: {_one_line(str(exc))}", exit_code(exc), as_json)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (BrokenPipeError, _ReaderGone, OSError):
        raise  # main() turns these into 141 or one line
    except Exception as exc:
        return _internal_error(exc, as_json)
    return 0


COMPLETE_ENV = "_GPURESOLVE_COMPLETE"  # what the completion script sets: SHELL_source|complete


def _bad_completion() -> str | None:
    """The line refusing a completion request Click cannot answer: a shell (or an instruction)
    it has none for, which it answers with exit 1 and nothing said, or `_complete` without the
    COMP_WORDS/COMP_CWORD the script sets beside it (a KeyError: exit 70); None when fine."""
    value = os.environ.get(COMPLETE_ENV)
    if not value:
        return None
    from click.shell_completion import get_completion_class

    from resolver.core.errors import escaped, shown

    shell, _, instruction = value.partition("_")
    if get_completion_class(shell) is None or instruction not in ("source", "complete"):
        return (
            f"{COMPLETE_ENV}={escaped(shown(value, 40))}: no completion for that shell or "
            "instruction (bash, zsh or fish, with _source or _complete; "
            "`gpuresolve completion SHELL` prints the script)"
        )
    cword = os.environ.get("COMP_CWORD")
    number = cword is not None and cword.isascii() and cword.isdigit() and len(cword) <= 6
    if instruction == "complete" and (
        "COMP_WORDS" not in os.environ or not (number or (shell == "fish" and cword is not None))
    ):  # fish's COMP_CWORD is the word being completed; the others' its index
        return (
            f"{COMPLETE_ENV}={escaped(shown(value, 40))}: COMP_WORDS and COMP_CWORD "
            "(a number but for fish) are not set, as the script `gpuresolve completion SHELL` "
            "prints sets them"
        )
    return None


def _no_args_help(exc: click.UsageError) -> bool:
    """Whether click raised the help of a group given no subcommand (NoArgsIsHelpError, 8.2+)."""
    return isinstance(exc, click.exceptions.NoArgsIsHelpError)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds like Ctrl-C."""


@contextmanager
def sigterm_raises() -> Iterator[Callable[[], bool]]:
    """Within the block SIGTERM raises `Terminated` (unwinding through `subprocs.started`,
    which kills the children) instead of ending the interpreter at once; yields "did it?"."""
    import signal
    import threading

    seen: list[bool] = []

    def handler(signum: int, frame: object) -> None:
        seen.append(True)
        raise Terminated()

    previous: Any = None
    installed = False
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
        with suppress(ValueError, OSError):
            previous = signal.signal(signal.SIGTERM, handler)
            installed = True
    try:
        yield lambda: bool(seen)
    finally:
        if installed:
            with suppress(ValueError, OSError, TypeError):
                signal.signal(signal.SIGTERM, previous)


def _kill_children() -> None:
    """Kill every child process still running (with its group): the CLI's last word, so that
    a child held across other work (the verify probe) never outlives an interrupt. No child was
    started when `subprocs` was never imported (it costs start-up, so it is not imported here)."""
    subprocs = sys.modules.get("resolver.io.subprocs")
    if subprocs is not None:
        subprocs.kill_all(grace=2.0)


def _one_line(text: str, limit: int = 1000) -> str:
    """A message as one line of bounded length: ASCII whitespace runs (newlines) shown as one
    space, the middle cut. Only ASCII: a U+2028 or U+0085 in a quoted name is the printer's to
    escape, not a space that would misname the file."""
    import re

    flat = " ".join(re.split(r"[ \t\n\r\f\v]+", text.strip(" \t\n\r\f\v")))
    return flat if len(flat) <= limit else f"{flat[: limit // 2]} … {flat[-limit // 2 :]}"


def _internal_error(exc: Exception, as_json: bool = False) -> int:
    """A bug: one line (or the traceback with GPURESOLVE_DEBUG=1), and exit 70."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    detail = _one_line(f"{type(exc).__name__}: {exc}", 300)
    return _error(
        f"internal error: {detail}; run with {DEBUG_ENV}=1 for the traceback and please report it",
        EXIT_INTERNAL,
        as_json,
    )
