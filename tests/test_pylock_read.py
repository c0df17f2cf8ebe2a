"""Reading a pylock.toml (PEP 751) as a lock: its pins per platform, its install plan, bad files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.core.errors import UserError
from resolver.install import plan
from resolver.install.env import EnvInfo, Installed, Tools
from resolver.readers import lockfile
from resolver.readers.pins import FORMAT_PYLOCK, canonical
from resolver.verify.package_checks import _lock_fix

LINUX = "sys_platform == 'linux' and platform_machine == 'x86_64'"
MAC = "sys_platform == 'darwin' and platform_machine == 'arm64'"
SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64
PT = "https://download.pytorch.org/whl"
FILES = "https://files.example"

# Shaped like the writer's fleet file: the Linux torch names its build only through its index
# (a wheel without a local tag), the macOS one comes from the CPU index, filelock is shared.
FLEET = f"""\
# written by hand for the tests
lock-version = "1.0"
environments = [
    "{LINUX} and python_version == '3.12'",
    "{MAC} and python_version == '3.12'",
]
requires-python = "==3.12.*"
created-by = "gpuresolve"

[[packages]]
name = "torch"
version = "2.8.0"
index = "{PT}/cu126"
marker = "{LINUX}"
[[packages.wheels]]
name = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
url = "{PT}/cu126/torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
hashes = {{sha256 = "{SHA_A}"}}

[[packages]]
name = "torch"
version = "2.8.0"
index = "{PT}/cpu"
marker = "{MAC}"
[[packages.wheels]]
name = "torch-2.8.0-cp312-none-macosx_11_0_arm64.whl"
url = "{PT}/cpu/torch-2.8.0-cp312-none-macosx_11_0_arm64.whl"
hashes = {{sha256 = "{SHA_B}"}}

[[packages]]
name = "nvidia-cudnn-cu12"
version = "9.10.2.21"
marker = "{LINUX} and python_version >= '3.12'"
[[packages.wheels]]
name = "nvidia_cudnn_cu12-9.10.2.21-py3-none-manylinux_2_27_x86_64.whl"
url = "{FILES}/nvidia_cudnn_cu12-9.10.2.21-py3-none-manylinux_2_27_x86_64.whl"
hashes = {{sha256 = "{SHA_C}"}}

[[packages]]
name = "torchvision"
version = "0.23.0+cu126"
marker = "{LINUX}"
[[packages.wheels]]
name = "torchvision-0.23.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
url = "{PT}/cu126/torchvision-0.23.0%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl"
hashes = {{sha256 = "{SHA_C}"}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_pins_are_the_target_platforms_with_their_builds(tmp_path: Path) -> None:
    path = write(tmp_path, "pylock.toml", FLEET)
    linux = lockfile.read(path, platform="linux-x86_64")
    assert linux.format == FORMAT_PYLOCK
    assert [p.name for p in linux.pins] == ["torch", "nvidia-cudnn-cu12", "torchvision"]
    torch = linux.get("torch")
    assert torch is not None
    assert (torch.version, torch.variant, torch.text) == ("2.8.0", "cu126", "torch==2.8.0+cu126")
    assert torch.hashes == (f"sha256:{SHA_A}",)
    # The marker stays: the interpreter being checked decides its Python condition.
    cudnn = linux.get("nvidia_cudnn_cu12")
    assert cudnn is not None and cudnn.marker is not None and "python_version" in cudnn.marker
    assert cudnn.variant is None  # no torch-family package: no build to compare
    vision = linux.get("TorchVision")
    assert vision is not None and (vision.version, vision.variant) == ("0.23.0", "cu126")
    assert linux.index_urls == (f"{PT}/cu126",)

    mac = lockfile.read(path, platform="macos-arm64")
    assert [(p.name, p.version, p.variant) for p in mac.pins] == [("torch", "2.8.0", "cpu")]
    every = lockfile.read(path)  # no platform: every package, each with its marker
    assert len(every.pins) == 4
    with pytest.raises(UserError, match=r"nothing locked for windows-x86_64 \(its environments"):
        lockfile.read(path, platform="windows-x86_64")


def test_found_by_content_under_another_name(tmp_path: Path) -> None:
    lock = lockfile.read(write(tmp_path, "fleet.lock", FLEET), platform="macos-arm64")
    assert lock.format == FORMAT_PYLOCK
    assert lockfile.read(write(tmp_path, "pylock.gpu.toml", FLEET)).format == "pylock"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('lock-version = "1.0"\n[[[\n', "invalid TOML"),
        ('lock-version = "1.0"\n', "Missing required value in 'created-by'"),
        ('lock-version = "1.0"\ncreated-by = "x"\npackages = "no"\n', "in 'packages'"),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n'
            'packages = [{name = "a", version = "1", marker = "os_name =="}]\n',
            "packages[0].marker",
        ),
        ('lock-version = "1.0"\nx = ' + "[" * 50_000 + "\n", "nested too deeply"),
        ('lock-version = "1.0"\nx = ' + "9" * 5_000 + "\n", "a number far too long"),
        ("name: x\ndependencies: [torch]\n", "invalid TOML"),  # named pylock.toml, not TOML
    ],
)
def test_malformed_pylock_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "pylock.toml", text)
    with pytest.raises(UserError) as exc:
        lockfile.read(path, platform="linux-x86_64")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value) and str(exc.value).startswith(f"{path}: ")


