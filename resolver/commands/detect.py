"""`gpuresolve detect`: what this machine has, and which probe said so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.ui import echo, note, warning

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.core.documents.reports import DetectDoc


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
            from resolver.core.errors import UserError

            try:
                self.catalog = catalog_mod.load()
            except UserError as exc:
                self.error = " ".join(str(exc).split())[:300]
        return self.catalog


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the host profile as JSON.")
@standard_options
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
    if profile.driver and not profile.driver_branch:
        catalog = db.get()
        branch = catalog.driver_branch(profile.driver, profile.driver_os) if catalog else None
        if branch is not None and branch.exact is not None:
            profile.driver_branch = str(branch.exact)
            profile.sources.setdefault("driver_branch", "database")
        elif branch is not None:
            profile.messages.append(
                f"the branch of Windows driver {profile.driver} is not in the database's table "
                f"of Windows driver numbers ({branch.text}): Windows numbers run above the "
                "branch's name (581.57 is R580)"
            )
    ignored: list[str] = []
    if profile.gpus and profile.driver:
        catalog = db.get()
        ignored = _outside_window(catalog, profile) if catalog is not None else []
        profile.messages.extend(ignored)
    if db.error:
        profile.messages.append(
            f"the database could not be read ({db.error}): only what the probes report is shown"
        )
    topo = _topology(profile)
    if as_json:
        data: DetectDoc = {**profile.to_json(), "topology": topo}
        emit_json(data)
        return
    from resolver.host.detection import lost_note

    src = profile.sources
    python = profile.python_full or profile.python
    glibc = f", glibc {profile.glibc}" if profile.glibc else ""
    wsl = " (WSL2: Windows driver)" if profile.wsl else ""
    echo(f"platform: {profile.platform}{wsl}, Python {python}{glibc}")
    if profile.driver:
        cuda = f", supports CUDA <= {profile.driver_cuda}" if profile.driver_cuda else ""
        origin = src.get("driver", "?")
        named = (
            f", branch R{profile.driver_branch} [{src.get('driver_branch', '?')}]"
            if profile.driver_branch
            else ""
        )
        if profile.driver_build_branch:
            named += f" (built from {profile.driver_build_branch} [nvml])"
        echo(f"driver: {profile.driver}{named}{cuda} [{origin}]")
    else:
        echo("driver: none")
    state = "gpu-outside-driver-window" if ignored else profile.state
    echo(f"state: {state}")
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
        echo(", ".join(parts))
    for lost in profile.lost_gpus:
        echo(f"GPU ?: lost, PCI bus {lost.pci_bus_id} ({lost.source}: {lost.error})")
    if profile.lost_gpus:
        warning(lost_note(profile))
    line = _topology_line(topo)
    if line:
        echo(f"topology: {line}")
    for message in profile.messages:
        note(message)


def _topology(profile: Any) -> dict[str, Any] | None:
    """How the GPUs are linked (NVML, nvidia-smi where it does not answer), with its summary;
    None when NVML found no GPU (nothing to link)."""
    if not profile.gpus or profile.sources.get("driver") != "nvml":
        return None
    from resolver.host import topology

    topo = topology.collect()
    if topo.get("gpus"):
        topo["summary"] = topology.summary(topo)
        topo["peak"] = topology.peak(topo, [g["index"] for g in topo["gpus"]])
    return topo


def _topology_line(topo: dict[str, Any] | None) -> str | None:
    if not topo:
        return None
    if topo.get("error"):
        return f"not read ({topo['error']})"
    return topo.get("summary")


def _outside_window(catalog: Catalog, profile: Any) -> list[str]:
    """A note per GPU the driver sees but does not drive (outside its architecture's window),
    judged by the driver's branch (NVML's, else the database's), never by its number alone."""
    from resolver.core.versions import parse_cc

    notes: list[str] = []
    if not profile.driver:
        return notes
    branch = catalog.driver_branch(profile.driver, profile.driver_os)
    for gpu in profile.gpus:
        if not gpu.cc:
            continue
        arch = catalog.architectures.get(parse_cc(gpu.cc))
        if arch is None or arch.drivers is None:
            continue
        win = arch.drivers
        label = f"GPU {gpu.index} ({gpu.name or gpu.cc})"
        if win.cut is not None and branch.lo >= win.cut:
            last = f"; R{win.last} is the last branch that does" if win.last else ""
            install = f" (install an R{win.last}-branch driver)" if win.last else ""
            notes.append(
                f"driver {profile.driver} ({branch.text}) no longer supports {arch.name} GPUs "
                f"(dropped in R{win.cut}): {label} gets no CUDA device{last}{install}"
            )
        elif win.first is not None and branch.hi < win.first:
            notes.append(
                f"driver {profile.driver} ({branch.text}) predates {arch.name} GPUs: {label} "
                f"needs R{win.first} or newer"
            )
    return notes
