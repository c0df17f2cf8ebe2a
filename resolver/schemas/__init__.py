"""The published JSON Schemas (draft 2020-12): one per `--json` document, and the team spec.

They ship in the package as plain JSON files beside this module, so `gpuresolve schema NAME`,
a pipeline and the test suite read the very same bytes. Each schema names its version
(``x-gpuresolve-version``, major.minor): a published key is never renamed or removed, a new
key bumps the minor version; documents that carry a version key (``"verify": 1``,
``"fleet_report": 1``) hold the major one.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from resolver.core.errors import UserError

__all__ = ["NAMES", "cite", "load", "text"]

# `gpuresolve schema --list` order: the commands as a user meets them, then the rest.
NAMES = (
    "detect",
    "suggest",
    "lock",
    "lock-check",
    "install",
    "verify",
    "image",
    "db-show",
    "db-check",
    "db-update",
    "db-reset",
    "db-inspect-wheel",
    "fleet-report",
    "error",
    "team-spec",
)


def text(name: str) -> str:
    """The schema's JSON text as shipped; unknown names are bad input (exit 2)."""
    if name not in NAMES:
        raise UserError(f"no schema named {name!r} (gpuresolve schema --list names them)")
    return resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    """The schema as a mapping."""
    data: dict[str, Any] = json.loads(text(name))
    return data


def cite(name: str) -> str:
    """How an error points at a schema: the command that prints it."""
    return f"`gpuresolve schema {name}`"
