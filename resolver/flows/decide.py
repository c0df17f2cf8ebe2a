"""A machine's decision: the solver on a target (suggest, install, lock), and `--confirm`'s wheel
read before it answers. Only flows call the solver (tests/test_architecture.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from resolver.solve import Decision, Request, Target, solve

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.observe.confirm import Confirmation


def decide(catalog: Catalog, target: Target, request: Request) -> Decision:
    """The solver's decision for ``target``."""
    return solve(catalog, target, request)


def confirmed(
    catalog: Catalog,
    decision: Decision,
    target: Target,
    request: Request,
    pytorch_index: str | None,
) -> tuple[Catalog, Decision, Confirmation | None]:
    """Confirm the selection; when a new observation was stored, load and solve again (so a
    database that layers observations answers from what the wheel showed). What the wheel read
    found is the confirmation's ``lines``, for the command to say."""
    from resolver import catalog as catalog_mod
    from resolver.dbupdate import DEFAULT_PYTORCH_INDEX
    from resolver.observe.confirm import confirm
    from resolver.observe.store import FILE
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
