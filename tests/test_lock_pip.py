"""requirements.txt against pip itself: pip parses it and resolves it, on a local PEP 503 index of
stub wheels named like PyTorch's, to exactly the pinned set; ``--hashes`` runs pip's resolver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lock_support import FILELOCK, lock_catalog, pip_report, stub_index
from pytorch_index import IndexServer, closed_port, serve
from target_support import written

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.platforms import pip_platforms
from resolver.core.versions import parse_cc
from resolver.flows.lock import prepare
from resolver.solve import Target, TargetGpu, solve
from resolver.solve.inputs import build_request
from resolver.writers import outputs
from resolver.writers.lockfiles import LockOptions, render_files

REQ = build_request(torch=None, with_=["torchvision"], cuda=None, policy="compat")


@pytest.fixture
def cat(synth_raw: dict[str, Any]) -> Catalog:
    return lock_catalog(synth_raw)


@pytest.fixture
def index(cat: Catalog) -> Iterator[IndexServer]:
    with serve(stub_index(cat)) as server:
        yield server


@pytest.fixture(autouse=True)
def _pip_isolated(scrubbed_tools: Path) -> None:
    """pip and uv started by these tests see none of this machine's configuration."""


def _target(platform: str, ccs: tuple[str, ...] = (), driver: str | None = None) -> Target:
    gpus = tuple(TargetGpu(parse_cc(c)) for c in ccs)
    driver_os = "windows" if platform.startswith("windows") else "linux"
    return written(platform, "3.11", driver, driver_os, gpus, nvidia=bool(gpus))


TARGETS = [
    (_target("linux-x86_64", ("6.1",), "580.65.06"), "2.8.0+cu126", "0.23.0+cu126"),
    (_target("linux-x86_64", ("8.6",), "580.65.06"), "2.12.0+cu130", "0.27.0+cu130"),
    (_target("linux-x86_64"), "2.12.0+cpu", "0.27.0+cpu"),
    (_target("windows-x86_64", ("8.6",), "566.36"), "2.1.0+cu118", "0.16.0+cu118"),
    (_target("macos-arm64"), "2.8.0", "0.23.0"),
]


def _platform_args(t: Target) -> list[str]:
    return [arg for tag in pip_platforms(t.platform) for arg in ("--platform", tag)]


@pytest.mark.slow
@pytest.mark.parametrize(("t", "torch", "torchvision"), TARGETS)
def test_pip_resolves_requirements_to_the_pinned_set(
    cat: Catalog, index: IndexServer, tmp_path: Path, t: Target, torch: str, torchvision: str
) -> None:
    options = LockOptions(pytorch_index=f"{index.url}/whl")
    files = render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)
    outputs.write_files(tmp_path, files)
    # The index the file names is the local one (the mirror option), the only index pip has;
    # for macOS the file adds it as an extra to the default index, here the local /simple.
    default = f"{index.url}/simple" if t.platform.name == "macos-arm64" else None
    got = pip_report(tmp_path / "requirements.txt", _platform_args(t), "3.11", default)
    assert got == {"torch": torch, "torchvision": torchvision, "filelock": FILELOCK}
    if t.platform.name != "macos-arm64":
        variant = torch.partition("+")[2]
        assert not any(p.startswith("/simple/") for p in index.paths())
        assert f"/whl/{variant}/torch/" in index.paths()


@pytest.mark.slow
def test_hashes_pin_the_whole_closure(cat: Catalog, index: IndexServer, tmp_path: Path) -> None:
    t = _target("linux-x86_64", ("6.1",), "580.65.06")
    options = LockOptions(pytorch_index=f"{index.url}/whl", hashes=True)
    files = render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)
    text = files["requirements.txt"]
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines[0] == f"--index-url {index.url}/whl/cu126"
    pinned = [ln.removesuffix(" \\") for ln in lines[1::2]]
    assert pinned == [f"filelock=={FILELOCK}", "torch==2.8.0+cu126", "torchvision==0.23.0+cu126"]
    assert all(ln.startswith("    --hash=sha256:") for ln in lines[2::2])
    # pip checks every hash: the file installs as written, and a changed hash is refused.
    req = tmp_path / "requirements.txt"
    req.write_text(text)
    got = pip_report(req, _platform_args(t), "3.11")
    assert got == {"torch": "2.8.0+cu126", "torchvision": "0.23.0+cu126", "filelock": FILELOCK}
    h = lines[4].split(":", 1)[1]
    req.write_text(text.replace(h, h[:-1] + ("0" if h[-1] != "0" else "1")))
    with pytest.raises(AssertionError, match=r"(?i)hash"):
        pip_report(req, _platform_args(t), "3.11")
    # The same inputs resolve to the same bytes.
    assert render_files(cat, prepare(cat, solve(cat, t, REQ), options), options) == files


