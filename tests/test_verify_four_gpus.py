"""Verify on a real 4 x H200 NVSwitch host, replayed without GPUs.

tests/fixtures/verify/h200x4/ was recorded on kind nvidia-h200-x4 (asked as nvidia-h100-x4; four
H200 answered) on 2026-11-26: `detect --json`, `verify --nccl --json`, `verify --benchmark --json`
and `nvidia-smi topo -m`, gpuresolve run from a checkout (`python3 -m resolver`), NVLink
multicast off in every process. The thresholds were set on a 2-GPU slice (issue 28); this is
the first recording with four GPUs on one NVSwitch, and it holds them there too.
"""

from __future__ import annotations

from pathlib import Path

from cli_support import assert_schema
from test_verify_multigpu import load, node, run_of

from resolver.host import topo_smi
from resolver.verify import nccl_check
from resolver.verify.result import PASS

REC = Path(__file__).parent / "fixtures" / "verify" / "h200x4"
BUS = ["00000000:00:06.0", "00000000:00:07.0", "00000000:00:08.0", "00000000:00:09.0"]


def test_the_recordings_are_the_published_documents() -> None:
    assert_schema("detect", load(REC / "detect.json"))
    for name in ("nccl.json", "bench.json"):
        assert_schema("verify", load(REC / name))


def test_four_gpus_on_one_nvswitch_read_as_such() -> None:
    topo = topo_smi.parse_topo_matrix((REC / "topo.txt").read_text(encoding="utf-8"))
    assert topo == {"pairs": {f"{a}-{b}": "NV18" for a in range(4) for b in range(a + 1, 4)}}
    detect = load(REC / "detect.json")
    assert [g["cc"] for g in detect["gpus"]] == ["9.0"] * 4
    assert detect["topology"]["summary"] == "4 × H200, NVSwitch, 18 × NVLink 4.0 each, P2P ok"


def test_nccl_on_four_gpus_passes_against_the_nvswitch_peak() -> None:
    """352.1 GB/s bus bandwidth at 1 GiB, 78% of 450 GB/s (two GPUs reached 73%)."""
    doc = load(REC / "nccl.json")
    run = run_of(doc)
    assert run.world == 4 and [r.rank for r in run.ranks] == [0, 1, 2, 3]
    check, out = nccl_check.judge(
        run, doc["nccl_check"]["topology"], doc["probe"], 4, doc.get("state")
    )
    assert check.status == PASS
    assert "352.1 GB/s at 1 GiB = 78% of NVSwitch: 18 x NVLink 4.0 x 25 GB/s" in check.reason
    assert out["peak"] == {"source": "nvlink", "links": 18, "per_link_gbps": 25.0, "gbps": 450.0}
    assert [g["pci_bus_id"] for g in out["gpus"]] == BUS
    recorded = next(c for c in doc["checks"] if c["id"] == "multigpu")
    assert (recorded["status"], recorded["reason"]) == (check.status, check.reason)


def test_every_gpu_of_four_is_judged_and_passes() -> None:
    top, check = node(load(REC / "bench.json"))
    assert check.status == PASS and check.reason.startswith("4 GPUs, each judged")
    assert [g["pci_bus_id"] for g in top["gpus"]] == BUS
    for g in top["gpus"]:
        assert g["status"] == PASS and g["cause"] is None
        assert g["relative_to_fastest"] >= 0.98
