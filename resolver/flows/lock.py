"""A lock, one machine's or a team's: what it resolves, the files it renders, the folder it
leaves. The command chooses the options and prints; what happens between is here, on values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped, plain_text, shown
from resolver.core.hostprofile import HostProfile
from resolver.core.vocab import CondaSource
from resolver.flows.output import OutputFolder
from resolver.host.pipconfig import PipIndex
from resolver.solve import Decision, Request, Target, solve
from resolver.solve.conda import solve_conda_forge
from resolver.writers import lockfiles, lockformats
from resolver.writers.recorded import FileOptions, LockInputs

__all__ = [
    "MAX_PROJECT_BYTES",
    "Single",
    "check_env_name",
    "closure_choice",
    "default_index_choice",
    "lock_options",
    "prepare",
    "recorded_index",
    "resolve_single",
    "single_files",
]

MAX_PROJECT_BYTES = 1024 * 1024  # a pyproject.toml larger than this is not one to edit


@dataclass(frozen=True)
class Single:
    """One machine's lock resolved: its builds, the one a wanted file lacks (nothing is written
    then), whether the files take packages from the index outside the PyTorch index, and the
    options the files are written with (the extensions' own where the build has any)."""

    lock_input: lockfiles.LockInput
    unmet: Decision | None
    uses_default_index: bool
    options: lockfiles.LockOptions


def resolve_single(
    catalog: Catalog,
    machine: Target,
    wanted: Request,
    options: lockfiles.LockOptions,
    glibc: str | None,
    profile: HostProfile | None,
) -> Single:
    """The builds for ``machine`` (its glibc: given, else the probed host's on its platform)."""
    if glibc is None and profile is not None and profile.platform == str(machine.platform):
        glibc = profile.glibc
    decision = solve(catalog, machine, wanted)
    lock_input = prepare(catalog, decision, options, glibc and glibc.strip())
    unmet = lock_input.unmet(options)
    if unmet is None:
        options = lockfiles.with_extensions(catalog, lock_input, options)
    used = lockfiles.uses_default_index(catalog, lock_input.decision, options)
    return Single(lock_input, unmet, used, options)


def prepare(
    catalog: Catalog, decision: Decision, options: lockfiles.LockOptions, glibc: str | None = None
) -> lockfiles.LockInput:
    """The builds ``options``' files need: the solver's ``decision`` and, for a conda-forge
    environment, conda-forge's for the same target and request."""
    conda_decision = None
    if options.needs_conda and options.conda_source == CondaSource.CONDA_FORGE:
        conda_decision = solve_conda_forge(catalog, decision.target, decision.request, glibc)
    return lockfiles.LockInput(decision, conda_decision, glibc)


def single_files(
    catalog: Catalog,
    single: Single,
    options: lockfiles.LockOptions,
    record: LockInputs,
    folder: OutputFolder,
) -> dict[str, str]:
    """The files of one machine's lock, recording ``record``; a file it edits in place (the
    user's pyproject.toml) is read from the folder first."""
    edited = [n for n in options.files if n in lockformats.in_place()]
    existing = folder.existing(edited, MAX_PROJECT_BYTES)
    return lockfiles.render_files(
        catalog, single.lock_input, options, inputs=record, existing=existing
    )


def default_index_choice(option: str | None) -> PipIndex:
    """The index outside the PyTorch index (``--default-index``, else the variable, else pip's
    configuration), its URL checked. Where it came from never goes into the files (only to
    stderr), so the same URL from any source gives the same bytes."""
    from resolver.host.pipconfig import default_index
    from resolver.io.urls import index_url

    found = default_index(option)
    if found.url is None:
        return found
    return replace(found, url=index_url(found.url, escaped(found.source)))


def recorded_index(url: str | None, where: str) -> PipIndex:
    """The index a lock recorded (``--check`` re-resolves with it, not this machine's)."""
    return PipIndex(url, f"the inputs recorded in {escaped(where)}" if url else "")


_ENV_NAME_BAD = set("/\\:# ")  # what conda refuses in an environment's name


def check_env_name(name: str) -> None:
    """A conda environment name conda would take: it lands in environment.yml and the locks."""
    plain_text(name, f"--name {shown(name)}")
    if not name.strip() or _ENV_NAME_BAD & set(name):
        raise UserError(
            f"--name {shown(name)}: a conda environment name without spaces, '/', '\\', ':' or '#'"
        )


def closure_choice(top_level: bool, hashes: bool | None) -> tuple[bool, bool | None]:
    """(top-level pins only, hashes): a full lock with hashes unless told otherwise; exit 2 for
    hashes without the closure they are computed from."""
    if top_level and hashes:
        raise UserError(
            "--top-level --hashes: top-level pins carry no hashes (they need the whole closure); "
            "drop --top-level for a full lock with hashes, or --hashes"
        )
    return top_level, (False if top_level else hashes)


def lock_options(
    choices: FileOptions, pytorch_index: str | None, default_index: str | None
) -> lockfiles.LockOptions:
    """The writers' options from a lock's own choices (the command line's, or those a lock
    records): one model whichever way they came; the environment's name and the closure choice
    checked."""
    if choices.env_name is not None:
        check_env_name(choices.env_name)
    top, hashed = closure_choice(choices.top_level, choices.hashes)
    return lockfiles.LockOptions(
        formats=frozenset(choices.formats),
        pytorch_index=pytorch_index,
        conda_source=choices.conda_source,
        channel=choices.channel.strip() if choices.channel else None,
        top_level=top,
        hashes=hashed,
        name=choices.env_name,
        default_index=default_index,
    )
