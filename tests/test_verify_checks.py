"""The verify checks, replayed on the probe recorded on an H100 (torch 2.11.0+cu130, driver 580).

The recorded run is the baseline that passes; each other case changes one fact of it, as the
failure it stands for would, and expects that check (and only that one) to fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from resolver.catalog import Catalog
from resolver.core.hostprofile import STATE_NO_DRIVER, GpuInfo, HostProfile
from resolver.readers import lockfile
from resolver.verify import checks
from resolver.verify.checks import CHECKS as ORDER
from resolver.verify.result import FAIL, PASS, SKIP, WARN, CheckResult, overall

CHECKS = [c.id for c in ORDER]  # every check's id, in report order

FIXTURES = Path(__file__).parent / "fixtures" / "verify"
H100 = FIXTURES / "h100_torch211_cu130"
LOCK = FIXTURES / "lock_torch215_cu132.txt"
SITE = "/opt/torch/.venv/lib/python3.12/site-packages"


@pytest.fixture
def probe() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def host() -> HostProfile:
    report = json.loads((H100 / "verify.json").read_text(encoding="utf-8"))
    return HostProfile.from_json(report["host"])


def run(
    probe: dict[str, Any], host: HostProfile | None, catalog: Catalog | None, **kw: Any
) -> dict[str, CheckResult]:
    return {r.id: r for r in checks.evaluate(probe, host, catalog, **kw)}


def failing(results: dict[str, CheckResult]) -> list[str]:
    return [k for k, r in results.items() if r.status == FAIL]


def test_recorded_h100_run_passes(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    res = run(probe, host, shipped)
    assert overall(res.values()) == PASS, {k: r.reason for k, r in res.items()}
    assert res["cudnn"].reason == "cuDNN 9.19.0 (the database lists 9.19.0.56)"
    assert res["nccl"].reason == "NCCL 2.28.9"
    assert res["arch"].reason == "sm_90 (GPU 0 NVIDIA H100 80GB HBM3): SASS sm_90"
    assert "580.159.04 >= 580" in res["driver"].reason
    libs = res["libraries"]
    assert libs.reason == "cudnn, nccl, cublas, cudart from the environment, none from outside"
    paths = dict(d.split(": ", 1) for d in libs.details)
    assert {"libcudnn.so.9", "libcudart.so.13", "libcublas.so.13", "libnccl.so.2"} <= set(paths)
    assert all(p.startswith(f"{SITE}/nvidia/") for p in paths.values())
    assert "cuDNN ran the convolution" in res["compute"].reason
    assert list(res) == list(CHECKS)  # every check, in report order
    assert [k for k in res if res[k].status == SKIP] == ["group", "lock"]
    assert res["lock"].reason == "no lock file given (--lock)"


def test_recorded_verify_json_matches_a_replay(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    """The kept `verify --json` output is what the checks give on its probe today.

    It was recorded when checks that did not apply were left out: "probe" (a pass then) and
    "lock" (no --lock) were not in it; every id is now, in the same order.
    """
    report = json.loads((H100 / "verify.json").read_text(encoding="utf-8"))
    res = checks.evaluate(report["probe"], host, shipped)
    recorded = [(c["id"], c["status"]) for c in report["checks"]]
    added = {"probe": PASS, "group": SKIP, "lock": SKIP}
    assert [(r.id, r.status) for r in res if r.id not in added] == recorded
    assert {r.id: r.status for r in res if r.id in added} == added
    assert [r.id for r in res] == list(CHECKS)
    assert report["status"] == "pass" and report["torch"] == "2.11.0+cu130"


def test_lock_pinning_another_torch_fails(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    lock = lockfile.read(LOCK, platform="linux-x86_64")
    res = run(probe, host, shipped, lock=lock)
    assert failing(res) == ["lock"]
    assert res["lock"].reason.startswith(
        "torch 2.11.0+cu130 installed; the lock pins torch==2.15.0+cu132"
    )
    assert res["lock"].fix == f"reinstall from the lock: pip install -r {LOCK}"
    recorded = json.loads((H100 / "verify_lock.json").read_text(encoding="utf-8"))
    assert recorded["status"] == "fail"
    (lock_check,) = [c for c in recorded["checks"] if c["id"] == "lock"]
    assert lock_check["reason"] == res["lock"].reason


def test_lock_matching_the_install_passes(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog, tmp_path: Path
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(
        "--index-url https://download.pytorch.org/whl/cu130\n"
        "torch==2.11.0\ntorchvision==0.26.0+cu130\nnvidia-cudnn-cu13==9.19.0.56\n",
        encoding="utf-8",
    )
    res = run(probe, host, shipped, lock=lockfile.read(path))
    assert res["lock"].status == PASS, res["lock"].reason
    assert res["lock"].reason.startswith("3 pins match (torch 2.11.0+cu130")


def test_lock_variant_mismatch_fails(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog, tmp_path: Path
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("torch==2.11.0+cu126\n", encoding="utf-8")
    res = run(probe, host, shipped, lock=lockfile.read(path))
    assert res["lock"].status == FAIL
    assert "the lock pins torch==2.11.0+cu126" in res["lock"].reason


Mutation = Callable[[dict[str, Any], HostProfile], None]


def _old_driver(p: dict[str, Any], h: HostProfile) -> None:
    h.driver = "575.57.08"


def _pascal(p: dict[str, Any], h: HostProfile) -> None:
    p["cuda"]["devices"][0].update(name="NVIDIA GeForce GTX 1080 Ti", cc="6.1")


def _old_cudnn(p: dict[str, Any], h: HostProfile) -> None:
    p["cudnn"].update(version=90100, version_text="9.1.0")


def _cudnn_broken(p: dict[str, Any], h: HostProfile) -> None:
    p["cudnn"] = {
        "compiled": True,
        "enabled": True,
        "available": False,
        "error": {
            "type": "RuntimeError",
            "message": "cuDNN version incompatibility: PyTorch was compiled against "
            "(9, 19, 0) but found runtime version (9, 1, 0).",
        },
    }


def _cuda_unavailable(p: dict[str, Any], h: HostProfile) -> None:
    p["cuda"] = {
        "available": False,
        "devices": [],
        "warnings": ["CUDA initialization: The NVIDIA driver on your system is too old"],
    }
    p["gpu_tests"] = []


def _package_drift(p: dict[str, Any], h: HostProfile) -> None:
    p["dists"]["nvidia-cudnn-cu13"]["version"] = "9.13.0.50"
    del p["dists"]["nvidia-nccl-cu13"]


def _shadowed(p: dict[str, Any], h: HostProfile) -> None:
    p["env"]["LD_LIBRARY_PATH"] = "/usr/lib/x86_64-linux-gnu:/usr/local/nvidia/lib64"
    for lib in p["libraries"]["loaded"]:
        if lib["path"].endswith("/libcudnn.so.9"):
            lib["path"] = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"


def _companion_mismatch(p: dict[str, Any], h: HostProfile) -> None:
    p["companions"]["torchvision"]["version"] = "0.26.0+cu126"


def _companion_unpaired(p: dict[str, Any], h: HostProfile) -> None:
    p["companions"]["torchvision"]["version"] = "0.25.0+cu130"


def _wrong_result(p: dict[str, Any], h: HostProfile) -> None:
    p["gpu_tests"][0]["conv2d"]["rel_err"] = 0.02


def _no_kernel_image(p: dict[str, Any], h: HostProfile) -> None:
    p["gpu_tests"][0]["matmul"] = {
        "error": {
            "type": "AcceleratorError",
            "message": "CUDA error: no kernel image is available for execution on the device",
        }
    }


def _cudnn_not_used(p: dict[str, Any], h: HostProfile) -> None:
    p["gpu_tests"][0]["conv_backend"] = "_ConvBackend.SlowDilated2d"


@pytest.mark.parametrize(
    ("mutate", "fails", "words"),
    [
        (_old_driver, ["driver"], "needs driver >= 580 (CUDA 13.x minor-version compat"),
        (_pascal, ["arch"], "no kernels for sm_61 (GPU 0 NVIDIA GeForce GTX 1080 Ti)"),
        (_old_cudnn, ["cudnn"], "cuDNN 9.1.0 is older than the 9.19.0.56"),
        (_cudnn_broken, ["cudnn"], "cuDNN does not load: cuDNN version incompatibility"),
        (_cuda_unavailable, ["cuda"], "False: CUDA initialization: The NVIDIA driver"),
        (_package_drift, ["packages"], "nvidia-cudnn-cu13 9.13.0.50 installed; torch requires"),
        (_shadowed, ["libraries"], "libcudnn.so.9 from /usr/lib/x86_64-linux-gnu, not the env"),
        (_companion_mismatch, ["companions"], "torchvision is a cu126 build; torch is cu130"),
        (_companion_unpaired, ["companions"], "torchvision 0.25.0 installed; torch 2.11.0 pairs"),
        (_wrong_result, ["compute"], "conv2d: wrong result (relative error 0.02)"),
        (_no_kernel_image, ["compute"], "matmul: CUDA error: no kernel image is available"),
        (_cudnn_not_used, ["compute"], "cuDNN did not run the convolution"),
    ],
)
def test_one_broken_fact_fails_its_check(
    probe: dict[str, Any],
    host: HostProfile,
    shipped: Catalog,
    mutate: Mutation,
    fails: list[str],
    words: str,
) -> None:
    mutate(probe, host)
    res = run(probe, host, shipped)
    assert failing(res) == fails, {k: r.reason for k, r in res.items() if r.status != PASS}
    (check,) = [res[k] for k in fails]
    assert words in check.reason
    assert check.fix


def test_fixes_name_the_pinned_package(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    _old_cudnn(probe, host)
    assert run(probe, host, shipped)["cudnn"].fix == "pip install nvidia-cudnn-cu13==9.19.0.56"
    _package_drift(probe, host)
    fix = run(probe, host, shipped)["packages"].fix
    assert fix == "pip install nvidia-cudnn-cu13==9.19.0.56 nvidia-nccl-cu13==2.28.9"
    _shadowed(probe, host)
    assert (
        run(probe, host, shipped)["libraries"].fix
        == "remove /usr/lib/x86_64-linux-gnu from LD_LIBRARY_PATH"
    )


def test_missing_cudnn_library_at_import(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    probe["torch"] = {
        "imported": False,
        "error": {
            "type": "ImportError",
            "message": "libcudnn.so.9: cannot open shared object file: No such file or directory",
        },
    }
    del probe["dists"]["nvidia-cudnn-cu13"]
    res = run(probe, host, shipped)
    assert res["import"].status == FAIL
    assert res["import"].reason == "torch cannot load libcudnn.so.9: not found"
    assert res["import"].fix == (
        "install the package torch pins for it: pip install nvidia-cudnn-cu13==9.19.0.56"
    )
    # Metadata still tells the rest of the story; torch-dependent checks are skipped.
    assert res["packages"].status == FAIL
    assert "nvidia-cudnn-cu13 is not installed" in res["packages"].reason
    for key in ("build", "driver", "cudnn", "compute", "libraries"):
        assert (res[key].status, res[key].reason) == (SKIP, "torch did not import")


def test_missing_cublas_names_the_cuda_toolkit_extra(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    probe["torch"] = {
        "imported": False,
        "error": {
            "type": "OSError",
            "message": "libcublasLt.so.13: cannot open shared object file: No such file",
        },
    }
    fix = run(probe, host, shipped)["import"].fix
    assert fix is not None and "cuda-toolkit[" in fix and "==13.0.2" in fix


def test_torch_not_installed(probe: dict[str, Any], host: HostProfile, shipped: Catalog) -> None:
    probe["torch"] = {
        "imported": False,
        "error": {"type": "ModuleNotFoundError", "message": "No module named 'torch'"},
    }
    probe["dists"] = {}
    res = run(probe, host, shipped)
    assert failing(res) == ["import"]
    assert res["import"].reason == "torch is not installed in this environment"


def test_undefined_symbol_points_at_ld_library_path(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    probe["env"]["LD_LIBRARY_PATH"] = "/usr/local/cuda-12.1/lib64"
    probe["torch"] = {
        "imported": False,
        "error": {
            "type": "ImportError",
            "message": "/x/libtorch_cuda.so: undefined symbol: cudnnGetLibConfig, version "
            "libcudnn.so.9",
        },
    }
    res = run(probe, host, shipped)
    assert "undefined symbol cudnnGetLibConfig" in res["import"].reason
    assert "/usr/local/cuda-12.1/lib64" in (res["import"].fix or "")


def test_cpu_build_on_a_gpu_host_fails(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    probe["torch"].update(version="2.11.0+cpu", cuda=None, arch_list=[])
    res = run(probe, host, shipped)
    assert res["build"].status == FAIL
    assert "CPU build (cpu) on a host with 1 NVIDIA GPU" in res["build"].reason


def test_cuda_build_without_a_gpu_warns(probe: dict[str, Any], shipped: Catalog) -> None:
    bare = HostProfile(platform="linux-x86_64", python="3.12", state=STATE_NO_DRIVER)
    probe["cuda"] = {"available": False, "devices": [], "warnings": []}
    probe["gpu_tests"] = []
    res = run(probe, bare, shipped)
    assert overall(res.values()) == WARN
    assert res["build"].status == WARN
    assert {res[k].status for k in ("driver", "cuda", "arch", "compute")} == {SKIP}


def test_ptx_only_coverage_passes_and_needs_the_toolkit_driver(
    probe: dict[str, Any], host: HostProfile, shipped: Catalog
) -> None:
    probe["torch"]["arch_list"] = ["sm_80", "compute_80"]
    res = run(probe, host, shipped)
    assert res["arch"].status == PASS
    assert "PTX sm_80 (JIT-compiled on first use)" in res["arch"].reason
    assert "CUDA 13.0 toolkit minimum, for PTX JIT" in res["driver"].reason


def test_without_a_database(probe: dict[str, Any], host: HostProfile) -> None:
    res = run(probe, host, None, catalog_error="data/torch.yaml: database file missing")
    assert failing(res) == []
    assert res["driver"].status == WARN
    assert "database file missing" in res["driver"].reason
    assert res["companions"].status == WARN


def test_probe_failure_is_one_fail() -> None:
    res = checks.evaluate(
        {"stage": "gpu-tests"},
        None,
        None,
        probe_failure="the probe crashed with SIGSEGV during 'gpu-tests'",
        stderr_tail=["Segmentation fault"],
    )
    assert [(r.id, r.status) for r in res] == [("probe", FAIL)] + [
        (key, SKIP) for key in CHECKS if key != "probe"
    ]
    assert res[0].details == ("last stage: gpu-tests", "stderr: Segmentation fault")
    assert {r.reason for r in res[1:] if r.id != "group"} == {
        "the probe did not finish: no facts to judge"
    }  # the node group's check judges the host, not the probe (test_fleet_verdicts)
    assert overall(res) == FAIL


def test_gpu_from_the_host_when_torch_sees_none(shipped: Catalog) -> None:
    """torch without CUDA at all still gets its arch list checked against the host's GPUs."""
    probe: dict[str, Any] = {
        "stage": "done",
        "torch": {
            "imported": True,
            "version": "2.8.0+cu126",
            "cuda": "12.6",
            "arch_list": ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        },
        "cuda": {"available": False, "devices": [], "warnings": []},
    }
    host = HostProfile(
        platform="linux-x86_64",
        python="3.12",
        driver="580.65.06",
        state="ok",
        gpus=[GpuInfo(0, "NVIDIA GeForce RTX 5090", "12.0")],
    )
    res = run(probe, host, shipped)
    assert res["arch"].status == FAIL and "no kernels for sm_120" in res["arch"].reason


