"""The logins of index URLs, kept in this process for the requests that need them.

A URL enters through ``io.urls`` (options, variables, pip's and gpuresolve's configuration, a
lock's recorded inputs); from there on the program holds only its ``public`` form (no login,
no conda token), which is what every file records. This store maps each public prefix back to
the URL as given, for the one use of a secret: the request (``for_request``: the HTTP client,
the installers' and uv's credential file). A lock read back names the indexes whose login was
not written (``mark``), so the files say so again however the secret comes this time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from resolver.core import secrets
from resolver.core.errors import GpuresolveError

_GIVEN: dict[str, str] = {}  # public prefix (no trailing "/") -> the URL as given
_PRIVATE: dict[str, str] = {}  # public prefix -> what it needs: one of KINDS
LOGIN, TOKEN, VARIABLES = "login", "token", "variables"
KINDS = (LOGIN, TOKEN, VARIABLES)  # user:password@, conda's /t/<token>/, pip's ${VAR}s
MAX_RECORDED = 64  # prefixes a lock read back may name


def _key(url: str) -> str:
    return url.rstrip("/")


def keep(url: str) -> str:
    """The public form of ``url``; its login (if any) kept here for the requests."""
    shown = secrets.public(url)
    if shown != url:
        _GIVEN[_key(shown)] = _key(url)
        netloc_kept = urlsplit(shown).netloc == urlsplit(url).netloc
        _PRIVATE[_key(shown)] = TOKEN if netloc_kept else LOGIN
    elif secrets.has_variables(url):
        _PRIVATE[_key(url)] = VARIABLES
    return shown


def mark(recorded: object) -> None:
    """The public URLs a lock recorded as needing a login the installer supplies (``logins``:
    URL -> kind); what is not such a mapping of URLs and kinds is ignored (input, bounded)."""
    if not isinstance(recorded, dict) or len(recorded) > MAX_RECORDED:
        return
    for url, kind in recorded.items():
        if isinstance(url, str) and len(url) <= 2048 and kind in KINDS and "://" in url:
            _PRIVATE.setdefault(_key(secrets.public(url)), kind)


def forget() -> None:
    """Empty the store (a new command in the same process: the tests)."""
    _GIVEN.clear()
    _PRIVATE.clear()


def _prefix(url: str, keys: Iterable[str]) -> str | None:
    """The longest key that is ``url`` or a folder of it."""
    best = None
    for key in keys:
        if (url == key or url.startswith(key + "/")) and (best is None or len(key) > len(best)):
            best = key
    return best


def any_private() -> bool:
    """Whether any URL of this command needs a login no file holds (the writers' fast path)."""
    return bool(_PRIVATE)


def needs(url: str) -> str | None:
    """What ``url`` (public) needs that no file carries (one of ``KINDS``), or None."""
    found = _prefix(_key(url), _PRIVATE)
    if found is not None:
        return _PRIVATE[found]
    return VARIABLES if secrets.has_variables(url) else None


def private_of(urls: Iterable[str]) -> dict[str, str]:
    """The prefixes known here that ``urls`` fall under, with their kind (what a lock records)."""
    out: dict[str, str] = {}
    for url in urls:
        found = _prefix(_key(url), _PRIVATE)
        if found is not None:
            out[found] = _PRIVATE[found]
        elif secrets.has_variables(url):
            out[_key(url)] = VARIABLES
    return dict(sorted(out.items()))


def given(url: str) -> str:
    """``url`` with the login it was given with (still with its ``${VAR}`` references)."""
    found = _prefix(_key(url), _GIVEN)
    if found is None:
        return url
    return _GIVEN[found] + url[len(found) :]


def for_request(url: str, environ: Mapping[str, str] | None = None) -> str:
    """The URL to request: its login as given, ``${VAR}`` expanded from the environment.
    Without one, the HTTP client's netrc (and the installers' netrc or keyring) apply."""
    return secrets.expand(given(url), os.environ if environ is None else environ)


def from_keyring(url: str) -> str | None:
    """``url`` with the login a keyring holds for it, as pip looks one up (the URL, then its
    host), when the ``keyring`` package is installed; None otherwise. Asked only after a 401:
    a keyring backend can be slow (a desktop's secret service)."""
    import importlib.util
    from urllib.parse import quote

    parts = urlsplit(url)
    if importlib.util.find_spec("keyring") is None or not parts.hostname or "@" in parts.netloc:
        return None
    import keyring

    for service in (url, parts.netloc):
        try:
            found = keyring.get_credential(service, None)
        except Exception:  # any backend's failure means no login from it
            return None
        if found is not None and found.username:
            login = f"{quote(found.username, safe='')}:{quote(found.password or '', safe='')}"
            return parts._replace(netloc=f"{login}@{parts.netloc}").geturl()
    return None


def shown(url: str) -> str:
    """``url`` as output shows it: with its login masked as pip does (``user:****@host``)."""
    return secrets.redact(given(url))


def logins(
    urls: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """host -> (user, password) of those ``urls`` that have a login here (given, or ``${VAR}``s
    set in the environment): what a child installer gets in a private netrc file."""
    from urllib.parse import unquote

    found: dict[str, tuple[str, str]] = {}
    for url in urls:
        full = for_request(url, environ)
        try:
            parts = urlsplit(full)
        except ValueError:
            continue
        if parts.hostname and parts.username is not None and "${" not in full.split("@")[0]:
            found[parts.hostname] = (unquote(parts.username), unquote(parts.password or ""))
    return found


_NETRC_BAD = frozenset(" \t\r\n\"'#\\")


def child_netrc(directory: str, urls: Iterable[str] = ()) -> str | None:
    """A netrc file in ``directory`` (a private temporary folder) with the logins a child
    installer (uv, pip) needs: every login given to this command and those of ``urls`` (their
    ``${VAR}``s set in the environment), then the user's own netrc. Never on a command line,
    where other users' ``ps`` would read it. None when there is no login to hand on."""
    hosts = logins([*_GIVEN, *urls])
    usable = {
        h: (u, p) for h, (u, p) in hosts.items() if not (_NETRC_BAD & set(f"{h}{u}{p}")) and u
    }
    if not usable:
        return None
    text = "".join(  # a token alone is a login without a password, as pip sends it
        f"machine {h} login {u}{f' password {p}' if p else ''}\n" for h, (u, p) in usable.items()
    )
    mine = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        from resolver.io.bounded import read_text

        text += "\n" + read_text(mine, limit=1024 * 1024, what="your netrc file")
    except (OSError, GpuresolveError):  # none, or unreadable: the logins above are enough
        pass
    path = os.path.join(directory, "netrc")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def child_url(url: str) -> str:
    """The URL a child installer gets on its command line: ``${VAR}``s expanded, no login (that
    goes in ``child_netrc``)."""
    return secrets.without_login(secrets.expand(url, os.environ))
