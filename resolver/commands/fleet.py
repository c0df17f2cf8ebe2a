"""`gpuresolve fleet report`: one verdict over the verify results a fleet's nodes sent back."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.group import SuggestingGroup
from resolver.commands.ui import echo
from resolver.core import secrets


@click.group(cls=SuggestingGroup)
def fleet() -> None:
    """Verify a whole fleet: read back what its nodes' `verify --json` runs answered."""


@fleet.command("report")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (a contract).")
@click.option(
    "--expect",
    "expect",
    metavar="LOCKDIR",
    type=click.Path(file_okay=False),
    help="The cluster lock's folder: its fleet.json names the nodes that should have answered; "
    "one without a result is missing.",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Also write the report as Markdown to FILE.",
)
@standard_options
def report(paths: tuple[str, ...], as_json: bool, expect: str | None, output: str | None) -> None:
    """Group the nodes' verify results (files, folders of them, `kubectl logs` output) and
    name each node that fails or disagrees with its group, with the cause its verify named.

    Exit 0 when every node passes (warnings allowed), 1 when a node fails, disagrees, is
    missing or left no verify result (it did not run or did not finish), 2 on bad input.
    """
    from resolver.fleet.report import (
        PLAN_FILE,
        build_report,
        load_plan,
        lock_pins,
        render_markdown,
    )
    from resolver.fleet.results import read_files, result_files
    from resolver.io.atomic import output_path, write_output

    plan = load_plan(Path(expect)) if expect else None
    files = result_files(list(paths), planned=plan is not None)
    inputs = [*files]
    if plan is not None:
        inputs += [plan.folder / PLAN_FILE, *(plan.folder / lock for lock in plan.locks.values())]
    if output:  # refused before the work: a FIFO, a folder, one of the files read
        output_path(Path(output), inputs)
    pins = lock_pins(plan) if plan else None
    left_out = plan.left_out if plan else None
    done = build_report(read_files(files), plan.nodes if plan else None, pins, left_out)
    text = secrets.redact(render_markdown(done))  # what nodes said may name a URL's login
    if output:
        write_output(Path(output), text, inputs)
    if as_json:
        emit_json(done.to_json())
    else:
        echo(text, nl=False)
    sys.exit(1 if done.status == "fail" else 0)
