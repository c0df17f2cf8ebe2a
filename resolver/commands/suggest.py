"""`gpuresolve suggest`: the best build for this machine or a described one."""

from __future__ import annotations

import sys

import click

from resolver.commands.common import emit_json, request_options, target_options


@click.command()
@target_options
@request_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the decision as JSON (a stable contract)."
)
@click.option("-v", "--verbose", is_flag=True, help="Also list every alternative and every reject.")
def suggest(
    driver: str | None,
    gpus: tuple[str, ...],
    no_gpu: bool,
    python: str | None,
    platform: str | None,
    host_file: str | None,
    torch_spec: str | None,
    with_: tuple[str, ...],
    cuda: str | None,
    driver_policy: str,
    allow_unconfirmed: bool,
    pytorch_index: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Say what to install: the pip command, why, and the runner-up.

    Exit 0 with a selection, 1 when no build runs on the target, 2 on bad input.
    """
    from resolver import catalog as catalog_mod
    from resolver import render
    from resolver.inputs import build_request, resolve_target
    from resolver.solve import solve

    catalog = catalog_mod.load()
    request = build_request(
        torch=torch_spec,
        with_=with_,
        cuda=cuda,
        policy="strict" if driver_policy == "strict" else "compat",
        allow_unconfirmed=allow_unconfirmed,
    )
    target, profile = resolve_target(
        catalog,
        driver=driver,
        gpus=gpus,
        no_gpu=no_gpu,
        python=python,
        platform=platform,
        host_file=host_file,
    )
    decision = solve(catalog, target, request)
    if as_json:
        emit_json(render.decision_json(catalog, decision, pytorch_index))
    else:
        if profile is not None:
            for message in profile.messages:
                click.echo(f"note: {message}")
        click.echo(render.decision_text(catalog, decision, pytorch_index, detail=verbose))
    sys.exit(0 if decision.selection is not None else 1)
