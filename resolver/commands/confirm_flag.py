"""`--confirm` for suggest and lock: observe the selected build's wheel before answering."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from resolver.commands.ui import echo

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.observe.confirm import Confirmation
    from resolver.solve import Decision, Request, Target

CONFIRM_OPTION = click.option(
    "--confirm",
    is_flag=True,
    help="Before answering, read the selected build's wheel (a few MB, range requests) when "
    "its architectures are not yet observed, and store the observation.",
)


def confirm_and_resolve(
    catalog: Catalog,
    decision: Decision,
    target: Target,
    request: Request,
    pytorch_index: str | None,
) -> tuple[Catalog, Decision, Confirmation | None]:
    """Confirm the selection; when a new observation was stored, load and solve again (so a
    database that layers observations answers from what the wheel showed)."""
    from resolver import catalog as catalog_mod
    from resolver.dbupdate import DEFAULT_PYTORCH_INDEX
    from resolver.observe.confirm import confirm
    from resolver.observe.store import FILE
    from resolver.solve import solve
    from resolver.wheels.index import pip_default_index

    sel = decision.selection
    if sel is None:
        return catalog, decision, None
    origin = Path(catalog.origin)
    database = origin if (origin / "torch.yaml").is_file() else catalog_mod.data_dir()
    user = catalog_mod.user_data_dir() / FILE
    outcome = confirm(
        torch=sel.release.version,
        variant=sel.variant.name,
        platform=sel.platform,
        pypi=sel.pypi,
        database=database,
        observed_files=_observed_files(database, user),
        target=user,
        pytorch_index=pytorch_index or DEFAULT_PYTORCH_INDEX,
        pypi_index=pip_default_index() if sel.pypi else None,
    )
    for line in outcome.lines:
        echo(f"confirm: {line}", err=True)
    if outcome.status in ("confirmed", "contradicted"):
        catalog = catalog_mod.load().for_index(pytorch_index)
        decision = solve(catalog, target, request)
    return catalog, decision, outcome


def _observed_files(database: Path, user: Path) -> list[Path]:
    """The observations that describe ``database``: its own, the user's, and the shipped ones
    when it is the shipped database or the user's copy of it."""
    from resolver import catalog as catalog_mod
    from resolver.observe.store import FILE

    files = [database / FILE, user]
    shipped = catalog_mod.shipped_data_dir()
    if database.resolve() in (shipped.resolve(), catalog_mod.user_data_dir().resolve()):
        files.append(shipped / FILE)
    return files
