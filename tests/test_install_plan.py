"""`gpuresolve install`'s pure half: what to remove from an environment and the exact commands."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from resolver.core.errors import UserError
from resolver.install import plan
from resolver.install.env import EnvInfo, Installed, Tools, require_managed
from resolver.readers import lockfile
from resolver.readers.pins import FORMAT_CONDA_LOCK, LockPins, canonical

CU12 = ("nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12")


def dist(name: str, version: str, *requires: str, installer: str | None = "pip") -> Installed:
    return Installed(name, version, tuple(requires), installer)


def env_of(*dists: Installed, conda: bool = False, pip: bool = True) -> EnvInfo:
    return EnvInfo(
        python="/envs/t/bin/python",
        executable="/envs/t/bin/python",
        prefix="/envs/t",
        base_prefix="/usr" if not conda else "/envs/t",
        version="3.11",
        full_version="3.11.7",
        conda=conda,
        has_pip=pip,
        dists={canonical(d.name): d for d in dists},
    )


def cu130_torch() -> list[Installed]:
    """torch 2.14.1+cu130 as pip leaves it: CUDA 13 libraries, mostly without a -cuNN suffix."""
    return [
        dist(
            "torch",
            "2.14.1+cu130",
            "nvidia-cublas==13.0.0.19; platform_system == 'Linux'",
            "nvidia-cudnn-cu13==9.13.0.50",
            "nvidia-cuda-runtime==13.0.48",
            "filelock",
        ),
        dist("nvidia-cublas", "13.0.0.19"),
        dist("nvidia-cudnn-cu13", "9.13.0.50", "nvidia-cublas"),
        dist("nvidia-cuda-runtime", "13.0.48"),
        dist("filelock", "3.16.1"),
        dist("nvidia-ml-py", "13.580.82"),  # NVML bindings: no CUDA library, never touched
    ]


def cu126_torch(version: str = "2.14.1+cu126") -> list[Installed]:
    return [
        dist("torch", version, *(f"{n}==1.0" for n in CU12)),
        dist("nvidia-cublas-cu12", "12.6.4.1"),
        dist("nvidia-cudnn-cu12", "9.10.2.21", "nvidia-cublas-cu12"),
        dist("nvidia-cuda-runtime-cu12", "12.6.77"),
    ]


def removed(found: list[plan.Removal]) -> list[str]:
    return [r.name for r in found]


WANT_CU126 = plan.wants_from_packages([("torch", "2.14.1+cu126")])


def test_other_cuda_major_goes_with_the_wrong_torch() -> None:
    found, notes = plan.removals(env_of(*cu130_torch()).dists, WANT_CU126, 12, cpu=False)
    assert removed(found) == ["torch", "nvidia-cublas", "nvidia-cuda-runtime", "nvidia-cudnn-cu13"]
    assert "the cu126 build is wanted" in found[0].why
    assert "CUDA 13 library" in found[1].why and "this install is CUDA 12" in found[1].why
    assert notes == []


def test_a_library_something_else_needs_is_kept_and_said() -> None:
    dists = [*cu130_torch(), dist("jax-cuda13-plugin", "0.7.1", "nvidia-cudnn-cu13>=9.8")]
    found, notes = plan.removals(env_of(*dists).dists, WANT_CU126, 12, cpu=False)
    assert "nvidia-cudnn-cu13" not in removed(found)
    assert "nvidia-cublas" in removed(found)
    assert any("nvidia-cudnn-cu13" in n and "jax-cuda13-plugin" in n for n in notes)


def test_cpu_build_on_a_gpu_host_is_replaced_and_nothing_else() -> None:
    dists = [dist("torch", "2.14.1+cpu"), *cu126_torch()[1:], dist("nvidia-ml-py", "13.580.82")]
    found, _ = plan.removals(env_of(*dists).dists, WANT_CU126, 12, cpu=False)
    assert removed(found) == ["torch"]
    assert "a CPU build; the cu126 build is wanted" in found[0].why


def test_same_cuda_major_keeps_its_libraries() -> None:
    want = plan.wants_from_packages([("torch", "2.14.1+cu128")])
    found, _ = plan.removals(env_of(*cu126_torch()).dists, want, 12, cpu=False)
    assert removed(found) == ["torch"]


def test_the_right_build_is_left_alone() -> None:
    found, notes = plan.removals(env_of(*cu126_torch()).dists, WANT_CU126, 12, cpu=False)
    assert (found, notes) == ([], [])


def test_leftover_libraries_of_the_other_major_go_even_with_the_right_torch() -> None:
    dists = [*cu126_torch(), dist("nvidia-nccl-cu13", "2.27.7")]
    found, _ = plan.removals(env_of(*dists).dists, WANT_CU126, 12, cpu=False)
    assert removed(found) == ["nvidia-nccl-cu13"]


def test_cpu_install_drops_what_only_the_old_torch_needed() -> None:
    dists = [*cu126_torch(), dist("nvidia-nccl-cu12", "2.27.3")]  # nccl: nobody's requirement
    want = plan.wants_from_packages([("torch", "2.14.1+cpu")])
    found, _ = plan.removals(env_of(*dists).dists, want, None, cpu=True)
    assert removed(found) == ["torch", *sorted(CU12)]


def test_untagged_torch_is_judged_by_its_cuda_runtime() -> None:
    pypi = [
        dist("torch", "2.8.0", "nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cublas-cu12"),
        dist("nvidia-cuda-runtime-cu12", "12.8.90"),
        dist("nvidia-cublas-cu12", "12.8.4.1"),
    ]
    dists = env_of(*pypi).dists
    assert plan.installed_variant(dists["torch"], dists) == "cu128"
    same = plan.wants_from_packages([("torch", "2.8.0+cu128")])
    assert plan.removals(dists, same, 12, cpu=False) == ([], [])
    other = plan.wants_from_packages([("torch", "2.8.0+cu126")])
    assert removed(plan.removals(dists, other, 12, cpu=False)[0]) == ["torch"]
    # An untagged torch without CUDA libraries is a CPU build ("torch==2.8.0" would keep it).
    cpu = env_of(dist("torch", "2.8.0")).dists
    assert plan.installed_variant(cpu["torch"], cpu) == "cpu"


def test_companion_built_for_another_torch_goes_with_a_hint() -> None:
    dists = [dist("torch", "2.13.0+cpu"), dist("torchvision", "0.28.0+cpu", "torch==2.13.0")]
    found, _ = plan.removals(env_of(*dists).dists, WANT_CU126, 12, cpu=False)
    assert removed(found) == ["torch", "torchvision"]
    assert "--with torchvision" in found[1].why
    fits = [*cu126_torch(), dist("torchvision", "0.29.1+cu126", "torch==2.14.1")]
    assert plan.removals(env_of(*fits).dists, WANT_CU126, 12, cpu=False) == ([], [])


def test_conda_installed_torch_is_left_to_conda() -> None:
    env = env_of(dist("torch", "2.5.1", installer="conda"), dist("pip", "24.2"), conda=True)
    p = plan.plan_decision(
        [("torch", "2.14.1+cu126")],
        "cu126",
        "https://x/whl/cu126",
        env,
        plan.Installer("pip", env.python),
    )
    assert removed(list(p.removals)) == ["torch"]
    assert [s.purpose for s in p.steps] == ["install"]
    assert any("installed by conda" in n for n in p.notes)


def test_decision_plan_commands_for_pip_and_uv() -> None:
    env = env_of(*cu130_torch())
    index = "https://mirror.example/pytorch whl/cu126"  # a space: the command must quote it
    pip = plan.plan_decision(
        [("torch", "2.14.1+cu126"), ("torchvision", "0.29.1+cu126")],
        "cu126",
        index,
        env,
        plan.Installer("pip", env.python),
    )
    remove, add = pip.steps
    assert remove.argv[:5] == (env.python, "-m", "pip", "uninstall", "-y")
    assert set(remove.argv[5:]) == {
        "torch",
        "nvidia-cublas",
        "nvidia-cuda-runtime",
        "nvidia-cudnn-cu13",
    }
    assert add.argv == (
        env.python, "-m", "pip", "install",
        "torch==2.14.1+cu126", "torchvision==0.29.1+cu126", "--index-url", index,
    )  # fmt: skip
    assert shlex.split(add.command) == list(add.argv)
    uv = plan.plan_decision(
        [("torch", "2.14.1+cu126")], "cu126", index, env, plan.Installer("uv", "/bin/uv")
    )
    assert uv.steps[0].argv[:5] == ("/bin/uv", "pip", "uninstall", "--python", env.python)
    assert uv.steps[1].argv[:5] == ("/bin/uv", "pip", "install", "--python", env.python)


def test_choose_installer() -> None:
    with_pip, no_pip = env_of(), env_of(pip=False)
    assert plan.choose_installer("auto", Tools(uv="/bin/uv"), with_pip).kind == "uv"
    assert plan.choose_installer("auto", Tools(), with_pip) == plan.Installer(
        "pip", with_pip.python
    )
    assert plan.choose_installer("pip", Tools(uv="/bin/uv"), with_pip).kind == "pip"
    with pytest.raises(UserError, match=r"uv is neither in gpuresolve's environment nor on PATH"):
        plan.choose_installer("uv", Tools(), with_pip)
    with pytest.raises(UserError, match="has no pip"):
        plan.choose_installer("pip", Tools(uv="/bin/uv"), no_pip)
    with pytest.raises(UserError, match="no installer"):
        plan.choose_installer("auto", Tools(), no_pip)


def test_system_interpreter_needs_system() -> None:
    system = EnvInfo("/usr/bin/python3", "/usr/bin/python3", "/usr", "/usr", "3.12")
    with pytest.raises(UserError, match="--system"):
        require_managed(system, system=False)
    require_managed(system, system=True)
    require_managed(env_of(), system=False)  # a virtualenv
    conda = env_of(conda=True)
    assert (conda.is_venv, conda.kind) == (False, "conda env")
    require_managed(conda, system=False)


def write(tmp_path: Path, name: str, text: str) -> LockPins:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return lockfile.read(path, platform="linux-x86_64")


def test_requirements_lock_is_installed_as_written(tmp_path: Path) -> None:
    lock = write(
        tmp_path,
        "requirements.txt",
        "--index-url https://download.pytorch.org/whl/cu126\n"
        "torch==2.14.1+cu126 ; python_version >= '3.10'\n"
        "torch==2.9.0+cu126 ; python_version < '3.10'\n"
        "nvidia-cublas-cu12==12.6.4.1\n",
    )
    env = env_of(*cu130_torch())
    wants = plan.wants_from_lock(lock, env.marker_environment())
    assert [w.text for w in wants] == ["torch==2.14.1+cu126"]  # the marker picked the line
    p = plan.plan_lock(lock, lock.path, env, plan.Installer("pip", env.python), Tools())
    assert "nvidia-cudnn-cu13" in {r.name for r in p.removals}
    assert p.steps[-1].argv == (env.python, "-m", "pip", "install", "-r", lock.path)


def test_lock_cuda_major_from_its_nvidia_pins(tmp_path: Path) -> None:
    lock = write(tmp_path, "r.txt", "torch==2.8.0\nnvidia-cudnn-cu12==9.10.2.21\n")
    assert plan.lock_cuda_major(lock, None) == 12
    assert plan.lock_cuda_major(lock, plan.wants_from_packages([("torch", "2.8.0+cu130")])[0]) == 13


ENV_YML = (
    "name: t\ndependencies:\n  - python=3.11\n  - pytorch=2.5.1=cuda124*\n  - pytorch-cuda=12.4\n"
)


def test_conda_lock_needs_a_conda_env_and_a_tool(tmp_path: Path) -> None:
    lock = write(tmp_path, "environment.yml", ENV_YML)
    with pytest.raises(UserError, match="not a conda env"):
        plan.plan_lock(lock, lock.path, env_of(), None, Tools(micromamba="/bin/micromamba"))
    conda_env = env_of(conda=True)
    with pytest.raises(UserError, match="needs micromamba, mamba or conda"):
        plan.plan_lock(lock, lock.path, conda_env, None, Tools(conda_lock="/bin/conda-lock"))
    p = plan.plan_lock(lock, lock.path, conda_env, None, Tools(mamba="/b/mamba", conda="/b/conda"))
    assert p.installer == "mamba"
    assert p.steps[-1].argv == (
        "/b/mamba", "env", "update", "--prefix", "/envs/t", "--file", lock.path,
    )  # fmt: skip


def test_choose_conda_tool() -> None:
    fmt = FORMAT_CONDA_LOCK
    assert plan.choose_conda_tool(fmt, Tools(conda_lock="/c", micromamba="/m")) == (
        "conda-lock",
        "/c",
    )
    assert plan.choose_conda_tool(fmt, Tools(micromamba="/m")) == ("micromamba", "/m")
    with pytest.raises(UserError, match=r"cannot read conda-lock\.yml"):
        plan.choose_conda_tool(fmt, Tools(conda="/c"))
    argv = plan.conda_argv("conda-lock", "/c", "/envs/t", "x-lock.yml", Tools(micromamba="/m"))
    assert argv == ("/c", "install", "--conda", "/m", "--prefix", "/envs/t", "x-lock.yml")
    assert plan.conda_argv("micromamba", "/m", "/envs/t", "e.yml", Tools())[:3] == (
        "/m", "install", "--yes",
    )  # fmt: skip


def test_mirror_and_includes() -> None:
    text = (
        "-r base.txt\n--constraint=/abs/c.txt\n"
        "--index-url https://download.pytorch.org/whl/cu126\n"
        "torch @ https://download.pytorch.org/whl/cu126/torch-2.8.0%2Bcu126-cp311-none.whl\n"
    )
    moved = plan.mirror_text(text, "https://download.pytorch.org/whl/", "https://m.corp/pt/")
    assert "--index-url https://m.corp/pt/cu126\n" in moved
    assert "torch @ https://m.corp/pt/cu126/torch-2.8.0" in moved
    assert "download.pytorch.org" not in moved
    fixed = plan.absolute_includes(moved, "/locks")
    assert fixed.startswith("-r /locks/base.txt\n--constraint=/abs/c.txt\n")
