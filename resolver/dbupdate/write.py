"""Write a database: YAML in the schema's style, validated in a temporary directory, swapped in.

A reader (``gpuresolve suggest`` in another shell) sees the old database or the new one, never
a mix: the four files are written into a sibling temporary directory, loaded and checked there,
and only then does the directory replace the old one (two renames; the old one is kept until
the new one is in place).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError
from resolver.db.yamlfile import dump_yaml
from resolver.dbupdate import UpdateError
from resolver.io.atomic import replacement_mode
from resolver.io.filelock import locked, write_error

_HEADER = "# Updated by `gpuresolve db update` at {stamp} (schema: SCHEMA.md).\n"


def leading_comments(path: Path) -> str:
    """The comment block a curated file opens with (kept when the file is rewritten)."""
    lines: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                lines.append(line)
    except OSError:
        pass
    return "".join(lines)


def write_database(
    target: Path,
    raw: Mapping[str, Any],
    *,
    base: Path,
    changed: Iterable[str],
    stamp: str,
    known_problems: Iterable[str] = (),
) -> None:
    """Replace the database in ``target`` with ``raw``, whole or not at all.

    Files not in ``changed`` are copied byte for byte from ``base`` (comments kept), as are the
    other files there (SCHEMA.md, optional data files); files only in ``target`` are kept.
    Raises UpdateError, leaving ``target`` untouched, when the result does not load or
    ``check()`` finds a problem that ``known_problems`` (the old database's) does not list;
    UserError when the disk is full or read-only (nothing half-written is left).
    """
    target = Path(os.path.abspath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(target.parent, exc) from None
    # The folder's lock (verify and db import take it to record observations there) is held
    # from the copy of the old folder to the swap: nothing recorded meanwhile is lost, and
    # any temporary folder of ours found now belongs to no live run.
    with locked(target):
        remove_leftovers(target)
        _write_locked(target, raw, base, set(changed), stamp, known_problems)


def clean_leftovers(target: Path) -> list[Path]:
    """Remove what a killed `db update` left beside ``target`` unless a live run holds its
    lock (then its folders are in use, and the run removes them itself); never fails."""
    target = Path(os.path.abspath(target))
    if not target.parent.is_dir():
        return []
    try:
        with locked(target, wait_s=0):
            return remove_leftovers(target)
    except UserError:  # held by a live run, or no lock file can be made here
        return []


def remove_leftovers(target: Path) -> list[Path]:
    """Remove the ``.NAME.new-*``/``.NAME.old-*`` folders a killed `db update` left beside
    ``target``; called with ``target``'s lock held, so no live run is using one. Only what is
    provably ours goes: that name, a real folder (not a link), owned by this user."""
    removed: list[Path] = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith((f".{target.name}.new-", f".{target.name}.old-")):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != getattr(os, "getuid", lambda: 0)():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _write_locked(
    target: Path,
    raw: Mapping[str, Any],
    base: Path,
    changed: set[str],
    stamp: str,
    known_problems: Iterable[str],
) -> None:
    from resolver import catalog
    from resolver.db.check import check

    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    except OSError as exc:
        raise write_error(target.parent, exc) from None
    try:
        mode = replacement_mode(target, 0o777)
        source_dir = Path(os.path.abspath(base))
        if target.is_dir():
            _keep_own_files(target, tmp, replaced=source_dir != target)
        if source_dir != target:  # the database it started from, all of it (not only FILES)
            own = _read_own_observations(tmp)
            shutil.copytree(source_dir, tmp, dirs_exist_ok=True, symlinks=True, copy_function=_copy)
            _merge_own_observations(tmp, own)
        # The target's own mode (or mkdir's), not mkdtemp's 0700 nor base's that copytree copied.
        os.chmod(tmp, mode)
        for name in (*catalog.FILES, *catalog.OPTIONAL_FILES):
            if name in changed and name in raw:
                kept = [
                    line
                    for line in leading_comments(base / name).splitlines(keepends=True)
                    if "`gpuresolve db update`" not in line
                ]
                header = "".join(kept) + _HEADER.format(stamp=stamp)
                (tmp / name).write_text(header + dump_yaml(raw[name]), encoding="utf-8")
        try:  # exactly as gpuresolve will load it (optional files such as conda_forge.yaml too)
            problems = check(catalog.load(tmp))
        except UserError as exc:
            raise UpdateError(f"the updated database does not load: {exc}") from None
        new = [p for p in problems if p not in set(known_problems)]
        if new:
            more = f" (and {len(new) - 3} more)" if len(new) > 3 else ""
            raise UpdateError("the updated database fails its check: " + "; ".join(new[:3]) + more)
        _swap(tmp, target)
    except (OSError, _CopyFailed) as exc:  # a full or read-only disk: the old one stands
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(target, exc.error if isinstance(exc, _CopyFailed) else exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_own_observations(tmp: Path) -> str | None:
    """The user's observations.yaml carried over (what verify and db import recorded)."""
    from resolver.observe.store import FILE

    try:
        return (tmp / FILE).read_text(encoding="utf-8") if (tmp / FILE).is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def _merge_own_observations(tmp: Path, own: str | None) -> None:
    """The started-from database's observations plus the user's own: copying the shipped
    file over the user's would lose every build `verify` saw. A damaged file of the user's
    is dropped (the shipped one stands), as the loader would ignore it anyway."""
    if own is None:
        return
    from resolver.core.errors import UserError
    from resolver.observe import store

    path = tmp / store.FILE
    try:
        mine = store.parse(own, str(path))
    except UserError:
        return
    merged = store.load(path) if path.is_file() else store.Observations()
    for entry in mine.wheels:
        merged.add(entry, "observations")
    for entry in mine.runtime:
        merged.add(entry, "runtime")
    store.save(path, merged)


_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


class _CopyFailed(Exception):
    """A copy that failed for want of disk space or a writable disk, raised past ``copytree``
    (which would fold it into a list of strings) to become one line, exit 2."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _copy(src: Any, dst: Any, *, follow_symlinks: bool = True) -> Any:
    try:
        return shutil.copy2(src, dst, follow_symlinks=follow_symlinks)
    except OSError as exc:
        if exc.errno in _DISK_ERRORS:
            raise _CopyFailed(exc) from None
        raise


def _keep_own_files(target: Path, tmp: Path, *, replaced: bool) -> None:
    """Copy what ``target`` holds into ``tmp``; when the update starts from another database
    (``replaced``), the database files there are not read at all (they may be what is damaged:
    this is how `db update` repairs them), only the user's other files are kept.

    A file that cannot be copied stops the update (the swap would lose it).
    """
    from resolver.db.location import DB_FILES

    try:
        if not replaced:
            shutil.copytree(target, tmp, dirs_exist_ok=True, symlinks=True, copy_function=_copy)
            return
        for entry in sorted(target.iterdir()):
            if entry.name in DB_FILES:
                if entry.is_dir() and not entry.is_symlink():
                    raise UpdateError(f"{entry} is a directory, in the way of a database file")
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, tmp / entry.name, symlinks=True, copy_function=_copy)
            else:
                _copy(entry, tmp / entry.name, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _DISK_ERRORS:
            raise _CopyFailed(exc) from None
        detail = " ".join(str(exc).split())[:200]
        raise UpdateError(f"cannot carry over the files in {target} ({detail})") from None


def _swap(new: Path, target: Path) -> None:
    """Put directory ``new`` where ``target`` is (restoring ``target`` if that fails)."""
    if not target.exists():
        os.rename(new, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rmdir(old)  # a fresh unused name
    os.rename(target, old)
    try:
        os.rename(new, target)
    except OSError:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