def test_hashes_for_another_platform(cat: Catalog, index: IndexServer) -> None:
    """pip resolves for the target's tags, not this machine's: Windows wheels for Windows."""
    t = _target("windows-x86_64", ("8.6",), "566.36")
    options = LockOptions(pytorch_index=f"{index.url}/whl", hashes=True)
    text = render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)["requirements.txt"]
    assert "torch==2.1.0+cu118 \\" in text
    assert any("win_amd64" in p for p in index.paths())
    assert not any("manylinux" in p for p in index.paths())


@pytest.mark.slow
def test_unreachable_index_is_one_clear_error(cat: Catalog) -> None:
    t = _target("linux-x86_64")
    options = LockOptions(pytorch_index=f"http://127.0.0.1:{closed_port()}/whl", hashes=True)
    with pytest.raises(
        UserError, match=r"cannot reach http://127\.0\.0\.1:\d+/whl/\w+ \(conn"
    ) as exc:
        render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)
    assert "\n" not in str(exc.value)
    assert str(exc.value).startswith("requirements.txt (--format requirements): ")


# --- a lock depends on its inputs alone: uv gets no UV_* setting of the user's -------------


def _lock(cat: Catalog, index: IndexServer, platform: str) -> dict[str, str]:
    gpus = (TargetGpu(parse_cc("8.6")),) if platform.startswith("linux") else ()
    driver = "580.65.06" if gpus else None
    t = written(platform, "3.11", driver, "linux", gpus, nvidia=bool(gpus))
    options = LockOptions(
        formats=frozenset({"requirements", "pylock"}),
        pytorch_index=f"{index.url}/whl",
        hashes=True,
        default_index=f"{index.url}/simple" if platform == "macos-arm64" else None,
    )
    return render_files(cat, prepare(cat, solve(cat, t, REQ), options), options)


def _settings(tmp_path: Path) -> dict[str, str]:
    """UV_* values that would each change or break the closure were uv given them."""
    nowhere = f"http://127.0.0.1:{closed_port()}/simple"
    config = tmp_path / "uv.toml"
    config.write_text(f'index-url = "{nowhere}"\nexclude-newer = "2001-01-01T00:00:00Z"\n')
    return {
        "UV_DEFAULT_INDEX": nowhere,
        "UV_INDEX_URL": nowhere,
        "UV_INDEX": nowhere,
        "UV_EXTRA_INDEX_URL": nowhere,
        "UV_EXCLUDE_NEWER": "2001-01-01T00:00:00Z",
        "UV_CONFIG_FILE": str(config),
        "UV_OFFLINE": "1",
        "UV_NO_CONFIG": "",
        "UV_FIND_LINKS": str(tmp_path),
        "UV_INDEX_STRATEGY": "first-index",
        "UV_PYTHON": "3.8",
    }


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["linux-x86_64", "macos-arm64"])
def test_uv_settings_leave_the_lock_byte_identical(
    cat: Catalog,
    index: IndexServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    platform: str,
) -> None:
    baseline = _lock(cat, index, platform)
    for var, value in _settings(tmp_path).items():
        with monkeypatch.context() as m:
            m.setenv(var, value)
            assert _lock(cat, index, platform) == baseline, var
    with monkeypatch.context() as m:  # all at once, with a user's uv.toml where uv looks for it
        for var, value in _settings(tmp_path).items():
            m.setenv(var, value)
        (tmp_path / "xdg" / "uv").mkdir(parents=True)
        (tmp_path / "xdg" / "uv" / "uv.toml").write_text(
            (tmp_path / "uv.toml").read_text(encoding="utf-8")
        )
        m.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        assert _lock(cat, index, platform) == baseline
