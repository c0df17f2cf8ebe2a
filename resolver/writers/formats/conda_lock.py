"""conda-lock.yml (format version 1), written from a real solve: `conda-lock install` reads it.

The format is conda-lock's ``conda_lock/lockfile/v1``: ``metadata`` (content_hash, channels,
platforms, sources) and one ``package`` entry per platform and package, conda entries with md5
and sha256, pip entries with sha256. Virtual packages stay out of the list (but in
``dependencies``), as conda-lock writes them. The content hash covers what was solved (channels,
specs, pip indexes, virtual packages), so it changes exactly when the inputs do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from resolver.writers.closure.conda_solve import CondaRecord
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats.environment import CondaEnv


@dataclass(frozen=True)
class LockedPlatform:
    """One platform of a lock: the environment asked for, and what the solvers answered."""

    env: CondaEnv
    virtual_packages: Mapping[str, str]
    conda: Sequence[CondaRecord]
    pip: Sequence[ResolvedDist] = ()


def content_hash(locked: LockedPlatform) -> str:
    """sha256 over the solve's inputs (canonical JSON); any stable value is valid for readers."""
    env = locked.env
    data = {
        "channels": list(env.channels),
        "specs": sorted(env.specs),
        "pip": sorted(env.pip),
        "pip_repositories": list(env.pip_repositories),
        "virtual_packages": dict(sorted(locked.virtual_packages.items())),
        "platform": env.platform,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def conda_dependencies(depends: Sequence[str]) -> dict[str, str]:
    """``["python >=3.12,<3.13.0a0", "libtorch ==2.9.1 cuda129_*", "__cuda"]`` -> name: spec.

    As conda-lock writes them: build strings dropped, several specs of one name joined.
    """
    out: dict[str, str] = {}
    for dep in depends:
        parts = dep.split()
        if not parts:
            continue
        name, spec = parts[0], (parts[1] if len(parts) > 1 else "")
        if spec in ("*", ""):
            out.setdefault(name, "")
            continue
        out[name] = ",".join(s for s in (out.get(name), spec) if s)
    return dict(sorted(out.items()))


def lock_document(locked: Sequence[LockedPlatform]) -> dict[str, object]:
    """The conda-lock v1 document for one or several platforms."""
    channels: list[str] = []
    for lp in locked:
        channels.extend(c for c in lp.env.channels if c != "nodefaults" and c not in channels)
    packages: list[dict[str, object]] = []
    for lp in locked:
        plat = lp.env.platform
        for rec in sorted(lp.conda, key=lambda r: r.name):
            packages.append(
                {
                    "name": rec.name,
                    "version": rec.version,
                    "manager": "conda",
                    "platform": plat,
                    "dependencies": conda_dependencies(rec.depends),
                    "url": rec.url,
                    "hash": {"md5": rec.md5, "sha256": rec.sha256},
                    "category": "main",
                    "optional": False,
                }
            )
        for dist in lp.pip:
            packages.append(
                {
                    "name": dist.name,
                    "version": dist.version,
                    "manager": "pip",
                    "platform": plat,
                    "dependencies": {k: v or "*" for k, v in dist.requires.items()},
                    "url": dist.url,
                    "hash": {"sha256": dist.sha256},
                    "category": "main",
                    "optional": False,
                }
            )
    return {
        "version": 1,
        "metadata": {
            "content_hash": {lp.env.platform: content_hash(lp) for lp in locked},
            "channels": [{"url": c, "used_env_vars": []} for c in channels],
            "platforms": [lp.env.platform for lp in locked],
            "sources": ["environment.yml"],
        },
        "package": packages,
    }


def render_conda_lock(header: Sequence[str], locked: Sequence[LockedPlatform]) -> str:
    """conda-lock.yml's text: the header comments, then the v1 document."""
    import yaml

    body = yaml.safe_dump(
        lock_document(locked), sort_keys=False, default_flow_style=False, width=4096
    )
    lines = [
        *header,
        "# install: conda-lock install --name ENV conda-lock.yml",
    ]
    return "\n".join(lines) + "\n" + body
