"""Which database a command uses, and where the parsed-catalog cache lives.

Three candidates: ``$GPURESOLVE_DATA_DIR`` (explicit: used as given, errors are the user's to
fix), the user's database (written by ``gpuresolve db update``) and the one shipped in the
wheel. Between the last two a real version decides: the content schema number first (a
database written by an older gpuresolve never shadows a newer shipped one), then the
``updated:`` timestamp. The version is read from the top of ``torch.yaml`` without parsing it,
so choosing costs a few lines of I/O; loading and the fallback on a damaged user database
live with the loader.

No ``from __future__ import annotations``: typing.NamedTuple would compile each string
annotation on every start (see db/models.py).
"""

import functools
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from resolver.core.errors import DataError, UserError
from resolver.io.bounded import open_regular

DATA_ENV = "GPURESOLVE_DATA_DIR"
CACHE_ENV = "GPURESOLVE_CACHE_DIR"
SCHEMA = 2  # the content schema this gpuresolve reads and `db update` writes
LEGACY_SCHEMA = 1  # a database with no `schema:` line (gpuresolve before schema numbers)
# Every file name `gpuresolve db update` writes into the user database (it copies the shipped
# data directory, then rewrites the YAML files): what `db reset` may remove.
# observations.yaml is not one of them: `verify` and `db import` record the user's own
# observations there, which `db update` merges with the shipped ones and `db reset` keeps.
DB_FILES = (
    "sources.yaml",
    "cuda.yaml",
    "gpus.yaml",
    "torch.yaml",
    "conda_forge.yaml",
    "images.yaml",
    "gpu_peaks.yaml",
    "extensions.yaml",
    "gpu_names.json",  # generated from pci.ids (tools/gen_gpu_names.py), copied as it is
    "catalog.json",  # generated: the shipped files parsed (db/snapshot.py); used there only
    "extensions.json",  # generated: extensions.yaml parsed (db/extdefer.py); used while it matches
    "ext_build_configs.yaml",  # release build configurations db update reads (dbupdate/run.py)
    "SCHEMA.md",
)
_HEAD_BYTES = 64 * 1024  # `schema:` and `updated:` sit in the first lines of torch.yaml
_TOP_KEY = re.compile(r"^(schema|updated):[ \t]*(.*?)[ \t]*(?:#.*)?$")
_MIN_TIME = datetime.min.replace(tzinfo=timezone.utc)


@functools.cache
def shipped_data_dir() -> Path:
    """`data/` inside the installed wheel (resolver/data), else the checkout's top-level `data/`
    (found once: the installation does not move while gpuresolve runs)."""
    package = Path(__file__).resolve().parent.parent
    inside = package / "data"
    return inside if (inside / "torch.yaml").is_file() else package.parent / "data"


def xdg_dir(variable: str, default: Path) -> Path:
    """An XDG base directory: "If an implementation encounters a relative path in any of these
    variables it should consider the path invalid and ignore it" (the XDG Base Directory
    specification), so a relative one (which would land in whatever folder gpuresolve runs
    from) falls back to the default, as an unset or empty one does."""
    value = os.environ.get(variable) or ""
    return Path(value) if os.path.isabs(value) else default


def _local_base() -> Path:
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    return xdg_dir("XDG_DATA_HOME", Path.home() / ".local" / "share")


def user_data_dir() -> Path:
    """Where `gpuresolve db update` writes: the user's data directory (XDG on Linux)."""
    return _local_base() / "gpuresolve" / "data"


def cache_dir() -> Path:
    """$GPURESOLVE_CACHE_DIR, else the user's cache directory (XDG on Linux)."""
    forced = os.environ.get(CACHE_ENV)
    if forced:
        return Path(forced)
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "gpuresolve" / "cache"
    return xdg_dir("XDG_CACHE_HOME", Path.home() / ".cache") / "gpuresolve"


class Version(NamedTuple):
    """A database's version: compared by schema, then by time."""

    schema: int
    updated: datetime

    def __str__(self) -> str:
        return f"schema {self.schema}, updated {self.updated.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def parse_updated(text: str) -> datetime:
    """``2026-11-24T10:00:00Z`` (db update), ``2026-11-22`` (older data: midnight UTC), or any
    ISO 8601 time with an offset; a time without an offset is UTC."""
    value = text.strip()
    if len(value) > 40:
        raise ValueError("too long")
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    when = datetime.fromisoformat(value)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def read_version(directory: Path) -> Version:
    """The version in ``directory/torch.yaml`` (DataError when it cannot be read or is malformed).

    No ``schema:`` line means a database from before schema numbers (LEGACY_SCHEMA); no
    ``updated:`` line sorts before every dated database.
    """
    return read_head(directory)[0]


