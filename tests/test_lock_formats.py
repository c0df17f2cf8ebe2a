"""Closures for another machine (uv, the target's markers), pylock.toml and `--format uv`.

Everything runs against a local PEP 503 index of stub wheels (tests/lock_support.py): torch
there needs `cuda-bindings` on Linux only, as the real wheels' markers say, so a lock made on
this Linux machine for macOS must leave it out, and one for aarch64 must take aarch64 wheels.
"""

from __future__ import annotations

import copy
import difflib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from cli_support import run_cli, write_db
from conftest import scrubbed_env
from lock_support import FILELOCK, lock_raw, stub_index
from pytorch_index import IndexServer, build_wheel, metadata_text, serve

from resolver.catalog import from_raw
from resolver.writers import recorded
from resolver.writers.closure.pip_resolve import find_uv

run = run_cli


def _has_uv() -> bool:
    try:
        find_uv()
    except Exception:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _has_uv(), reason="uv is not installed (a dependency of gpuresolve)"
)
BINDINGS = "13.0.1"
LINUX_ONLY = f'cuda-bindings=={BINDINGS}; platform_system == "Linux"'


def _raw(synth_raw: dict[str, Any]) -> dict[str, Any]:
    """The lock tests' database, plus CPU wheels of 2.12 for linux-aarch64."""
    raw = lock_raw(copy.deepcopy(synth_raw))
    (s212,) = [s for s in raw["torch.yaml"]["series"] if s["minor"] == "2.12"]
    s212["python"]["linux-aarch64"] = ["3.11", "3.12"]
    (cpu,) = [v for v in s212["variants"] if v["name"] == "cpu"]
    cpu["platforms"]["linux-aarch64"] = {}
    return raw


def _bindings() -> tuple[tuple[str, str, bytes], ...]:
    out = []
    for arch in ("x86_64", "aarch64"):
        name = f"cuda_bindings-{BINDINGS}-py3-none-manylinux_2_28_{arch}.whl"
        data = build_wheel("cuda_bindings", BINDINGS, metadata_text("cuda-bindings", BINDINGS, []))
        for page in ("/simple/", "/whl/cpu/", "/whl/cu126/", "/whl/cu130/"):
            out.append((f"{page}cuda-bindings/", name, data))
    return tuple(out)


@pytest.fixture
def raw(
    scrubbed_tools: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    data = _raw(synth_raw)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(write_db(scrubbed_tools / "db", data)))
    return data


