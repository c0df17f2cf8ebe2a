"""The pinned environment files of one target: what to render, and how (the `lock` API).

A flow solves what the files need (a ``LockInput``: this module never solves), ``render_files``
turns it into ``{file name: text}`` (requirements.txt's closure, pylock.toml and conda-lock.yml
run a resolver; ``--top-level`` requirements.txt does not), ``write_files`` writes them
atomically or diffs them (``--check``). A fleet calls ``render_files`` once per platform.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.platforms import PythonVersion
from resolver.core.vocab import CondaSource, LockFormat, words
from resolver.solve import Decision, Target
from resolver.solve.conda import virtual_packages
from resolver.solve.extensions import requirement_line
from resolver.standalone.startup import CHECK_NAME, PROBE_NAME
from resolver.writers import recorded
from resolver.writers.closure.conda_solve import CondaRecord
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats.conda_lock import LockedPlatform, content_hashes, render_conda_lock
from resolver.writers.formats.environment import CONDA_SOURCES, conda_env, render_environment
from resolver.writers.formats.header import header_lines
from resolver.writers.formats.requirements import index_lines, pins, render_requirements
from resolver.writers.formats.virtual_packages import explain, render_virtual_packages
from resolver.writers.outputs import diff_files, write_files

__all__ = [
    "FORMATS",
    "LockInput",
    "LockOptions",
    "diff_files",
    "file_names",
    "render_files",
    "write_files",
]

FORMATS = words(LockFormat)
REQUIREMENTS, ENVIRONMENT, VIRTUAL, CONDA_LOCK, PYLOCK, PYPROJECT = (
    "requirements.txt",
    "environment.yml",
    "virtual-packages.yml",
    "conda-lock.yml",
    "pylock.toml",
    "pyproject.toml",
)
DOCKERFILE = "Dockerfile"
STARTUP_CHECK, STARTUP_PROBE = CHECK_NAME, PROBE_NAME  # the Dockerfile's start-up check
# Each format and the files it writes, in the order they are written: the one table of formats
# (the file order, and the format a file is named by in a message, follow from it).
_FILES: dict[str, tuple[str, ...]] = {
    LockFormat.REQUIREMENTS: (REQUIREMENTS,),
    LockFormat.CONDA: (ENVIRONMENT, VIRTUAL),
    # the lock, and the inputs it came from
    LockFormat.CONDA_LOCK: (ENVIRONMENT, VIRTUAL, CONDA_LOCK),
    LockFormat.PYLOCK: (PYLOCK,),
    LockFormat.UV: (PYPROJECT,),
    # the Dockerfile installs requirements.txt; its start-up check runs the probe with the image's
    # own Python
    LockFormat.DOCKERFILE: (REQUIREMENTS, DOCKERFILE, STARTUP_CHECK, STARTUP_PROBE),
}
_ORDER = tuple(dict.fromkeys(name for names in _FILES.values() for name in names))
FORMAT_OF = {name: next(f for f, names in _FILES.items() if name in names) for name in _ORDER}
# Files edited in place (the user's own file): never removed; their inputs are recorded in
# their own table ([tool.gpuresolve]), not in a comment line.
UPDATED_IN_PLACE = frozenset({PYPROJECT})

# (requirements, index lines, target, glibc) -> the resolved closure with hashes
PipResolver = Callable[[Sequence[str], Sequence[str], Target, str | None], list[ResolvedDist]]
# (channels, specs, conda subdir, virtual packages) -> the solved records
CondaSolver = Callable[[Sequence[str], Sequence[str], str, Mapping[str, str]], list[CondaRecord]]


def file_names(formats: Iterable[str]) -> tuple[str, ...]:
    """The files the formats write, in a stable order ("all" is every format)."""
    wanted = set(formats)
    if "all" in wanted:
        wanted = (wanted - {"all"}) | set(FORMATS)
    unknown = wanted - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown format(s) {', '.join(sorted(unknown))}")
    names = {n for f in wanted for n in _FILES[f]}
    return tuple(n for n in _ORDER if n in names)


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
        file_names(self.formats)  # validates
        if "all" in self.formats:
            object.__setattr__(self, "formats", frozenset(FORMATS))
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
        return file_names(self.formats)

    @property
    def needs_wheels(self) -> bool:
        """Whether a file is made from the PyTorch-index decision."""
        wheel_files = {REQUIREMENTS, PYLOCK, PYPROJECT}
        return bool(wheel_files & set(self.files)) or (
            self.needs_conda and self.conda_source == CondaSource.PIP
        )

    @property
    def needs_conda(self) -> bool:
        return ENVIRONMENT in self.files


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
def making(name: str, options: LockOptions) -> Iterator[None]:
    """A file that needs an index or a channel it cannot read: one line naming the file, its
    format, and what to do given the options passed (nothing is written: files are rendered
    before any is)."""
    try:
        yield
    except UserError as exc:
        asked = FORMAT_OF[name]
        if asked not in options.formats and name == REQUIREMENTS:  # the Dockerfile's
            asked = LockFormat.DOCKERFILE
        said = str(exc) if str(exc).startswith(name) else f"{name} (--format {asked}): {exc}"
        raise UserError(f"{said}; {_advice(name, options)}") from None


def _advice(name: str, options: LockOptions) -> str:
    mirror = "--pytorch-index and --default-index name a reachable mirror"
    drop = (
        "ask for the formats you need instead of all"
        if options.every
        else (f"leave out --format {FORMAT_OF[name]}")
    )
    if name == REQUIREMENTS:
        return f"--top-level pins only what was asked, with no index to reach; or {mirror}"
    if name == CONDA_LOCK:
        return f"or {drop}"  # the channel's own message names --channel
    given = " (a top-level lock pins requirements.txt alone)" if options.top_level else ""
    return f"{name} always pins the whole closure{given}: {mirror}; or {drop}"


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

    Every file records its inputs (``recorded.stamp``): ``inputs`` (the request and options as
    given, for `lock --check` to re-resolve) with the target and the database's version.
    ``existing``: the current text of files edited in place (the user's pyproject.toml).
    Raises ValueError when a decision the files need selected nothing (check ``lock.unmet``).
    """
    pip_run = pip_resolver or _default_pip
    conda_run = conda_solver or _default_conda
    closures: dict[tuple[tuple[str, ...], tuple[str, ...]], list[ResolvedDist]] = {}

    def closure(reqs: Sequence[str], index: Sequence[str], target: Target) -> list[ResolvedDist]:
        key = (tuple(reqs), tuple(index))
        if key not in closures:
            closures[key] = pip_run(reqs, index, target, lock.glibc)
        return closures[key]

    files: dict[str, str] = {}
    names = options.files
    decision = lock.decision
    if REQUIREMENTS in names:
        cand = decision.selection
        if cand is None:
            raise ValueError("no build selected: nothing to lock")
        whole = None
        if not options.top_level:
            extra = options.extra_requirements
            index = index_lines(
                catalog, cand, options.pytorch_index, bool(extra), options.default_index
            )
            with making(REQUIREMENTS, options):
                whole = closure([*pins(cand), *extra], index, decision.target)
        files[REQUIREMENTS] = render_requirements(
            catalog,
            decision,
            options.pytorch_index,
            whole,
            options.extra_requirements,
            options.default_index,
            hashes=options.with_hashes,
        )
    if PYLOCK in names:
        with making(PYLOCK, options):
            files[PYLOCK] = render_pylock_file(catalog, decision, options, closure)
    if PYPROJECT in names:
        files[PYPROJECT] = render_uv_project(
            catalog, [decision], options, (existing or {}).get(PYPROJECT)
        )
    if options.needs_conda:
        forge = options.conda_source == CondaSource.CONDA_FORGE
        env_decision = lock.conda_decision if forge else decision
        if env_decision is None or env_decision.selection is None:
            raise ValueError("no conda build selected: nothing to lock")
        env = conda_env(
            catalog,
            env_decision,
            source=options.conda_source,
            channel=options.channel,
            pytorch_index=options.pytorch_index,
            name=options.name,
            extra_requirements=options.extra_requirements,
            default_index=options.default_index,
        )
        target = env_decision.target
        vp = virtual_packages(catalog, target, env_decision.selection.variant.cuda, lock.glibc)
        notes = explain(target, vp, lock.glibc)
        files[ENVIRONMENT] = render_environment(catalog, env)
        files[VIRTUAL] = render_virtual_packages(catalog, env_decision, [(env.platform, vp, notes)])
        if CONDA_LOCK in names:
            hashes = content_hashes(files[ENVIRONMENT], files[VIRTUAL])  # before the slow solve
            channels = [c for c in env.channels if c != "nodefaults"]
            with making(CONDA_LOCK, options):
                records = conda_run(channels, env.specs, env.platform, vp)
                pip = closure(env.pip, env.pip_index, target) if env.pip else []
            if pip and pip_resolver is None:  # uv's closure: the specifiers from the metadata
                from resolver.writers.closure.dist_metadata import with_requires

                pip = with_requires(pip, target)
            header = header_lines(
                catalog,
                env_decision,
                [f"solved for {env.platform} with the virtual packages of virtual-packages.yml"],
            )
            locked = [LockedPlatform(env, vp, records, pip)]
            files[CONDA_LOCK] = render_conda_lock(header, locked, hashes)
    if DOCKERFILE in names and (decision.target.platform.os == "linux" or not options.every):
        from resolver.db import imagesdata
        from resolver.images import facts as image_facts
        from resolver.writers.formats.dockerfile import probe_files, render_dockerfile

        facts = image_facts.from_raw(*imagesdata.read(catalog.origin))
        files[DOCKERFILE] = render_dockerfile(catalog, decision, facts)
        files.update(probe_files())
    made = replace(
        inputs or recorded.LockInputs(),
        target=decision.target,
        glibc=lock.glibc,
        database=catalog.updated,
    )
    record = made.to_json()
    return {n: recorded.stamp(n, files[n], record) for n in _ORDER if n in files}


