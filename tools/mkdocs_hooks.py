"""MkDocs hook: the footer names gpuresolve's version, read from the package (never typed twice)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_INIT = Path(__file__).resolve().parent.parent / "resolver" / "__init__.py"  # tools/ -> root


def version() -> str:
    found = re.search(r'__version__\s*=\s*"([^"]+)"', _INIT.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError(f"no __version__ in {_INIT}")
    return found.group(1)


def on_config(config: Any, **kwargs: Any) -> Any:
    config["copyright"] = f"gpuresolve {version()} · BSD-3-Clause"
    return config
