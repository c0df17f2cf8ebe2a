"""Index and channel URLs from options, the environment and pip's configuration, validated.

They end up in files other tools read (requirements.txt's ``--index-url`` line, environment.yml,
the installer's command line), so a newline that would inject an ``--extra-index-url`` line, a
``javascript:`` URL or a space that splits an argument is refused before anything is written.

A login in the URL (``user:token@``, a conda ``/t/<token>/``) is taken out here, where the URL
enters, and kept for the requests (``io.credentials``): what the program passes on is the URL
without it, so no file or output can carry it. pip's ``${VARIABLE}`` references are accepted
and kept as written.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from resolver.core import secrets
from resolver.core.errors import UserError, shown
from resolver.io import credentials

MAX_URL = 2048
_BAD_CHARS = re.compile(r"[\s\x00-\x1f\x7f\"'<>\\^`{|}]")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def index_url(value: str, what: str) -> str:
    """An http(s) URL, or a ``file:`` URL of a local mirror directory; one line when it is not."""
    url = value.strip()
    if not url:
        raise UserError(f"{what}: an empty URL")
    shown = _shown(url)
    if len(url) > MAX_URL:
        raise UserError(f"{what}: a URL longer than {MAX_URL} characters: {shown}")
    if _BAD_CHARS.search(secrets.ENV_VAR.sub("", url)):
        raise UserError(
            f"{what}: {shown}: URLs may not contain spaces, control characters or quotes"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise UserError(f"{what}: {shown}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise UserError(f"{what}: {shown}: no host name")
        return credentials.keep(url)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise UserError(f"{what}: {shown}: a file: URL names a local path (file:///path)")
        if not parts.path.startswith("/"):
            raise UserError(f"{what}: {shown}: a file: URL needs an absolute path")
        return url
    raise UserError(f"{what}: {shown}: only http://, https:// or file:/// URLs are accepted")


def channel(value: str, what: str) -> str:
    """A conda channel: a name such as ``conda-forge``, or a URL as :func:`index_url` accepts."""
    text = value.strip()
    if "://" in text or text.startswith("file:"):
        return index_url(text, what)
    if not _CHANNEL_NAME.match(text):
        raise UserError(
            f"{what}: {_shown(text)}: a channel name (letters, digits, '.', '_', '-') or a URL"
        )
    return text


def _shown(url: str) -> str:
    """The value as it can be shown in one line of an error message."""
    return shown(secrets.redact(url), 82)
