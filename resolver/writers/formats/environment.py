"""environment.yml in two flavours, and the conda spec both it and conda-lock.yml are made from.

``pip`` (default, every variant): conda supplies Python and pip, the torch set comes from the
PyTorch index through a ``pip:`` section. ``conda-forge``: conda-forge's own pytorch build,
pinned by build string and ``cuda-version`` (conda's classic solver ignores ``__cuda``).

The pip flavour serves two readers. `conda env create` / mamba pass the ``pip:`` lines to pip, so
the index travels as an ``--index-url`` line there; conda-lock parses every ``pip:`` line as a
requirement and takes indexes from ``pip-repositories`` instead, so that line carries a selector
(``# [pip-index]``) that matches no platform and conda-lock drops it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from resolver.catalog import Catalog
from resolver.core.vocab import CondaSource, LockFormat, words
from resolver.solve import Decision
from resolver.solve.conda import conda_forge_pins, python_specs, virtual_packages
from resolver.writers.formats.header import header_lines
from resolver.writers.formats.requirements import index_lines, pins
from resolver.writers.formats.unit import LockFormatUnit
from resolver.writers.formats.virtual_packages import explain, render_virtual_packages

if TYPE_CHECKING:
    from resolver.writers.formats.unit import RenderContext

NAME, VIRTUAL = "environment.yml", "virtual-packages.yml"

CONDA_SOURCES = words(CondaSource)
PIP_INDEX_SELECTOR = "# [pip-index]"


@dataclass(frozen=True)
class CondaEnv:
    """What environment.yml says, and what conda-lock.yml locks."""

    name: str
    channels: tuple[str, ...]
    platform: str  # conda subdir: "linux-64"
    specs: tuple[str, ...]  # conda match specs ("python=3.12", "pytorch=2.13.0=cuda129*")
    pip: tuple[str, ...]  # pip requirements ("torch==2.8.0+cu126"), pip flavour only
    pip_index: tuple[str, ...]  # "--index-url URL" lines for the pip requirements
    decision: Decision  # the build this environment holds

    @property
    def pip_repositories(self) -> tuple[str, ...]:
        return tuple(line.partition(" ")[2] for line in self.pip_index)

    @property
    def allow_pypi_requests(self) -> bool:
        """conda-lock's switch: whether the default index may serve the pip section too."""
        return not any(line.startswith("--index-url ") for line in self.pip_index)


