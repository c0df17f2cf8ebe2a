"""Shared fixtures: a small synthetic database for rule tests, and the shipped one for facts."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from resolver import catalog as catalog_mod

P = ["PRIM"]

SYNTH: dict[str, Any] = {
    "sources.yaml": {
        "sources": {
            "PRIM": {"cite": "a primary source", "primary": True},
            "SEC": {"cite": "a secondary source", "primary": False},
        }
    },
    "cuda.yaml": {
        "toolkits": [
            {
                "version": "11.0",
                "min_driver": {"linux": "450.51.05", "windows": "451.48"},
                "source": P,
            },
            {
                "version": "11.8",
                "min_driver": {"linux": "520.61.05", "windows": "520.06"},
                "source": P,
            },
            {
                "version": "12.6",
                "min_driver": {"linux": "560.28.03", "windows": "560.76"},
                "source": P,
            },
            {
                "version": "12.8",
                "min_driver": {"linux": "570.26", "windows": "570.65"},
                "source": P,
            },
            {"version": "13.0", "min_driver": {"linux": "580.65.06", "windows": None}, "source": P},
        ],
        "minor_version_compat": [
            {"major": 11, "min_driver": {"linux": "450.80.02", "windows": "452.39"}, "source": P},
            {"major": 12, "min_driver": {"linux": "525.60.13", "windows": "528.33"}, "source": P},
            {"major": 13, "min_driver": {"linux": "580", "windows": "580"}, "source": P},
        ],
    },
    "gpus.yaml": {
        "architectures": [
            {"cc": cc, "name": name, "tegra": cc in ("8.7",), "source": P}
            for cc, name in [
                ("6.0", "Pascal"),
                ("6.1", "Pascal"),
                ("7.0", "Volta"),
                ("7.5", "Turing"),
                ("8.0", "Ampere"),
                ("8.6", "Ampere"),
                ("8.7", "Ampere"),
                ("8.9", "Ada"),
                ("9.0", "Hopper"),
                ("10.0", "Blackwell"),
                ("12.0", "Blackwell"),
            ]
        ],
        "gpus": [
            {"name": "Tesla V100", "cc": "7.0", "source": P},
            {"name": "NVIDIA GeForce GTX 1080 Ti", "cc": "6.1", "source": P},
            {"name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "source": P},
            {"name": "NVIDIA H100", "cc": "9.0", "source": P, "pci_ids": ["0x2330"]},
            {"name": "Jetson AGX Orin", "cc": "8.7", "source": P},
        ],
    },
    "torch.yaml": {
        "index_url": "https://download.pytorch.org/whl/{variant}",
        "updated": "2026-01-01",
        "series": [
            {
                "minor": "2.1",
                "python": {"linux-x86_64": ["3.10", "3.11"], "windows-x86_64": ["3.10", "3.11"]},
                "releases": [
                    {
                        "version": "2.1.0",
                        "torchvision": "0.16.0",
                        "torchaudio": "2.1.0",
                        "source": P,
                    }
                ],
                "variants": [
                    {
                        "name": "cpu",
                        "pypi": ["windows-x86_64"],
                        "source": P,
                        "platforms": {"linux-x86_64": {}, "windows-x86_64": {}},
                    },
                    {
                        "name": "cu118",
                        "cuda": "11.8",
                        "source": P,
                        "cudnn": {"version": "8.7.0.84", "source": P},
                        "platforms": {
                            "linux-x86_64": {
                                "sass": ["6.0", "7.0", "8.0", "8.6", "9.0"],
                                "ptx": ["9.0"],
                                "source": P,
                            },
                            "windows-x86_64": {
                                "sass": ["6.0", "7.0", "8.0", "8.6", "9.0"],
                                "ptx": [],
                                "source": P,
                            },
                        },
                    },
                ],
            },
            {
                "minor": "2.8",
                "python": {
                    "linux-x86_64": ["3.10", "3.11", "3.12"],
                    "windows-x86_64": ["3.10", "3.11", "3.12"],
                },
                "releases": [
                    {
                        "version": "2.8.0",
                        "torchvision": "0.23.0",
                        "torchaudio": "2.8.0",
                        "source": P,
                    }
                ],
                "variants": [
                    {
                        "name": "cpu",
                        "pypi": ["windows-x86_64"],
                        "source": P,
                        "platforms": {"linux-x86_64": {}, "windows-x86_64": {}},
                    },
                    {
                        "name": "cu126",
                        "cuda": "12.6",
                        "source": P,
                        "cudnn": {"version": "9.10.2.21", "source": P},
                        "platforms": {
                            "linux-x86_64": {
                                "sass": ["6.0", "7.0", "7.5", "8.0", "8.6", "9.0"],
                                "ptx": [],
                                "source": P,
                            },
                            "windows-x86_64": {
                                "sass": ["6.0", "7.0", "7.5", "8.0", "8.6", "9.0"],
                                "ptx": [],
                                "source": ["SEC"],
                                "confirmed": False,
                            },
                        },
                    },
                    {
                        "name": "cu128",
                        "cuda": "12.8",
                        "pypi": ["linux-x86_64"],
                        "source": P,
                        "cudnn": {"version": "9.10.2.21", "source": P},
                        "platforms": {
                            "linux-x86_64": {
                                "sass": ["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
                                "ptx": [],
                                "source": P,
                            }
                        },
                    },
                ],
            },
            {
                "minor": "2.12",
                "python": {"linux-x86_64": ["3.11", "3.12"]},
                "releases": [
                    {"version": "2.12.0", "torchvision": "0.27.0", "torchaudio": None, "source": P}
                ],
                "variants": [
                    {"name": "cpu", "source": P, "platforms": {"linux-x86_64": {}}},
                    {
                        "name": "cu126",
                        "cuda": "12.6",
                        "source": P,
                        "platforms": {
                            "linux-x86_64": {
                                "sass": ["6.0", "7.0", "7.5", "8.0", "8.6", "9.0"],
                                "ptx": [],
                                "source": ["SEC"],
                                "confirmed": False,
                            }
                        },
                    },
                    {
                        "name": "cu130",
                        "cuda": "13.0",
                        "pypi": ["linux-x86_64"],
                        "source": P,
                        "platforms": {
                            "linux-x86_64": {
                                "sass": ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
                                "ptx": [],
                                "source": P,
                            }
                        },
                    },
                ],
            },
        ],
    },
}


@pytest.fixture
def synth_raw() -> dict[str, Any]:
    return copy.deepcopy(SYNTH)


@pytest.fixture
def synth(synth_raw: dict[str, Any]) -> catalog_mod.Catalog:
    return catalog_mod.from_raw(synth_raw)


@pytest.fixture(scope="session")
def shipped() -> catalog_mod.Catalog:
    return catalog_mod.load(catalog_mod.shipped_data_dir())


# --- child tools (pip, uv) from a scrubbed environment ---------------------------------------
# A developer's machine has its own pip configuration (extra indexes, find-links) and maybe
# PIP_*/UV_* settings: none of it may reach a pip or uv that a test starts, directly or through
# gpuresolve, or results depend on the machine: every test starts with os.environ scrubbed
# (`_no_tool_settings`), and a test's own subprocess calls pass `env=scrubbed_env(...)` (or the
# `child_env` fixture).
TOOL_PREFIXES = ("PIP_", "UV_")
# The environment the suite was started with: only for a test that looks up, on purpose and
# saying so, what this machine offers (local wheels), and then passes it on explicitly.
STARTING_ENV = dict(os.environ)


def scrubbed_env(environ: Mapping[str, str] | None = None, /, **extra: str) -> dict[str, str]:
    """``environ`` (default: os.environ) without any PIP_*/UV_* variable, with pip reading no
    configuration file (PIP_CONFIG_FILE is the null device) and uv none either, plus ``extra``."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if not k.upper().startswith(TOOL_PREFIXES)}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["UV_NO_CONFIG"] = "1"
    env.update(extra)
    return env


