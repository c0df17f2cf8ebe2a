"""Verify on a real 4 x H200 NVSwitch host, replayed without GPUs.

tests/fixtures/verify/h200x4/ was recorded with record_multigpu.sh (`LOAD_GPU=2`: the bf16
matmul loop on GPU 2) on kind nvidia-h200-x4 (asked as nvidia-h100-x4; four H200 answered) on
2026-11-26, NVLink multicast off in every process. The thresholds were set on a 2-GPU slice
(issue 28); this is the first recording with four GPUs on one NVSwitch, healthy and with each
fault, and the verdicts hold there: healthy passes (77-79% of the peak), P2P off fails naming
the variable (5%), the load on GPU 2 warns naming GPU 2 and not another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import assert_schema
from test_verify_multigpu import load, node, run_of

from resolver.host import topo_smi
from resolver.verify import nccl_check
from resolver.verify.result import FAIL, PASS, WARN

REC = Path(__file__).parent / "fixtures" / "verify" / "h200x4"
BUS = ["00000000:00:06.0", "00000000:00:07.0", "00000000:00:08.0", "00000000:00:09.0"]
DOCS = ["nccl_healthy", "nccl_p2p_off", "bench_load", "bench_healthy", "bench_healthy2"]


def judge(doc: dict[str, Any]) -> Any:
    """The NCCL check replayed on the recorded run; it must say what the recording said."""
    check, out = nccl_check.judge(
        run_of(doc), doc["nccl_check"]["topology"], doc["probe"], 4, doc.get("state")
    )
    recorded = next(c for c in doc["checks"] if c["id"] == "multigpu")
    assert (recorded["status"], recorded["reason"]) == (check.status, check.reason)
    return check, out


def test_the_recordings_are_the_published_documents() -> None:
    assert_schema("detect", load(REC / "detect.json"))
    for name in DOCS:
        assert_schema("verify", load(REC / f"{name}.json"))


def test_four_gpus_on_one_nvswitch_read_as_such() -> None:
    topo = topo_smi.parse_topo_matrix((REC / "topo_m.txt").read_text(encoding="utf-8"))
    assert topo == {"pairs": {f"{a}-{b}": "NV18" for a in range(4) for b in range(a + 1, 4)}}
    detect = load(REC / "detect.json")
    assert [g["cc"] for g in detect["gpus"]] == ["9.0"] * 4
    assert detect["topology"]["summary"] == "4 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok"


@pytest.mark.parametrize("name", ["nccl_healthy", "bench_healthy", "bench_healthy2"])
def test_healthy_nccl_on_four_gpus_passes_against_the_nvswitch_peak(name: str) -> None:
    doc = load(REC / f"{name}.json")
    assert run_of(doc).world == 4
    check, out = judge(doc)
    assert check.status == PASS
    found = re.search(
        r"(\d+\.\d) GB/s at 1 GiB = (\d+)% of NVSwitch: 18 x NVLink 4.0", check.reason
    )
    assert found is not None and 77 <= int(found[2]) <= 79  # 345-354 GB/s of 450
    assert out["peak"] == {"source": "nvlink", "links": 18, "per_link_gbps": 25.0, "gbps": 450.0}
    assert [g["pci_bus_id"] for g in out["gpus"]] == BUS


def test_p2p_disabled_on_four_gpus_fails_naming_the_variable() -> None:
    check, _ = judge(load(REC / "nccl_p2p_off.json"))
    assert check.status == FAIL
    assert check.reason.startswith("NCCL_P2P_DISABLE=1 is set")
    assert "24.5 GB/s at 1 GiB = 5% of NVSwitch" in check.reason


def test_a_load_on_gpu_2_of_4_names_gpu_2_in_both_checks() -> None:
    doc = load(REC / "bench_load.json")
    check, _ = judge(doc)
    assert check.status == WARN and check.reason.startswith(f"GPU 2 ({BUS[2]}): another process")
    top, speed_check = node(doc)
    assert speed_check.status == WARN
    assert speed_check.reason.startswith(f"GPU 2 (NVIDIA H200, {BUS[2]}): another process")
    for g in top["gpus"]:
        assert (g["status"], g["cause"]) == (
            (WARN, "other_process") if g["index"] == 2 else (PASS, None)
        )


@pytest.mark.parametrize("name", ["bench_healthy", "bench_healthy2"])
def test_every_gpu_of_four_is_judged_and_passes(name: str) -> None:
    top, check = node(load(REC / f"{name}.json"))
    assert check.status == PASS and check.reason.startswith("4 GPUs, each judged")
    assert [g["pci_bus_id"] for g in top["gpus"]] == BUS
    for g in top["gpus"]:
        assert g["status"] == PASS and g["cause"] is None
        assert g["relative_to_fastest"] >= 0.98
