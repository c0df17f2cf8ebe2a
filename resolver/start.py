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
    from resolver.cli import entry as run

    run()
