"""How every command talks to a person: -q/-v/-vv, notes, warnings, debug notes and progress.

The habits of pip, uv and ruff: `-q/--quiet` drops notes and progress (never errors, never the
command's own output); `-v/--verbose` asks a command for more detail in its own output
(`suggest -v` lists the alternatives); `-vv` adds debug notes on stderr. Notes and warnings
always go to stderr, so stdout holds only what the command answers. A progress line appears on
stderr only when it is a terminal, never in CI (``CI`` set) or under `-q`, and only once a step
has taken a second.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

import click

from resolver.core import secrets
from resolver.core.errors import escaped, escaped_lines

F = TypeVar("F", bound=Callable[..., Any])
_META = "gpuresolve.verbosity"  # in the root context's meta: -1 quiet, 0, 1 (-v), 2 (-vv)
PROGRESS_AFTER = 1.0  # seconds: a step shorter than this shows nothing
MIB = 1024 * 1024
PROGRESS_FROM = 500  # items (targets, machine shapes): fewer take well under a second


def store_verbosity(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    root = ctx.find_root()
    now = root.meta.get(_META, 0)
    if param.name == "quiet" and value:
        root.meta[_META] = -1
    elif param.name == "verbose" and value and now >= 0:
        root.meta[_META] = max(now, int(value))


def level() -> int:
    """-1 under -q, 0 by default, 1 with -v, 2 with -vv (outside a command: 0)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return 0
    value: int = ctx.find_root().meta.get(_META, 0)
    return value


def quiet() -> bool:
    return level() < 0


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """The one way a command prints text (its answer, notes, diffs, errors it says itself): every
    line escaped by ``core.errors``' rule, so text from files, nodes, the verified environment or
    the network never reaches the terminal raw (a lock line's escape sequences, a node's bidi
    override), and a URL's login is masked (``core.secrets``); tests/test_output_escape.py
    holds every other module to it. Written to Python's own stream (not click's choice of one),
    whose encoding escapes what it lacks (cli.py)."""
    out = sys.stderr if err else sys.stdout  # and no URL's login, whatever wrote the text:
    click.echo(escaped_lines(secrets.redact(message)), file=out, nl=nl)


def note(message: str) -> None:
    """A note on stderr, unless -q; shaped to name only options this command has."""
    if not quiet():
        echo(f"note: {fit_options(message)}", err=True)


def warning(message: str) -> None:
    """A warning on stderr: a result the user should look at; -q keeps it."""
    echo(f"warning: {fit_options(message)}", err=True)


def debug(message: str) -> None:
    """A debug note on stderr under -vv: where a fact came from, what was tried."""
    if level() >= 2:
        echo(f"debug: {message}", err=True)


# --- no advice naming an option the command lacks -----------------------------------------------

# Advice written once for the commands that describe a target (suggest, lock, image), and read
# by commands without those options (detect, verify, install): there the clause is left out.
# Patterns as text, compiled by ``re`` on first use (its cache): most commands write no advice,
# and compiling at import was a cost on every start.
_OPTION_CLAUSES = (
    r",? or describe the target with --driver and --gpu to resolve for another machine",
)
_OPTION = r"(?<![\w`-])--[a-z][a-z0-9-]+"


def command_options() -> set[str] | None:
    """The long options of the command running now (None outside a command)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    return {o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)}


def fit_options(message: str) -> str:
    """``message`` without an advice clause that names an option this command does not have."""
    have = command_options()
    if have is None:
        return message
    for clause in _OPTION_CLAUSES:
        found = re.search(clause, message)
        if found and not set(re.findall(_OPTION, found.group(0))) <= have:
            message = message[: found.start()] + message[found.end() :]
    return message


def foreign_options(message: str) -> list[str]:
    """The options a message names (outside backquoted commands) that this command lacks."""
    have = command_options() or set()
    bare = re.sub(r"`[^`]*`", "", message)
    return [o for o in re.findall(_OPTION, bare) if o not in have]


# --- progress -----------------------------------------------------------------------------------


def progress_allowed() -> bool:
    """A terminal on stderr, not CI, not -q."""
    if quiet() or os.environ.get("CI", "") not in ("", "0", "false"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def step(label: str) -> Iterator[None]:
    """A progress line (`label… 3s`) on stderr while the block runs longer than a second.

    The line is redrawn in place every few tenths of a second by a daemon thread and erased
    when the block ends, so nothing of it stays in the terminal's scrollback.
    """
    if not progress_allowed():
        yield
        return
    done = threading.Event()
    shown = [False]
    start = time.monotonic()

    def draw() -> None:
        if done.wait(PROGRESS_AFTER):
            return
        while not done.is_set():
            shown[0] = True
            sys.stderr.write(f"\r{escaped(label)}… {time.monotonic() - start:.0f}s\033[K")
            sys.stderr.flush()
            done.wait(0.25)

    thread = threading.Thread(target=draw, name="gpuresolve-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown[0]:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@contextmanager
def progress_bars() -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """Click's progress bar on stderr for each long counted step, one after the other (a team
    lock's node list, solve, grouping); a total of 0 is a step of unknown length, shown as a
    `step` line. Only where `progress_allowed` and the step is long."""
    bars = ExitStack()

    def start(label: str, total: int) -> Callable[[int], None]:
        bars.close()  # the previous step is done: its bar ends its line
        if total == 0:
            bars.enter_context(step(label))
            return lambda n: None
        if total < PROGRESS_FROM or not progress_allowed():
            return lambda n: None
        bar = bars.enter_context(click.progressbar(length=total, label=label, file=sys.stderr))
        return bar.update

    with bars:
        yield start


def byte_progress(label: str) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    """A bytes-read counter on stderr where `progress_allowed` (else nothing), and its finisher."""
    if not progress_allowed():
        return None, lambda: None
    last = [0.0]

    def show(n: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.1:
            last[0] = now
            sys.stderr.write(f"\r{escaped(label)}: {n / MIB:.1f} MiB read")
            sys.stderr.flush()

    def done() -> None:
        if last[0]:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    return show, done


def warnings(lines: Iterable[str]) -> None:
    """Each line as a warning on stderr (a selected build's warnings, say)."""
    for line in lines:
        warning(line)
