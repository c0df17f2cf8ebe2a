"""The probe and the checks on a real torch: the CPU-only 2.13.0 wheel in a throwaway virtualenv.

pip finds ``torch==2.13.0`` (CPU) as a local wheel through its configured find-links; uv installs
that wheel file (pip where uv cannot). The venv sees the system's site-packages, so torch's
import-time dependencies come from there and the install needs no index (``--no-index
--no-deps``); where that does not give an importable torch, a plain ``pip install
torch==2.13.0`` is tried. Where neither works, these tests are skipped.
Installing takes a while: the venv is made once per test session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
from conftest import scrubbed_env

from resolver.catalog import Catalog
from resolver.core.hostprofile import STATE_NO_DRIVER, GpuInfo, HostProfile
from resolver.readers import lockfile
from resolver.verify import checks
from resolver.verify.checks import CHECKS as ORDER
from resolver.verify.result import FAIL, PASS, SKIP, overall
from resolver.verify.run import run_probe

CHECKS = [c.id for c in ORDER]  # every check's id, in report order

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "tests" / "fixtures" / "verify" / "lock_torch215_cu132.txt"
TORCH = "torch==2.13.0"
INSTALL_TIMEOUT_S = 900


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
        env=scrubbed_env(),
    )


def _imports_torch(python: Path) -> bool:
    done = subprocess.run(
        [str(python), "-I", "-c", "import torch, sys; sys.exit(torch.__version__ != '2.13.0+cpu')"],
        capture_output=True,
        timeout=300,
        check=False,
    )
    return done.returncode == 0


def _uv_venv(base: Path, tried: list[str]) -> Path | None:
    """The venv made by uv from the local wheel pip's find-links offer (uv unpacks the 200 MB
    wheel in seconds where pip takes a minute), in a scrubbed environment; None where there is
    no such wheel or uv fails."""
    from test_install import UV, _offline_torch

    wheel = _offline_torch("2.13.0") if UV else None
    if UV is None or wheel is None:
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env |= {"UV_CACHE_DIR": str(base / "uv-cache"), "UV_NO_CONFIG": "1"}
    env |= {"UV_PYTHON_DOWNLOADS": "never", "PIP_CONFIG_FILE": os.devnull}
    where = base / "uv"
    python = where / "bin" / "python"
    install = ["--quiet", "--python", str(python), "--no-index", "--no-deps", str(wheel)]
    for argv in (
        [UV, "venv", "--quiet", "--system-site-packages", "--python", sys.executable, str(where)],
        [UV, "pip", "install", *install],
    ):
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            tried.append(f"uv: {done.stderr.strip().splitlines()[-1:] or ['failed']}")
            return None
    return python if _imports_torch(python) else None


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding the CPU-only torch 2.13.0; its interpreter."""
    base = tmp_path_factory.mktemp("torch213")
    tried: list[str] = []
    made = _uv_venv(base, tried)
    if made is not None:
        return made
    for name, site, args in (
        ("offline", True, ("--no-index", "--no-deps", TORCH)),
        ("plain", False, (TORCH,)),
    ):
        where = base / name
        try:
            venv.EnvBuilder(with_pip=True, system_site_packages=site).create(where)
        except (OSError, subprocess.CalledProcessError) as exc:
            tried.append(f"{name}: venv: {exc}")
            continue
        python = where / "bin" / "python"
        try:
            done = _pip(python, *args)
        except subprocess.TimeoutExpired:
            tried.append(f"{name}: pip timed out")
            continue
        if done.returncode == 0 and _imports_torch(python):
            return python
        tried.append(f"{name}: {done.stderr.strip().splitlines()[-1:] or ['no torch']}")
        shutil.rmtree(where, ignore_errors=True)
    pytest.skip(f"cannot install {TORCH} (CPU) into a virtualenv: {'; '.join(tried)}")


@pytest.fixture(scope="session")
def probe(torch_venv: Path) -> dict[str, Any]:
    run = run_probe(str(torch_venv), want=["filelock"], timeout_s=300)
    assert run.failure is None, run.stderr_tail
    assert run.data is not None
    return run.data


def no_gpu() -> HostProfile:
    return HostProfile(platform="linux-x86_64", python="3.11", state=STATE_NO_DRIVER)


