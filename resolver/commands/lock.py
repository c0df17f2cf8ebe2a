"""`gpuresolve lock`: the selection as requirements.txt, environment.yml and conda-lock files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from resolver import catalog as catalog_mod
from resolver.commands import lock_inputs
from resolver.commands.common import (
    RequestOptions,
    TargetOptions,
    request_options,
    target_options,
    warn_lost,
)
from resolver.commands.config import no_config, standard_options
from resolver.commands.confirm_flag import CONFIRM_OPTION
from resolver.commands.lock_output import say_single, say_unmet, write_or_check
from resolver.commands.lock_team import IMAGE_OPTION, lock_team, refuse_team_flags
from resolver.commands.params import FormatChoice, SafePath, check_channel, check_url
from resolver.commands.ui import echo, level, step
from resolver.core.errors import UserError, shown
from resolver.core.versions import GLIBC_RE
from resolver.core.vocab import CondaSource, words
from resolver.flows.lock import (
    default_index_choice,
    lock_options,
    recorded_index,
    resolve_single,
    single_files,
)
from resolver.flows.output import OutputFolder
from resolver.writers import lockfiles, lockformats
from resolver.writers.recorded import FileOptions

CHANNEL_ENV = "GPURESOLVE_CONDA_CHANNEL"


@click.command()
@click.argument("spec", required=False, type=SafePath(dir_okay=False))
@target_options
@request_options
@click.option(
    "--format",
    "formats",
    type=FormatChoice(),
    multiple=True,
    default=("requirements",),
    show_default=True,
    help=lockformats.help_text(),
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
    is_eager=True,  # before any value is looked up: --check reads no config file
    callback=no_config,
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
    type=click.Choice(words(CondaSource)),
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
@click.option("--glibc", metavar="X.Y", help="The target's glibc (default: detected, else 2.28).")
@click.option("--name", "env_name", metavar="NAME", help="The conda environment's name.")
@CONFIRM_OPTION
@IMAGE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the files and the decision as JSON.")
@standard_options
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
    verbose = level() >= 1  # -v: which index serves what, where it came from, uv's environment
    directory = Path(output or ".")
    index = default_index_choice(default_index)
    # the index is recorded: --check re-resolves with the same URL
    files = FileOptions(formats, hashes, top_level, conda_source, channel, env_name, index.url)
    effective = None
    if check and spec is None:
        if not OutputFolder(directory).has_lock_files():
            raise UserError(
                f"no gpuresolve lock files in {directory}: nothing to check (lock first, or "
                "point -o at the folder the files are in)"
            )
        found = OutputFolder(directory).recorded_inputs()
        if found is not None:
            where, record = found
            effective = lock_inputs.apply_record(ctx, record, target, request, files, glibc)
            request, files, glibc = effective.request, effective.files, effective.glibc
            if files.default_index != index.url:
                index = recorded_index(files.default_index, where)
    if glibc is not None and not GLIBC_RE.match(glibc.strip()):
        raise UserError(f"--glibc {shown(glibc)}: expected a glibc version like 2.28")
    pytorch_index = request.pytorch_index
    options = lock_options(files, pytorch_index, index.url)
    if hashes and lockfiles.REQUIREMENTS not in options.files:
        raise UserError("--hashes pins requirements.txt: add --format requirements (or all)")
    catalog = catalog_mod.load().for_index(request.pytorch_index)  # a mirror's releases too
    if spec is not None:
        given = [*target.given(), *request.given()]
        if conda_source != CondaSource.PIP:
            given.append("--conda-source")
        if confirm:
            given.append("--confirm")
        if given:
            raise UserError(f"{spec}: {given[0]} belongs in the spec, not on the command line")
        evidence = "any" if request.allow_unconfirmed else request.evidence
        lock_team(catalog, spec, options, output, split, check, evidence, as_json, (index, verbose))
    refuse_team_flags(split)  # --split, --image: a team's (a cluster's) options
    wanted = request.request(target.without_cuda(), catalog.extensions)
    if effective is not None and effective.target is not None:
        machine, profile = effective.target, None
        if lock_inputs.given(ctx, "python") and target.python:
            from resolver.flows.target import with_python

            machine = with_python(machine, target.python)
    else:
        recorded_python = None
        if effective is not None and not target.python:
            recorded_python = effective.python
        machine, profile = target.resolve(catalog, python=recorded_python)
        warn_lost(profile)
        if not (target.python or target.host_file) and recorded_python is None and target.given():
            echo(
                f"gpuresolve: no --python given: the lock assumes Python {machine.python} "
                "(this interpreter's) and records it; pass --python to choose",
                err=True,
            )
    if confirm:
        from resolver.commands.confirm_flag import confirm_and_resolve
        from resolver.flows.decide import decide

        catalog, _decision, _confirmed = confirm_and_resolve(
            catalog, decide(catalog, machine, wanted), machine, wanted, pytorch_index
        )
    if effective is not None:
        overrides = list(effective.overrides)
        rec = effective.recorded_target
        if effective.target_flags and rec is not None and not lock_inputs.same_target(machine, rec):
            overrides.extend(effective.target_flags)
        if overrides:
            echo(
                f"gpuresolve: {', '.join(overrides)} from the command line override the "
                f"inputs recorded in {where}",
                err=True,
            )
    single = resolve_single(catalog, machine, wanted, options, glibc, profile)
    unmet = single.unmet
    if unmet is not None:
        say_unmet(catalog, single, options, as_json)
    options = single.options  # with the extensions' indexes where the lock has extensions
    used = single.uses_default_index
    lock_inputs.say_index(index, verbose=verbose, used=used)
    files = replace(  # the index is an input where used
        files,
        default_index=options.default_index if used else None,
        top_level=options.top_level,
        hashes=options.with_hashes,
    )
    record = lock_inputs.as_given(request, files)
    folder = OutputFolder(directory, [Path(target.host_file)] if target.host_file else [])
    with step("resolving the lock files"):  # the closures (uv), conda solves
        texts = single_files(catalog, single, options, record, folder)
    statuses = write_or_check(folder, texts, check, "", catalog.updated, as_json)
    say_single(catalog, single, options, statuses, check, as_json)
