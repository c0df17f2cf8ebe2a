"""The compatibility database (``data/*.yaml``): the one entry point the rest of gpuresolve uses.

``load()`` picks the database in use, reads it through the JSON cache and returns a typed
Catalog. The jobs behind it live in resolver/db/: the record types (models.py), parsing the raw
YAML (parse.py), ``db check``'s cross-record rules (check.py), GPU-name lookup (gpunames.py),
which directory is used (location.py) and the cache (cache.py). With a warm cache only the
record types are imported: the parser and PyYAML load when the cache cannot answer.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resolver.core.errors import MALFORMED, DataError, UserError, escaped, malformed
from resolver.db import cache as _cache
from resolver.db import location as _location
from resolver.db import snapshot as _snapshot
from resolver.db.evidence import Contradiction, Provenance
from resolver.db.models import (
    Architecture,
    ArchList,
    Catalog,
    CompatFloor,
    CondaBuild,
    CondaForge,
    CondaRelease,
    DriverWindow,
    GpuModel,
    Pinned,
    Release,
    Toolkit,
    Variant,
)

__all__ = [  # re-exported: callers import the database's names from here
    "ArchList",
    "Architecture",
    "Catalog",
    "CompatFloor",
    "CondaBuild",
    "CondaForge",
    "CondaRelease",
    "Contradiction",
    "DataError",
    "DriverWindow",
    "GpuModel",
    "Pinned",
    "Provenance",
    "Release",
    "Toolkit",
    "Variant",
]

FILES = ("sources.yaml", "cuda.yaml", "gpus.yaml", "torch.yaml")
OPTIONAL_FILES = ("conda_forge.yaml", "observations.yaml", "extensions.yaml")  # read where present
SNAPSHOT_FILES = FILES + OPTIONAL_FILES  # what data/catalog.json holds, parsed (db/snapshot.py)
DATA_ENV = _location.DATA_ENV
# What a cached catalog depends on besides the data: the code that reads and checks it (a change
# to any is a miss, so a cache never outlives the code it was written for).
_DB = Path(__file__).parent / "db"
_CODE = tuple(
    [Path(__file__)]
    + [
        _DB / f"{m}.py"
        for m in ("models", "gpunames", "evidence", "parse", "observations", "extensions")
    ]
)


def from_raw(raw: Mapping[str, Any], origin: str = "<memory>", lenient: bool = False) -> Catalog:
    """Build a Catalog from the parsed YAML documents (keys are the file names)."""
    from resolver.db.parse import from_raw as parse  # the parser: only on a cache miss

    return parse(raw, origin=origin, lenient=lenient)


# Choosing the database and the cache live in resolver/db/; these names stay for callers.
shipped_data_dir = _location.shipped_data_dir
user_data_dir = _location.user_data_dir
data_dir = _location.data_dir
cache_dir = _location.cache_dir
CACHE_ENV = _location.CACHE_ENV
_warned: set[str] = set()  # user databases already warned about in this process


def _updated(directory: Path) -> str:
    """The database's version as text ("" when unreadable); kept for older callers."""
    try:
        return str(_location.read_version(directory))
    except DataError:
        return ""


def load(directory: Path | None = None) -> Catalog:
    """Read and validate the database in ``directory``, else the one in use.

    The one in use is ``$GPURESOLVE_DATA_DIR`` (errors are the user's: exit 2), else the newer
    of the user's and the shipped database; a user database that fails to load is passed
    over with one warning line on stderr, so that a damaged download never bricks the tool.
    """
    if directory is not None:
        return _load_dir(directory)
    choice = _location.choose()
    if choice.kind == "forced":
        try:
            return _load_dir(choice.directory)
        except DataError as exc:
            raise DataError(f"{DATA_ENV}={choice.directory}: {exc}") from None
    if choice.kind == "user":
        try:
            return _load_dir(choice.directory)
        except DataError as exc:
            choice = _location.Choice(shipped_data_dir(), "shipped", (choice.directory, str(exc)))
    if choice.ignored is not None:
        _warn_ignored(*choice.ignored)
    return _load_dir(choice.directory, _user_observations())


# The user's own observations, parsed, in a cached catalog (not a file name: no clash possible).
OVERLAY_KEY = "user observations"


def _user_observations() -> Path | None:
    """The user data directory's observations.yaml, where there is one.

    `verify`, `--confirm` and `db import` record into it; while no user database is in use (no
    `db update` yet), it is laid over the shipped database (``_overlay``).
    """
    path = user_data_dir() / "observations.yaml"
    try:
        return path if path.is_file() else None
    except OSError:
        return None


