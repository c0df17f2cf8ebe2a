"""The index pip on this machine is configured with, read the way pip documents it, without pip.

gpuresolve names no registry itself: `db update`, `observe` and the lock writers read the
default index from pip's own configuration. pip need not be installed (after `uv tool install`,
`uvx` or pipx's uv backend there is none beside gpuresolve), so its files are read here, in
pip's order (https://pip.pypa.io/en/stable/topics/configuration/): global files, then the
user's (the legacy one first), then the site file (``sys.prefix``), then ``PIP_CONFIG_FILE``;
a later file wins, an ``[install]`` value beats a ``[global]`` one from any file, and
``PIP_INDEX_URL`` beats them all. ``PIP_CONFIG_FILE`` set to the null device loads no file; one
that exists hides the user's files.
"""

from __future__ import annotations

import configparser
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from resolver.core.errors import UserError
from resolver.io.bounded import read_optional_text

MAX_CONFIG_BYTES = 256 * 1024  # a pip.conf larger than this is not one
SECTIONS = ("global", "install")  # pip install's sections, the later wins
IGNORED_ENV = ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")  # never carried into a lock
INDEX_ENV = "GPURESOLVE_DEFAULT_INDEX"  # the index for packages outside the PyTorch index


@dataclass(frozen=True)
class PipIndex:
    """The default index pip is configured with, and where that came from."""

    url: str | None
    source: str  # "PIP_INDEX_URL", "/etc/pip.conf [global]", "" when none
    ignored: tuple[str, ...] = field(default=())  # extra-index-url / find-links seen, not used


def config_files(environ: Mapping[str, str], platform: str = sys.platform) -> list[Path]:
    """pip's configuration files, lowest priority first (files that may not exist)."""
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    name = "pip.ini" if platform == "win32" else "pip.conf"
    home = Path(environ.get("USERPROFILE" if platform == "win32" else "HOME") or Path.home())
    files: list[Path] = []
    if platform == "win32":
        files.append(Path(environ.get("ProgramData") or "C:\\ProgramData") / "pip" / name)
        user = [home / "pip" / name, Path(environ.get("APPDATA") or home) / "pip" / name]
    elif platform == "darwin":
        files.append(Path("/Library/Application Support/pip") / name)
        support = home / "Library" / "Application Support" / "pip"
        user_dir = support if support.is_dir() else home / ".config" / "pip"
        user = [home / ".pip" / name, user_dir / name]
    else:
        dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
        files += [Path(d) / "pip" / name for d in dirs.split(os.pathsep) if d]
        files.append(Path("/etc") / name)
        config_home = environ.get("XDG_CONFIG_HOME", "").strip() or str(home / ".config")
        user = [home / ".pip" / name, Path(config_home) / "pip" / name]
    if not (env_file and os.path.exists(env_file)):
        files += user
    files.append(Path(sys.prefix) / name)
    if env_file:
        files.append(Path(env_file))
    return files


def _values(path: Path) -> dict[tuple[str, str], str]:
    """{(section, key): value} of one file, keys spelt as pip normalises them."""
    if path.is_file() and not os.access(path, os.R_OK):
        return {}  # pip's configparser skips a file it cannot open
    text = read_optional_text(path, limit=MAX_CONFIG_BYTES, what="a pip configuration file")
    if text is None:
        return {}
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path}: not a pip configuration file ({first})") from None
    out: dict[tuple[str, str], str] = {}
    for section in parser.sections():
        for key, value in parser.items(section):
            out[(section, key.lower().replace("_", "-").removeprefix("--"))] = value
    return out


def pip_index(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> PipIndex:
    """The index ``pip install`` would use, read from pip's variables and files."""
    env = os.environ if environ is None else environ
    merged: dict[tuple[str, str], tuple[str, str]] = {}  # (section, key) -> (value, file)
    for path in config_files(env, platform):
        for key, value in _values(path).items():
            merged[key] = (value, str(path))
    seen = {key for (section, key), (value, _) in merged.items() if section in SECTIONS and value}
    seen |= {v[4:].lower().replace("_", "-") for v in IGNORED_ENV if env.get(v, "").strip()}
    ignored = sorted(seen & {"extra-index-url", "find-links"})
    given = env.get("PIP_INDEX_URL", "").split()
    if given:
        return PipIndex(given[0], "PIP_INDEX_URL", tuple(ignored))
    for section in reversed(SECTIONS):
        found = merged.get((section, "index-url"))
        if found and found[0].split():
            return PipIndex(found[0].split()[0], f"{found[1]} [{section}]", tuple(ignored))
    return PipIndex(None, "", tuple(ignored))


def pip_index_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The default index pip is configured with; None when nothing is configured."""
    return pip_index(environ).url


def default_index(option: str | None, environ: Mapping[str, str] | None = None) -> PipIndex:
    """The index for packages outside the PyTorch index: the option, else
    $GPURESOLVE_DEFAULT_INDEX, else pip's configuration. ``source`` says where it came from in
    words ("" for none: the installer's own default, which gpuresolve never writes)."""
    env = os.environ if environ is None else environ
    if option and option.strip():
        return PipIndex(option.strip(), "--default-index")
    if env.get(INDEX_ENV, "").strip():
        return PipIndex(env[INDEX_ENV].strip(), INDEX_ENV)
    found = pip_index(env)
    if found.url:
        return PipIndex(found.url, f"pip's configuration ({found.source})", found.ignored)
    return found
