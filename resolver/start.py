"""The console script's first module (and `python -m resolver`'s): a start-up setting made before
anything else is imported, then the CLI."""

from __future__ import annotations

import gc

# Collect when 100,000 new objects are tracked, not every 700: starting (the imports, the
# database) makes ~60,000 objects that all live until exit, and ~60 passes over them were ~3% of
# a `suggest`. Long commands still collect; cyclic garbage between passes stays bounded.
GC_THRESHOLD = 100_000


def entry() -> None:
    """Run gpuresolve as a program (the console script `gpuresolve`)."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    if _lone_version_flag():
        import os

        from resolver.commands.version import answer

        os._exit(answer())  # nothing to tear down: no child, no temporary file, stdout flushed
    if _lone_help_flag():
        _help()
    from resolver.cli import entry as run

    run()


def _help() -> None:
    """A lone `--help` (or `-h`, or no argument): the text click rendered before for the same
    code, width and language, printed without importing click; else rendered and kept for the
    next, then printed by click as ever (`commands/helpcache.py`)."""
    import os

    from resolver.commands import helpcache

    path = helpcache.cache_file()
    if path is None:
        return
    text = helpcache.read(path)
    if text is not None:
        os._exit(helpcache.answer(text))
    helpcache.store(path, _rendered_help())


def _rendered_help() -> str:
    """The top-level help as `gpuresolve --help` prints it, rendered by click."""
    import click

    from resolver.cli import cli

    with click.Context(cli, info_name="gpuresolve", **cli.context_settings) as ctx:
        return ctx.get_help()


def _lone_help_flag() -> bool:
    """`gpuresolve --help`, `-h` or nothing, outside shell completion."""
    import os
    import sys

    return (
        len(sys.argv) <= 2
        and sys.argv[1:] in ([], ["-h"], ["--help"])
        and sys.stdout is not None
        and not os.environ.get("_GPURESOLVE_COMPLETE")
    )


def _lone_version_flag() -> bool:
    """`gpuresolve --version` (or `-V`) and nothing else, outside shell completion: answered
    before click is imported, whose import alone is twice a bare interpreter's start."""
    import os
    import sys

    return (
        len(sys.argv) == 2
        and sys.argv[1] in ("-V", "--version")
        and sys.stdout is not None
        and not os.environ.get("_GPURESOLVE_COMPLETE")
    )
