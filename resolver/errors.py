"""Errors a user can act on: the CLI prints their one-line message and exits 2."""


class UserError(Exception):
    """Bad input (an option, a file, a name): one clear line, exit code 2, never a traceback."""


class DataError(UserError):
    """The compatibility database is malformed; the message names the file and the record."""


def shown(value: object, limit: int = 60) -> str:
    """A user's value quoted for a one-line message, cut when long (a 5,000-digit "version")."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 4]}...{text[-1]}"