def read_head(directory: Path) -> tuple[Version, str | None]:
    """The version in ``directory/torch.yaml`` and its ``updated:`` as written (None: no such
    line): what `--version` prints, read without loading the database."""
    path = directory / "torch.yaml"
    try:
        with open_regular(path, what="a database file") as fh:
            head = fh.read(_HEAD_BYTES)
    except FileNotFoundError:
        raise DataError(f"{path}: database file missing") from None
    except UserError as exc:  # a FIFO or a device
        raise DataError(str(exc)) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(head) == _HEAD_BYTES:  # a cut multi-byte character at the end is not damage
        head = head[: head.rfind(b"\n") + 1]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _TOP_KEY.match(line)
        if m and m[1] not in found:
            found[m[1]] = m[2].strip("'\"")
            if len(found) == 2:
                break
    schema = LEGACY_SCHEMA
    if "schema" in found:
        raw = found["schema"]
        if not re.fullmatch(r"[0-9]{1,4}", raw) or int(raw) < 1:
            raise DataError(f"{path}: 'schema' must be a positive integer, got {raw[:40]!r}")
        schema = int(raw)
    updated = _MIN_TIME
    if found.get("updated"):
        try:
            updated = parse_updated(found["updated"])
        except ValueError:
            raise DataError(
                f"{path}: 'updated' must be a date or an ISO 8601 time, "
                f"got {found['updated'][:40]!r}"
            ) from None
    return Version(schema, updated), found.get("updated") or None


class Choice(NamedTuple):
    """The database to load, and (where one was passed over as damaged) why."""

    directory: Path
    kind: str  # "forced" ($GPURESOLVE_DATA_DIR), "user" or "shipped"
    ignored: tuple[Path, str] | None = None  # a user database skipped: (directory, reason)


def _user_present(user: Path) -> bool:
    """A user database exists: any database file at its path (a file where the directory
    should be counts too, as a damaged one). An empty directory (a reset's leftover) or one
    holding only the user's own observations.yaml (what `verify` records) is no database."""
    try:
        if not user.is_dir():
            return os.path.lexists(user)
        with os.scandir(user) as entries:
            return any(e.name in DB_FILES for e in entries)
    except OSError:
        return True  # there, but unreadable: damaged, not absent


def choose() -> Choice:
    """$GPURESOLVE_DATA_DIR, else the user's database where its version is newer than the
    shipped one's and this gpuresolve can read its schema, else the shipped database."""
    forced = os.environ.get(DATA_ENV)
    if forced:
        return Choice(Path(forced), "forced")
    shipped = shipped_data_dir()
    try:
        user = user_data_dir()
    except RuntimeError:  # no home directory to look in
        return Choice(shipped, "shipped")
    if not _user_present(user):
        return Choice(shipped, "shipped")
    try:
        if not user.is_dir():
            raise DataError(f"{user}: not a directory")
        mine = read_version(user)
    except (DataError, OSError) as exc:
        return Choice(shipped, "shipped", (user, str(exc)))
    if mine.schema > SCHEMA:
        reason = f"written by a newer gpuresolve (schema {mine.schema}; this one reads {SCHEMA})"
        return Choice(shipped, "shipped", (user, reason))
    try:
        theirs = read_version(shipped)
    except DataError:
        theirs = Version(LEGACY_SCHEMA, _MIN_TIME)
    return Choice(user, "user") if mine > theirs else Choice(shipped, "shipped")


def data_dir() -> Path:
    """The database chosen by version (the loader may still fall back from a damaged one)."""
    return choose().directory


def ignored_warning(directory: Path, reason: str) -> str:
    """The one line a command prints when it passes over a damaged user database."""
    flat = " ".join(reason.split())
    if len(flat) > 300:
        flat = flat[:297] + "..."
    return (
        f"gpuresolve: warning: ignoring the user database in {directory} ({flat}); "
        "using the shipped database (`gpuresolve db reset` removes it, "
        "`gpuresolve db update` rewrites it)"
    )


def cache_file(
    directory: Path,
    required: tuple[str, ...],
    optional: tuple[str, ...],
    code: tuple[Path, ...],
    extra: tuple[Path, ...] = (),
) -> Path | None:
    """The cache file for the catalog parsed from ``directory``: named by a checksum of the
    gpuresolve version, the mtimes of the ``code`` files (the record classes and the
    parser), the directory and its files' sizes and mtimes, and the paths, sizes and mtimes
    of the ``extra`` files read with it (the user's observations); None where a file is
    missing or the cache directory cannot be named."""
    import zlib  # a checksum names the file; hashlib would cost more start-up than it saves

    from resolver import __version__

    try:
        parts = [__version__, *(f"{c.name}:{c.stat().st_mtime_ns}" for c in code)]
        parts.append(str(directory.resolve()))
        for name in (*required, *optional):
            path = directory / name
            if name in required or path.is_file():
                st = path.stat()
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
            else:
                parts.append(f"{name}:absent")
        for path in extra:
            st = path.stat()
            parts.append(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}")
        where = cache_dir()
    except (OSError, RuntimeError):
        return None  # a missing file: let the loader say so; no home: no cache
    key = "|".join(parts).encode()
    digest = f"{zlib.crc32(key):08x}{zlib.adler32(key):08x}"
    return where / f"catalog-{digest}.json"
