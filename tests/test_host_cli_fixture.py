"""`gpuresolve detect` on a real H100 reports what nvidia-smi reports there (recorded run)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from resolver.catalog import Catalog
from resolver.core.hostprofile import HostProfile
from resolver.solve import Request, solve
from resolver.solve.target import target_from_profile

HERE = Path(__file__).parent / "fixtures" / "host" / "h100_driver580_cli"


def test_detect_matches_nvidia_smi_on_the_same_host() -> None:
    detected = json.loads((HERE / "detect.json").read_text())
    rows = list(csv.reader((HERE / "smi_query.csv").read_text().splitlines()))
    assert len(rows) == len(detected["gpus"]) == 1
    index, name, driver, cc, pci, memory, mig = (c.strip() for c in rows[0])
    gpu = detected["gpus"][0]
    assert detected["driver"] == driver
    assert (str(gpu["index"]), gpu["name"], gpu["cc"]) == (index, name, cc)
    assert gpu["memory_mib"] == int(memory)
    assert gpu["pci_device_id"] == "0x" + pci.lower()[2:6]
    assert gpu["mig"] == mig.lower()
    assert detected["state"] == "ok" and detected["driver_cuda"] == "13.0"


def test_recorded_host_resolves_like_it_did_there(shipped: Catalog) -> None:
    profile = HostProfile.from_json(json.loads((HERE / "detect.json").read_text()))
    recorded = json.loads((HERE / "suggest.json").read_text())
    target = target_from_profile(shipped, profile)
    decision = solve(shipped, target, Request())
    assert decision.selection is not None
    assert recorded["target"]["gpus"] == [{"cc": "9.0", "name": "NVIDIA H100 80GB HBM3"}]
    assert recorded["selection"]["torch"] == decision.selection.release.version
    assert recorded["selection"]["variant"] == decision.selection.variant.name
