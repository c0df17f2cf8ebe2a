"""The pinned environment files of one target: what to render, and how (the `lock` API).

A flow solves what the files need (a ``LockInput``: this module never solves), ``render_files``
turns it into ``{file name: text}`` (requirements.txt's closure, pylock.toml and conda-lock.yml
run a resolver; ``--top-level`` requirements.txt does not), ``write_files`` writes them
atomically or diffs them (``--check``). A fleet calls ``render_files`` once per platform.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.vocab import CondaSource, LockFormat
from resolver.solve import Decision, Target
from resolver.solve.extensions import requirement_line
from resolver.writers import lockformats, recorded
from resolver.writers.closure.conda_solve import CondaRecord
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats import requirements
from resolver.writers.formats.environment import CONDA_SOURCES
from resolver.writers.formats.requirements import index_lines
from resolver.writers.formats.unit import (
    CondaSolver,
    LockFormatUnit,
    Options,
    PipResolver,
    RenderContext,
)
from resolver.writers.outputs import diff_files, write_files

__all__ = ["LockInput", "LockOptions", "diff_files", "render_files", "write_files"]

REQUIREMENTS = requirements.NAME  # --hashes pins it


@dataclass(frozen=True)
class LockOptions:
    formats: frozenset[str] = frozenset({LockFormat.REQUIREMENTS.value})
    pytorch_index: str | None = None  # a mirror of the PyTorch index
    conda_source: str = "pip"  # pip | conda-forge
    channel: str | None = None  # conda channel name or URL (None: the database's, conda-forge)
    # requirements.txt pins the whole closure (a lock), or only what was asked (``top_level``)
    top_level: bool = False
    hashes: bool | None = None  # the closure's sha256 hashes (None: with them unless top_level)
    name: str | None = None  # the conda environment's name
    extra_requirements: tuple[str, ...] = ()  # other pip packages (a team spec's packages.pip)
    default_index: str | None = None  # the index outside the PyTorch index (None: installer's)
    # --format all: every format (its name replaced by theirs, so that a team can take one out),
    # the Dockerfile only for a Linux target (containers run Linux)
    every: bool = False

    def __post_init__(self) -> None:
        lockformats.expand(self.formats)  # validates
        if "all" in self.formats:
            object.__setattr__(self, "formats", frozenset(lockformats.names()))
            object.__setattr__(self, "every", True)
        if self.top_level and self.hashes:
            raise ValueError("top-level pins carry no hashes: hashes need the whole closure")
        if self.conda_source not in CONDA_SOURCES:
            raise ValueError(f"conda source {self.conda_source!r}")

    @property
    def with_hashes(self) -> bool:
        """Whether requirements.txt's pins carry sha256 hashes (the default of a full lock)."""
        return not self.top_level if self.hashes is None else self.hashes

    @property
    def files(self) -> tuple[str, ...]:
        return lockformats.file_names(self.formats)

    @property
    def needs_wheels(self) -> bool:
        """Whether a file is made from the PyTorch-index decision."""
        wheels = any(f.needs_wheels for f in lockformats.expand(self.formats))
        return wheels or (self.needs_conda and self.conda_source == CondaSource.PIP)

    @property
    def needs_conda(self) -> bool:
        """Whether a file is made from a conda environment's decision."""
        return any(f.needs_conda for f in lockformats.expand(self.formats))


@dataclass(frozen=True)
class LockInput:
    """One target's choices: the PyTorch-index build, and conda-forge's where that is wanted."""

    decision: Decision
    conda_decision: Decision | None = None
    glibc: str | None = None  # the target's glibc (Linux), when known

    def unmet(self, options: LockOptions) -> Decision | None:
        """The decision a wanted file needs that selected nothing (then nothing is written)."""
        if options.needs_wheels and self.decision.selection is None:
            return self.decision
        forge = options.needs_conda and options.conda_source == CondaSource.CONDA_FORGE
        if forge and (self.conda_decision is None or self.conda_decision.selection is None):
            return self.conda_decision or self.decision
        return None


def uses_default_index(catalog: Catalog, decision: Decision, options: LockOptions) -> bool:
    """Whether the files lock packages from the index outside the PyTorch index."""
    cand = decision.selection
    if cand is None:
        return False
    if options.needs_conda and options.conda_source == CondaSource.CONDA_FORGE:
        return bool(options.extra_requirements)
    extra = bool(options.extra_requirements)
    return index_lines(catalog, cand, options.pytorch_index, extra)[0].startswith("--extra-")