@pytest.fixture
def index(raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[IndexServer]:
    routes = stub_index(from_raw(raw), ("filelock", LINUX_ONLY), _bindings())
    with serve(routes) as server:
        monkeypatch.setenv("PIP_INDEX_URL", f"{server.url}/simple")  # pip's default index
        yield server


def _lock(capsys: pytest.CaptureFixture[str], index: IndexServer, *args: str) -> str:
    code, out, err = run(capsys, "lock", "--pytorch-index", f"{index.url}/whl", *args)
    assert code == 0, out + err
    return err


def test_macos_lock_made_on_linux_leaves_out_linux_only_deps(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from packaging.pylock import Pylock

    out = tmp_path / "mac"
    _lock(
        capsys,
        index,
        *("--platform", "macos-arm64", "--python", "3.11", "--no-gpu"),
        *("--format", "pylock", "--format", "requirements", "--hashes", "-o", str(out)),
    )
    req = (out / "requirements.txt").read_text()
    assert "torch==2.8.0 \\" in req and "cuda-bindings" not in req
    text = (out / "pylock.toml").read_text()
    lock = Pylock.from_dict(tomlkit.parse(text).unwrap())
    names = {str(p.name): p for p in lock.packages}
    assert sorted(names) == ["filelock", "torch"]
    assert str(names["torch"].version) == "2.8.0"
    wheel = (names["torch"].wheels or [])[0]
    assert wheel.name is not None and wheel.name.endswith("macosx_11_0_arm64.whl")
    assert len(wheel.hashes["sha256"]) == 64
    assert [str(m) for m in lock.environments or []] == [
        'sys_platform == "darwin" and platform_machine == "arm64" and python_version == "3.11"'
    ]
    assert names["torch"].index == f"{index.url}/whl/cpu"
    assert recorded.intact("pylock.toml", text)
    # Only macOS wheels of torch were looked at; cuda-bindings was never asked for.
    assert not any("cuda-bindings" in p for p in index.paths())


@pytest.mark.slow
def test_aarch64_lock_made_on_x86_64_takes_aarch64_wheels(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "arm"
    _lock(
        capsys,
        index,
        *("--platform", "linux-aarch64", "--python", "3.12", "--no-gpu", "--hashes"),
        *("--format", "requirements", "--format", "pylock", "-o", str(out)),
    )
    req = (out / "requirements.txt").read_text()
    pins = [ln.removesuffix(" \\") for ln in req.splitlines() if "==" in ln]
    assert pins == [
        f"cuda-bindings=={BINDINGS}",
        f"filelock=={FILELOCK}",
        "torch==2.12.0+cpu",
    ]
    doc = tomlkit.parse((out / "pylock.toml").read_text()).unwrap()
    files = [w["name"] for p in doc["packages"] for w in p["wheels"]]
    assert f"cuda_bindings-{BINDINGS}-py3-none-manylinux_2_28_aarch64.whl" in files
    assert "torch-2.12.0+cpu-cp312-cp312-manylinux_2_28_aarch64.whl" in files
    assert not any("x86_64" in f for f in files)
    # --check re-resolves from what the files record, with no flags.
    code, out_text, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, out_text + err


def _uv_env() -> dict[str, str]:
    return scrubbed_env()


def test_pylock_installs_with_uv_from_the_local_index(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python not in ("3.11", "3.12"):
        pytest.skip("the stub index has torch 2.12 wheels for Python 3.11 and 3.12 only")
    out = tmp_path / "here"
    _lock(
        capsys,
        index,
        *("--platform", "linux-x86_64", "--python", python, "--no-gpu"),
        *("--format", "pylock", "-o", str(out)),
    )
    uv = find_uv()
    venv = tmp_path / "venv"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, "--no-python-downloads", str(venv)],
        check=True,
        env=_uv_env(),
        timeout=120,
    )
    install = [uv, "pip", "install", "--python", str(venv / "bin" / "python")]
    proc = subprocess.run(
        [*install, "-r", str(out / "pylock.toml")],
        capture_output=True,
        text=True,
        env=_uv_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")],
        capture_output=True,
        text=True,
        env=_uv_env(),
        timeout=60,
        check=True,
    ).stdout.split()
    assert sorted(freeze) == sorted(
        [f"cuda-bindings=={BINDINGS}", f"filelock=={FILELOCK}", "torch==2.12.0+cpu"]
    )


EXISTING = """\
# The team's own project: gpuresolve must keep every byte it does not manage.
[project]
name = "vision-app"   # keep this comment
version = "1.4.0"
requires-python = ">=3.11"
dependencies = [
    "requests>=2.31",   # http
    "torch>=2.0",
    "pillow",
]

[tool.ruff]
line-length = 99  # ours

[[tool.uv.index]]
name = "internal"
url = "https://pkgs.example.invalid/simple"
"""


def test_uv_project_round_trips_and_uv_locks_it(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(EXISTING)
    args = ("--platform", "linux-x86_64", "--python", "3.11", "--no-gpu", "--format", "uv")
    _lock(capsys, index, *args, "-o", str(project))
    text = (project / "pyproject.toml").read_text()
    diff = [
        ln
        for ln in difflib.ndiff(EXISTING.splitlines(), text.splitlines())
        if ln.startswith(("-", "+"))
    ]
    assert [ln for ln in diff if ln.startswith("-")] == ['-     "torch>=2.0",']
    added = [ln[2:] for ln in diff if ln.startswith("+")]
    assert added == [
        '    "torch==2.12.0+cpu",',
        "",
        "[[tool.uv.index]]",
        'name = "pytorch-cpu"',
        f'url = "{index.url}/whl/cpu"',
        "explicit = true",
        "",
        "[tool.uv.sources]",
        'torch = {index = "pytorch-cpu"}',
        "",
        "[tool.gpuresolve]",
        *added[-2:],
    ]
    assert added[-2].startswith("inputs = ") and added[-1].startswith("note = ")
    # The inputs are recorded like every other file's: a second run changes nothing, and a plain
    # --check (no options at all) re-resolves from them.
    record = recorded.read("pyproject.toml", text)
    assert record is not None and record["target"]["python"] == "3.11"
    assert record["files"]["formats"] == ["uv"] and recorded.intact("pyproject.toml", text)
    _lock(capsys, index, *args, "-o", str(project))
    assert (project / "pyproject.toml").read_text() == text
    code, out, err = run(capsys, "lock", "--check", "-o", str(project))
    assert code == 0, out + err
    assert out.startswith("all current: 1 file(s)")
    # The user's own edits elsewhere are theirs: still current.
    edited = text.replace('"pillow",', '"pillow",\n    "rich",')
    (project / "pyproject.toml").write_text(edited)
    assert run(capsys, "lock", "--check", "-o", str(project))[0] == 0
    # A hand edit of the torch pin is drift: exit 1, the diff back.
    (project / "pyproject.toml").write_text(edited.replace("torch==2.12.0+cpu", "torch==2.11.0"))
    code, out, err = run(capsys, "lock", "--check", "-o", str(project))
    assert code == 1
    assert "(drift): pyproject.toml" in err and '+    "torch==2.12.0+cpu",' in out
    # A damaged record is one line, exit 2 (validated as the other files' records are).
    doc: Any = tomlkit.parse(text)  # edited by path: tomlkit's item types differ by release
    bad = json.loads(str(doc["tool"]["gpuresolve"]["inputs"]))
    bad["target"]["python"] = "3.11\u202e"
    doc["tool"]["gpuresolve"]["inputs"] = json.dumps(bad)
    (project / "pyproject.toml").write_text(tomlkit.dumps(doc))
    code, _, err = run(capsys, "lock", "--check", "-o", str(project))
    assert code == 2 and "the recorded target is damaged" in err
    (project / "pyproject.toml").write_text(text)
    # uv accepts it; the team's own packages and index are not on the local server, so the
    # copy uv locks keeps only what gpuresolve wrote.
    doc = tomlkit.parse(text)
    doc["tool"]["uv"]["index"][0]["url"] = f"{index.url}/simple"
    deps = doc["project"]["dependencies"]
    doc["project"]["dependencies"] = [d for d in deps if d.startswith("torch")]
    (project / "pyproject.toml").write_text(tomlkit.dumps(doc))
    uv_lock = [find_uv(), "lock", "--no-python-downloads", "--python", sys.executable]
    proc = subprocess.run(
        [*uv_lock, "--default-index", f"{index.url}/simple"],
        cwd=project,
        capture_output=True,
        text=True,
        env=_uv_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    locked = tomlkit.parse((project / "uv.lock").read_text()).unwrap()
    torch = next(p for p in locked["package"] if p["name"] == "torch")
    assert torch["version"] == "2.12.0+cpu"
    assert torch["source"] == {"registry": f"{index.url}/whl/cpu"}


def test_team_uv_project_carries_platform_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPURESOLVE_DATA_DIR", raising=False)
    spec = Path(__file__).resolve().parent.parent / "environments" / "dev-cpu-mac.yaml"
    out = tmp_path / "team"
    code, stdout, err = run(capsys, "lock", str(spec), "--format", "uv", "-o", str(out), "--json")
    assert code == 0, stdout + err
    files = {Path(f["path"]).name: f for f in json.loads(stdout)["files"]}
    assert files["pyproject.toml"]["format"] == "uv"
    doc = tomlkit.parse((out / "pyproject.toml").read_text()).unwrap()
    linux = "sys_platform == 'linux' and platform_machine == 'x86_64'"
    mac = "sys_platform == 'darwin' and platform_machine == 'arm64'"
    deps = doc["project"]["dependencies"]
    assert any(d.startswith("torch==") and "+cpu" in d and linux in d for d in deps)
    assert any(d.startswith("torch==") and "+" not in d.split(";")[0] and mac in d for d in deps)
    assert doc["tool"]["uv"]["sources"]["torch"] == {"index": "pytorch-cpu", "marker": linux}
    assert doc["tool"]["uv"]["index"] == [
        {"name": "pytorch-cpu", "url": "https://download.pytorch.org/whl/cpu", "explicit": True}
    ]
    assert not (out / "linux-x86_64").exists()  # one pyproject, not one per platform


SPEC = """\
name: mixed
python: "3.11"
packages: {torch: ">=2.0"}
targets:
  - {name: linux-ci, platform: linux-x86_64, no_gpu: true}
  - {name: macbooks, platform: macos-arm64}
"""


@pytest.mark.slow
def test_team_pylock_spans_platforms_with_markers(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from packaging.pylock import Pylock

    spec = tmp_path / "mixed.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "mixed"
    _lock(capsys, index, str(spec), "--format", "pylock", "-o", str(out))
    assert sorted(p.name for p in out.iterdir()) == [
        ".gpuresolve-manifest.json",
        "pylock.toml",
        "report.md",
    ]
    text = (out / "pylock.toml").read_text()
    lock = Pylock.from_dict(tomlkit.parse(text).unwrap())
    linux = 'sys_platform == "linux" and platform_machine == "x86_64"'
    mac = 'sys_platform == "darwin" and platform_machine == "arm64"'
    got = {(p.name, str(p.version), str(p.marker) if p.marker else None) for p in lock.packages}
    assert got == {
        ("torch", "2.8.0+cpu", linux),
        ("torch", "2.8.0", mac),
        ("cuda-bindings", BINDINGS, linux),
        ("filelock", FILELOCK, None),  # the same wheel on both platforms: no marker
    }
    assert len(lock.environments or []) == 2
    code, stdout, err = run(capsys, "lock", str(spec), "--check", "-o", str(out))
    assert code == 0, stdout + err
    # This Linux machine installs its own platform's packages from the one file.
    if f"{sys.version_info.major}.{sys.version_info.minor}" != "3.11":
        return
    uv = find_uv()
    venv = tmp_path / "venv"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, "--no-python-downloads", str(venv)],
        check=True,
        env=_uv_env(),
        timeout=120,
    )
    python = str(venv / "bin" / "python")
    install = [uv, "pip", "install", "--python", python, "-r", str(out / "pylock.toml")]
    proc = subprocess.run(
        install, capture_output=True, text=True, env=_uv_env(), timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", python],
        capture_output=True,
        text=True,
        env=_uv_env(),
        timeout=60,
        check=True,
    ).stdout.split()
    assert "torch==2.8.0+cpu" in freeze and f"cuda-bindings=={BINDINGS}" in freeze


# --- reading back what the writer wrote (verify --lock, install --lock) --------------------------


@pytest.mark.slow
def test_pylock_for_a_linux_target_reads_back_as_the_requirements_pins(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from resolver.readers import lockfile
    from resolver.readers.pins import FORMAT_PYLOCK

    out = tmp_path / "arm"
    _lock(
        capsys,
        index,
        *("--platform", "linux-aarch64", "--python", "3.12", "--no-gpu", "--hashes"),
        *("--format", "requirements", "--format", "pylock", "-o", str(out)),
    )
    pylock = lockfile.read(out / "pylock.toml", platform="linux-aarch64")
    req = lockfile.read(out / "requirements.txt", platform="linux-aarch64")
    assert pylock.format == FORMAT_PYLOCK
    got = sorted((p.name, p.version, p.variant, p.hashes) for p in pylock.pins)
    assert got == sorted((p.name, p.version, p.variant, p.hashes) for p in req.pins)
    torch = pylock.get("torch")
    assert torch is not None and torch.text == "torch==2.12.0+cpu"
    assert pylock.index_urls[0] == f"{index.url}/whl/cpu"
    assert all(p.hashes and p.marker is None for p in pylock.pins)


@pytest.mark.slow
def test_team_pylock_reads_back_per_platform(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from resolver.core.errors import UserError
    from resolver.readers import lockfile

    spec = tmp_path / "mixed.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "mixed"
    _lock(capsys, index, str(spec), "--format", "pylock", "-o", str(out))
    path = out / "pylock.toml"
    linux = lockfile.read(path, platform="linux-x86_64")
    assert sorted((p.name, p.version, p.variant) for p in linux.pins) == [
        ("cuda-bindings", BINDINGS, None),
        ("filelock", FILELOCK, None),
        ("torch", "2.8.0", "cpu"),  # the local version says so
    ]
    mac = lockfile.read(path, platform="macos-arm64")
    assert sorted((p.name, p.version, p.variant) for p in mac.pins) == [
        ("filelock", FILELOCK, None),
        ("torch", "2.8.0", "cpu"),  # no local version: the CPU index it comes from says so
    ]
    mac_torch = mac.get("torch")
    assert mac_torch is not None and mac_torch.marker is not None and "darwin" in mac_torch.marker
    with pytest.raises(UserError, match="nothing locked for windows-x86_64"):
        lockfile.read(path, platform="windows-x86_64")


def test_every_format_of_the_vocabulary_names_its_files() -> None:
    """One registry of formats: every word of LockFormat is a format, in the vocabulary's order,
    and each file is named by the format that writes it."""
    from resolver.core.vocab import LockFormat, words
    from resolver.writers import lockformats

    assert lockformats.names() == words(LockFormat)
    assert lockformats.owner("requirements.txt") == "requirements"  # not the Dockerfile's
    every = lockformats.file_names(["all"])
    assert every == tuple(n for f in lockformats.FORMATS for n in f.files)
    assert len(set(every)) == len(every)  # a file is one format's
