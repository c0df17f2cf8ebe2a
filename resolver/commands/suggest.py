"""`gpuresolve suggest`: the best build for this machine or a described one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import click

from resolver.commands.common import (
    RequestOptions,
    TargetOptions,
    request_options,
    target_options,
    warn_lost,
)
from resolver.commands.config import standard_options
from resolver.commands.confirm_flag import CONFIRM_OPTION
from resolver.commands.emit import emit_json
from resolver.commands.ui import debug, echo, level, note, warning
from resolver.present import findings as words

if TYPE_CHECKING:
    from resolver.core.documents.decision import SuggestDoc


@click.command()
@target_options
@request_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the decision as JSON (a stable contract)."
)
@click.option(
    "--explain",
    "explain_build",
    metavar="BUILD",
    help="Every check one build (torch==2.15.0+cu132, or 2.15.0) passes or fails here.",
)
@CONFIRM_OPTION
@standard_options
def suggest(
    target: TargetOptions,
    request: RequestOptions,
    as_json: bool,
    explain_build: str | None,
    confirm: bool,
) -> None:
    """Say what to install: the pip command, why, and the runner-up.

    -v also lists every alternative (with its evidence grade, in ranking order) and reject.
    Exit 0 with a selection, 1 when no build runs on the target, 2 on bad input.
    With --explain: 0 when that build fits the target, 1 when it does not.
    """
    from resolver import catalog as catalog_mod
    from resolver.flows.decide import decide
    from resolver.present import render

    catalog = catalog_mod.load().for_index(request.pytorch_index)  # a mirror's releases too
    debug(f"database {catalog.updated} from {catalog.origin}")
    wanted = request.request(target.without_cuda(), catalog.extensions)
    machine, profile = target.resolve(catalog)
    warn_lost(profile)
    decision = decide(catalog, machine, wanted)
    pytorch_index = request.pytorch_index
    confirmation = None
    if confirm:
        from resolver.commands.confirm_flag import confirm_and_resolve

        catalog, decision, confirmation = confirm_and_resolve(
            catalog, decision, machine, wanted, pytorch_index
        )
    if explain_build is not None:
        from resolver.present.explain import explain

        text, fits = explain(catalog, decision, explain_build)
        echo(text)
        sys.exit(0 if fits else 1)
    if as_json:
        # the decision, and the keys only suggest adds (checked on the writes below)
        data = cast("SuggestDoc", render.decision_json(catalog, decision, pytorch_index))
        data["messages"] = list(profile.messages) if profile is not None else []
        if confirm:
            data["confirm"] = confirmation.to_json() if confirmation else None
        emit_json(data)
    else:
        if profile is not None:
            for message in profile.messages:
                note(message)
        detail = level() >= 1
        echo(render.decision_text(catalog, decision, pytorch_index, detail=detail))
        for line in words.warnings(decision.selection.warnings if decision.selection else ()):
            warning(line)
    sys.exit(0 if decision.selection is not None else 1)
