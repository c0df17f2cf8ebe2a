"""`--confirm` for suggest and lock: observe the selected build's wheel before answering."""

from __future__ import annotations

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
    """``flows.decide.confirmed``, saying what the wheel read found."""
    from resolver.flows.decide import confirmed

    catalog, decision, outcome = confirmed(catalog, decision, target, request, pytorch_index)
    for line in outcome.lines if outcome is not None else ():
        echo(f"confirm: {line}", err=True)
    return catalog, decision, outcome
