"""The one rule for a secret in a URL: used for the request, never written or shown.

An index URL may carry a login (``https://user:token@host/simple``) and a conda channel a token
(``https://host/t/<token>/channel``). Three forms of such a URL exist:

- as given: used only to make the request (``io.credentials`` keeps it in the process);
- ``public``: what a file records, the URL without its user information or token, so the
  installer gets the secret its own way (netrc, keyring, a ``${VARIABLE}``);
- ``redacted``: what output shows, as pip shows it (``user:****@host``, a token alone
  ``****@host``, conda's ``/t/****/``).

pip's ``${VARIABLE}`` syntax (``https://${PIP_USER}:${PIP_TOKEN}@host/simple``) is no secret:
it is kept as written everywhere and expanded only for the request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # urllib.parse (with ipaddress) is imported by the first URL split, not by
    # every command's start: every line printed passes ``redact``, which needs no parse
    from urllib.parse import SplitResult

# pip's environment-variable syntax in requirement files (pip._internal.req.req_file)
ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")
_ONLY_VARS = re.compile(r"^(?:\$\{[A-Z0-9_]+\}|[:])*$")
MASK = "****"
# In free text: a scheme, then user information up to the first "@" of the authority.
# (to the last "@" before the path: a password may hold an unquoted "@", as urlsplit reads it)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/\s?#'\"<>]+)@")
# conda's token path segment (conda.gateways.connection: /t/<token>/), in any URL of the text
_CONDA_TOKEN = re.compile(r"(?P<head>://[^\s/'\"<>]+(?:/[^\s/'\"<>]+)*?)/t/(?P<token>[^\s/'\"<>]+)")


def _is_variables(text: str) -> bool:
    """Whether ``text`` is only ``${VAR}`` references (and ':'): written, never a secret."""
    return bool(text) and ENV_VAR.search(text) is not None and bool(_ONLY_VARS.match(text))


def _written(info: str) -> bool:
    """Whether user information holds no secret as written: its password (or a lone token) is
    only ``${VAR}`` references (``robot:${TOKEN}``, ``${USER}:${TOKEN}``, ``${TOKEN}``)."""
    user, colon, password = info.partition(":")
    return _is_variables(password) if colon else _is_variables(user)


def _mask_info(info: str) -> str:
    """pip's ``redact_netloc``: the user name kept, the password masked; a lone token masked."""
    if _written(info):
        return info
    user, colon, _password = info.partition(":")
    if not colon:
        return MASK
    return f"{user}:{MASK}"


# A login typed without a scheme before a host ("user:token@registry/name"): only where the
# text is refused as what it should be (an image reference), so a tag before a digest is no login
_BARE_LOGIN = re.compile(r"^(?P<info>[^/\s@]+:[^/\s@]*)@")


def redact_refused(text: str) -> str:
    """``text`` that was refused (shown back in the error), its login masked with or without a
    scheme: ``me:tok@reg/x:1`` is shown ``me:****@reg/x:1``."""
    text = redact(text)
    return _BARE_LOGIN.sub(lambda m: f"{_mask_info(m['info'])}@", text, count=1)


def redact(text: str) -> str:
    """``text`` (a URL, or a message naming URLs) with every secret masked as pip masks it."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m['head']}{_mask_info(m['info'])}@", text)
    if "/t/" in text:
        text = _CONDA_TOKEN.sub(_mask_token, text)
    return text


def _mask_token(match: re.Match[str]) -> str:
    token = match["token"]
    shown = token if _is_variables(token) else MASK
    return f"{match['head']}/t/{shown}"


def _split(url: str) -> SplitResult | None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts if parts.scheme and parts.netloc else None


def public(url: str) -> str:
    """The URL a file records: without user information or a conda token (unless they are only
    ``${VARIABLE}`` references, which are written as given)."""
    parts = _split(url)
    if parts is None:
        return url
    netloc = parts.netloc
    info, at, host = netloc.rpartition("@")
    if at and not _written(info):
        netloc = host
    path = parts.path
    segments = path.split("/")
    for i in range(1, len(segments) - 1):
        if segments[i] == "t" and segments[i + 1] and not _is_variables(segments[i + 1]):
            path = "/".join(segments[:i] + segments[i + 2 :])
            break
    if netloc == parts.netloc and path == parts.path:
        return url
    return parts._replace(netloc=netloc, path=path).geturl()


def without_login(url: str) -> str:
    """``url`` without any user information, ``${VARIABLE}`` references included (for uv,
    which does not expand them in pyproject.toml: it takes ``UV_INDEX_<NAME>_USERNAME``)."""
    plain = public(url)
    parts = _split(plain)
    if parts is None or "@" not in parts.netloc:
        return plain
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def has_secret(url: str) -> bool:
    """Whether ``url`` carries a login or a token that must not be written."""
    return public(url) != url


def has_variables(url: str) -> bool:
    """Whether ``url`` holds pip's ``${VARIABLE}`` references (expanded only for a request)."""
    return ENV_VAR.search(url) is not None


def expand(url: str, environ: Mapping[str, str]) -> str:
    """``url`` with each ``${VAR}`` replaced by the variable's value, as pip does for the
    request (an unset variable is left as written)."""
    return ENV_VAR.sub(lambda m: environ.get(m[1], m[0]), url)


def expand_outside_login(text: str, environ: Mapping[str, str]) -> str:
    """``text`` (a requirement file's index line) with its ``${VAR}``s expanded except in a
    URL's user information: a login read back is shown as written, never expanded."""
    match = _USERINFO.search(text)
    if match is None:
        return expand(text, environ)
    head, rest = text[: match.end("head")], text[match.end() :]
    return f"{expand(head, environ)}{match['info']}@{expand(rest, environ)}"
