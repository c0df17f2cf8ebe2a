"""The shipped `.pre-commit-hooks.yaml` under the real pre-commit: `pre-commit try-repo` installs
the hook from a temporary git repository holding this checkout's package, with pip reading only a
local wheelhouse (every distribution the build and the package need, written from this
environment's installed files), so nothing reaches the network. A project's temporary git
repository holds top-level locks (whose check reads no index): a current lock passes, a lock
edited by hand and a spec changed without re-locking fail with the diff.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
HOOK = "gpuresolve-lock-check"
MACHINE: tuple[str, ...] = ("--gpu", "RTX 4090", "--driver", "550.54.15", "--python", "3.12")
MACHINE += ("--platform", "linux-x86_64")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("pre_commit") is None, reason="pre-commit is not installed"
    ),
]


# --- a wheelhouse from the installed distributions ---------------------------------------------


def _needed(roots: list[str]) -> list[md.Distribution]:
    """The installed distributions ``roots`` need, their requirements followed (no extras)."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        req = Requirement(todo.pop())
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen[name] = md.distribution(str(name))
        todo.extend(seen[name].requires or [])
    return list(seen.values())


def _wheel_of(dist: md.Distribution, out: Path) -> None:
    """A wheel of an installed distribution, from its RECORD: its files, its scripts that are no
    entry points (uv's binary) under ``.data/scripts``, a fresh RECORD."""
    name = str(canonicalize_name(dist.metadata["Name"])).replace("-", "_")
    version = dist.version
    info = next(p for p in dist.files or [] if p.parts[0].endswith(".dist-info"))
    tag = next(
        ln.split(":", 1)[1].strip()
        for ln in (dist.read_text("WHEEL") or "").splitlines()
        if ln.startswith("Tag:")
    )
    scripts = {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
    records: list[tuple[str, str, int]] = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in dist.files or []:
            where = Path(str(dist.locate_file(file)))
            if "__pycache__" in file.parts or file.name in ("RECORD", "INSTALLER", "REQUESTED"):
                continue
            if file.parts[0] == "..":  # outside site-packages: a script
                if file.name in scripts or not where.is_file():
                    continue
                arcname = f"{name}-{version}.data/scripts/{file.name}"
            else:
                arcname = file.as_posix()
            if not where.is_file():
                continue
            body = where.read_bytes()
            wheel.writestr(arcname, body)
            digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=")
            records.append((arcname, f"sha256={digest.decode()}", len(body)))
        record = f"{info.parts[0]}/RECORD"
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*records, (record, "", "")])
        wheel.writestr(record, text.getvalue())
    (out / f"{name}-{version}-{tag}.whl").write_bytes(buffer.getvalue())


def _wheelhouse(folder: Path) -> Path:
    folder.mkdir()
    import tomlkit

    pyproject = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8")).unwrap()
    roots = ["gpuresolve", *pyproject["build-system"]["requires"]]
    for dist in _needed(roots):
        if canonicalize_name(dist.metadata["Name"]) != "gpuresolve":  # the hook repo builds it
            _wheel_of(dist, folder)
    return folder


# --- the repositories --------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


def _repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "tests@gpuresolve.invalid")
    _git(path, "config", "user.name", "tests")
    _git(path, "config", "commit.gpgsign", "false")
    return path


def _hook_repo(path: Path) -> Path:
    """This checkout's package and hook file, committed (what `rev:` would name)."""
    repo = _repo(path)
    for name in ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, repo / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("resolver", "data"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=ignore)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "hook")
    return repo


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    base = tmp_path_factory.mktemp("precommit")
    wheels = _wheelhouse(base / "wheels")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "UV_"))}
    env.update(
        HOME=str(base / "home"),
        PRE_COMMIT_HOME=str(base / "pre-commit"),  # the hook's environment, built once
        XDG_CACHE_HOME=str(base / "cache"),
        XDG_DATA_HOME=str(base / "data"),
        XDG_CONFIG_HOME=str(base / "config"),
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",  # the wheelhouse alone: no index, no network
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        VIRTUALENV_NO_PERIODIC_UPDATE="1",
        GIT_CONFIG_NOSYSTEM="1",
    )
    for var in ("GPURESOLVE_DATA_DIR", "GPURESOLVE_CACHE_DIR", "GPURESOLVE_CONFIG"):
        env.pop(var, None)
    yield _hook_repo(base / "hook"), env


def _gpuresolve(project: Path, env: dict[str, str], *args: str) -> None:
    """This checkout's gpuresolve, as the hook's is (the shipped database)."""
    proc = subprocess.run(
        [sys.executable, "-m", "resolver", *args],
        cwd=project,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _try_repo(hook: Path, project: Path, env: dict[str, str]) -> tuple[int, str]:
    """`pre-commit try-repo HOOK gpuresolve-lock-check` on the staged files, as a commit would."""
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook), HOOK, "--verbose"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_current_lock_passes_and_an_edited_one_fails_with_the_diff(
    tmp_path: Path, setting: tuple[Path, dict[str, str]]
) -> None:
    hook, env = setting
    project = _repo(tmp_path / "project")
    _gpuresolve(project, env, "lock", "--top-level", *MACHINE, "-o", "locks")
    (project / "requirements.txt").write_text("numpy\n", encoding="utf-8")  # the project's own
    _git(project, "add", "-A")
    code, out = _try_repo(hook, project, env)
    assert code == 0, out
    assert re.search(r"gpuresolve lock --check\.+Passed", out), out
    _git(project, "commit", "-q", "-m", "lock")

    lock = project / "locks" / "requirements.txt"
    lock.write_text(lock.read_text().replace("torch==2.14.1", "torch==2.14.0"), encoding="utf-8")
    _git(project, "add", "-A")
    code, out = _try_repo(hook, project, env)
    assert code == 1, out
    assert re.search(r"gpuresolve lock --check\.+Failed", out), out
    assert "-torch==2.14.0+cu126" in out and "+torch==2.14.1+cu126" in out  # the diff back
    assert "drift" in out


def test_a_spec_changed_without_locking_again_fails_with_the_diff(
    tmp_path: Path, setting: tuple[Path, dict[str, str]]
) -> None:
    hook, env = setting
    project = _repo(tmp_path / "project")
    spec = project / "environments" / "lab.yaml"
    spec.parent.mkdir()
    text = (
        "name: lab\npython: '3.12'\nlock: top-level\ntargets:\n"
        "  - {name: ws, platform: linux-x86_64, driver: '550.54.15', gpus: ['RTX 4090']}\n"
    )
    spec.write_text(text, encoding="utf-8")
    _gpuresolve(project, env, "lock", "environments/lab.yaml")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "lab")

    spec.write_text(text.replace("550.54.15", "580.95.05"), encoding="utf-8")  # a newer driver
    _git(project, "add", "-A")
    code, out = _try_repo(hook, project, env)
    assert code == 1, out
    assert "$ gpuresolve lock environments/lab.yaml --check" in out
    assert "-torch==2.14.1+cu126" in out and re.search(r"\+torch==\S+\+cu13\d", out), out