def default_action(sig: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving ``sig`` its default action in the child before it starts, for a
    test that sends (or raises) that signal in the child. A suite started with the signal
    ignored (``trap '' INT``, or ``&`` from a shell without job control) passes that on through
    fork and exec, and a Python started so installs no KeyboardInterrupt handler: the signal
    would do nothing and the test would time out."""
    import signal

    def reset() -> None:
        signal.signal(sig, signal.SIG_DFL)

    return reset


@pytest.fixture
def child_env() -> Callable[..., dict[str, str]]:
    """``scrubbed_env`` for a test's ``subprocess`` calls: ``env=child_env(HOME=...)``."""
    return scrubbed_env


@pytest.fixture(autouse=True)
def _no_tool_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test: no PIP_*/UV_* variable, pip and uv read no configuration file."""
    for var in list(os.environ):
        if var.upper().startswith(TOOL_PREFIXES):
            monkeypatch.delenv(var)
    for var, value in scrubbed_env({}).items():
        monkeypatch.setenv(var, value)


@pytest.fixture
def scrubbed_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Scrubbed as every test is, and pip's and uv's caches under ``tmp_path`` (for gpuresolve
    run in-process, which starts pip or uv); returns ``tmp_path``."""
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return tmp_path


@pytest.fixture
def dbupdate_hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """For `db update` against the local test index: no real pip configuration (it may name a
    real index), no waiting between retries, no database or index chosen by the environment,
    and no proxy for 127.0.0.1."""
    import resolver.host.pipconfig as pipconfig
    from resolver.io import http as fetch

    monkeypatch.setattr(pipconfig, "pip_index_url", lambda environ=None: None)
    monkeypatch.setattr(fetch, "BACKOFF", 0.0)
    monkeypatch.delenv("GPURESOLVE_PYTORCH_INDEX", raising=False)
    monkeypatch.delenv(catalog_mod.DATA_ENV, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def index() -> Iterator[Any]:
    """The recorded-shape PyTorch index (tests/fixtures/pytorch_index) on 127.0.0.1; modules
    that serve other routes define their own `index`."""
    from pytorch_index import fixture_routes, serve

    with serve(fixture_routes()) as srv:
        yield srv


@pytest.fixture(scope="session")
def _warm_cache(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The shipped database's catalog cache, written once per session (per xdist worker)."""
    import os

    where = tmp_path_factory.mktemp("warm-cache")
    before = os.environ.get(catalog_mod.CACHE_ENV)
    os.environ[catalog_mod.CACHE_ENV] = str(where)
    try:
        catalog_mod.load(catalog_mod.shipped_data_dir())
    except catalog_mod.DataError:
        pass  # the tests that load it say why
    finally:
        if before is None:
            del os.environ[catalog_mod.CACHE_ENV]
        else:
            os.environ[catalog_mod.CACHE_ENV] = before
    return sorted(where.iterdir())


@pytest.fixture(autouse=True)
def _private_dirs(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    _warm_cache: list[Path],
) -> None:
    """Tests write only to temporary directories: the catalog cache and user data included.

    Each test's cache folder starts with a copy of the shipped database's cache (what any user's
    second run finds), so the suite parses the YAML once per worker, not once per test; the
    tests of the cache itself damage, plant or remove that copy as they need."""
    import shutil

    base = tmp_path_factory.mktemp("home")
    (base / "cache").mkdir()
    for path in _warm_cache:
        shutil.copyfile(path, base / "cache" / path.name)
    monkeypatch.setenv(catalog_mod.CACHE_ENV, str(base / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "xdg-cache"))
    # no user's defaults file (`[tool.gpuresolve.defaults]`'s companion) reaches a test
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("APPDATA", str(base / "config"))
    monkeypatch.delenv("GPURESOLVE_CONFIG", raising=False)


# --- nothing left in the system temp folder ---------------------------------------------------
# The whole session (pytest's own tmp_path folders, gpuresolve in-process and every child process)
# uses one fresh folder inside the system temp folder, through TMPDIR; at the end anything in it
# besides pytest's tmp_path tree is a leak of gpuresolve or of a test, and fails the session.
# The folder is removed either way, so the suite leaves nothing behind. xdist workers inherit it.
_SESSION_TMP_ENV = "GPURESOLVE_TEST_SESSION_TMP"


def pytest_configure(config: pytest.Config) -> None:
    import os
    import tempfile

    if os.environ.get(_SESSION_TMP_ENV):  # an xdist worker: the controller made it
        tempfile.tempdir = None
        return
    session_tmp = tempfile.mkdtemp(prefix="gpuresolve-tests-")
    os.environ[_SESSION_TMP_ENV] = session_tmp
    os.environ["TMPDIR"] = session_tmp
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def _leftovers(session_tmp: str) -> list[str]:
    import os

    return sorted(n for n in os.listdir(session_tmp) if not n.startswith("pytest-of-"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os
    import shutil

    session_tmp = os.environ.get(_SESSION_TMP_ENV)
    if not session_tmp or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        left = _leftovers(session_tmp)
    except OSError:
        return
    shutil.rmtree(session_tmp, ignore_errors=True)
    if left:
        shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        print(f"\nthe suite left files in the temp folder: {shown}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
