"""A lock depends on its inputs alone: no UV_* variable or uv config file of the user's steers the
closure uv resolves, and the index outside the PyTorch index comes from the option, then
$GPURESOLVE_DEFAULT_INDEX, then pip's configuration read without pip, in pip's documented order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.host import pipconfig

URL = "https://mirror.invalid/simple"


@pytest.fixture(autouse=True)
def _pip_isolated(scrubbed_tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pipconfig.INDEX_ENV, raising=False)


# --- uv runs with an environment gpuresolve builds ----------------------------------------------


def test_uv_gets_only_the_documented_variables() -> None:
    from resolver.io.childenv import DOCUMENTED, uv_environment

    user = {"PATH": "/bin", "UV_INDEX_URL": "x", "UV_CACHE_DIR": "/c", "HTTPS_PROXY": "p"}
    user |= {"SSL_CERT_FILE": "/ca", "PIP_INDEX_URL": "y", "VIRTUAL_ENV": "/v", "UV_PYTHON": "3"}
    env = uv_environment(user)
    assert env == {
        "PATH": "/bin",
        "UV_CACHE_DIR": "/c",
        "HTTPS_PROXY": "p",
        "SSL_CERT_FILE": "/ca",
        "UV_NO_CONFIG": "1",
        "UV_NO_PROGRESS": "1",
    }
    page = Path(__file__).resolve().parent.parent / "docs" / "reference" / "lock-files.md"
    text = page.read_text(encoding="utf-8")  # the site's page on lock files documents them
    assert all(f"`{name}`" in text for name in DOCUMENTED if name.isupper())


def test_lock_verbose_names_the_index_and_what_uv_gets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", URL)
    _, err = _cli_lock(capsys, tmp_path, "-v")
    assert f"outside the PyTorch index: {URL} (from pip's configuration (PIP_INDEX_URL))" in err
    assert "UV_CACHE_DIR" in err and "HTTPS_PROXY" in err and "SSL_CERT_FILE" in err


# --- the index outside the PyTorch index ------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _pip_env(tmp_path: Path) -> dict[str, str]:
    """pip's variables for files under tmp_path only (no PIP_CONFIG_FILE)."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / "config"),
        "XDG_CONFIG_DIRS": str(tmp_path / "etc-xdg"),
        "PATH": os.environ.get("PATH", ""),
    }


