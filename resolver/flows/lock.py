"""A lock, one machine's or a team's: what it resolves, the files it renders, the folder it
leaves. The command chooses the options and prints; what happens between is here, on values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from resolver.catalog import Catalog
from resolver.core.errors import UserError, escaped, plain_text, shown
from resolver.core.hostprofile import HostProfile
from resolver.flows.output import OutputFolder, owned_names
from resolver.host.pipconfig import PipIndex
from resolver.solve import Decision, Request, Target, solve
from resolver.writers import lockfiles, manifest
from resolver.writers.recorded import FileOptions, LockInputs

__all__ = [
    "MAX_PROJECT_BYTES",
    "Single",
    "TeamRun",
    "check_env_name",
    "closure_choice",
    "default_index_choice",
    "lock_options",
    "recorded_index",
    "resolve_single",
    "run_team",
    "single_files",
]

MAX_PROJECT_BYTES = 1024 * 1024  # a pyproject.toml larger than this is not one to edit
Progress = Callable[[str, int], Callable[[int], None]]


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
    lock_input = lockfiles.prepare(catalog, decision, options, glibc and glibc.strip())
    unmet = lock_input.unmet(options)
    if unmet is None:
        options = lockfiles.with_extensions(catalog, lock_input, options)
    used = lockfiles.uses_default_index(catalog, lock_input.decision, options)
    return Single(lock_input, unmet, used, options)


def single_files(
    catalog: Catalog,
    single: Single,
    options: lockfiles.LockOptions,
    record: LockInputs,
    folder: OutputFolder,
) -> dict[str, str]:
    """The files of one machine's lock, recording ``record``; a file it edits in place (the
    user's pyproject.toml) is read from the folder first."""
    edited = [n for n in options.files if n in lockfiles.UPDATED_IN_PLACE]
    existing = folder.existing(edited, MAX_PROJECT_BYTES)
    return lockfiles.render_files(
        catalog, single.lock_input, options, inputs=record, existing=existing
    )


@dataclass(frozen=True)
class TeamRun:
    """A team lock resolved: its spec, options, folder, files and groups, and the files an
    earlier run wrote that it no longer writes (each removable or kept, and why)."""

    spec: Any  # team.spec.EnvSpec
    options: lockfiles.LockOptions
    folder: OutputFolder
    team: Any  # team.lock.TeamLock
    stale: tuple[manifest.Stale, ...]

    @property
    def gone(self) -> list[str]:
        """What is no longer generated and provably ours."""
        return [item.name for item in self.stale if item.removable]


def run_team(
    catalog: Catalog,
    spec_path: str,
    options: lockfiles.LockOptions,
    *,
    output: str | None,
    split: bool | None,
    check: bool,
    evidence: str,
    progress: Progress | None = None,
    on_spec: Callable[[Any, lockfiles.LockOptions], lockfiles.LockOptions] | None = None,
    recorded: Callable[[Path, lockfiles.LockOptions], lockfiles.LockOptions] | None = None,
    image: str | None = None,
) -> TeamRun:
    """`gpuresolve lock SPEC` up to writing: the spec read, the fleet locked, the folder's stale
    files found. ``evidence`` other than "documented" overrides the spec's; ``on_spec`` gets the
    spec once read and returns the options it asks for (its `lock: top-level`); ``recorded``
    gives the options the folder's report.md records (--check re-resolves with them)."""
    from resolver.team.lock import default_output, lock_team
    from resolver.team.spec import load_spec, with_image

    spec = with_image(load_spec(spec_path, catalog, progress), image)  # lock --image REF
    if evidence != "documented":  # given on the command line: overrides the spec's
        spec = replace(spec, request=replace(spec.request, evidence=evidence))
    options = replace(options, conda_source=spec.conda_source)
    if on_spec is not None:
        options = on_spec(spec, options)
    sources = [spec.path.parent / m.source for m in spec.members if m.source != "described"]
    folder = OutputFolder(Path(output) if output else default_output(spec), [spec.path, *sources])
    directory = folder.directory
    if check and not (directory / "report.md").is_file():
        raise UserError(
            f"no gpuresolve lock files in {directory} (no report.md): nothing to check (lock "
            f"{spec.name} first, or point -o at the folder its files are in)"
        )
    if check and recorded is not None:  # the formats the team's files record, unless given
        options = recorded(directory, options)
    team = lock_team(
        catalog,
        spec,
        options,
        split,
        existing=lambda rel: folder.read(rel, MAX_PROJECT_BYTES, "a file gpuresolve edits"),
        progress=progress,
        folder=directory,
    )
    stale = tuple(folder.stale(team.files, spec.path.name, owned_names()) if team.ok else ())
    return TeamRun(spec, options, folder, team, stale)


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