def conda_env(
    catalog: Catalog,
    decision: Decision,
    *,
    source: str = "pip",
    channel: str | None = None,
    pytorch_index: str | None = None,
    name: str | None = None,
    extra_requirements: Sequence[str] = (),
    default_index: str | None = None,
) -> CondaEnv:
    """The environment for ``decision``: a PyTorch-index decision for ``source="pip"``, a
    conda-forge one (``resolver.solve.conda.solve_conda_forge``) for ``source="conda-forge"``."""
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    cf = catalog.conda_forge
    chan = channel or (cf.channel if cf else "conda-forge")
    target = decision.target
    py = python_specs(target.python)
    if source == "pip":
        return CondaEnv(
            name=name or f"torch-{cand.variant.name}",
            channels=(chan, "nodefaults"),
            platform=target.platform.conda_subdir,
            specs=(*py, "pip"),
            pip=(*pins(cand), *extra_requirements),
            pip_index=tuple(
                index_lines(catalog, cand, pytorch_index, bool(extra_requirements), default_index)
            ),
            decision=decision,
        )
    if source != CondaSource.CONDA_FORGE:
        raise ValueError(f"conda source {source!r}: one of {', '.join(CONDA_SOURCES)}")
    if cf is None:
        raise ValueError("the database has no conda_forge.yaml")
    return CondaEnv(
        name=name or f"torch-{cf.build_prefix(cand.variant.cuda)}",
        channels=(chan, "nodefaults"),
        platform=target.platform.conda_subdir,
        specs=(*py, *conda_forge_pins(cf, cand), *(("pip",) if extra_requirements else ())),
        pip=tuple(extra_requirements),  # from the default index
        pip_index=(f"--index-url {default_index}",) if default_index and extra_requirements else (),
        decision=decision,
    )


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain where YAML reads it back unchanged, else quoted."""
    import json

    import yaml

    try:
        plain = yaml.safe_load(text) == text and "#" not in text
    except yaml.YAMLError:
        plain = False
    return text if plain else json.dumps(text)


def render_environment(catalog: Catalog, env: CondaEnv) -> str:
    """environment.yml: read by `conda env create`, mamba, micromamba and conda-lock."""
    extra: list[str] = []
    if env.pip:
        extra.append(
            "conda supplies Python and pip; the torch set comes from the PyTorch index through pip"
        )
        extra.append(
            "platforms, pip-repositories and allow-pypi-requests are conda-lock's (conda warns "
            "and ignores them); conda-lock skips the '# [pip-index]' line"
        )
    else:
        cand = env.decision.selection
        assert cand is not None
        extra.append(
            "conda-forge's own build, pinned by build string and cuda-version: conda's classic "
            "solver ignores __cuda (conda/conda#10803)"
            if cand.variant.cuda
            else "conda-forge's own CPU build, pinned by build string"
        )
    lines = header_lines(catalog, env.decision, extra)
    lines.append(f"name: {_scalar(env.name)}")
    lines.append("channels:")
    lines.extend(f"  - {_scalar(c)}" for c in env.channels)
    lines.append("platforms:")
    lines.append(f"  - {_scalar(env.platform)}")
    if env.pip:
        lines.append("pip-repositories:")
        lines.extend(f"  - {_scalar(url)}" for url in env.pip_repositories)
        if not env.allow_pypi_requests:
            lines.append("allow-pypi-requests: false")
    lines.append("dependencies:")
    lines.extend(f"  - {_scalar(s)}" for s in env.specs)
    if env.pip:
        lines.append("  - pip:")
        lines.extend(f"      - {_scalar(line)}  {PIP_INDEX_SELECTOR}" for line in env.pip_index)
        lines.extend(f"      - {_scalar(p)}" for p in env.pip)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CondaInputs:
    """The target's conda environment and virtual packages (environment.yml and
    virtual-packages.yml say them, conda-lock.yml solves them)."""

    decision: Decision
    env: CondaEnv
    virtual: Mapping[str, str]


def conda_inputs(ctx: RenderContext) -> CondaInputs:
    """The environment of the decision the conda source asks for (once per rendering)."""
    if "conda" not in ctx.memo:
        options, lock = ctx.options, ctx.lock
        forge = options.conda_source == CondaSource.CONDA_FORGE
        decision = lock.conda_decision if forge else lock.decision
        if decision is None or decision.selection is None:
            raise ValueError("no conda build selected: nothing to lock")
        env = conda_env(
            ctx.catalog,
            decision,
            source=options.conda_source,
            channel=options.channel,
            pytorch_index=options.pytorch_index,
            name=options.name,
            extra_requirements=options.extra_requirements,
            default_index=options.default_index,
        )
        cuda = decision.selection.variant.cuda
        vp = virtual_packages(ctx.catalog, decision.target, cuda, lock.glibc)
        ctx.memo["conda"] = CondaInputs(decision, env, vp)
    found: CondaInputs = ctx.memo["conda"]
    return found


def render(ctx: RenderContext) -> Mapping[str, str]:
    """environment.yml and the virtual packages it was made for."""
    conda = conda_inputs(ctx)
    notes = explain(conda.decision.target, conda.virtual, ctx.lock.glibc)
    platforms = [(conda.env.platform, conda.virtual, notes)]
    return {
        NAME: render_environment(ctx.catalog, conda.env),
        VIRTUAL: render_virtual_packages(ctx.catalog, conda.decision, platforms),
    }


FORMAT = LockFormatUnit(
    LockFormat.CONDA,
    (NAME, VIRTUAL),
    render,
    needs_conda=True,
    summary="environment.yml + virtual-packages.yml",
)
