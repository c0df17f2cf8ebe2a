"""Hosts recorded with `gpuresolve detect --json`: one file (`--host`, a spec's `detect:`) or a
folder of them (a spec's `detect: DIR/`), read with caps, each as a `HostProfile`.

The decision layer turns profiles into targets and shapes; reading the files is done here.
"""

from __future__ import annotations

import os
from fnmatch import fnmatch
from pathlib import Path

from resolver.core.errors import UserError
from resolver.core.hostprofile import HostProfile

__all__ = ["MAX_DETECT_FILES", "MAX_DETECT_FILE_BYTES", "load_folder", "load_profile"]

# A folder of detect files is read whole: bound it (a detect file is a few KB).
MAX_DETECT_FILES = 100_000
MAX_DETECT_FILE_BYTES = 1 << 20


def load_profile(path: str) -> HostProfile:
    """A host recorded with `gpuresolve detect --json` (one clear error for a bad file).

    Read with a size and nesting cap: a real one is a few KB.
    """
    from resolver.io.bounded import HOST_FILE_LIMIT, load_json

    what = "a `gpuresolve detect --json` file"
    data = load_json(path, limit=HOST_FILE_LIMIT, what=what)
    try:
        return HostProfile.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise UserError(f"{path}: not {what} ({detail})") from None


def load_folder(folder: Path) -> list[tuple[str, HostProfile]]:
    """Each ``*.json`` file of ``folder`` (a `detect --json` output) as (file stem, profile).

    The caps are checked before any file is parsed, the count while the folder is listed: a
    folder over them fails at once, however many entries it holds."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not fnmatch(entry.name, "*.json"):
                    continue
                if len(names) >= MAX_DETECT_FILES:
                    raise UserError(f"{folder}: more than {MAX_DETECT_FILES} detect files")
                names.append(entry.name)
    except OSError as exc:
        raise UserError(f"{folder}: cannot list: {exc.strerror}") from None
    files = [folder / name for name in sorted(names)]
    if not files:
        raise UserError(f"{folder}: no *.json files (expected `gpuresolve detect --json` outputs)")
    for path in files:
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise UserError(f"{path}: cannot read: {exc.strerror}") from None
        if size > MAX_DETECT_FILE_BYTES:
            raise UserError(f"{path}: {size} bytes; a detect file is a few KB (cap 1 MiB)")
    return [(path.stem, load_profile(str(path))) for path in files]
