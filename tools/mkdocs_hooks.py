"""MkDocs hooks: the footer names gpuresolve's version, read from the package (never typed twice);
the command reference shows each option's real default or nothing; a page with click's
"no default" marker (``Sentinel.UNSET``) fails the build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_INIT = Path(__file__).resolve().parent.parent / "resolver" / "__init__.py"  # tools/ -> root
_MARKER = "Sentinel"  # click 8.3+'s UNSET, as str() spells it


def version() -> str:
    found = re.search(r'__version__\s*=\s*"([^"]+)"', _INIT.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError(f"no __version__ in {_INIT}")
    return found.group(1)


def default_cell(option: Any) -> str:
    """An option's Default cell: what it was declared with, or nothing.

    mkdocs-click 0.9 prints ``option.default`` as it is, and from click 8.3 on an option declared
    without one holds click's UNSET marker, so 139 cells read ``Sentinel.UNSET``. No default, an
    empty one (a repeatable option) and one computed at run time (a callable) show nothing.
    """
    if option.required:
        return "_required"
    value = option.default
    unset = value is None or callable(value) or type(value).__name__ == _MARKER
    if unset or (isinstance(value, (tuple, list)) and not value):
        return ""
    return f"`{value}`"


def table_row(option: Any) -> str:
    """mkdocs-click's table row of an option, with `default_cell` for its last column."""
    from mkdocs_click import _docs

    names = ", ".join(f"`{opt}`" for opt in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{opt}`" for opt in option.secondary_opts)
    description = option.help if option.help is not None else "N/A"
    kind = _docs._format_table_option_type(option)
    return f"| {names} | {kind} | {description} | {default_cell(option)} |"


def on_config(config: Any, **kwargs: Any) -> Any:
    config["copyright"] = f"gpuresolve {version()} · BSD-3-Clause"
    try:
        from mkdocs_click import _docs
    except ImportError:  # only the footer is wanted (the test of it)
        return config
    _docs._format_table_option_row = table_row  # the pinned mkdocs-click (pyproject's docs extra)
    return config


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """A generated reference page (mkdocs-click) that shows the marker fails the build."""
    if "::: mkdocs-click" in (page.markdown or "") and _MARKER in html:
        from mkdocs.exceptions import PluginError

        raise PluginError(
            f"{page.file.src_path}: {_MARKER!r} in the page (click's no-default marker)"
        )
    return html
