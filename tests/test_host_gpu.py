"""Real detection on a real GPU machine, checked against nvidia-smi's own answer."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from resolver.core.hostprofile import STATE_OK, HostProfile
from resolver.host import detect

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi on PATH"),
]

FIELDS = "index,name,driver_version,compute_cap,pci.device_id,memory.total"


def _smi_rows() -> list[list[str]]:
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"nvidia-smi has no GPU to compare with: {done.stdout.strip()}")
    return [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line]


def test_detect_matches_nvidia_smi() -> None:
    rows = _smi_rows()
    profile = detect()
    assert profile.state == STATE_OK, profile.messages
    assert profile.driver == rows[0][2]
    assert [g.index for g in profile.gpus] == [int(r[0]) for r in rows]
    assert [g.name for g in profile.gpus] == [r[1] for r in rows]
    assert [g.cc for g in profile.gpus] == [r[3] for r in rows]
    assert [g.pci_device_id for g in profile.gpus] == [f"0x{int(r[4], 16) >> 16:04x}" for r in rows]
    assert [g.memory_mib for g in profile.gpus] == [int(r[5]) for r in rows]
    if profile.sources.get("driver") == "nvml":
        assert profile.driver_cuda is not None  # NVML reads it; nvidia-smi's query cannot


def test_real_profile_round_trips_json() -> None:
    _smi_rows()
    profile = detect()
    again = HostProfile.from_json(profile.to_json())
    assert again.to_json() == profile.to_json()