def test_verify_with_a_malformed_pylock_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "pylock.toml", 'lock-version = "1.0"\ncreated-by = 3\n')
    code, out, err = run_cli(capsys, "verify", "--python", sys.executable, "--lock", str(path))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "not a valid pylock.toml" in lines[0], err


def _env(*dists: Installed) -> EnvInfo:
    return EnvInfo(
        python="/envs/t/bin/python",
        executable="/envs/t/bin/python",
        prefix="/envs/t",
        base_prefix="/usr",
        version="3.12",
        full_version="3.12.3",
        conda=False,
        has_pip=True,
        dists={canonical(d.name): d for d in dists},
    )


def test_install_plan_needs_uv_or_a_pip_that_reads_pylock(tmp_path: Path) -> None:
    lock = lockfile.read(write(tmp_path, "pylock.toml", FLEET), platform="linux-x86_64")
    env = _env(Installed("torch", "2.8.0+cpu", (), "pip"))
    wants = plan.wants_from_lock(lock, env.marker_environment())
    if env.marker_environment().get("sys_platform") == "linux":
        assert [w.text for w in wants] == ["torch==2.8.0+cu126", "torchvision==0.23.0+cu126"]
    uv = plan.Installer("uv", "/bin/uv")
    p = plan.plan_lock(lock, lock.path, env, uv, Tools(uv="/bin/uv"))
    assert p.installer == "uv"
    assert p.steps[-1].argv == (
        "/bin/uv",
        "pip",
        "install",
        "--python",
        env.python,
        "-r",
        lock.path,
    )
    for installer in (plan.Installer("pip", env.python), None):
        with pytest.raises(UserError, match=r"needs uv or pip 26\.1 or newer .*has no pip;"):
            plan.plan_lock(lock, lock.path, env, installer, Tools())
    pip = plan.Installer("pip", env.python)
    old = _env(Installed("torch", "2.8.0+cpu", (), "pip"), Installed("pip", "26.0.1"))
    with pytest.raises(UserError, match=r"has pip 26\.0\.1;"):
        plan.plan_lock(lock, lock.path, old, pip, Tools())
    new = _env(Installed("torch", "2.8.0+cpu", (), "pip"), Installed("pip", "26.1"))
    p = plan.plan_lock(lock, lock.path, new, pip, Tools())
    assert p.installer == "pip"
    assert p.steps[-1].argv == (new.python, "-m", "pip", "install", "-r", lock.path)


def test_mirror_moves_index_and_wheel_urls(tmp_path: Path) -> None:
    moved = plan.mirror_text(FLEET, f"{PT}/", "https://m.corp/pt/")
    plan.check_mirrored_pylock(moved, "pylock.toml", "https://m.corp/pt", "linux-x86_64")
    lock = lockfile.read(write(tmp_path, "pylock.toml", moved), platform="linux-x86_64")
    assert lock.index_urls == ("https://m.corp/pt/cu126",)
    assert 'url = "https://m.corp/pt/cu126/torch-2.8.0-cp312' in moved
    assert "download.pytorch.org" not in moved
    # The plan reads the builds from the lock itself; the copy must still be the same lock.
    assert [(p.name, p.version, p.hashes) for p in lock.pins] == [
        (p.name, p.version, p.hashes)
        for p in lockfile.read(write(tmp_path, "pylock.orig.toml", FLEET), "linux-x86_64").pins
    ]
    broken = plan.mirror_text(FLEET, f"{PT}/", 'https://m.corp/"pt/')
    with pytest.raises(UserError, match=r"cannot be written into pylock\.toml: .*invalid TOML"):
        plan.check_mirrored_pylock(broken, "pylock.toml", 'https://m.corp/"pt', None)


def test_verify_fix_names_an_installer_that_reads_pylock(tmp_path: Path) -> None:
    lock = lockfile.read(write(tmp_path, "pylock.toml", FLEET), platform="linux-x86_64")
    assert _lock_fix(lock).endswith(f"gpuresolve install --lock {lock.path}")
