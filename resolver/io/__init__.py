"""Layer 1, input and output: the HTTP client, zip over range reads, bounded readers, atomic writes.

Imports only from the core layer below it; every layer above reads and writes through it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from resolver.errors import UserError


class ReadError(UserError):
    """A file or URL could not be read as asked: a server error, a truncated or damaged file,
    a read budget. One line naming the file or URL, exit 2."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading, refused at once (OSError) unless it is a regular file: a
    FIFO would block the read forever, a device (``/dev/zero``) never end."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