def pylock_closure(
    catalog: Catalog,
    decision: Decision,
    options: LockOptions,
    closure: Callable[[Sequence[str], Sequence[str], Target], list[ResolvedDist]] | None = None,
    glibc: str | None = None,
) -> list[ResolvedDist]:
    """The decision's whole closure for its target (the torch set and the extra packages)."""
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    extra = options.extra_requirements
    index = index_lines(catalog, cand, options.pytorch_index, bool(extra), options.default_index)
    if closure is None:
        return _default_pip([*pins(cand), *extra], index, decision.target, glibc)
    return closure([*pins(cand), *extra], index, decision.target)


def render_fleet_pylock(
    catalog: Catalog, decisions: Sequence[Decision], options: LockOptions, header: Sequence[str]
) -> str:
    """One pylock.toml for several platforms: packages carry their platforms' markers."""
    from resolver.writers.formats.pylock import fleet_document, render_pylock

    with making(PYLOCK, options):
        closures = [
            (d.target.platform, d.target.python, pylock_closure(catalog, d, options))
            for d in decisions
        ]
    return render_pylock(header, fleet_document(closures))


def render_pylock_file(
    catalog: Catalog,
    decision: Decision,
    options: LockOptions,
    closure: Callable[[Sequence[str], Sequence[str], Target], list[ResolvedDist]],
) -> str:
    """pylock.toml for the decision's target: the resolved closure (needs the index)."""
    from resolver.writers.formats.pylock import document, render_pylock

    dists = pylock_closure(catalog, decision, options, closure)
    target = decision.target
    header = header_lines(
        catalog,
        decision,
        [
            f"for {target.platform} and Python {target.python} only: other machines need their own",
            "install: uv pip install -r pylock.toml (PEP 751; every wheel checked by its sha256)",
        ],
    )
    return render_pylock(header, document(target.platform, target.python, dists))


def render_uv_project(
    catalog: Catalog,
    decisions: Sequence[Decision],
    options: LockOptions,
    existing: str | None,
) -> str:
    """pyproject.toml with the torch set of every decision (one per platform, with markers)."""
    from resolver.writers.formats.uvproject import PlatformSet, render_pyproject

    sets: list[PlatformSet] = []
    for decision in decisions:
        cand = decision.selection
        if cand is None:
            raise ValueError("no build selected: nothing to lock")
        tagged = any("+" in version for _, version in cand.packages)
        url = catalog.index_url(cand.variant.name, options.pytorch_index) if tagged else None
        sets.append(
            PlatformSet(decision.target.platform, tuple(cand.packages), cand.variant.name, url)
        )
    python = decisions[0].target.python if decisions else PythonVersion(3, 12)
    return render_pyproject(
        existing,
        sets,
        name=options.name or "environment",
        python=python,
        extra_requirements=options.extra_requirements,
    )
