"""Read the pins out of a lock file, whichever of the formats gpuresolve writes it is in:
requirements.txt (``requirements``), environment.yml and conda-lock.yml v1 (``conda``) or
pylock.toml (PEP 751, ``pylock``). `verify --lock` and `install --lock` both read through here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError
from resolver.io.bounded import LOCK_LIMIT, LOCK_MAX_NODES, load_yaml, read_text
from resolver.readers import pylock
from resolver.readers.conda import read_conda_lock, read_environment
from resolver.readers.pins import FORMAT_REQUIREMENTS, LockPins
from resolver.readers.requirements import read_requirements


def read(path: str | Path, platform: str | None = None) -> LockPins:
    """The pins of a lock file; ``platform`` (gpuresolve's name) selects conda-lock's entries.

    The format comes from the content, not the file name: a YAML document with ``package:`` is
    a conda-lock file, one with ``dependencies:`` an environment.yml, TOML with ``lock-version``
    (or a file PEP 751 names ``pylock.toml`` / ``pylock.<name>.toml``) a pylock.toml, anything
    else is read as requirements.txt. Raises UserError (one line) when the file cannot be read
    or parsed.
    """
    p = Path(path)
    text = read_text(p, limit=LOCK_LIMIT, what="a lock file")
    if pylock.is_pylock_name(p.name) or pylock.looks_like_pylock(text):
        return pylock.read_pins(text, str(path), platform)
    if p.suffix.lower() in (".yml", ".yaml") or _looks_like_yaml_lock(text):
        doc = _yaml(text, path)
        if isinstance(doc, dict) and "package" in doc:
            return read_conda_lock(doc, str(path), platform)
        if isinstance(doc, dict) and "dependencies" in doc:
            return read_environment(doc, str(path))
        raise UserError(
            f"{path}: not a lock file gpuresolve reads (expected environment.yml with "
            "'dependencies:' or conda-lock.yml with 'package:')"
        )
    pins, urls = read_requirements(text, p)
    return LockPins(str(path), FORMAT_REQUIREMENTS, tuple(pins), tuple(urls))


def _looks_like_yaml_lock(text: str) -> bool:
    return bool(re.search(r"^(package|dependencies):\s*$", text, re.MULTILINE))


def _yaml(text: str, path: str | Path) -> Any:
    return load_yaml(text, path, max_nodes=LOCK_MAX_NODES)
