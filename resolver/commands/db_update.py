"""`gpuresolve db update`: refresh the database from the PyTorch wheel index (or, with
--read-wheels, read the wheels of builds not yet observed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.params import SafePath, Seconds, check_url
from resolver.commands.ui import echo, note, progress_allowed
from resolver.dbupdate import DEFAULT_PYTORCH_INDEX, PYTORCH_INDEX_ENV

if TYPE_CHECKING:
    from resolver.core.documents.reports import DbUpdateDone, DbUpdateFailed
    from resolver.dbupdate.collect import ProgressBar

__all__ = ["update"]

_JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, help="The outcome as JSON (a stable contract)."
)


@click.command()
@click.option(
    "--pytorch-index",
    envvar=PYTORCH_INDEX_ENV,
    default=DEFAULT_PYTORCH_INDEX,
    show_default=True,
    metavar="URL",
    callback=check_url,
    help=f"The PyTorch wheel index (or a mirror of it); env {PYTORCH_INDEX_ENV}.",
)
@click.option(
    "--pypi-index",
    metavar="URL",
    callback=check_url,
    help="The default index to learn which build it carries (default: pip's index-url).",
)
@click.option("--no-pypi", is_flag=True, help="Do not read the default index at all.")
@click.option(
    "--write-data",
    type=SafePath(file_okay=False),
    help="Update this data directory in place (a checkout's data/, for a release).",
)
@click.option(
    "--timeout",
    type=Seconds(0.1, 600),
    default=20.0,
    show_default=True,
    metavar="SECONDS",
    help="Each request's deadline, whole: connecting, the answer however slowly it comes, "
    "and any retries.",
)
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option(
    "--read-wheels",
    is_flag=True,
    help="Instead: read one wheel of every build not yet observed (its arch list, CUDA, "
    "cuDNN, NCCL) and record it in observations.yaml.",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=1),
    metavar="MB",
    help="With --read-wheels: read at most this many MiB in all (default 512).",
)
@_JSON_OPTION
@standard_options
def update(
    pytorch_index: str,
    pypi_index: str | None,
    no_pypi: bool,
    write_data: str | None,
    timeout: float,
    dry_run: bool,
    read_wheels: bool,
    budget: float | None,
    as_json: bool,
) -> None:
    """Refresh the database from the PyTorch wheel index (into your data directory).

    Also adds new releases of the extension packages (xformers, bitsandbytes, torchao, vllm,
    triton, flash-attn) from the default index and the PyTorch index's CUDA folders, read from
    their wheels; releases the database holds are never changed.

    Exit 0 when updated or current, 1 when the indexes could not be read (the database in use
    is left as it was).
    """
    from resolver import catalog as catalog_mod

    if budget is not None and not read_wheels:
        from resolver.core.errors import UserError

        raise UserError("--budget applies to --read-wheels")
    if read_wheels:
        from resolver.commands.db_wheels import update_read_wheels

        update_read_wheels(
            pytorch_index, None if no_pypi else pypi_index, no_pypi, write_data, timeout,
            dry_run, 512.0 if budget is None else budget,
        )  # fmt: skip
        return
    from resolver.core.errors import IndexFormatError
    from resolver.dbupdate import UpdateError
    from resolver.dbupdate.run import run_update
    from resolver.host.pipconfig import pip_index_url
    from resolver.io import ReadError
    from resolver.io.http import Client

    target = Path(write_data) if write_data else catalog_mod.user_data_dir()
    # The database in use, after any fallback: a damaged user database is not read, only replaced.
    base = target if write_data else Path(catalog_mod.load().origin)
    pypi = None if no_pypi else (pypi_index or pip_index_url())
    if pypi is not None and pypi_index is None:
        from resolver.io.urls import index_url

        pypi = index_url(pypi, "pip's configured index-url")
    if pypi is None and not no_pypi:
        note(
            "no default index is configured in pip (index-url, PIP_INDEX_URL or "
            "--pypi-index): skipping which build it carries and the extension packages' "
            "releases there"
        )
    echo(f"reading {pytorch_index.rstrip('/')}/ (database: {base})", err=True)
    from resolver.dbupdate.exthistory import read_state_file, write_state_file

    state_file = catalog_mod.cache_dir() / "ext-pages.json"
    try:
        with Client(timeout=timeout) as fetcher:
            outcome = run_update(
                base=base,
                target=target,
                pytorch_index=pytorch_index,
                pypi_index=pypi,
                fetcher=fetcher,
                progress=_no_progress if as_json or not progress_allowed() else _progress,
                dry_run=dry_run,
                ext_state=read_state_file(state_file),
            )
    except (UpdateError, ReadError, IndexFormatError) as exc:
        echo(f"gpuresolve: db update failed: {exc}; the database is unchanged", err=True)
        if as_json:
            failed: DbUpdateFailed = {
                "ok": False,
                "error": str(exc),
                "changed": False,
                "written": False,
            }
            emit_json(failed)
        sys.exit(1)
    echo(f"{outcome.requests} requests", err=True)
    if outcome.history is not None:
        hist = outcome.history
        echo(
            f"extension history: {hist.wheels_read} wheels read, {hist.bytes_read / 2**20:.1f} "
            f"MiB fetched, {hist.seconds:.1f} s",
            err=True,
        )
        if not dry_run:
            write_state_file(state_file, hist.state)
    if as_json:
        done: DbUpdateDone = {
            "ok": True,
            "changed": outcome.summary.changed,
            "written": outcome.written,
            "dry_run": dry_run,
            "base": str(outcome.base),
            "target": str(outcome.target),
            "pypi_read": outcome.pypi_read,
            "requests": outcome.requests,
            "changes": outcome.summary.as_json(),
            "extension_pages_read": outcome.extensions_read,
            "extension_wheels_read": outcome.extension_wheels,
        }
        if outcome.history is not None:
            done["extension_bytes_read"] = outcome.history.bytes_read
            done["extension_seconds"] = round(outcome.history.seconds, 3)
        emit_json(done)
        sys.exit(0)
    for line in outcome.summary.lines():
        echo(line)
    if not outcome.summary.changed:
        echo(f"the database is current ({base})")
    elif dry_run:
        echo(f"dry run: nothing written (would write {target})")
    else:
        echo(f"updated {target}")
        forced = os.environ.get(catalog_mod.DATA_ENV)
        if forced and not write_data:
            note(f"{catalog_mod.DATA_ENV}={forced} still overrides it")


@contextmanager
def _no_progress(label: str, length: int) -> Iterator[ProgressBar]:
    """No bar: --json keeps the output free of it."""

    class _Quiet:
        def update(self, n_steps: int) -> None:
            pass

    yield _Quiet()


@contextmanager
def _progress(label: str, length: int) -> Iterator[ProgressBar]:
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar
