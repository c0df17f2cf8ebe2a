"""gpuresolve's exceptions: one root, one class per concept, each mapped to an exit code here.

The CLI asks ``exit_code`` for every ``GpuresolveError`` it catches, so an error a call site
forgot to convert still ends as one line with its concept's exit code, never as exit 70.
"""

from __future__ import annotations


class GpuresolveError(Exception):
    """The root: anything gpuresolve raises on purpose; the message is one line for the user."""


class UserError(GpuresolveError):
    """Bad input (an option, a file, a name): one clear line, exit code 2, never a traceback."""


class DataError(UserError):
    """The compatibility database is malformed; the message names the file and the record."""


class FetchError(GpuresolveError):
    """A URL could not be read (after the retries, where retrying made sense)."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url, self.reason, self.status = url, reason, status


class IndexFormatError(GpuresolveError):
    """A page that is not a simple-repository page (garbage, an error page served as 200)."""


class MetadataError(GpuresolveError):
    """Metadata that cannot be read or is not the wheel's (a broken zip, garbage, a mismatch)."""


EXIT_USAGE = 2  # bad input, or a source we were pointed at that cannot be read
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: a bug of ours, never 1 ("no compatible build")

# The one place an error concept meets its exit code (the most specific class listed wins).
EXIT_CODES: dict[type, int] = {
    UserError: EXIT_USAGE,
    FetchError: EXIT_USAGE,
    IndexFormatError: EXIT_USAGE,
    MetadataError: EXIT_USAGE,
}


def exit_code(exc: GpuresolveError) -> int:
    """The exit code of an error: that of its nearest listed class, EXIT_INTERNAL if none is."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return EXIT_INTERNAL


def shown(value: object, limit: int = 60) -> str:
    """A user's value quoted for a one-line message, cut when long (a 5,000-digit "version")."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 4]}...{text[-1]}"