def cpu_build(p: dict[str, Any]) -> None:
    """The recorded probe as a CPU build would report it, without torchvision or torchaudio."""
    p["torch"].update(version="2.11.0+cpu", cuda=None, arch_list=[])
    p["cuda"] = {"available": False, "devices": [], "warnings": []}
    p["cudnn"] = {"compiled": False, "available": False}
    p["nccl"] = {"available": False}
    p["gpu_tests"] = []
    p["libraries"]["loaded"] = []
    p["companions"] = {}
    p["dists"] = {"torch": {"version": "2.11.0+cpu", "requires": ["filelock"]}}


def test_cpu_build_skips_what_does_not_apply(probe: dict[str, Any], shipped: Catalog) -> None:
    """Every id is in the report; the checks that do not apply say SKIP and why."""
    cpu_build(probe)
    bare = HostProfile(platform="linux-x86_64", python="3.12", state=STATE_NO_DRIVER)
    res = run(probe, bare, shipped)
    assert list(res) == list(CHECKS)
    assert overall(res.values()) == PASS  # SKIP does not change the outcome
    skipped = {k: r.reason for k, r in res.items() if r.status == SKIP}
    assert skipped == {
        **{
            k: "not a CUDA build (cpu)"
            for k in ("driver", "cuda", "arch", "cudnn", "nccl", "compute")
        },
        "libraries": "CPU build: no CUDA libraries",
        "companions": "neither torchvision nor torchaudio is installed",
        "group": "no node group given (--group)",
        "lock": "no lock file given (--lock)",
    }
    assert all(r.fix is None for r in res.values() if r.status == SKIP)
    assert [k for k, r in res.items() if r.status == PASS] == [
        "probe",
        "environment",
        "import",
        "build",
        "packages",
    ]