def _overlay(catalog: Catalog, path: Path, doc: Any) -> Catalog:
    """The shipped database with the user's observations (parsed) laid over it, validated entry
    by entry: one for a build the database lacks is skipped; a damaged file is a warning."""
    from resolver.db.observations import apply_observations

    try:
        return apply_observations(catalog, doc, lenient=True)
    except DataError as exc:
        _warn_ignored(path, str(exc))
        return catalog


def _warn_ignored(directory: Path, reason: str) -> None:
    if str(directory) in _warned:
        return
    _warned.add(str(directory))
    with contextlib.suppress(OSError, ValueError):  # stderr closed or full: still fall back
        print(escaped(_location.ignored_warning(directory, reason)), file=sys.stderr, flush=True)


def _load_dir(directory: Path, overlay: Path | None = None) -> Catalog:
    """One directory's catalog, with the user's observations file ``overlay`` laid over it.

    The parsed YAML (the overlay's too: parsing it cost every command ~70 ms of start-up) is
    cached as JSON, keyed on every file read (a damaged cache is only a miss), and validated by
    `from_raw` and the overlay's own rules either way, so a planted cache can yield no catalog
    the YAML could not."""
    try:
        bounded = directory.resolve() != shipped_data_dir()
    except (OSError, RuntimeError):  # a symlink loop: certainly not the shipped database
        bounded = True
    cache = _cache_file(directory, overlay)
    if cache is not None:
        cached = _cache.read(cache)
        doc = cached.pop(OVERLAY_KEY, None) if cached is not None else None
        if cached is not None and (overlay is None or doc is not None):
            try:
                found = from_raw(cached, origin=str(directory), lenient=bounded)
            except (*MALFORMED, UserError):
                pass  # a foreign or stale cache: parse the YAML again, silently
            else:
                return found if overlay is None else _overlay(found, overlay, doc)
    # The shipped database: its files parsed ahead (data/catalog.json), while they match.
    raw: dict[str, Any] | None = None if bounded else _snapshot.read(directory, SNAPSHOT_FILES)
    if raw is None:
        raw = {}
        for name in FILES:
            raw[name] = _read_yaml(directory / name, bounded=bounded)
        for name in OPTIONAL_FILES:
            if (directory / name).is_file():
                raw[name] = _read_yaml(directory / name, bounded=bounded)
    try:
        catalog = from_raw(raw, origin=str(directory), lenient=bounded)
    except MALFORMED as exc:
        # from_raw names the record for what it checks; anything else is malformed all the same
        raise malformed(f"{directory}: malformed database", exc) from None
    doc = None
    if overlay is not None:
        try:
            doc = _read_yaml(overlay, bounded=True)
        except DataError as exc:  # unreadable: warned of, and not cached (so warned again)
            _warn_ignored(overlay, str(exc))
    if cache is not None and (overlay is None or doc is not None):
        kept = _deferred(raw, directory)
        _cache.write(cache, kept if doc is None else {**kept, OVERLAY_KEY: doc})
    return catalog if doc is None or overlay is None else _overlay(catalog, overlay, doc)


def _cache_file(directory: Path, overlay: Path | None = None) -> Path | None:
    extra = () if overlay is None else (overlay,)
    return _location.cache_file(directory, FILES, OPTIONAL_FILES, _CODE, extra)


def parse_shipped(path: Path) -> Any:
    """One shipped file parsed, as the snapshot's generator (tools/) stores it: extensions.yaml
    as its head only (``db/extdefer``; its packages have their own snapshot)."""
    doc = _read_yaml(path, bounded=False)
    return _deferred({path.name: doc}, path.parent).get(path.name)


def parse_yaml(path: Path) -> Any:
    """One shipped file parsed whole (extensions.json's generator)."""
    return _read_yaml(path, bounded=False)


def _deferred(raw: dict[str, Any], directory: Path) -> dict[str, Any]:
    """``raw`` with extensions.yaml cut to its head (what the cache and snapshot keep): the
    start path never reads the extension packages' history."""
    from resolver.db import extdefer

    doc = raw.get(extdefer.FILE)
    if not isinstance(doc, dict) or extdefer.DEFERRED in doc:
        return raw
    stamp = extdefer.stamp_of(directory)
    if stamp is None:
        return raw
    return {**raw, extdefer.FILE: extdefer.head(doc, stamp)}


def _read_yaml(path: Path, *, bounded: bool = True) -> Any:
    from resolver.db import yamlfile  # imports PyYAML: only when the cache cannot answer

    return yamlfile.read_yaml(path, bounded=bounded)