def _pip_says(env: dict[str, str]) -> str | None:
    """pip's own merged configuration (its Configuration class, which its option parser reads:
    ``install`` over ``global``, ``:env:`` over both)."""
    code = (
        "from pip._internal.configuration import Configuration as C\n"
        "c = C(isolated=False); c.load()\n"
        "def get(k):\n"
        "    try: return c.get_value(k)\n"
        "    except Exception: return ''\n"
        "print(get(':env:.index-url') or get('install.index-url') or get('global.index-url'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    ).stdout.strip()
    return out.split()[0] if out else None


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="pip's Linux file locations")
def test_pip_configuration_is_read_in_pips_order_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _pip_env(tmp_path)
    _write(tmp_path / "etc-xdg" / "pip" / "pip.conf", "[global]\nindex-url = https://a.invalid/s\n")
    legacy = tmp_path / "home" / ".pip" / "pip.conf"
    user = tmp_path / "home" / "config" / "pip" / "pip.conf"
    own = tmp_path / "env.conf"
    both = "[install]\nindex-url = https://d.invalid/s\n[global]\nindex-url = https://c.invalid/s\n"
    cases: list[tuple[dict[Path, str], dict[str, str]]] = [
        ({}, {}),
        ({legacy: "[global]\nindex_url = https://b.invalid/s\n"}, {}),
        ({legacy: "[global]\nindex-url = https://b.invalid/s\n", user: both}, {}),
        ({legacy: "[install]\nindex-url = https://e.invalid/s\n"}, {}),
        (
            {user: "[global]\nindex-url = https://c.invalid/s\n"},
            {"PIP_INDEX_URL": "https://f.invalid/s"},
        ),
        (
            {user: both, own: "[global]\nindex-url = https://g.invalid/s\n"},
            {"PIP_CONFIG_FILE": str(own)},
        ),
        ({user: both}, {"PIP_CONFIG_FILE": os.devnull}),
    ]
    expected = []
    for files, extra in cases:  # pip's own answers first, with pip
        for path in (legacy, user, own):
            path.unlink(missing_ok=True)
        for path, text in files.items():
            _write(path, text)
        expected.append(_pip_says({**env, **extra}))
    assert len(set(expected)) >= 6  # the cases tell the rules apart
    # Then gpuresolve's, where no pip can be imported or run.
    monkeypatch.setitem(sys.modules, "pip", None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    for (files, extra), want in zip(cases, expected, strict=True):
        for path in (legacy, user, own):
            path.unlink(missing_ok=True)
        for path, text in files.items():
            _write(path, text)
        got = pipconfig.pip_index({**env, **extra}, "linux")
        assert got.url == want, (files, extra)
        assert (got.source == "PIP_INDEX_URL") == ("PIP_INDEX_URL" in extra)


def test_extra_indexes_and_find_links_are_noted_not_used(tmp_path: Path) -> None:
    conf = _write(tmp_path / "pip.conf", "[global]\nextra-index-url = file:///x\nfind-links = /w\n")
    got = pipconfig.pip_index({"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}, "linux")
    assert got.url is None and got.ignored == ("extra-index-url", "find-links")


def test_a_damaged_pip_configuration_is_one_line(tmp_path: Path) -> None:
    from resolver.core.errors import UserError

    conf = _write(tmp_path / "pip.conf", "index-url = no section\n")
    with pytest.raises(UserError, match="not a pip configuration file") as exc:
        pipconfig.pip_index({"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}, "linux")
    assert "\n" not in str(exc.value)


def _cli_lock(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> tuple[str, str]:
    code, _, err = run_cli(
        capsys, "lock", "--platform", "macos-arm64", "--python", "3.12", "-o", str(out), *extra
    )
    assert code == 0, err
    return (out / "requirements.txt").read_text(encoding="utf-8"), err


def test_same_index_from_any_source_gives_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _write(tmp_path / "pip.conf", f"[global]\nindex-url = {URL}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    from_file, _ = _cli_lock(capsys, tmp_path / "a")
    assert f"--index-url {URL}\n--extra-index-url " in from_file
    assert f"# packages outside the PyTorch index: {URL}\n" in from_file
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", URL)
    assert _cli_lock(capsys, tmp_path / "b")[0] == from_file
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.setenv(pipconfig.INDEX_ENV, URL)
    assert _cli_lock(capsys, tmp_path / "c")[0] == from_file
    monkeypatch.delenv(pipconfig.INDEX_ENV)
    assert _cli_lock(capsys, tmp_path / "d", "--default-index", URL)[0] == from_file
    # The option beats the variable, which beats pip's configuration.
    monkeypatch.setenv("PIP_INDEX_URL", "https://pip.invalid/simple")
    monkeypatch.setenv(pipconfig.INDEX_ENV, "https://var.invalid/simple")
    assert "--index-url https://var.invalid/simple\n" in _cli_lock(capsys, tmp_path / "e")[0]
    assert _cli_lock(capsys, tmp_path / "f", "--default-index", URL)[0] == from_file


def test_no_index_configured_leaves_it_to_the_installer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, _ = _cli_lock(capsys, tmp_path)
    assert "--index-url" not in text  # only --extra-index-url for the PyTorch index
    assert "# packages outside the PyTorch index: the installer's default index" in text


def test_a_bad_default_index_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pipconfig.INDEX_ENV, "ftp://x.invalid/simple")
    code, _, err = run_cli(capsys, "lock", "--platform", "macos-arm64", "-o", str(tmp_path))
    assert code == 2 and pipconfig.INDEX_ENV in err and "\n" not in err.strip()


def test_check_uses_the_recorded_index_not_this_machines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", URL)
    text, _ = _cli_lock(capsys, tmp_path)
    assert f'"default_index":"{URL}"' in text
    monkeypatch.setenv("PIP_INDEX_URL", "https://elsewhere.invalid/simple")
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(tmp_path))
    assert code == 0, err
    monkeypatch.delenv("PIP_INDEX_URL")
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(tmp_path))
    assert code == 0, err
    other = "https://other.invalid/simple"
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(tmp_path), "--default-index", other)
    assert code == 1 and "--default-index" in err


def test_an_unused_index_is_not_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CUDA build from the PyTorch index alone: the configured index changes no byte."""
    args = ("--platform", "linux-x86_64", "--gpu", "A100", "--driver", "580.65.06")
    code, _, err = run_cli(capsys, "lock", *args, "--python", "3.12", "-o", str(tmp_path / "a"))
    assert code == 0, err
    monkeypatch.setenv("PIP_INDEX_URL", URL)
    code, _, err = run_cli(capsys, "lock", *args, "--python", "3.12", "-o", str(tmp_path / "b"))
    assert code == 0, err
    a, b = (tmp_path / d / "requirements.txt" for d in "ab")
    assert a.read_bytes() == b.read_bytes() and URL not in b.read_text(encoding="utf-8")