def with_extensions(catalog: Catalog, lock: LockInput, options: LockOptions) -> LockOptions:
    """``options`` with the extension packages the selection chose as pip requirements, pinned
    beside torch (the files pin torch exactly, so an installer cannot swap it for the torch an
    extension would pull); a conda-forge environment cannot carry them yet (UserError)."""
    sel = lock.decision.selection
    if sel is None or not sel.extensions:
        return options
    if options.needs_conda and options.conda_source == CondaSource.CONDA_FORGE:
        names = ", ".join(c.package for c in sel.extensions)
        raise UserError(f"--conda-source conda-forge cannot carry {names} yet (use pip)")
    python = lock.decision.target.python
    reqs = tuple(requirement_line(catalog, c, sel.release, python) for c in sel.extensions)
    return replace(options, extra_requirements=(*reqs, *options.extra_requirements))


def _default_pip(
    requirements: Sequence[str], index: Sequence[str], target: Target, glibc: str | None
) -> list[ResolvedDist]:
    from resolver.writers.closure.pip_resolve import resolve

    return resolve(requirements, index, target, glibc)


def _default_conda(
    channels: Sequence[str], specs: Sequence[str], subdir: str, virtual: Mapping[str, str]
) -> list[CondaRecord]:
    from resolver.writers.closure.conda_solve import solve as conda_solve

    return conda_solve(channels, specs, subdir, virtual)


@contextmanager
def making(name: str, options: Options) -> Iterator[None]:
    """A file that needs an index or a channel it cannot read: one line naming the file, its
    format, and what to do given the options passed (nothing is written: files are rendered
    before any is)."""
    try:
        yield
    except UserError as exc:
        fmt = lockformats.get(lockformats.owner(name) or "")
        asked = fmt.name
        if asked not in options.formats:  # the file of a format another one uses
            chosen = lockformats.expand(options.formats)
            asked = next((f.name for f in chosen if fmt.name in f.uses), asked)
        said = str(exc) if str(exc).startswith(name) else f"{name} (--format {asked}): {exc}"
        raise UserError(f"{said}; {_advice(fmt, name, options)}") from None


def _advice(fmt: LockFormatUnit, name: str, options: Options) -> str:
    drop = (
        "ask for the formats you need instead of all"
        if options.every
        else (f"leave out --format {fmt.name}")
    )
    given = " (a top-level lock pins requirements.txt alone)" if options.top_level else ""
    mirror = "--pytorch-index and --default-index name a reachable mirror"
    return fmt.advice.format(name=name, mirror=mirror, drop=drop, given=given)


def render_files(
    catalog: Catalog,
    lock: LockInput,
    options: LockOptions,
    *,
    pip_resolver: PipResolver | None = None,
    conda_solver: CondaSolver | None = None,
    inputs: recorded.LockInputs | None = None,
    existing: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``{file name: text}`` for the target, in a stable order; deterministic for fixed inputs.

    Each format asked for (and each it uses) renders its files (writers/lockformats.py); the
    files come in the registry's order. Every file records its inputs (``recorded.stamp``):
    ``inputs`` (the request and options as given, for `lock --check` to re-resolve) with the
    target and the database's version. ``existing``: the current text of files edited in place
    (the user's pyproject.toml). Raises ValueError when a decision the files need selected
    nothing (check ``lock.unmet``).
    """
    ctx = RenderContext(
        catalog,
        lock,
        options,
        pip_resolver or _default_pip,
        conda_solver or _default_conda,
        pip_resolver is not None,
        existing or {},
        making,
    )
    chosen = lockformats.expand(options.formats)
    # the files of the PyTorch-index decision first (the slow conda solve after them); a
    # format's own order otherwise, so a format rendered after those whose files it uses
    for fmt in sorted(chosen, key=lambda f: not f.needs_wheels):
        ctx.files.update(fmt.render(ctx))
    made = replace(
        inputs or recorded.LockInputs(),
        target=lock.decision.target,
        glibc=lock.glibc,
        database=catalog.updated,
    )
    record = made.to_json()
    made_files = [n for f in chosen for n in f.files if n in ctx.files]  # in the registry's order
    return {n: recorded.stamp(n, ctx.files[n], record) for n in made_files}
