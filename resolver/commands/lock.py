"""`gpuresolve lock`: the selection as requirements.txt, environment.yml and conda-lock files."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from resolver import catalog as catalog_mod
from resolver import render
from resolver.commands.common import (
    RequestOptions,
    TargetOptions,
    check_channel,
    request_options,
    target_options,
)
from resolver.commands.confirm_flag import CONFIRM_OPTION
from resolver.errors import UserError, shown
from resolver.writers import lockfiles

_GLIBC_RE = re.compile(r"^2\.\d{1,3}$")
CHANNEL_ENV = "GPURESOLVE_CONDA_CHANNEL"


@click.command()
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@target_options
@request_options
@click.option(
    "--format",
    "formats",
    type=click.Choice(["requirements", "conda", "conda-lock", "dockerfile", "all"]),
    multiple=True,
    default=("requirements",),
    show_default=True,
    help="requirements: requirements.txt; conda: environment.yml + virtual-packages.yml; "
    "conda-lock: those and conda-lock.yml (a real solve); dockerfile: requirements.txt and a "
    "Dockerfile that installs it; repeat, or all (the lock files).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(file_okay=False),
    default=None,
    help="The directory to write into (default: ., or environments/<name>/ for a spec).",
)
@click.option(
    "--split",
    is_flag=True,
    help="With a spec: when no set runs on every target, write one set per group of targets.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 with a diff when a file differs from what would be written.",
)
@click.option(
    "--hashes",
    is_flag=True,
    help="requirements.txt pins the whole closure with sha256 hashes (runs pip; needs the index).",
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
@click.option("--glibc", metavar="X.Y", help="The target's glibc (default: detected, else 2.28).")
@click.option("--name", "env_name", metavar="NAME", help="The conda environment's name.")
@CONFIRM_OPTION
def lock(
    spec: str | None,
    target: TargetOptions,
    request: RequestOptions,
    formats: tuple[str, ...],
    output: str | None,
    split: bool,
    check: bool,
    hashes: bool,
    conda_source: str,
    channel: str | None,
    glibc: str | None,
    env_name: str | None,
    confirm: bool,
) -> None:
    """Write the build for this machine (or a described one) as files to commit and install from.

    With SPEC (environments/<name>.yaml), lock a team environment: one set that runs on every
    target of the fleet, written once per platform, with report.md.

    Exit 0 when written (or, with --check, all current), 1 when no build fits (nothing is
    written) or --check finds a difference, 2 on bad input.
    """
    if glibc is not None and not _GLIBC_RE.match(glibc.strip()):
        raise UserError(f"--glibc {shown(glibc)}: expected a glibc version like 2.28")
    pytorch_index = request.pytorch_index
    options = lockfiles.LockOptions(
        formats=frozenset(formats),
        pytorch_index=pytorch_index,
        conda_source=conda_source,
        channel=channel.strip() if channel else None,
        hashes=hashes,
        name=env_name,
    )
    if hashes and lockfiles.REQUIREMENTS not in options.files:
        raise UserError("--hashes pins requirements.txt: add --format requirements (or all)")
    catalog = catalog_mod.load()
    if spec is not None:
        given = [*target.given(), *request.given()]
        if conda_source != "pip":
            given.append("--conda-source")
        if confirm:
            given.append("--confirm")
        if given:
            raise UserError(f"{spec}: {given[0]} belongs in the spec, not on the command line")
        evidence = "any" if request.allow_unconfirmed else request.evidence
        _lock_team(catalog, spec, options, output, split, check, evidence)
    if split:
        raise UserError("--split needs a team environment spec (gpuresolve lock SPEC --split)")
    wanted = request.request(target)
    machine, profile = target.resolve(catalog)
    if glibc is None and profile is not None and profile.platform == machine.platform:
        glibc = profile.glibc
    if confirm:
        from resolver.commands.confirm_flag import confirm_and_resolve
        from resolver.solve import solve

        decision = solve(catalog, machine, wanted)
        catalog, _decision, _c = confirm_and_resolve(
            catalog, decision, machine, wanted, pytorch_index
        )
    lock_input = lockfiles.prepare(catalog, machine, wanted, options, glibc and glibc.strip())
    unmet = lock_input.unmet(options)
    if unmet is not None:
        if unmet is lock_input.conda_decision:
            click.echo("conda-forge has no build that runs on this target (nothing written)")
        else:
            click.echo("nothing written:")
        click.echo(render.decision_text(catalog, unmet, pytorch_index))
        sys.exit(1)
    files = lockfiles.render_files(catalog, lock_input, options)
    _write_or_check(Path(output or "."), files, check, "")
    sel = lock_input.decision.selection
    if sel is not None and options.needs_wheels:
        click.echo(f"build: {render.describe_build(sel)}")
    if lock_input.conda_decision is not None and lock_input.conda_decision.selection is not None:
        click.echo(
            f"conda-forge build: {render.describe_build(lock_input.conda_decision.selection)}"
        )
    sys.exit(0)


def _write_or_check(directory: Path, files: dict[str, str], check: bool, what: str) -> None:
    """Write the files (saying which changed), or with --check compare them and exit."""
    changed = [n for n in files if lockfiles.diff_files(directory, {n: files[n]})]
    diff = lockfiles.write_files(directory, files, check=check)
    if check:
        if diff:
            sys.stdout.write(diff)
            click.echo(
                f"gpuresolve: {len(changed)} file(s){what} differ from what `gpuresolve lock` "
                "writes: " + ", ".join(changed),
                err=True,
            )
            sys.exit(1)
        click.echo(f"all current: {len(files)} file(s) in {directory}")
        sys.exit(0)
    for name in files:
        click.echo(f"{'wrote' if name in changed else 'unchanged'} {directory / name}")


def _lock_team(
    catalog: catalog_mod.Catalog,
    spec_path: str,
    options: lockfiles.LockOptions,
    output: str | None,
    split: bool,
    check: bool,
    evidence: str,
) -> None:
    """`gpuresolve lock SPEC`: every platform's files and report.md; exits."""
    from dataclasses import replace

    from resolver.envspec import load_spec
    from resolver.teamlock import default_output, lock_team

    spec = load_spec(spec_path, catalog)
    if evidence != "documented":  # given on the command line: overrides the spec's
        spec = replace(spec, request=replace(spec.request, evidence=evidence))
    options = replace(options, conda_source=spec.conda_source)
    team = lock_team(catalog, spec, options, split)
    directory = Path(output) if output else default_output(spec)
    for label, decision in team.groups:
        where = f" ({label})" if label else ""
        if decision.ok:
            picks = "; ".join(
                f"{c.platform}: {render.describe_build(c.candidate)}" for c in decision.choices
            )
            click.echo(f"{spec.name}{where}: {picks}")
        else:
            click.echo(f"{spec.name}{where}: no set runs on every target")
            for conflict in decision.conflicts:
                click.echo(f"  {conflict}")
    if not team.ok:
        hint = "" if split else "; --split writes one set per group of targets"
        click.echo(f"nothing written{hint} (see the reasons above)", err=True)
        sys.exit(1)
    from resolver.writers import manifest

    stale = manifest.stale(directory, team.files)
    gone = [item.name for item in stale if item.removable]
    for item in stale:
        if not item.removable:
            click.echo(
                f"gpuresolve: kept {directory / item.name}: no longer generated, but "
                f"{item.why_kept}; remove it yourself if it is not needed",
                err=True,
            )
    if gone and check:
        click.echo(f"gpuresolve: {spec.name}: no longer generated: {', '.join(gone)}", err=True)
        sys.exit(1)
    if not check:
        for name in gone:  # a platform or group the spec no longer has
            for path in manifest.remove(directory, name):
                click.echo(f"removed {path}")
    _write_or_check(directory, team.files, check, f" of {spec.name}")
    manifest.write(directory, team.files)
    sys.exit(0)
