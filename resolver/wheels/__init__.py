"""Read what a torch wheel really carries, from the wheel's own bytes.

A wheel is a zip: its central directory (at the end) says where each member lies, so a reader
that can fetch byte ranges — a local file, or an HTTP server answering ``Range`` requests — reads
the directory plus the two or three members it needs, a percent or so of the download, and never
imports or runs anything of torch.

- ``source``: random-access byte sources (file, HTTP ranges, a streamed fallback) with a budget.
- ``zipdir``: the zip central directory (zip64 included) and streamed, capped member reads.
- ``torchwheel``: torch/version.py and the compiled-in CUDA arch flags, as a ``WheelReport``.
"""

from __future__ import annotations

from resolver.core.errors import UserError


class WheelError(UserError):
    """The wheel could not be read: not a zip, truncated, not torch, a server error, a budget."""
