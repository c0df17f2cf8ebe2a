"""Where ``images.yaml`` is, and its YAML read: the file side of ``images/facts.py``, whose
rules (``from_raw``, ``check``) stay pure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["FILE", "data_file", "read"]

FILE = "images.yaml"


def data_file(catalog_origin: str | None = None) -> Path:
    """images.yaml next to the database in use, else the shipped one (a user database written by
    `db update` has no images.yaml)."""
    from resolver.db.location import shipped_data_dir

    if catalog_origin:
        here = Path(catalog_origin) / FILE
        if here.is_file():
            return here
    return shipped_data_dir() / FILE


def read(catalog_origin: str | None = None) -> tuple[Any, str]:
    """The parsed images.yaml for the database at ``catalog_origin``, and where it was read
    (``images.facts.from_raw(*read(origin))`` makes the facts); DataError when unreadable."""
    from resolver.db.yamlfile import read_yaml

    path = data_file(catalog_origin)
    return read_yaml(path), str(path)
