"""conda-lock.yml (format version 1), written from a real solve: `conda-lock install` reads it.

The format is conda-lock's ``conda_lock/lockfile/v1``: ``metadata`` (content_hash, channels,
platforms, sources) and one ``package`` entry per platform and package, conda entries with md5
and sha256, pip entries with sha256. Virtual packages stay out of the list (but in
``dependencies``), as conda-lock writes them. ``content_hash`` is the one conda-lock computes from
environment.yml and virtual-packages.yml, by conda-lock's own code, so that `conda-lock lock
--check-input-hash` with those files skips the solve instead of re-solving and overwriting.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from resolver.core.errors import UserError
from resolver.core.vocab import LockFormat
from resolver.writers.closure.conda_solve import INSTALL_HINT, CondaRecord
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats import environment
from resolver.writers.formats.environment import CondaEnv
from resolver.writers.formats.header import header_lines
from resolver.writers.formats.unit import LockFormatUnit

if TYPE_CHECKING:
    from resolver.writers.formats.unit import RenderContext

NAME = "conda-lock.yml"


@dataclass(frozen=True)
class LockedPlatform:
    """One platform of a lock: the environment asked for, and what the solvers answered."""

    env: CondaEnv
    virtual_packages: Mapping[str, str]
    conda: Sequence[CondaRecord]
    pip: Sequence[ResolvedDist] = ()


def content_hashes(environment_yml: str, virtual_packages_yml: str) -> dict[str, str]:
    """Per conda subdir, the content hash conda-lock writes for these two files.

    Computed by conda-lock's own functions (its spec parser, its virtual-package repo and its
    hash), because the hash is a sha256 over conda-lock's internal models: conda's MatchSpec
    reading of each spec (``python=3.12`` is ``3.12.*``, ``pytorch=2.12.0=cuda129*`` is exact),
    pydantic dumps and a fake repodata of the virtual packages. A re-implementation would drift
    with every conda-lock release; the test suite runs conda-lock's `--check-input-hash` on it.
    """
    try:
        from conda_lock.content_hash import compute_content_hashes
        from conda_lock.src_parser import make_lock_spec
        from conda_lock.virtual_package import virtual_package_repo_from_specification
    except ImportError:
        raise UserError(f"conda-lock.yml's content_hash needs conda-lock: {INSTALL_HINT}") from None
    quiet = logging.getLogger("conda_lock")  # its notes (the '# [pip-index]' line it skips)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory(prefix="gpuresolve-conda-lock-") as folder:
            where = Path(folder)
            (where / "environment.yml").write_text(environment_yml, encoding="utf-8")
            (where / "virtual-packages.yml").write_text(virtual_packages_yml, encoding="utf-8")
            # the PyPI-to-conda name map only renames pip's own "pip" entry: an empty one keeps
            # every name and reads nothing from the network
            (where / "names.json").write_text("{}", encoding="utf-8")
            spec = make_lock_spec(
                src_files=[where / "environment.yml"], mapping_url=str(where / "names.json")
            )
            repo = virtual_package_repo_from_specification(where / "virtual-packages.yml")
            try:
                hashes: dict[str, str] = dict(compute_content_hashes(spec, repo))
            finally:  # its fake channel, which conda-lock removes only when the process exits
                shutil.rmtree(repo.base_path, ignore_errors=True)
    finally:
        quiet.setLevel(level)
    return hashes


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


def lock_document(locked: Sequence[LockedPlatform], hashes: Mapping[str, str]) -> dict[str, object]:
    """The conda-lock v1 document for one or several platforms (``hashes``: content_hashes)."""
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
            "content_hash": {lp.env.platform: hashes[lp.env.platform] for lp in locked},
            "channels": [{"url": c, "used_env_vars": []} for c in channels],
            "platforms": [lp.env.platform for lp in locked],
            "sources": ["environment.yml"],
        },
        "package": packages,
    }


def render_conda_lock(
    header: Sequence[str], locked: Sequence[LockedPlatform], hashes: Mapping[str, str]
) -> str:
    """conda-lock.yml's text: the header comments, then the v1 document."""
    import yaml

    body = yaml.safe_dump(
        lock_document(locked, hashes), sort_keys=False, default_flow_style=False, width=4096
    )
    lines = [
        *header,
        "# install: conda-lock install --name ENV conda-lock.yml",
    ]
    return "\n".join(lines) + "\n" + body


def render(ctx: RenderContext) -> Mapping[str, str]:
    """conda-lock.yml: the environment solved by conda (and its pip section by the resolver)."""
    conda = environment.conda_inputs(ctx)
    env, target = conda.env, conda.decision.target
    # before the slow solve
    hashes = content_hashes(ctx.files[environment.NAME], ctx.files[environment.VIRTUAL])
    channels = [c for c in env.channels if c != "nodefaults"]
    with ctx.reaching(NAME):
        records = ctx.conda_run(channels, env.specs, env.platform, conda.virtual)
        pip = ctx.closure(env.pip, env.pip_index, target) if env.pip else []
    if pip and not ctx.custom_pip:  # uv's closure: the specifiers from the metadata
        from resolver.writers.closure.dist_metadata import with_requires

        pip = with_requires(pip, target)
    header = header_lines(
        ctx.catalog,
        conda.decision,
        [f"solved for {env.platform} with the virtual packages of virtual-packages.yml"],
    )
    locked = [LockedPlatform(env, conda.virtual, records, pip)]
    return {NAME: render_conda_lock(header, locked, hashes)}


FORMAT = LockFormatUnit(
    LockFormat.CONDA_LOCK,
    (NAME,),
    render,
    uses=(LockFormat.CONDA,),
    advice="or {drop}",  # the channel's own message names --channel
    summary="those and conda-lock.yml (a real solve)",
)
