"""The cyclic garbage collector held off while a fleet is read and locked.

Reading and locking a 10,000-machine spec allocates about a million small objects that live until
the lock is written (YAML nodes, targets, decisions, their reasons). CPython's collector is
triggered by allocations and rescans every object still alive, so it re-walks that growing heap
again and again: measured, 3.3 of 7.6 s of a 10,000-target lock (bench/distinct_targets.py).
Those objects form no reference cycles (tests/test_fleet_memo.py checks it), so reference
counting frees them all the same; a cycle made meanwhile waits for the next full collection.
On the way out they join the oldest generation at once (``gc.freeze`` then ``gc.unfreeze``, which
"puts them back into the oldest generation"), as if they had survived: otherwise the first
young collection after the block walks all of them (0.3 s at 10,000 targets).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block; on again after, with what the block made
    in the oldest generation (nesting is fine: the outermost block decides)."""
    if not gc.isenabled():  # off already: an outer block (or the caller) owns it
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:  # nobody else's frozen objects would be thawed
            gc.freeze()
            gc.unfreeze()
        gc.enable()
