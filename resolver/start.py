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
    from resolver.cli import entry as run

    run()


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
