"""`gpuresolve schema`: the published JSON Schemas, for pipelines that validate our output."""

from __future__ import annotations

import click

from resolver.commands.config import standard_options
from resolver.commands.params import lazy_complete
from resolver.commands.ui import echo


@click.command()
@click.argument("name", required=False, shell_complete=lazy_complete("complete_schema"))
@click.option("--list", "list_", is_flag=True, help="Print the schema names, one a line.")
@standard_options
def schema(name: str | None, list_: bool) -> None:
    """Print the JSON Schema (draft 2020-12) of a `--json` document or of the team spec.

    `gpuresolve schema --list` names them; `gpuresolve schema suggest` prints one. Keys are a
    contract: never renamed or removed; a new key bumps the schema's minor version.
    """
    from resolver import schemas
    from resolver.core.errors import UserError

    if list_ == (name is not None):
        raise UserError("name one schema, or --list (see `gpuresolve schema --help`)")
    if list_:
        for known in schemas.NAMES:
            echo(known)
        return
    assert name is not None
    echo(schemas.text(name), nl=False)
