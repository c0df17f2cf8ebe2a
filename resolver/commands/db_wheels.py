"""`gpuresolve db inspect-wheel`: what one torch wheel really carries, read from its bytes."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.params import SAFE_TEXT
from resolver.commands.ui import MIB, byte_progress, echo, progress_allowed, quiet
from resolver.core.errors import escaped
from resolver.flows.observe import (
    against_database,
    import_entries,
    observations_file,
    read_wheels_inputs,
)


@click.command("inspect-wheel")
@click.argument("where", metavar="URL|PATH", type=SAFE_TEXT)
@click.option("--json", "as_json", is_flag=True, help="As JSON (a stable contract).")
@click.option(
    "--budget",
    type=click.FloatRange(min=0.1),
    default=64.0,
    show_default=True,
    metavar="MB",
    help="Read at most this many MiB of the wheel.",
)
@click.option(
    "--sha256",
    metavar="HEX",
    help="The wheel's expected sha256 (an index's); reported, and checked when the whole "
    "file is read.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Each request's deadline, whole: connecting, the answer however slowly it comes, "
    "and any retries.",
)
@standard_options
def inspect_wheel(
    where: str, as_json: bool, budget: float, sha256: str | None, timeout: float
) -> None:
    """Read a torch wheel (a URL, with HTTP range requests, or a file): its version, CUDA,
    and the GPU architectures compiled into it (SASS and PTX).

    Only the zip directory, torch/version.py, the metadata and the library holding the
    arch list are read (about 9 MB of an 888 MB wheel); nothing of torch is run. Exit 2
    when the file is not a readable torch wheel.
    """
    from resolver.core.errors import UserError
    from resolver.io.http import Client
    from resolver.wheels.torchwheel import inspect_wheel as inspect

    if sha256 is not None and not _is_sha256(sha256):
        raise UserError(f"--sha256 {sha256!r}: not 64 hexadecimal digits")
    if "://" in where:  # a login in the URL is used for the requests, never shown
        from resolver.io.credentials import keep

        where = keep(where)
    show, done = byte_progress(where.rsplit("/", 1)[-1][:60])
    try:
        with Client(timeout=timeout) as client:
            report = inspect(
                where, budget=int(budget * MIB), progress=show, sha256=sha256, client=client
            )
    finally:
        done()
    verdict = against_database(report)
    if as_json:
        data = report.as_json()
        data["contradicts"] = verdict
        emit_json(data)
        return
    echo(report.file)
    git = f" (git {report.git_version[:12]})" if report.git_version else ""
    echo(f"  version  {report.version}{git}")
    echo(f"  CUDA     {report.cuda or 'none (a CPU build)'}")
    if report.cuda is not None:
        echo(f"  SASS     {' '.join(report.sass) or 'none'}")
        echo(f"  PTX      {' '.join(report.ptx) or 'none'}")
        echo(f"           (from {report.arch_member})")
    if report.cudnn or report.nccl:
        echo(
            f"  pins     cuDNN {report.cudnn or '-'}, NCCL {report.nccl or '-'} "
            "(the wheel's Requires-Dist)"
        )
    echo(f"  sha256   {report.sha256 or 'unknown (not given, whole file not read)'}")
    share = f" ({report.bytes_read / report.size:.1%})" if report.size else ""
    echo(f"  read     {report.bytes_read} of {report.size} bytes{share}")
    if verdict is None:
        echo("  database: no record of this build")
    elif not verdict:
        echo("  database: agrees")
    for item in verdict or ():
        src = f" [{', '.join(item['source'])}]" if item.get("source") else ""
        echo(
            f"  database: CONTRADICTION: {item['fact']} {item.get('note', '')}; "
            f"the database says {item['value']}{src}"
        )
    for line in report.notes if not quiet() else ():
        echo(f"  note: {line}", err=True)


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def update_read_wheels(
    pytorch_index: str,
    pypi_index: str | None,
    no_pypi: bool,
    write_data: str | None,
    timeout: float,
    dry_run: bool,
    budget: float,
) -> None:
    """`db update --read-wheels`: the wheel-reading run, its progress and its summary."""
    from resolver.io.http import Client
    from resolver.observe import readwheels
    from resolver.wheels.index import pip_default_index

    target, base, doc, observed = read_wheels_inputs(write_data)
    pypi = None if no_pypi else (pypi_index or pip_default_index())
    if dry_run:
        todo, already = readwheels.plan(doc, observed)
        echo(f"{len(todo)} build(s) without an observation ({already} observed):")
        for build in todo:
            where = "default index" if build.pypi and pypi else "PyTorch index"
            echo(f"  {build.label} ({where})")
        echo(f"dry run: nothing read or written (would record into {target})")
        return
    echo(f"reading wheels for {base} (recording into {target})", err=True)
    tty = progress_allowed()
    state: dict[str, Any] = {"label": "", "n": 0, "total": 0, "bytes": 0}
    last = [0.0]

    def draw(force: bool = False) -> None:
        now = time.monotonic()
        if tty and (force or now - last[0] >= 0.1):
            last[0] = now
            sys.stderr.write(
                f"\r\033[K[{state['n']:d}/{state['total']:d}] {state['bytes'] / MIB:.1f} MiB  "
                f"{escaped(state['label'])}"[:120]
            )
            sys.stderr.flush()

    def on_build(n: int, total: int, label: str) -> None:
        state.update(n=n + 1, total=total, label=label)
        draw(force=True)

    def on_bytes(n: int) -> None:
        state["bytes"] = n
        draw()

    with Client(timeout=timeout) as fetcher:
        summary = readwheels.read_wheels(
            doc=doc,
            observed=observed,
            target=target,
            pytorch_index=pytorch_index,
            pypi_index=pypi,
            fetcher=fetcher,
            budget=int(budget * MIB),
            on_build=on_build,
            on_bytes=on_bytes,
        )
    if tty and last[0]:
        sys.stderr.write("\r\033[K")
    for line in summary.lines():
        echo(line)
    if summary.offline:
        echo("no wheel could be read: the indexes are unreachable", err=True)
        sys.exit(1)


@click.command("export-observations")
@click.argument("file", metavar="FILE", type=SAFE_TEXT)
@standard_options
def export_observations(file: str) -> None:
    """Write your observations (wheels read, builds verified) as a YAML file to share.

    FILE "-" writes to stdout. An existing FILE is replaced only when gpuresolve wrote it.
    """
    from resolver.core.errors import UserError
    from resolver.observe import store

    doc = store.load(observations_file(None))
    if file == "-":
        echo(doc.to_yaml(), nl=False)
        return
    path = Path(file)
    if path.exists() and not store.written_by_us(path):
        raise UserError(f"{path}: exists and was not written by gpuresolve; not replacing it")
    store.save(path, doc)
    echo(f"wrote {len(doc.wheels)} wheel and {len(doc.runtime)} runtime observation(s) to {path}")


@click.command("import")
@click.argument("file", metavar="FILE", type=SAFE_TEXT)
@click.option("--dry-run", is_flag=True, help="Check and compare; record nothing.")
@standard_options
def import_observations(file: str, dry_run: bool) -> None:
    """Merge an observations file (from `db export-observations`) into your database.

    Every entry is validated; each is compared with the curated facts and contradictions are
    reported and kept on the entry. A wheel observation of a build the database lacks is
    refused (run `gpuresolve db update` first). Exit 2 on an invalid file.
    """
    from resolver.observe import store

    incoming = store.load_required(Path(file))
    target = observations_file(None)
    counts, lines = import_entries(incoming, target, file, dry_run)
    for line in lines:
        echo(line)
    verb = "would import" if dry_run else "imported"
    echo(
        f"{verb} {counts['added']} new observation(s) from {file} ({counts['same']} known, "
        f"{counts['differs']} differing from one already recorded (both kept), "
        f"{counts['refused']} refused) into {target}"
    )
