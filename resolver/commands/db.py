"""`gpuresolve db`: inspect, check and update the compatibility database."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.group import SuggestingGroup
from resolver.commands.params import SafePath
from resolver.commands.ui import echo, note

if TYPE_CHECKING:
    from resolver.core.documents.reports import DbCheckDoc

_DATA_OPTION = click.option(
    "--data",
    "data_dir",
    type=SafePath(file_okay=False),
    help="This data directory instead of the one in use.",
)


@click.group(cls=SuggestingGroup)
def db() -> None:
    """The compatibility database: check it, show it, update it."""


_JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, help="The outcome as JSON (a stable contract)."
)


@db.command()
@_DATA_OPTION
@_JSON_OPTION
@standard_options
def check(data_dir: str | None, as_json: bool) -> None:
    """Validate the schema and the consistency of every record (exit 1 on problems)."""
    from resolver import catalog as catalog_mod
    from resolver.flows.database import problems_of

    cat = catalog_mod.load(Path(data_dir) if data_dir else None)
    problems = problems_of(cat)
    if as_json:
        doc: DbCheckDoc = {
            "ok": not problems,
            "origin": str(cat.origin),
            "updated": cat.updated,
            "problems": list(problems),
            "counts": {
                "releases": len(cat.releases),
                "toolkits": len(cat.toolkits),
                "gpus": len(cat.gpus),
                "sources": len(cat.sources),
            },
        }
        emit_json(doc)
        sys.exit(1 if problems else 0)
    for problem in problems:
        echo(problem)
    releases = len(cat.releases)
    if problems:
        echo(f"{len(problems)} problem(s) in {cat.origin}", err=True)
        sys.exit(1)
    echo(
        f"ok: {cat.origin}: {releases} torch releases, {len(cat.toolkits)} CUDA toolkits, "
        f"{len(cat.gpus)} GPU models, {len(cat.sources)} sources"
    )


@db.command()
@_DATA_OPTION
@click.option("--json", "as_json", is_flag=True, help="Everything, as JSON (a stable contract).")
@click.option(
    "--with",
    "with_",
    multiple=True,
    metavar="PKG",
    help="List this extension package's releases one by one (repeatable; --json: only these).",
)
@standard_options
def show(data_dir: str | None, as_json: bool, with_: tuple[str, ...]) -> None:
    """What the database knows: releases × platforms, its date, sourced and unconfirmed facts."""
    from resolver import catalog as catalog_mod
    from resolver import dbshow
    from resolver.core.errors import UserError
    from resolver.core.versions import canonical_name

    cat = catalog_mod.load(Path(data_dir) if data_dir else None)
    names = tuple(canonical_name(n) for n in with_)
    unknown = [n for n in names if n not in cat.extensions]
    if unknown:
        have = ", ".join(sorted(cat.extensions))
        raise UserError(f"--with {unknown[0]}: not an extension package the database has ({have})")
    if as_json:
        emit_json(dbshow.show_json(cat, names or None))
    else:
        echo(dbshow.show_text(cat, names))


@db.command()
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON.")
@standard_options
def reset(dry_run: bool, as_json: bool) -> None:
    """Remove the user database (written by `db update`) and the catalog cache.

    Only files gpuresolve writes there are removed; anything else is named and left in place.
    Afterwards the shipped database is used.
    """
    from resolver.core.errors import UserError
    from resolver.db import location
    from resolver.db import reset as reset_mod

    try:
        plan = reset_mod.plan()
    except OSError as exc:
        raise UserError(
            f"cannot read {getattr(exc, 'filename', '') or exc}: {exc.strerror}"
        ) from None
    failed = [] if dry_run else reset_mod.apply(plan)
    if as_json:
        emit_json(plan.to_json(dry_run=dry_run, failed=failed))
    else:
        verb = "would remove" if dry_run else "removed"
        for path in plan.remove:
            echo(f"{verb} {path}")
        for path in plan.keep:
            echo(f"kept {path} (not written by gpuresolve)")
        if not plan.remove:
            echo(f"nothing to remove (user database: {plan.data_dir})")
    for line in failed:
        echo(f"gpuresolve: cannot remove {line}", err=True)
    forced = os.environ.get(location.DATA_ENV)
    if forced:
        note(f"{location.DATA_ENV}={forced} is still the database in use")
    if failed:
        sys.exit(2)


def _wheel_commands() -> None:
    """`db update`, `db inspect-wheel` and the observation commands live in their own modules."""
    from resolver.commands.db_update import update
    from resolver.commands.db_wheels import export_observations, import_observations, inspect_wheel

    db.add_command(update)
    db.add_command(inspect_wheel)
    db.add_command(export_observations)
    db.add_command(import_observations)


_wheel_commands()
