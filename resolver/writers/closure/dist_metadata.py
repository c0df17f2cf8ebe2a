"""What each package of a resolved closure requires, with specifiers, for the target.

uv's annotations name who requires whom but not the specifiers; conda-lock.yml's pip entries
record them (``torchvision: {torch: "==2.8.0+cu126"}``). The wheel's core metadata has them:
PEP 658 ``.metadata`` files where the index serves them, else the wheel's ``METADATA`` read with
HTTP range requests (db update's reader). Markers are judged for the target, never this machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from resolver.solve import Target
from resolver.writers.closure.pip_resolve import ResolvedDist

TIMEOUT_S = 20.0


def with_requires(dists: Sequence[ResolvedDist], target: Target) -> list[ResolvedDist]:
    """``dists`` with ``requires`` read from their metadata; a package whose metadata cannot
    be read keeps the names uv's annotations gave (specifier "")."""
    from packaging.utils import canonicalize_name

    from resolver.core.platforms import marker_env
    from resolver.dbupdate.metadata import parse_metadata, remote_metadata
    from resolver.io import ReadError
    from resolver.io.http import Client
    from resolver.markers import applicable

    env = marker_env(target.platform, target.python)
    out: list[ResolvedDist] = []
    with Client(timeout=TIMEOUT_S, tries=2) as fetcher:
        for dist in dists:
            url = dist.url.split("#", 1)[0]
            try:
                page = fetcher.get_optional(url + ".metadata")
                data = page.body if page is not None else remote_metadata(fetcher, url, dist.name)
                meta = parse_metadata(data, dist.name, dist.version)
            except (ReadError, OSError):
                out.append(dist)
                continue
            requires: dict[str, str] = {}
            for req in applicable(meta.requires_dist, env):
                dep = str(canonicalize_name(req.name))
                spec = str(req.specifier)
                requires[dep] = ",".join(x for x in (requires.get(dep), spec) if x)
            out.append(replace(dist, requires=dict(sorted(requires.items()))))
    return out
