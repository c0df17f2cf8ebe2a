"""`gpuresolve detect`: what this machine has, and which probe said so."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from resolver.commands.common import emit_json

if TYPE_CHECKING:
    from resolver.catalog import Catalog


class _LazyCatalog:
    """The database, loaded on first need: detection reports what the probes found even when
    no database can be read (it only adds names' compute capabilities and the driver's CUDA)."""

    def __init__(self) -> None:
        self.loaded = False
        self.catalog: Catalog | None = None
        self.error: str | None = None

    def get(self) -> Catalog | None:
        if not self.loaded:
            self.loaded = True
            from resolver import catalog as catalog_mod
            from resolver.errors import UserError

            try:
                self.catalog = catalog_mod.load()
            except UserError as exc:
                self.error = " ".join(str(exc).split())[:300]
        return self.catalog


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the host profile as JSON.")
def detect(as_json: bool) -> None:
    """Report platform, Python, glibc, NVIDIA driver and each GPU (with the source of each fact)."""
    from resolver.host import detect as run_detect

    db = _LazyCatalog()

    def lookup(name: str) -> str | None:
        catalog = db.get()
        model = catalog.gpu_by_name(name) if catalog else None
        return f"{model.cc[0]}.{model.cc[1]}" if model else None

    profile = run_detect(lookup_cc=lookup)
    if not profile.driver_cuda and profile.driver:
        catalog = db.get()
        if catalog is not None:
            profile.driver_cuda = catalog.driver_max_cuda(profile.driver, profile.driver_os)
        if profile.driver_cuda:
            profile.sources.setdefault("driver_cuda", "database")
    if db.error:
        profile.messages.append(
            f"the database could not be read ({db.error}): only what the probes report is shown"
        )
    if as_json:
        emit_json(profile.to_json())
        return
    src = profile.sources
    python = profile.python_full or profile.python
    glibc = f", glibc {profile.glibc}" if profile.glibc else ""
    wsl = " (WSL2: Windows driver)" if profile.wsl else ""
    click.echo(f"platform: {profile.platform}{wsl}, Python {python}{glibc}")
    if profile.driver:
        cuda = f", supports CUDA <= {profile.driver_cuda}" if profile.driver_cuda else ""
        origin = src.get("driver", "?")
        click.echo(f"driver: {profile.driver}{cuda} [{origin}]")
    else:
        click.echo("driver: none")
    click.echo(f"state: {profile.state}")
    for gpu in profile.gpus:
        parts = [f"GPU {gpu.index}: {gpu.name or 'unknown model'}"]
        if gpu.cc:
            parts.append(f"compute capability {gpu.cc} [{gpu.sources.get('cc', '?')}]")
        if gpu.memory_mib:
            parts.append(f"{gpu.memory_mib} MiB")
        if gpu.pci_device_id:
            parts.append(f"PCI {gpu.pci_device_id}")
        if gpu.mig:
            parts.append(f"MIG {gpu.mig}")
        click.echo(", ".join(parts))
    for message in profile.messages:
        click.echo(f"note: {message}")
