"""The environment gpuresolve's child installers (uv) run with: built, never inherited whole.

uv reads dozens of ``UV_*`` variables and its own config files; several change what it resolves
(``UV_INDEX``, ``UV_EXTRA_INDEX_URL``, ``UV_DEFAULT_INDEX``, ``UV_EXCLUDE_NEWER``, ...), so a lock
made under them would depend on the shell it was made in. The closure's uv gets only the
variables below (what a process needs to run, and what reaches an index without choosing it:
cache, proxies, certificates, credentials), plus ``UV_NO_CONFIG``; every index is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping

# What a process needs to run at all (a home, a temporary folder, Windows' system folders).
PROCESS = (
    "PATH",
    "HOME",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "TEMP",
    "TMP",
    "TMPDIR",
    "LANG",
    "LC_ALL",
)
CACHE = ("UV_CACHE_DIR", "XDG_CACHE_HOME")  # where downloads are kept, not what is chosen
_PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
PROXIES = tuple(v for name in _PROXY_NAMES for v in (name, name.lower()))
CERTIFICATES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_NATIVE_TLS")
CREDENTIALS = ("NETRC",)  # a private index's login (uv reads ~/.netrc, or this file)
DOCUMENTED = (*CACHE, *PROXIES, *CERTIFICATES, *CREDENTIALS)
FIXED = {"UV_NO_CONFIG": "1", "UV_NO_PROGRESS": "1"}


def uv_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The closure's uv environment: the process basics and the documented variables of
    ``environ``, nothing else of it (no ``UV_*`` but the cache folder and native TLS)."""
    env = {k: environ[k] for k in (*PROCESS, *DOCUMENTED) if environ.get(k)}
    env.update(FIXED)
    return env


def installer_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment an installer (uv or pip) runs with for ``install``: the user's, less
    every ``UV_*`` variable but the documented ones (``UV_INDEX_URL`` would otherwise replace
    the lock's own ``--index-url``), and no uv config files."""
    keep = set(DOCUMENTED)
    env = {k: v for k, v in environ.items() if not k.startswith("UV_") or k in keep}
    env.update(FIXED)
    return env


def described() -> str:
    """One line for ``lock -v`` and the README: what passes through to uv."""
    return "uv runs with only these of your variables: " + ", ".join(DOCUMENTED)
