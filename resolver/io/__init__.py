"""Layer 1, input and output: the HTTP client, zip over range reads, bounded readers, atomic writes.

Imports only from the core layer below it; every layer above reads and writes through it.
"""

from __future__ import annotations

from resolver.core.errors import UserError

__all__ = ["ReadError"]


class ReadError(UserError):
    """A file or URL could not be read as asked: a server error, a truncated or damaged file,
    a read budget. One line naming the file or URL, exit 2."""