@pytest.mark.slow
def test_probe_reports_the_cpu_build(probe: dict[str, Any], torch_venv: Path) -> None:
    torch = probe["torch"]
    assert torch["imported"] is True
    assert (torch["version"], torch["cuda"], torch["arch_list"]) == ("2.13.0+cpu", None, [])
    assert probe["cuda"]["available"] is False and probe["cudnn"]["available"] is False
    assert probe["stage"] == "done" and "gpu_tests" not in probe
    assert probe["dists"]["torch"]["version"] == "2.13.0+cpu"
    assert probe["python"]["prefix"] == str(torch_venv.parent.parent)
    assert probe["markers"]["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    if os.path.exists("/proc/self/maps"):
        assert probe["libraries"]["maps_readable"] is True
        assert probe["libraries"]["loaded"] == []


def test_cpu_torch_on_a_gpu_less_host_passes(probe: dict[str, Any], shipped: Catalog) -> None:
    results = checks.evaluate(probe, no_gpu(), shipped)
    assert overall(results) == PASS, [(r.id, r.reason) for r in results]
    by_id = {r.id: r for r in results}
    assert by_id["build"].reason == "CPU build on a host without an NVIDIA GPU"
    assert by_id["import"].reason.startswith("torch 2.13.0+cpu from ")
    assert list(by_id) == list(CHECKS)
    for key in ("driver", "cuda", "arch", "cudnn", "nccl", "compute"):
        assert (by_id[key].status, by_id[key].reason) == (SKIP, "not a CUDA build (cpu)")
    assert by_id["lock"].status == SKIP


def test_cpu_torch_on_a_gpu_host_fails(probe: dict[str, Any], shipped: Catalog) -> None:
    host = HostProfile(
        platform="linux-x86_64",
        python="3.11",
        driver="580.65.06",
        state="ok",
        gpus=[GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0")],
    )
    by_id = {r.id: r for r in checks.evaluate(probe, host, shipped)}
    assert by_id["build"].status == FAIL
    assert "gpuresolve suggest" in (by_id["build"].fix or "")


def test_lock_pinning_another_torch_fails(probe: dict[str, Any], shipped: Catalog) -> None:
    lock = lockfile.read(LOCK, platform="linux-x86_64")
    by_id = {r.id: r for r in checks.evaluate(probe, no_gpu(), shipped, lock=lock)}
    assert by_id["lock"].status == FAIL
    assert by_id["lock"].reason.startswith(
        "torch 2.13.0+cpu installed; the lock pins torch==2.15.0+cu132"
    )
    assert "torchvision is not installed; the lock pins torchvision==0.29.2+cu132" in (
        by_id["lock"].reason
    )


def _gpu_host() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    env.pop("VIRTUAL_ENV", None)
    env.pop("CONDA_PREFIX", None)
    return subprocess.run(
        [sys.executable, "-m", "resolver", "verify", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.skipif(_gpu_host(), reason="this host has an NVIDIA GPU: the CPU build fails here")
def test_cli_on_this_gpu_less_host(torch_venv: Path, tmp_path: Path) -> None:
    done = _cli("--python", str(torch_venv), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["status"], report["torch"], report["variant"]) == ("pass", "2.13.0+cpu", "cpu")
    assert report["summary"]["fail"] == 0
    assert [c["id"] for c in report["checks"]] == list(CHECKS)
    assert "SKIP  cuDNN" in _cli("--python", str(torch_venv)).stdout
    done = _cli("--python", str(torch_venv), "--lock", str(LOCK))
    assert done.returncode == 1
    assert "FAIL  lock" in done.stdout
    assert "torch 2.13.0+cpu installed; the lock pins torch==2.15.0+cu132" in done.stdout
    # The same pins written as an environment.yml pip section.
    env_yml = tmp_path / "environment.yml"
    env_yml.write_text("dependencies:\n  - pip:\n      - torch==2.13.0+cpu\n", encoding="utf-8")
    done = _cli("--python", str(torch_venv), "--lock", str(env_yml))
    assert done.returncode == 0, done.stdout
    assert "PASS  lock" in done.stdout


@pytest.mark.skipif(_gpu_host(), reason="this host has an NVIDIA GPU: the CPU build fails here")
def test_cli_group_holds_a_gpu_node_without_its_driver(torch_venv: Path, tmp_path: Path) -> None:
    """Issue 39: a CPU torch on a node Slurm lists with gpu:a100:1 passed `verify --lock` as a
    CPU host; with its group (as the sbatch script exports it) it fails, saying why."""
    lock = tmp_path / "hpc" / "linux-x86_64" / "environment.yml"
    lock.parent.mkdir(parents=True)
    lock.write_text("dependencies:\n  - pip:\n      - torch==2.13.0+cpu\n", encoding="utf-8")
    plan = {
        "fleet": 1,
        "groups": [
            {
                "group": "hpc",
                "nodes_of": "gpu-a100-driver-535.104.05",
                "nodes": ["gpu-a1"],
                "expects": {
                    "gpus": [{"name": "NVIDIA A100", "cc": "8.0", "count": 1}],
                    "driver": "535.104.05",
                },
            }
        ],
    }
    (tmp_path / "hpc" / "fleet.yaml").write_text(json.dumps(plan), encoding="utf-8")
    args = ("--python", str(torch_venv), "--lock", str(lock), "--json")
    done = _cli(*args)
    assert done.returncode == 0, done.stdout + done.stderr  # a CPU host, as far as it knows
    done = _cli(*args, env={"GPURESOLVE_GROUP": "gpu-a100-driver-535.104.05"})
    assert done.returncode == 1, done.stdout + done.stderr
    by_id = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    assert by_id["build"]["reason"] == "CPU build on a host without an NVIDIA GPU"
    assert (by_id["group"]["status"], by_id["group"]["reason"]) == (
        "fail",
        "this node's group expects 1 × NVIDIA A100 with driver 535.104.05 (node group "
        "gpu-a100-driver-535.104.05); this host has no NVIDIA driver",
    )


def _pylock(tmp_path: Path, linux_torch: str, linux_index: str) -> Path:
    """A fleet's pylock.toml: this Linux machine's torch, and a macOS one that must not count."""
    pt = "https://download.pytorch.org/whl"
    linux = "sys_platform == 'linux' and platform_machine == 'x86_64'"
    mac = "sys_platform == 'darwin' and platform_machine == 'arm64'"
    text = 'lock-version = "1.0"\ncreated-by = "tests"\n'
    for version, index, marker, tag in (
        (linux_torch, linux_index, linux, "manylinux_2_28_x86_64"),
        ("2.14.0", "cpu", mac, "macosx_11_0_arm64"),
    ):
        wheel = f"torch-{version}-cp312-none-{tag}.whl"
        url = f"{pt}/{index}/{wheel.replace('+', '%2B')}"
        text += (
            f'\n[[packages]]\nname = "torch"\nversion = "{version}"\nindex = "{pt}/{index}"\n'
            f'marker = "{marker}"\n[[packages.wheels]]\nname = "{wheel}"\n'
            f'url = "{url}"\nhashes = {{sha256 = "{"0" * 64}"}}\n'
        )
    path = tmp_path / "pylock.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_pylock_pins_are_checked_like_the_other_formats(
    probe: dict[str, Any], shipped: Catalog, tmp_path: Path
) -> None:
    same = lockfile.read(_pylock(tmp_path, "2.13.0+cpu", "cpu"), platform="linux-x86_64")
    by_id = {r.id: r for r in checks.evaluate(probe, no_gpu(), shipped, lock=same)}
    assert (by_id["lock"].status, by_id["lock"].reason) == (PASS, "1 pin match (torch 2.13.0+cpu)")
    # No local version: the build is the index's, and it is not the one installed.
    other = lockfile.read(_pylock(tmp_path, "2.15.0", "cu132"), platform="linux-x86_64")
    by_id = {r.id: r for r in checks.evaluate(probe, no_gpu(), shipped, lock=other)}
    assert by_id["lock"].status == FAIL
    assert by_id["lock"].reason == "torch 2.13.0+cpu installed; the lock pins torch==2.15.0+cu132"
    assert by_id["lock"].fix == f"reinstall from the lock: gpuresolve install --lock {other.path}"


@pytest.mark.slow
@pytest.mark.skipif(_gpu_host(), reason="this host has an NVIDIA GPU: the CPU build fails here")
def test_cli_checks_a_pylock(torch_venv: Path, tmp_path: Path) -> None:
    done = _cli("--python", str(torch_venv), "--lock", str(_pylock(tmp_path, "2.13.0+cpu", "cpu")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  lock" in done.stdout


@pytest.mark.slow
def test_the_dockerfile_startup_check_passes_on_the_real_torch(
    torch_venv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`lock --format dockerfile`'s start-up check, run by the environment's own Python (as the
    image's would be): the real CPU torch matches the lock, so the command runs; another pin
    stops it with the reason."""
    from cli_support import run_cli

    from resolver.catalog import shipped_data_dir

    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(shipped_data_dir()))
    code, out, err = run_cli(
        capsys, "lock", "--format", "dockerfile", "--platform", "linux-x86_64", "--no-gpu",
        "--python", py, "--torch", "==2.13.0", "-o", str(tmp_path),
    )  # fmt: skip
    assert code == 0, out + err
    req = tmp_path / "requirements.txt"
    assert "torch==2.13.0+cpu" in req.read_text(encoding="utf-8")
    check = [str(torch_venv), str(tmp_path / "gpuresolve-check.py"), str(req)]
    command = [str(torch_venv), "-c", "print('ran')"]
    done = subprocess.run([*check, *command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    assert "start-up check: torch 2.13.0+cpu OK" in done.stderr
    req.write_text(req.read_text(encoding="utf-8").replace("2.13.0+cpu", "2.12.0+cpu"))
    done = subprocess.run([*check, *command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert "torch 2.13.0+cpu is installed, the lock pins 2.12.0+cpu" in done.stderr
