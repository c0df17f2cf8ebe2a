"""Read what a torch wheel really carries, from the wheel's own bytes.

A wheel is a zip: its central directory (at the end) says where each member lies, so a reader
that can fetch byte ranges — a local file, or an HTTP server answering ``Range`` requests — reads
the directory plus the two or three members it needs, a percent or so of the download, and never
imports or runs anything of torch. The byte sources and the zip reader live in ``resolver.io``
(``ranges``, ``zip``: the standard library's ``zipfile`` over counted range reads).

- ``torchwheel``: torch/version.py and the compiled-in CUDA arch flags, as a ``WheelReport``.
- ``index``: which wheel to read for a build.
"""

from __future__ import annotations

from resolver.io import ReadError

__all__ = ["WheelError"]


class WheelError(ReadError):
    """The wheel is not what was asked for: not torch, no arch list, a sha256 mismatch."""
