"""conda-lock.yml from a real solve (py-rattler, in a child process) against a local channel made
at test time, and conda-lock's own parser on every conda file (where conda-lock is installed)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conda_channel import forge_packages, make_channel
from lock_support import FILELOCK, lock_catalog, stub_index
from pytorch_index import IndexServer, closed_port, serve
from target_support import written

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.versions import parse_cc
from resolver.flows.lock import prepare
from resolver.readers import lockfile
from resolver.solve import Target, TargetGpu, solve
from resolver.solve.inputs import build_request
from resolver.writers import outputs
from resolver.writers.closure import conda_solve
from resolver.writers.lockfiles import LockOptions, render_files

needs_rattler = pytest.mark.skipif(
    importlib.util.find_spec("rattler") is None,
    reason="py-rattler is not installed (pip install 'gpuresolve[conda]')",
)
# conda-lock is large (about 60 packages, 110 MB): not in the test extra. Its parser checks run
# where it is installed (pip install conda-lock).
needs_conda_lock = pytest.mark.skipif(
    importlib.util.find_spec("conda_lock") is None,
    reason="conda-lock is not installed: its own parser is not run on the files",
)

REQ = build_request(torch=None, with_=["torchvision"], cuda=None, policy="compat")
LINUX = {"__archspec": "1 x86_64", "__glibc": "2.28", "__linux": "5.10", "__unix": "0"}


@pytest.fixture
def cat(synth_raw: dict[str, Any]) -> Catalog:
    return lock_catalog(synth_raw)


@pytest.fixture
def channel(tmp_path: Path) -> str:
    return make_channel(tmp_path / "channel", forge_packages())


def _target(platform: str, ccs: tuple[str, ...] = (), driver: str | None = None) -> Target:
    gpus = tuple(TargetGpu(parse_cc(c)) for c in ccs)
    driver_os = "windows" if platform.startswith("windows") else "linux"
    return written(platform, "3.12", driver, driver_os, gpus, nvidia=bool(gpus))


def _builds(records: list[conda_solve.CondaRecord]) -> dict[str, str]:
    return {r.name: r.build for r in records}


# --- the solve honours the virtual packages ------------------------------------------------------


@needs_rattler
@pytest.mark.parametrize(
    ("virtual", "expected"),
    [
        ({"__cuda": "12.4"}, "cuda129_generic_py312_h0_202"),  # 12.x never gets CUDA 13
        ({"__cuda": "12.9"}, "cuda129_generic_py312_h0_202"),
        ({"__cuda": "13.0"}, "cuda130_generic_py312_h0_202"),
        ({"__cuda": "13.0", "__glibc": "2.17"}, "cuda129_generic_py312_h0_202"),  # cu130: 2.28
        ({}, "cpu_generic_py312_h0_2"),  # no __cuda: the CPU build
    ],
)
def test_solve_honours_virtual_packages(
    channel: str, virtual: dict[str, str], expected: str
) -> None:
    """Unpinned on purpose: the solver alone must keep a 12.x driver off the CUDA 13 build."""
    records = conda_solve.solve([channel], ["python=3.12", "pytorch"], "linux-64", LINUX | virtual)
    builds = _builds(records)
    assert builds["pytorch"] == expected
    if expected.startswith("cuda12"):
        assert {r.version for r in records if r.name == "cuda-version"} == {"12.9"}


@needs_rattler
def test_pins_hold_even_where_13_would_be_allowed(channel: str) -> None:
    records = conda_solve.solve(
        [channel],
        ["python=3.12", "pytorch=2.12.0=cuda129*", "cuda-version=12.9"],
        "linux-64",
        LINUX | {"__cuda": "13.0"},
    )
    assert _builds(records)["pytorch"].startswith("cuda129_")


@needs_rattler
def test_unsolvable_is_one_line(channel: str) -> None:
    with pytest.raises(UserError, match="no conda solution for the target") as exc:
        conda_solve.solve([channel], ["pytorch=2.12.0=cuda129*"], "linux-64", LINUX)
    assert "\n" not in str(exc.value)


@needs_rattler
def test_unreachable_channel_is_one_line() -> None:
    with pytest.raises(UserError, match="cannot read the conda channel") as exc:
        conda_solve.solve(
            [f"http://127.0.0.1:{closed_port()}/forge"], ["pytorch"], "linux-64", LINUX
        )
    assert "\n" not in str(exc.value) and "--channel" in str(exc.value)


def test_missing_solver_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conda_solve, "rattler_available", lambda: False)
    with pytest.raises(UserError, match=r"pip install 'gpuresolve\[conda\]'"):
        conda_solve.solve(["conda-forge"], ["pytorch"], "linux-64", LINUX)


# --- conda-lock.yml ------------------------------------------------------------------------------


def _lock(cat: Catalog, t: Target, tmp_path: Path, **opts: Any) -> dict[str, str]:
    options = LockOptions(formats=frozenset({"conda-lock"}), **opts)
    files = render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)
    outputs.write_files(tmp_path / "out", files)
    return files


@needs_rattler
def test_conda_forge_lock(cat: Catalog, channel: str, tmp_path: Path) -> None:
    t = _target("linux-x86_64", ("8.6",), "575.51.03")  # a 12.x driver
    files = _lock(cat, t, tmp_path, conda_source="conda-forge", channel=channel)
    assert list(files) == ["environment.yml", "virtual-packages.yml", "conda-lock.yml"]
    doc = yaml.safe_load(files["conda-lock.yml"])
    assert doc["version"] == 1
    assert doc["metadata"]["platforms"] == ["linux-64"]
    assert doc["metadata"]["channels"] == [{"url": channel, "used_env_vars": []}]
    assert doc["metadata"]["sources"] == ["environment.yml"]
    pkgs = {p["name"]: p for p in doc["package"]}
    assert set(pkgs) == {"cuda-version", "libtorch", "python", "pytorch", "torchvision"}
    assert pkgs["pytorch"]["url"].endswith(
        "/linux-64/pytorch-2.12.0-cuda129_generic_py312_h0_202.tar.bz2"
    )
    assert pkgs["cuda-version"]["version"] == "12.9"
    assert pkgs["pytorch"]["dependencies"]["__cuda"] == ""
    assert pkgs["pytorch"]["dependencies"]["python"] == ">=3.12,<3.13.0a0"
    for p in doc["package"]:
        assert p["manager"] == "conda" and p["platform"] == "linux-64"
        assert len(p["hash"]["md5"]) == 32 and len(p["hash"]["sha256"]) == 64
    assert not any("cuda130" in p["url"] for p in doc["package"])
    pins = lockfile.read(tmp_path / "out" / "conda-lock.yml", "linux-x86_64")
    torch = pins.get("torch")
    assert torch is not None and (torch.version, torch.variant) == ("2.12.0", "cu129")
    # The same inputs, the same bytes.
    assert _lock(cat, t, tmp_path, conda_source="conda-forge", channel=channel) == files


@needs_rattler
@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (_target("linux-x86_64", ("8.6",), "580.65.06"), "cuda130_generic_py312_h0_202"),
        (_target("linux-x86_64"), "cpu_generic_py312_h0_2"),
        (_target("windows-x86_64", ("8.6",), "576.02"), "cuda128_generic_py312_h0_202"),
        (_target("macos-arm64"), "cpu_generic_py312_h0_2"),
    ],
)
def test_conda_forge_lock_per_platform(
    cat: Catalog, channel: str, tmp_path: Path, t: Target, expected: str
) -> None:
    files = _lock(cat, t, tmp_path, conda_source="conda-forge", channel=channel)
    pkgs = {p["name"]: p for p in yaml.safe_load(files["conda-lock.yml"])["package"]}
    assert pkgs["pytorch"]["url"].endswith(f"-{expected}.tar.bz2")


@pytest.fixture
def index(cat: Catalog, scrubbed_tools: Path) -> Iterator[IndexServer]:
    with serve(stub_index(cat)) as server:
        yield server


@pytest.mark.slow
@needs_rattler
def test_pip_flavour_lock(cat: Catalog, channel: str, index: IndexServer, tmp_path: Path) -> None:
    """conda gives python and pip; the pip section is the closure pip resolved, with sha256."""
    t = _target("linux-x86_64", ("6.1",), "580.65.06")
    files = _lock(cat, t, tmp_path, channel=channel, pytorch_index=f"{index.url}/whl")
    doc = yaml.safe_load(files["conda-lock.yml"])
    conda = {p["name"]: p for p in doc["package"] if p["manager"] == "conda"}
    pip = {p["name"]: p for p in doc["package"] if p["manager"] == "pip"}
    assert set(conda) == {"pip", "python"} and conda["python"]["version"] == "3.12.11"
    assert {n: p["version"] for n, p in pip.items()} == {
        "filelock": FILELOCK,
        "torch": "2.8.0+cu126",
        "torchvision": "0.23.0+cu126",
    }
    assert pip["torch"]["url"].startswith(f"{index.url}/files/torch-2.8.0")
    assert set(pip["torch"]["hash"]) == {"sha256"}
    assert pip["torchvision"]["dependencies"] == {"torch": "==2.8.0+cu126"}
    env = yaml.safe_load(files["environment.yml"])
    assert env["pip-repositories"] == [f"{index.url}/whl/cu126"]


# --- conda-lock's own parser ---------------------------------------------------------------------


def _lock_for_conda_lock(
    cat: Catalog, channel: str, index: IndexServer, tmp_path: Path, source: str
) -> tuple[Path, Path]:
    """A 12.x-driver sm_86 lock written to ``out/``, and conda-lock's name map (offline: empty)."""
    t = _target("linux-x86_64", ("8.6",), "575.51.03")
    _lock(cat, t, tmp_path, conda_source=source, channel=channel, pytorch_index=f"{index.url}/whl")
    mapping = tmp_path / "pypi-to-conda.json"
    mapping.write_text("{}")
    return tmp_path / "out", mapping


