"""`gpuresolve db`: inspect and check the compatibility database."""

from __future__ import annotations

import sys

import click


@click.group()
def db() -> None:
    """The compatibility database: check it, show it, update it."""


@db.command()
@click.option("--data", "data_dir", type=click.Path(file_okay=False), help="Check this data directory.")
def check(data_dir: str | None) -> None:
    """Validate the schema and the consistency of every record (exit 1 on problems)."""
    from pathlib import Path

    from resolver import catalog as catalog_mod

    cat = catalog_mod.load(Path(data_dir) if data_dir else None)
    problems = cat.check()
    for problem in problems:
        click.echo(problem)
    releases = len(cat.releases)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {cat.origin}", err=True)
        sys.exit(1)
    click.echo(
        f"ok: {cat.origin}: {releases} torch releases, {len(cat.toolkits)} CUDA toolkits, "
        f"{len(cat.gpus)} GPU models, {len(cat.sources)} sources"
    )
