"""The index pip on this machine is configured with: a probe of the host, like its driver.

gpuresolve names no registry itself: `db update`, `observe` and the lock writers read the
default index from pip's own configuration.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from resolver.io import subprocs


def pip_index_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The default index pip is configured with (PIP_INDEX_URL, then ``pip config list``).

    None when nothing is configured: gpuresolve names no registry itself.
    """
    env = os.environ if environ is None else environ
    if env.get("PIP_INDEX_URL", "").strip():
        return env["PIP_INDEX_URL"].split()[0]
    try:
        out = subprocs.run(
            [sys.executable, "-m", "pip", "config", "list"],
            timeout=30,
            env={**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        ).stdout
    except OSError:
        return None
    return pip_config_index(out)


def pip_config_index(listing: str) -> str | None:
    """The index-url from ``pip config list`` output (``install.`` beats ``global.``)."""
    found: dict[str, str] = {}
    for line in listing.splitlines():
        m = re.match(r"^([^.\s]*)\.index-url\s*=\s*(['\"]?)(.*)\2\s*$", line.strip())
        if m and m.group(3).strip():
            found[m.group(1)] = m.group(3).split()[0]
    for section in (":env:", "install", "global"):
        if section in found:
            return found[section]
    return next(iter(found.values()), None)