@pytest.mark.slow
@needs_rattler
@needs_conda_lock
@pytest.mark.parametrize("source", ["conda-forge", "pip"])
def test_conda_lock_parses_every_file(
    cat: Catalog,
    channel: str,
    index: IndexServer,
    tmp_path: Path,
    source: str,
    child_env: Callable[..., dict[str, str]],
) -> None:
    from conda_lock.lockfile import parse_conda_lock_file
    from conda_lock.src_parser.environment_yaml import parse_environment_file
    from conda_lock.virtual_package import virtual_package_repo_from_specification

    out, mapping = _lock_for_conda_lock(cat, channel, index, tmp_path, source)
    spec = parse_environment_file(out / "environment.yml", ["linux-64"], mapping_url=str(mapping))
    deps = {d.name: d for d in spec.dependencies["linux-64"]}
    if source == "conda-forge":
        assert (deps["pytorch"].version, deps["pytorch"].build) == ("2.12.0", "cuda129*")
        assert deps["cuda-version"].version == "12.9.*"
    else:
        assert deps["torch"].manager == "pip" and deps["torch"].version == "==2.8.0+cu128"
        assert spec.pip_repositories and not spec.allow_pypi_requests
    repo = virtual_package_repo_from_specification(out / "virtual-packages.yml")
    shutil.rmtree(repo.base_path)  # conda-lock's fake channel, removed only when the process exits
    cuda = [p for p in repo.all_repodata["linux-64"]["packages"].values() if p["name"] == "__cuda"]
    assert [p["version"] for p in cuda] == ["12.9"]
    lock = parse_conda_lock_file(out / "conda-lock.yml")
    names = {p.name for p in lock.package}
    assert ("pytorch" in names) == (source == "conda-forge")
    assert lock.metadata.platforms == ["linux-64"]
    # `conda-lock render` (no solver needed) turns it into an explicit file conda installs from.
    render = ["render", "-k", "explicit", "-p", "linux-64"]
    render += ["--filename-template", "explicit-{platform}.lock", str(out / "conda-lock.yml")]
    proc = subprocess.run(
        [sys.executable, "-m", "conda_lock", *render],
        cwd=tmp_path,
        env=child_env(HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    explicit = (tmp_path / "explicit-linux-64.lock").read_text()
    assert "@EXPLICIT" in explicit
    assert ("cuda129_generic_py312" in explicit) == (source == "conda-forge")


def _conda_lock_hashes(out: Path, mapping: Path) -> dict[str, list[str]]:
    """The content hashes conda-lock itself computes for the files gpuresolve wrote."""
    from conda_lock.content_hash import backwards_compatible_content_hashes
    from conda_lock.src_parser import make_lock_spec
    from conda_lock.virtual_package import virtual_package_repo_from_specification

    spec = make_lock_spec(src_files=[out / "environment.yml"], mapping_url=str(mapping))
    repo = virtual_package_repo_from_specification(out / "virtual-packages.yml")
    try:
        return {
            p: sorted(backwards_compatible_content_hashes(spec, repo, p)) for p in spec.platforms
        }
    finally:
        shutil.rmtree(repo.base_path, ignore_errors=True)  # conda-lock's own, removed at exit


@pytest.mark.slow
@needs_rattler
@needs_conda_lock
@pytest.mark.parametrize("source", ["conda-forge", "pip"])
def test_content_hash_is_conda_locks(
    cat: Catalog, channel: str, index: IndexServer, tmp_path: Path, source: str
) -> None:
    """conda-lock's `--check-input-hash` accepts the hash: it skips the solve and keeps the file."""
    out, mapping = _lock_for_conda_lock(cat, channel, index, tmp_path, source)
    written = yaml.safe_load((out / "conda-lock.yml").read_text())["metadata"]["content_hash"]
    expected = _conda_lock_hashes(out, mapping)
    assert set(written) == set(expected)
    for platform, value in written.items():
        assert value in expected[platform]
    # conda-lock's own check, as a user runs it. Its conda is a guard that answers `--version`
    # (conda-lock asks first) and otherwise records being run and fails: a hash conda-lock
    # accepts never reaches it, and the file stays as it was.
    guard = tmp_path / "solver-must-not-run"
    ran = tmp_path / "solver-ran"
    guard.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && echo "conda 0" && exit 0\n'
        f'echo "$@" >> "{ran}"\nexit 3\n'
    )
    guard.chmod(0o755)
    before = (out / "conda-lock.yml").read_bytes()
    assert _check_input_hash(out, mapping, guard, tmp_path) == 0
    assert (out / "conda-lock.yml").read_bytes() == before
    assert not ran.exists()
    # and the guard does catch a re-solve: a hash conda-lock does not accept reaches it
    doc = before.decode().replace(written["linux-64"], "f" * 64)
    (out / "conda-lock.yml").write_text(doc)
    assert _check_input_hash(out, mapping, guard, tmp_path) != 0
    assert ran.exists()


def _check_input_hash(out: Path, mapping: Path, solver: Path, home: Path) -> int:
    """`conda-lock lock --check-input-hash` on gpuresolve's files; its exit status."""
    argv = ["lock", "--check-input-hash", "-f", "environment.yml", "--lockfile", "conda-lock.yml"]
    argv += ["--virtual-package-spec", "virtual-packages.yml", "--conda", str(solver)]
    argv += ["--pypi_to_conda_lookup_file", str(mapping)]
    proc = subprocess.run(
        [sys.executable, "-m", "conda_lock", *argv],
        cwd=out,
        env={**os.environ, "HOME": str(home), "TMPDIR": str(home), "RUNNER_TEMP": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.returncode
