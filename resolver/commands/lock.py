"""`gpuresolve lock`: the selection as requirements.txt, environment.yml and conda-lock files."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from resolver import catalog as catalog_mod
from resolver import render
from resolver.commands import lock_inputs
from resolver.commands.common import (
    RequestOptions,
    SafePath,
    TargetOptions,
    check_channel,
    check_url,
    emit_json,
    request_options,
    target_options,
)
from resolver.commands.confirm_flag import CONFIRM_OPTION
from resolver.core.errors import UserError, shown
from resolver.flows.output import Checked, OutputFolder, owned_names
from resolver.flows.output import FileStatus as FileStatus_
from resolver.host.pipconfig import PipIndex
from resolver.writers import lockfiles

_GLIBC_RE = re.compile(r"^2\.[0-9]{1,3}$")
CHANNEL_ENV = "GPURESOLVE_CONDA_CHANNEL"
MAX_PROJECT_BYTES = 1024 * 1024  # a pyproject.toml larger than this is not one to edit


@click.command()
@click.argument("spec", required=False, type=SafePath(dir_okay=False))
@target_options
@request_options
@click.option(
    "--format",
    "formats",
    type=click.Choice(["requirements", "conda", "conda-lock", "pylock", "uv", "dockerfile", "all"]),
    multiple=True,
    default=("requirements",),
    show_default=True,
    help="requirements: requirements.txt; conda: environment.yml + virtual-packages.yml; "
    "conda-lock: those and conda-lock.yml (a real solve); pylock: pylock.toml (PEP 751); "
    "uv: the torch set in pyproject.toml for uv; dockerfile: requirements.txt and a Dockerfile "
    "that installs it; repeat, or all (the first three).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=SafePath(file_okay=False),
    default=None,
    help="The directory to write into (default: ., or environments/<name>/ for a spec).",
)
@click.option(
    "--split/--no-split",
    default=None,
    help="With a spec: write one set per group of targets (--split), or only a common set "
    "(--no-split); default: the spec's `split:` (auto: split only when no common set exists).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; re-resolve from the inputs the files record and exit 1 when a file was "
    "edited (drift) or now resolves to other pins (stale); a newer database alone passes.",
)
@click.option(
    "--hashes/--no-hashes",
    default=None,
    help="requirements.txt's pins carry sha256 hashes (default, except with --top-level).",
)
@click.option(
    "--top-level",
    is_flag=True,
    help="requirements.txt pins only what was asked (the torch set, a spec's packages.pip as "
    "given), not the whole closure: not a full lock, but made without an index (a spec: "
    "`lock: top-level`).",
)
@click.option(
    "--conda-source",
    type=click.Choice(["pip", "conda-forge"]),
    default="pip",
    show_default=True,
    help="pip: conda gives Python, the PyTorch index the torch set; conda-forge: its own builds.",
)
@click.option(
    "--channel",
    metavar="NAME|URL",
    envvar=CHANNEL_ENV,
    callback=check_channel,
    help=f"The conda channel (default conda-forge), e.g. a mirror's URL [env: {CHANNEL_ENV}].",
)
@click.option(
    "--default-index",
    metavar="URL",
    callback=check_url,
    help="The index for packages outside the PyTorch index (default: "
    "$GPURESOLVE_DEFAULT_INDEX, else pip's configured index-url, else the installer's own).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Say which index serves what, where it came from, and what of the environment uv gets.",
)
@click.option("--glibc", metavar="X.Y", help="The target's glibc (default: detected, else 2.28).")
@click.option("--name", "env_name", metavar="NAME", help="The conda environment's name.")
@CONFIRM_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the files and the decision as JSON.")
def lock(
    spec: str | None,
    target: TargetOptions,
    request: RequestOptions,
    formats: tuple[str, ...],
    output: str | None,
    split: bool | None,
    check: bool,
    hashes: bool | None,
    top_level: bool,
    conda_source: str,
    channel: str | None,
    default_index: str | None,
    verbose: bool,
    glibc: str | None,
    env_name: str | None,
    confirm: bool,
    as_json: bool,
) -> None:
    """Write the build for this machine (or a described one) as files to commit and install from.

    With SPEC (environments/<name>.yaml), lock a team environment: one set that runs on every
    target of the fleet, written once per platform, with report.md.

    Every file records the inputs it was made from; `--check` re-resolves from them (options
    given override them) and tells a hand edit (drift) from a newer build (stale).

    Exit 0 when written (or, with --check, all current), 1 when no build fits (nothing is
    written) or --check finds drift or stale pins, 2 on bad input.
    """
    ctx = click.get_current_context()
    directory = Path(output or ".")
    lock_opts: dict[str, Any] = {
        "formats": formats,
        "hashes": hashes,
        "top_level": top_level,
        "conda_source": conda_source,
        "channel": channel,
        "env_name": env_name,
        "default_index": None,
    }
    index = lock_inputs.default_index_choice(default_index)
    lock_opts["default_index"] = index.url  # recorded: --check re-resolves with the same URL
    effective = None
    if check and spec is None:
        if not lock_inputs.has_lock_files(directory):
            raise UserError(
                f"no gpuresolve lock files in {directory}: nothing to check (lock first, or "
                "point -o at the folder the files are in)"
            )
        found = lock_inputs.find_recorded(directory)
        if found is not None:
            where, record = found
            effective = lock_inputs.apply_record(
                ctx, where, record, target, request, lock_opts, glibc
            )
            request, lock_opts, glibc = effective.request, effective.lock_options, effective.glibc
            if lock_opts["default_index"] != index.url:
                index = lock_inputs.recorded_index(lock_opts["default_index"], where)
    if glibc is not None and not _GLIBC_RE.match(glibc.strip()):
        raise UserError(f"--glibc {shown(glibc)}: expected a glibc version like 2.28")
    if lock_opts["env_name"] is not None:
        lock_inputs.check_env_name(lock_opts["env_name"])
    pytorch_index = request.pytorch_index
    top, hashed = lock_inputs.closure_choice(bool(lock_opts["top_level"]), lock_opts["hashes"])
    options = lockfiles.LockOptions(
        formats=frozenset(lock_opts["formats"]),
        pytorch_index=pytorch_index,
        conda_source=lock_opts["conda_source"],
        channel=lock_opts["channel"].strip() if lock_opts["channel"] else None,
        top_level=top,
        hashes=hashed,
        name=lock_opts["env_name"],
        default_index=index.url,
    )
    if hashes and lockfiles.REQUIREMENTS not in options.files:
        raise UserError("--hashes pins requirements.txt: add --format requirements (or all)")
    catalog = catalog_mod.load().for_index(request.pytorch_index)  # a mirror's releases too
    if spec is not None:
        given = [*target.given(), *request.given()]
        if conda_source != "pip":
            given.append("--conda-source")
        if confirm:
            given.append("--confirm")
        if given:
            raise UserError(f"{spec}: {given[0]} belongs in the spec, not on the command line")
        evidence = "any" if request.allow_unconfirmed else request.evidence
        _lock_team(
            catalog, spec, options, output, split, check, evidence, as_json, (index, verbose)
        )
    if split is not None:
        raise UserError("--split needs a team environment spec (gpuresolve lock SPEC --split)")
    wanted = request.request(target)
    if effective is not None and effective.target is not None:
        machine, profile = effective.target, None
        if lock_inputs.given(ctx, "python") and target.python:
            from resolver.host.interpreter import python_version

            machine = replace(machine, python=python_version(target.python))
    else:
        recorded_python = None
        if effective is not None and not target.python:
            recorded_python = effective.python
        machine, profile = target.resolve(catalog, python=recorded_python)
        if (
            not target.python
            and not target.host_file
            and recorded_python is None
            and (target.given())
        ):
            click.echo(
                f"gpuresolve: no --python given: the lock assumes Python {machine.python} "
                "(this interpreter's) and records it; pass --python to choose",
                err=True,
            )
    if glibc is None and profile is not None and profile.platform == machine.platform:
        glibc = profile.glibc
    glibc = glibc and glibc.strip()
    if confirm:
        from resolver.commands.confirm_flag import confirm_and_resolve
        from resolver.solve import solve

        catalog, _decision, _confirmed = confirm_and_resolve(
            catalog, solve(catalog, machine, wanted), machine, wanted, pytorch_index
        )
    if effective is not None:
        overrides = list(effective.overrides)
        rec = effective.recorded_target
        if effective.target_flags and rec is not None and not lock_inputs.same_target(machine, rec):
            overrides.extend(effective.target_flags)
        if overrides:
            click.echo(
                f"gpuresolve: {', '.join(overrides)} from the command line override the "
                f"inputs recorded in {where}",
                err=True,
            )
    lock_input = lockfiles.prepare(catalog, machine, wanted, options, glibc)
    unmet = lock_input.unmet(options)
    if unmet is not None:
        if as_json:
            emit_json(
                {"ok": False, "files": [], "decision": _decision_json(catalog, unmet, options)}
            )
            sys.exit(1)
        if unmet is lock_input.conda_decision:
            click.echo("conda-forge has no build that runs on this target (nothing written)")
        else:
            click.echo("nothing written:")
        click.echo(render.decision_text(catalog, unmet, pytorch_index))
        sys.exit(1)
    options = lockfiles.with_extensions(catalog, lock_input, options)
    used = lockfiles.uses_default_index(catalog, lock_input.decision, options)
    lock_inputs.say_index(index, verbose=verbose, used=used)
    lock_opts["default_index"] = options.default_index if used else None  # an input where used
    lock_opts["top_level"], lock_opts["hashes"] = options.top_level, options.with_hashes
    record = lock_inputs.inputs_record(request, wanted, lock_opts)
    existing = _existing(directory, options.files)
    files = lockfiles.render_files(catalog, lock_input, options, inputs=record, existing=existing)
    statuses = _write_or_check(directory, files, check, "", catalog, as_json)
    if as_json and check:  # what changed, not the whole decision with every rejected build
        sel = lock_input.decision.selection
        emit_json(
            {
                "ok": statuses[1],
                "check": statuses[2],
                "files": statuses[0],
                **statuses[3],
                "build": (
                    render.candidate_json(catalog, sel, options.pytorch_index) if sel else None
                ),
            }
        )
        sys.exit(0 if statuses[1] else 1)
    if as_json:
        emit_json(
            {
                "ok": statuses[1],
                "check": statuses[2],
                "files": statuses[0],
                "decision": _decision_json(catalog, lock_input.decision, options),
                "conda_decision": (
                    _decision_json(catalog, lock_input.conda_decision, options)
                    if lock_input.conda_decision is not None
                    else None
                ),
            }
        )
        sys.exit(0 if statuses[1] else 1)
    if check:
        sys.exit(0 if statuses[1] else 1)
    sel = lock_input.decision.selection
    if sel is not None and options.needs_wheels:
        click.echo(f"build: {render.describe_build(sel)}")
    if lock_input.conda_decision is not None and lock_input.conda_decision.selection is not None:
        click.echo(
            f"conda-forge build: {render.describe_build(lock_input.conda_decision.selection)}"
        )
    sys.exit(0)


def _decision_json(
    catalog: catalog_mod.Catalog, decision: Any, options: lockfiles.LockOptions
) -> dict[str, Any]:
    return render.decision_json(catalog, decision, options.pytorch_index)


def _existing(directory: Path, names: Sequence[str]) -> dict[str, str]:
    """The current text of the files a format edits in place (the user's pyproject.toml), read
    as everything under the output folder is: never through a link."""
    edited = [n for n in names if n in lockfiles.UPDATED_IN_PLACE]
    return OutputFolder(directory).existing(edited, MAX_PROJECT_BYTES)


FileStatus = dict[str, Any]  # a file's status as --json shows it


def _write_or_check(
    directory: Path,
    files: dict[str, str],
    check: bool,
    what: str,
    catalog: catalog_mod.Catalog,
    as_json: bool = False,
) -> tuple[list[FileStatus], bool, str | None, dict[str, Any]]:
    """Write the files (saying which changed), or with --check compare them and say why.

    Returns each file's status (written/unchanged, or with --check its check status and
    changes), whether all is well, --check's outcome (drift | stale | database-newer | current)
    and what --check found for --json (changes, messages, exit).
    """
    folder = OutputFolder(directory)
    if check:
        found = folder.check(files, catalog.updated, what)
        _say_checked(found, directory, len(files), as_json)
        extra = {
            "changes": found.changes,
            "messages": list(found.messages),
            "exit": 0 if found.ok else 1,
        }
        return [f.to_json() for f in found.files], found.ok, found.outcome, extra
    written = folder.write(files)
    _say_written(written, as_json)
    return [f.to_json() for f in written], True, None, {}


def _say_checked(found: Checked, directory: Path, count: int, as_json: bool) -> None:
    if found.diff and not as_json:
        sys.stdout.write(found.diff)
    for line in found.messages:
        click.echo(f"gpuresolve: {line}", err=True)
    if found.ok and not as_json:
        click.echo(f"all current: {count} file(s) in {directory}")


def _say_written(files: Sequence[Any], as_json: bool) -> None:
    for f in files if not as_json else ():
        click.echo(f"{'wrote' if f.status == 'written' else f.status} {f.path}")


PROGRESS_FROM = 500  # targets or machine shapes: fewer take well under a second


@contextlib.contextmanager
def _progress_bars() -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """Click's progress bar on stderr for each long step of a team lock, one after the other;
    only when stderr is a terminal (a pipe or a CI log gets nothing) and the step is long."""
    bars = contextlib.ExitStack()

    def start(label: str, total: int) -> Callable[[int], None]:
        bars.close()  # the previous step is done: its bar ends its line
        if total < PROGRESS_FROM or not sys.stderr.isatty():
            return lambda n: None
        bar = bars.enter_context(click.progressbar(length=total, label=label, file=sys.stderr))
        return bar.update

    with bars:
        yield start


def _lock_team(
    catalog: catalog_mod.Catalog,
    spec_path: str,
    options: lockfiles.LockOptions,
    output: str | None,
    split: bool | None,
    check: bool,
    evidence: str,
    as_json: bool = False,
    index: tuple[PipIndex, bool] | None = None,
) -> None:
    """`gpuresolve lock SPEC`: every platform's files and report.md; exits. ``index``: the
    index outside the PyTorch index and whether to say more about it (-v)."""
    from resolver.team.lock import default_output, lock_team
    from resolver.team.spec import load_spec

    with _progress_bars() as progress:  # a large node list's reading, the solving, grouping
        spec = load_spec(spec_path, catalog, progress)
        if evidence != "documented":  # given on the command line: overrides the spec's
            spec = replace(spec, request=replace(spec.request, evidence=evidence))
        options = replace(options, conda_source=spec.conda_source)
        ctx = click.get_current_context()
        if spec.lock == "top-level" and not lock_inputs.given(ctx, "top_level"):
            top, hashed = lock_inputs.closure_choice(True, options.hashes)
            options = replace(options, top_level=top, hashes=hashed)
        if index is not None:
            lock_inputs.say_index(index[0], verbose=index[1], used=bool(spec.pip))
        directory = Path(output) if output else default_output(spec)
        if check and not (directory / "report.md").is_file():
            raise UserError(
                f"no gpuresolve lock files in {directory} (no report.md): nothing to check (lock "
                f"{spec.name} first, or point -o at the folder its files are in)"
            )
        if check:  # the formats the team's files record, unless given again
            options = lock_inputs.recorded_team_formats(directory, options)
        team = lock_team(
            catalog,
            spec,
            options,
            split,
            existing=lambda rel: OutputFolder(directory).read(
                rel, MAX_PROJECT_BYTES, "a file gpuresolve edits"
            ),
            progress=progress,
        )
    if split is not None and split != (spec.split == "true") and spec.split != "auto":
        click.echo(
            f"gpuresolve: {'--split' if split else '--no-split'} overrides the spec's "
            f"split: {spec.split}",
            err=True,
        )
    if team.auto_split:
        click.echo(
            f"{spec.name}: no set runs on every target, so the lock is split into "
            f"{len(team.groups)} groups (split: auto; `split: false` in the spec refuses instead)",
            err=True,
        )
    for label, decision in team.groups:
        if as_json:
            break
        where = f" ({label})" if label else ""
        if decision.ok:
            picks = "; ".join(
                f"{c.folder}: {render.describe_build(c.candidate)}" for c in decision.choices
            )
            click.echo(f"{spec.name}{where}: {picks}")
        else:
            click.echo(f"{spec.name}{where}: no set runs on every target")
            for conflict in decision.conflicts:
                click.echo(f"  {conflict}")
    groups_json = [
        {
            "label": label or None,
            "ok": decision.ok,
            "torch": decision.torch,
            "platforms": {  # a platform's GPU-less members' set: "<platform>-cpu"
                c.folder: render.candidate_json(catalog, c.candidate, options.pytorch_index)
                for c in decision.choices
            },
            "conflicts": list(decision.conflicts),
        }
        for label, decision in team.groups
    ]
    if not team.ok:
        if as_json:
            emit_json({"ok": False, "spec": spec.name, "files": [], "groups": groups_json})
            sys.exit(1)
        hint = "" if split else "; --split writes one set per group of targets"
        click.echo(f"nothing written{hint} (see the reasons above)", err=True)
        sys.exit(1)
    folder = OutputFolder(directory)
    ours = owned_names()
    stale = folder.stale(team.files, spec.path.name, ours)
    gone = [item.name for item in stale if item.removable]
    for item in stale:
        if not item.removable:
            click.echo(
                f"gpuresolve: kept {directory / item.name}: no longer generated, but "
                f"{item.why_kept}; remove it yourself if it is not needed",
                err=True,
            )
    if gone and check:
        removed = [FileStatus_(directory / n, n, "removed").to_json() for n in gone]
        click.echo(f"gpuresolve: {spec.name}: no longer generated: {', '.join(gone)}", err=True)
        if as_json:
            emit_json(
                {
                    "ok": False,
                    "check": "drift",
                    "changes": [],
                    "messages": [f"{spec.name}: no longer generated: {', '.join(gone)}"],
                    "exit": 1,
                    "spec": spec.name,
                    "files": removed,
                    "groups": groups_json,
                }
            )
        sys.exit(1)
    if check:
        statuses, ok, outcome, found = _write_or_check(
            directory, team.files, check, f" of {spec.name}", catalog, as_json
        )
    else:  # the files, then what is no longer generated and provably ours, then the manifest
        replaced = folder.replace(team.files, spec.path.name, ours)
        _say_written([f for f in replaced.files if f.status != "removed"], as_json)
        for path in replaced.removed if not as_json else ():
            click.echo(f"removed {path}")
        statuses, ok, outcome, found = [f.to_json() for f in replaced.files], True, None, {}
    if as_json:
        emit_json(
            {
                "ok": ok,
                "check": outcome,
                **found,
                "spec": spec.name,
                "split": len(team.groups) > 1 or bool(team.groups and team.groups[0][0]),
                "files": statuses,
                "groups": groups_json,
            }
        )
    sys.exit(0 if ok else 1)
