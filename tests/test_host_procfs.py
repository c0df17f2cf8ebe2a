"""Kernel-module probe: recorded /sys and /proc files under a fake root."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from resolver.core.hostprofile import STATE_NO_DRIVER, STATE_NO_GPU, STATE_OK
from resolver.host import procfs

FIX = Path(__file__).parent / "fixtures" / "host"
H100 = FIX / "h100_driver580"
BUS = "0000:00:06.0"

# The fake roots name a folder after the PCI bus ("0000:00:06.0"): no such names on Windows.
needs_colons = pytest.mark.skipif(sys.platform == "win32", reason="':' in file names")


def put(root: Path, rel: str, content: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def h100_root(root: Path, *, dev: bool = True, sysfs: bool = True) -> Path:
    """The recorded H100 machine's kernel-module files; ``dev``: its /dev/nvidia0 is here."""
    if sysfs:
        put(root, procfs.SYS_VERSION, (H100 / "sys_module_version.out").read_text())
        put(root, f"{procfs.SYS_PCI}/{BUS}/device", (H100 / "sys_pci_device.out").read_text())
    put(root, procfs.PROC_VERSION, (H100 / "proc_version.out").read_text())
    put(
        root,
        f"{procfs.PROC_GPUS}/{BUS}/information",
        (H100 / "proc_gpu_information.out").read_text(),
    )
    if dev:
        put(root, "dev/nvidia0", "")
        put(root, "dev/nvidiactl", "")
    return root


def test_sys_version() -> None:
    assert procfs.parse_sys_version((H100 / "sys_module_version.out").read_text()) == "580.159.04"
    assert procfs.parse_sys_version("") is None
    assert procfs.parse_sys_version("garbage\n") is None


@pytest.mark.parametrize(
    ("rel", "version"),
    [
        ("h100_driver580/proc_version.out", "580.159.04"),  # open module, recorded
        ("transcribed/proc_version_proprietary.out", "535.104.05"),  # proprietary module
    ],
)
def test_proc_version(rel: str, version: str) -> None:
    assert procfs.parse_proc_version((FIX / rel).read_text()) == version


def test_proc_version_from_h200_reference() -> None:
    capture = (FIX / "h200_driver580_probe.txt").read_text()
    section = capture.split("== proc\n", 1)[1].split("== ", 1)[0]
    assert procfs.parse_proc_version(section) == "580.159.04"
    sys_section = capture.split("== sys/module\n", 1)[1].split("== ", 1)[0]
    assert procfs.parse_sys_version(sys_section) == "580.159.04"


def test_proc_version_garbage() -> None:
    assert procfs.parse_proc_version(None) is None
    assert procfs.parse_proc_version("GCC version:  gcc version 15.3.0 (GCC)\n") is None


def test_information_recorded() -> None:
    info = procfs.parse_information((H100 / "proc_gpu_information.out").read_text())
    assert info["Model"] == "NVIDIA H100 80GB HBM3"
    assert info["Bus Location"] == BUS
    assert info["Device Minor"] == "0"
    assert info["GPU Excluded"] == "No"
    g = procfs.proc_gpu(BUS, info)
    assert (g.bus, g.model, g.minor, g.excluded) == (BUS, "NVIDIA H100 80GB HBM3", 0, False)


@needs_colons
def test_read_usable_gpu_with_lookup(tmp_path: Path) -> None:
    r = procfs.read(h100_root(tmp_path), lookup_cc={"NVIDIA H100 80GB HBM3": "9.0"}.get)
    assert (r.state, r.driver, r.sources) == (STATE_OK, "580.159.04", {"driver": "sysfs"})
    assert r.gpus is not None
    g = r.gpus[0]
    assert (g.index, g.name, g.cc, g.pci_device_id, g.memory_mib) == (
        0,
        "NVIDIA H100 80GB HBM3",
        "9.0",
        "0x2330",
        None,
    )
    assert g.sources == {"name": "procfs", "cc": "name-lookup", "pci_device_id": "sysfs"}
    assert r.detail is None


@needs_colons
def test_read_without_sysfs_uses_proc_version(tmp_path: Path) -> None:
    r = procfs.read(h100_root(tmp_path, sysfs=False))
    assert (r.driver, r.sources) == ("580.159.04", {"driver": "procfs"})
    assert r.gpus is not None and r.gpus[0].cc is None and r.gpus[0].pci_device_id is None


@needs_colons
def test_read_gpu_without_device_file_is_not_usable(tmp_path: Path) -> None:
    """/proc lists the host's GPUs inside a container that was given none."""
    r = procfs.read(h100_root(tmp_path, dev=False))
    assert (r.state, r.gpus, r.driver) == (STATE_NO_GPU, [], "580.159.04")
    assert r.detail == (
        "the kernel module lists 1 GPU (NVIDIA H100 80GB HBM3), "
        "but its device file /dev/nvidia0 is not here"
    )


@needs_colons
def test_read_excluded_gpu(tmp_path: Path) -> None:
    root = h100_root(tmp_path)
    info = root / procfs.PROC_GPUS / BUS / "information"
    info.write_text(info.read_text().replace("GPU Excluded:\t No", "GPU Excluded:\t Yes"))
    r = procfs.read(root)
    assert (r.state, r.detail) == (STATE_NO_GPU, "1 GPU is excluded by the driver")


def test_read_empty_root_is_no_driver(tmp_path: Path) -> None:
    r = procfs.read(tmp_path)
    assert (r.state, r.driver, r.gpus) == (STATE_NO_DRIVER, None, None)
