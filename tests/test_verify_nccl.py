"""The NCCL check across GPUs (issue 24), on one machine without GPUs.

Every topology and bandwidth below is SYNTHETIC, built by hand to exercise one rule, and labelled
so; the recorded 2 x H200 runs replay in test_verify_multigpu.py. The launcher is run for real
with stand-in interpreters (shell scripts) that hang, crash or answer, so killing and stage naming
are real.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from resolver.host import topology
from resolver.verify import nccl_check, nccl_run
from resolver.verify.nccl_run import NcclRun, Rank
from resolver.verify.result import FAIL, PASS, SKIP, WARN

posix_only = pytest.mark.skipif(os.name != "posix", reason="signals and #! scripts")


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def synthetic_topology(links: int = 18, active: int = 18, p2p: str = "ok") -> dict[str, Any]:
    """SYNTHETIC: two H100-like GPUs with NVLink 4 links to NVSwitches."""

    def gpu(i: int) -> dict[str, Any]:
        return {
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
            "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
            "nvlinks": [
                {
                    "link": n,
                    "active": n < active,
                    "version": 6,  # NVML_NVLINK_VERSION_4_0
                    "remote_bus_id": "FFFFFFFF:FF:FF.0",
                    "remote_type": "switch",
                }
                for n in range(links)
            ],
        }

    pair = {"gpus": [0, 1], "p2p": p2p, "common_ancestor": "system", "nvlinks": 0}
    return {"error": None, "gpus": [gpu(0), gpu(1)], "pairs": [pair]}


def synthetic_run(busbw: float, env: dict[str, str] | None = None) -> NcclRun:
    """SYNTHETIC worker answers: exact collectives and the given all-reduce bus bandwidth."""
    run = NcclRun(world=2, timeout_s=60)
    for rank in range(2):
        data = {
            "stage": "done",
            "all_reduce_ok": True,
            "all_gather_ok": True,
            "env": env or {},
            "libraries": ["/env/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"],
            "bandwidth": [
                {"op": "all_reduce", "bytes": 1 << 28, "us": 1.0, "algbw": busbw, "busbw": busbw},
                {"op": "all_gather", "bytes": 1 << 28, "us": 1.0, "algbw": 1.0, "busbw": 1.0},
            ],
        }
        run.ranks.append(Rank(rank=rank, data=data, stage="done"))
    return run


PROBE = {
    "cuda": {
        "available": True,
        "device_count": 2,
        "devices": [
            {"index": 0, "pci_bus_id": "0000:18:00"},
            {"index": 1, "pci_bus_id": "0000:19:00"},
        ],
    },
    "libraries": {"roots": ["/env/lib/python3.12/site-packages"]},
}


def test_one_or_no_gpu_is_skip() -> None:
    check, doc = nccl_check.judge(None, None, PROBE, 1)
    assert (check.status, check.reason) == (SKIP, "one GPU visible: nothing to run NCCL across")
    assert nccl_check.judge(None, None, PROBE, 0)[0].reason == "no GPU visible"
    assert doc["run"] is None and doc["visible_gpus"] == 1


def test_synthetic_link_peaks() -> None:
    assert topology.link_peak_gbps(synthetic_topology(), [0, 1])[0] == 450.0
    assert topology.link_peak_gbps(synthetic_topology(active=12), [0, 1])[0] == 300.0
    peak, basis = topology.link_peak_gbps(synthetic_topology(links=0), [0, 1])
    assert peak == pytest.approx(3.938 * 16) and basis.startswith("PCIe gen5 x16")


def test_synthetic_healthy_nvlink_passes() -> None:
    check, doc = nccl_check.judge(synthetic_run(380.0), synthetic_topology(), PROBE, 2)
    assert check.status == PASS
    assert "all-reduce bus bandwidth 380.0 GB/s at 256 MiB = 84% of NVSwitch" in check.reason
    assert doc["peak_gbps"] == 450.0 and doc["bandwidth"][0]["busbw"] == 380.0
    assert doc["peak"] == {"source": "nvlink", "links": 18, "per_link_gbps": 25.0, "gbps": 450.0}


def test_synthetic_p2p_disabled_is_named_with_the_drop() -> None:
    run = synthetic_run(20.0, env={"NCCL_P2P_DISABLE": "1"})
    check, _ = nccl_check.judge(run, synthetic_topology(), PROBE, 2)
    assert check.status == FAIL
    assert check.reason.startswith("NCCL_P2P_DISABLE=1 is set")
    assert "20.0 GB/s at 256 MiB = 4% of NVSwitch" in check.reason
    assert "below the 73% a healthy host reached" in check.reason
    assert check.fix is not None and check.fix.startswith("unset NCCL_P2P_DISABLE")


def test_synthetic_link_down_pair_without_p2p_and_foreign_nccl() -> None:
    run = synthetic_run(100.0)
    assert run.ranks[0].data is not None
    run.ranks[0].data["libraries"] = ["/usr/lib/x86_64-linux-gnu/libnccl.so.2"]
    topo = synthetic_topology(active=16, p2p="not supported")
    check, _ = nccl_check.judge(run, topo, PROBE, 2)
    assert check.status == WARN
    assert check.reason.startswith("peer-to-peer between GPU 0 and 1: not supported")
    text = " ".join(check.details)
    assert "NVLink 16, 17 down (16 of 18 active)" in text
    assert "libnccl from outside the environment: /usr/lib/x86_64-linux-gnu/libnccl.so.2" in text


def test_synthetic_wrong_sum_fails() -> None:
    run = synthetic_run(380.0)
    assert run.ranks[1].data is not None
    run.ranks[1].data["all_reduce_ok"] = False
    check, _ = nccl_check.judge(run, synthetic_topology(), PROBE, 2)
    assert (check.status, check.reason) == (FAIL, "rank 1: all_reduce result wrong")


@pytest.mark.slow
@posix_only
def test_hang_is_a_fail_naming_rank_stage_and_timeout_and_every_child_ends(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    body = f"echo $$ >> '{pids}'; echo '@@gpuresolve-stage init' >&2; exec sleep 300"
    t = time.monotonic()
    run = nccl_run.run_nccl(script(tmp_path, body), 2, timeout_s=1.5, sizes=(1024,))
    assert time.monotonic() - t < 30
    assert run.timed_out
    assert run.failure == "NCCL did not finish within 1.5 s (rank 0 during 'init' hung)"
    for pid in pids.read_text(encoding="utf-8").split():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
    check, doc = nccl_check.judge(run, synthetic_topology(), PROBE, 2)
    assert check.status == FAIL and doc["run"]["timed_out"] is True


@posix_only
def test_crash_is_a_fail_with_its_signal(tmp_path: Path) -> None:
    body = "echo '@@gpuresolve-stage all-reduce' >&2; kill -SEGV $$"
    run = nccl_run.run_nccl(script(tmp_path, body), 2, timeout_s=20, sizes=(1024,))
    assert run.failure == "rank 0 during 'all-reduce' crashed with SIGSEGV"


@posix_only
def test_children_get_multicast_off_and_a_loopback_rendezvous(tmp_path: Path) -> None:
    """A stand-in worker that answers with its own environment (the answer is synthetic)."""
    body = (
        "shift 3\n"  # -I -c <worker source>
        'printf \'{"stage": "done", "env": {"nvls": "%s", "symm": "%s", "nvshmem": "%s", '
        '"addr": "%s", "argv": "%s"}}\\n\' "$NCCL_NVLS_ENABLE" '
        '"$TORCH_SYMM_MEM_DISABLE_MULTICAST" "$NVSHMEM_DISABLE_NVLS" "$MASTER_ADDR" "$*"'
    )
    environ = dict(os.environ, NCCL_NVLS_ENABLE="1")  # the caller's own setting is overridden
    run = nccl_run.run_nccl(script(tmp_path, body), 2, timeout_s=20, environ=environ)
    assert run.failure is None, run.ranks
    for r in run.ranks:
        assert r.data is not None
        env = r.data["env"]
        assert (env["nvls"], env["symm"], env["nvshmem"]) == ("0", "1", "1")
        assert env["addr"] == "127.0.0.1" and f"--rank {r.rank} --world 2" in env["argv"]


def test_worker_source_is_python_3_9_syntax() -> None:
    source = nccl_run.WORKER_FILE.read_text(encoding="utf-8")
    ast.parse(source, feature_version=(3, 9))
    imports = {
        n.names[0].name.split(".")[0]
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Import, ast.ImportFrom)) and n.names
    }
    assert "resolver" not in imports  # it runs in the target interpreter, alone


def test_json_document_keys() -> None:
    _, doc = nccl_check.judge(synthetic_run(380.0), synthetic_topology(), PROBE, 2)
    assert list(doc) == [
        "visible_gpus",
        "topology",
        "run",
        "bandwidth",
        "peak_gbps",
        "peak_basis",
        "thresholds",
        "peak",
        "summary",
        "gpus",
    ]
    json.dumps(doc)


@posix_only
def test_verify_nccl_on_the_recorded_one_gpu_probe_is_one_skip_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_support import run_cli
    from test_verify_checks import H100

    from resolver.flows import verify as verify_flow

    probe = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    (tmp_path / "probe.json").write_text(json.dumps(probe), encoding="utf-8")
    python = script(tmp_path, f"cat '{tmp_path / 'probe.json'}'")
    monkeypatch.setattr(verify_flow, "detect", lambda catalog: None)
    _, out, _ = run_cli(capsys, "verify", "--python", python, "--nccl")
    line = "SKIP  NCCL across GPUs  one GPU visible: nothing to run NCCL across"
    assert [ln for ln in out.splitlines() if "NCCL across" in ln] == [line]
    _, out, _ = run_cli(capsys, "verify", "--python", python, "--nccl", "--json")
    report = json.loads(out)
    assert report["nccl_check"]["visible_gpus"] == 1 and report["nccl_check"]["run"] is None
    assert report["checks"][-1]["id"] == "multigpu"
    _, out, _ = run_cli(capsys, "verify", "--python", python, "--json")
    assert json.loads(out)["nccl_check"] is None  # one GPU and not asked: no check at all


ONE_GPU = Path(__file__).parent / "fixtures" / "verify" / "h100_nccl_one_gpu"


def test_recorded_one_gpu_h100_skips_and_its_topology_reads_pcie() -> None:
    """Real: `verify --nccl` and NVML's topology on the one-GPU H100 (no NVLink there)."""
    text = (ONE_GPU / "verify_nccl_one_gpu.txt").read_text(encoding="utf-8")
    assert "SKIP  NCCL across GPUs  one GPU visible: nothing to run NCCL across" in text
    report = json.loads((ONE_GPU / "verify_nccl_one_gpu.json").read_text(encoding="utf-8"))
    assert report["nccl_check"]["visible_gpus"] == 1
    topo = json.loads((ONE_GPU / "topology_one_gpu.json").read_text(encoding="utf-8"))
    assert topo["gpus"][0]["nvlinks"] == [] and topo["pairs"] == []
    peak, basis = topology.link_peak_gbps(topo, [0])
    assert peak == pytest.approx(3.938 * 16) and basis.startswith("PCIe gen5 x16")


def test_recorded_one_process_smoke_run_has_the_shape_the_check_reads() -> None:
    """Real, but one process on one GPU: it proves the worker runs on NCCL and answers what
    the check reads; it measures no link (bus bandwidth is 0 by definition at n = 1)."""
    doc = json.loads((ONE_GPU / "nccl_smoke_world1.json").read_text(encoding="utf-8"))
    assert doc["failure"] is None and not doc["timed_out"]
    (rank,) = doc["ranks"]
    result = rank["result"]
    assert rank["stage"] == "done" and result["all_reduce_ok"] and result["all_gather_ok"]
    assert result["libraries"][0].endswith("nvidia/nccl/lib/libnccl.so.2")
    for row in result["bandwidth"]:
        assert set(row) == {"op", "bytes", "us", "algbw", "busbw"} and row["busbw"] == 0.0
    run = NcclRun(world=2, timeout_s=60)  # the same answer as two ranks' would read (synthetic)
    run.ranks = [Rank(rank=i, data=result, stage="done") for i in range(2)]
    check, _ = nccl_check.judge(run, synthetic_topology(), PROBE, 2)
    assert check.status == FAIL and "all-reduce bus bandwidth 0.0 GB/s" in check.reason
