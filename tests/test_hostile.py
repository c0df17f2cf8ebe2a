"""Every command against malformed and hostile input: a documented exit code, one line, no trace.

Each case asserts what a user (or a script) relies on: the exit code the README documents, no
Python traceback, stderr under 2 KB with one `gpuresolve: error:` line for bad input, nothing
written outside the command's output folder, and no half-written (temporary) file left behind.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.io.bounded import SPEC_LIMIT

BIG = "9" * 5000  # past Python's int-conversion limit (4300 digits)
HOST = Path(__file__).parent / "fixtures" / "host" / "h100_driver580" / "detect.json"

BOMB = """name: bomb
python: "3.12"
description: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]
packages: {pip: [&b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]]}
targets:
  - &c {name: x, no_gpu: true, gpus: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}
  - {name: y, no_gpu: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c]}
"""
LAUGHS = "\n".join(
    [
        "name: laughs",
        'python: "3.12"',
        "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)),
        "description: *a8",
        "targets: [{name: x, no_gpu: true}]",
        "",
    ]
)
GOOD_SPEC = 'name: ok\npython: "3.12"\ntargets:\n  - {name: x, no_gpu: true}\n'


def spec(text: str | bytes) -> Callable[[Path], list[str]]:
    """A case whose input is a team spec with this content, locked into out/."""

    def build(tmp: Path) -> list[str]:
        path = tmp / "in" / "team.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return ["lock", str(path), "-o", str(tmp / "out")]

    return build


def host(content: str | bytes, *more: str) -> Callable[[Path], list[str]]:
    """A case whose input is a --host file with this content."""

    def build(tmp: Path) -> list[str]:
        path = tmp / "in" / "host.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return ["suggest", "--host", str(path), *more]

    return build


def lockfile(content: str | bytes, command: str = "verify") -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        path = tmp / "in" / "requirements.yml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        if command == "verify":
            return ["verify", "--lock", str(path), "--python", sys.executable, "--timeout", "60"]
        return ["install", "--lock", str(path), "--python", sys.executable, "--dry-run"]

    return build


def args(*argv: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [a.replace("{tmp}", str(tmp)) for a in argv]

    return build


def script(name: str, body: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "in" / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    return make


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], list[str]]
    code: int = 2
    says: str = ""  # a fragment the one error line must hold
    env: tuple[tuple[str, str | None], ...] = ()


def _deep_yaml(levels: int) -> str:
    return GOOD_SPEC.replace("python:", "description: " + "[" * levels + "]" * levels + "\npython:")


CASES = [
    # --- numbers past Python's int-conversion limit --------------------------------------------
    Case("driver-bigint", args("suggest", "--driver", f"{BIG}.1", "--gpu", "8.0"), says="driver"),
    Case("driver-bigpart", args("suggest", "--driver", f"535.{BIG}", "--gpu", "8.0")),
    Case("gpu-bigint", args("suggest", "--driver", "535.104.05", "--gpu", f"{BIG}.0")),
    Case("gpu-sm-bigint", args("suggest", "--driver", "535.104.05", "--gpu", f"sm_{BIG}")),
    Case("torch-bigint", args("suggest", "--no-gpu", "--torch", f"=={BIG}"), says="too long"),
    Case("torch-bigminor", args("suggest", "--no-gpu", "--torch", f">=2.{BIG}")),
    Case("with-bigint", args("suggest", "--no-gpu", "--with", f"torchvision>={BIG}")),
    Case("python-bigint", args("suggest", "--no-gpu", "--python", f"3.{BIG}")),
    Case("glibc-bigint", args("lock", "--no-gpu", "--glibc", f"2.{BIG}", "-o", "{tmp}/out")),
    Case("host-bigint", host('{"platform": ' + BIG + "}"), says="too long"),
    Case(
        "spec-count-bigint",
        spec(f'name: n\npython: "3.12"\ntargets: [{{name: x, count: {BIG}, no_gpu: true}}]\n'),
        says="too long",
    ),
    Case(
        "spec-driver-bigint",
        spec(f'name: n\npython: "3.12"\ntargets: [{{name: x, driver: "{BIG}.1", gpus: [8.0]}}]\n'),
    ),
    # --- other malformed values ------------------------------------------------------------------
    Case("driver-text", args("suggest", "--driver", "latest", "--gpu", "8.0")),
    Case("driver-five-parts", args("suggest", "--driver", "535.1.2.3.4", "--gpu", "8.0")),
    Case("driver-empty", args("suggest", "--driver", "", "--gpu", "8.0")),
    Case("gpu-unknown-cc", args("suggest", "--driver", "580.65.06", "--gpu", "9.9")),
    Case("gpu-nul", args("suggest", "--driver", "580.65.06", "--gpu", "RTX\x004090")),
    Case(
        "gpu-shell-junk",
        args("suggest", "--driver", "580.65.06", "--gpu", "RTX 4090; rm -rf /"),
        says="unknown GPU",
    ),
    Case(
        "gpu-trailing-word",
        args("suggest", "--driver", "580.65.06", "--gpu", "RTX 4090 foo"),
        says="not part of the model name",
    ),
    Case("python-four", args("suggest", "--no-gpu", "--python", "4.0")),
    Case("python-missing-path", args("suggest", "--no-gpu", "--python", "./no-such-python")),
    Case("platform-unknown", args("suggest", "--platform", "linux-sparc")),
    Case("torch-bad-spec", args("suggest", "--no-gpu", "--torch", "=>2.0")),
    Case("torch-bad-tag", args("suggest", "--no-gpu", "--torch", "==2.8.0+cu12x")),
    Case("with-not-companion", args("suggest", "--no-gpu", "--with", "numpy")),
    Case("with-junk", args("suggest", "--no-gpu", "--with", "torchvision; rm -rf /")),
    Case("cuda-major-only", args("suggest", "--driver", "580.65.06", "--cuda", "12")),
    Case("cuda-junk", args("suggest", "--driver", "580.65.06", "--cuda", "12.6; x")),
    Case("unknown-option", args("suggest", "--bogus"), says="--bogus"),
    Case("unknown-command", args("frobnicate")),
    Case("detect-unknown-option", args("detect", "--gpu", "8.0")),
    # --- options that contradict each other -----------------------------------------------------
    Case("no-gpu-cuda", args("suggest", "--no-gpu", "--cuda", "12.6"), says="--no-gpu"),
    Case("no-gpu-cuda-tag", args("suggest", "--no-gpu", "--torch", "==2.8.0+cu126")),
    Case("no-gpu-gpu", args("suggest", "--no-gpu", "--gpu", "8.0")),
    Case("no-gpu-driver", args("suggest", "--no-gpu", "--driver", "580.65.06")),
    Case("mac-gpu", args("suggest", "--platform", "macos-arm64", "--gpu", "8.0")),
    Case("mac-cuda", args("suggest", "--platform", "macos-arm64", "--cuda", "12.8")),
    Case("mixed-variants", args("suggest", "--torch", "==2.8.0+cu126", "--cuda", "12.8")),
    Case("lock-cuda-no-gpu", args("lock", "--no-gpu", "--cuda", "12.6", "-o", "{tmp}/out")),
    # --- host files -----------------------------------------------------------------------------
    Case("host-missing", args("suggest", "--host", "{tmp}/in/none.json"), says="no such file"),
    Case("host-directory", args("suggest", "--host", "{tmp}/in")),
    Case("host-dev-zero", args("suggest", "--host", "/dev/zero"), says="not a regular file"),
    Case("host-64mb", host(b" " * (64 * 1024 * 1024)), says="larger than"),
    Case("host-deep-json", host("[" * 100_000 + "]" * 100_000), says="nested"),
    Case("host-binary", host(bytes(range(256)) * 20), says="UTF-8"),
    Case("host-latin1", host('{"platform": "caf\xe9"}'.encode("latin-1"))),
    Case("host-not-json", host("platform: linux")),
    Case("host-list", host("[]")),
    Case("host-wrong-types", host('{"platform": 5, "python": [], "gpus": "many"}')),
    Case("host-empty", host("")),
    # --- index URLs that end up in files --------------------------------------------------------
    Case(
        "index-newline",
        args(
            "suggest", "--no-gpu", "--pytorch-index", "https://m/whl\n--extra-index-url https://e"
        ),
        says="control characters",
    ),
    Case("index-javascript", args("suggest", "--no-gpu", "--pytorch-index", "javascript:alert(1)")),
    Case("index-ftp", args("suggest", "--no-gpu", "--pytorch-index", "ftp://mirror/whl")),
    Case("index-no-host", args("suggest", "--no-gpu", "--pytorch-index", "https:///whl")),
    Case("index-space", args("suggest", "--no-gpu", "--pytorch-index", "https://m/a b")),
    Case("index-remote-file", args("suggest", "--no-gpu", "--pytorch-index", "file://host/x")),
    Case("index-bad-port", args("suggest", "--no-gpu", "--pytorch-index", "https://m:99x/whl")),
    Case(
        "index-env",
        args("suggest", "--no-gpu"),
        says="GPURESOLVE_PYTORCH_INDEX",
        env=(("GPURESOLVE_PYTORCH_INDEX", "https://m/whl\r\nx"),),
    ),
    Case("lock-index-newline", args("lock", "--no-gpu", "--pytorch-index", "https://m/\nx")),
    Case("channel-junk", args("lock", "--no-gpu", "--channel", "a;b", "-o", "{tmp}/out")),
    Case("db-update-pypi-space", args("db", "update", "--pypi-index", "https://p/ s", "--dry-run")),
    Case(
        "db-update-index-js", args("db", "update", "--pytorch-index", "javascript:x", "--dry-run")
    ),
    # --- timeouts ---------------------------------------------------------------------------------
    Case("verify-timeout-zero", args("verify", "--timeout", "0")),
    Case("verify-timeout-negative", args("verify", "--timeout", "-1")),
    Case("verify-timeout-nan", args("verify", "--timeout", "nan")),
    Case("verify-timeout-inf", args("verify", "--timeout", "inf")),
    Case("verify-timeout-huge", args("verify", "--timeout", "1e9")),
    Case("db-update-timeout-zero", args("db", "update", "--timeout", "0", "--dry-run")),
    Case("db-update-timeout-nan", args("db", "update", "--timeout", "nan", "--dry-run")),
    Case("db-update-timeout-huge", args("db", "update", "--timeout", "1e9", "--dry-run")),
    # --- team specs -----------------------------------------------------------------------------
    Case("spec-alias-bomb", spec(BOMB)),
    Case("spec-billion-laughs", spec(LAUGHS), says="expands to more than"),
    Case("spec-deep", spec(_deep_yaml(200)), says="nested"),
    Case(
        "spec-deep-100k", spec(_deep_yaml(100_000)), says="nested more than 64"
    ),  # libyaml stops it
    Case("spec-deep-maps", spec(GOOD_SPEC + "description: " + "{a: " * 50_000 + "}" * 50_000)),
    Case("spec-duplicate-key", spec(GOOD_SPEC + "name: again\n"), says="given twice"),
    Case(
        "spec-duplicate-nested",
        spec(GOOD_SPEC.replace("no_gpu: true", "no_gpu: true, no_gpu: false")),
        says="given twice",
    ),
    Case("spec-latin1", spec("name: caf\xe9\npython: '3.12'\n".encode("latin-1")), says="UTF-8"),
    Case("spec-utf16", spec(GOOD_SPEC.encode("utf-16")), says="UTF-8"),
    Case("spec-description-map", spec(GOOD_SPEC + "description: {a: 1}\n"), says="description"),
    Case("spec-description-list", spec(GOOD_SPEC + "description: [a, b]\n")),
    Case("spec-not-mapping", spec("- a\n- b\n")),
    Case("spec-empty", spec("")),
    Case("spec-bad-yaml", spec("name: [unclosed\n"), says="line"),
    Case("spec-too-large", spec(GOOD_SPEC + "#" * (SPEC_LIMIT + 1) + "\n"), says="larger"),
    Case("spec-name-escapes", spec(GOOD_SPEC.replace("name: ok", "name: ../../etc"))),
    Case("spec-target-escapes", spec(GOOD_SPEC.replace("name: x", "name: ../x"))),
    Case("spec-python-number", spec(GOOD_SPEC.replace('"3.12"', "3.10"))),
    Case(
        "spec-detect-dev-zero",
        spec(GOOD_SPEC.replace("{name: x, no_gpu: true}", "{name: x, detect: /dev/zero}")),
    ),
    Case("spec-missing", args("lock", "{tmp}/in/none.yaml", "-o", "{tmp}/out")),
    Case("spec-python-object", spec(GOOD_SPEC + "extra: !!python/object/apply:os.system [ls]\n")),
    # --- lock files read by verify and install --------------------------------------------------
    Case("verify-lock-missing", args("verify", "--lock", "{tmp}/in/none.txt")),
    Case("verify-lock-bomb", lockfile(LAUGHS.replace("description", "dependencies"))),
    Case("verify-lock-binary", lockfile(bytes(range(256)) * 4)),
    Case("verify-lock-deep", lockfile("dependencies: " + "[" * 100_000 + "]" * 100_000)),
    Case("verify-lock-duplicate", lockfile("dependencies: [a]\ndependencies: [b]\n")),
    Case("install-lock-missing", args("install", "--lock", "{tmp}/in/none.txt", "--dry-run")),
    Case("install-lock-binary", lockfile(bytes(range(256)) * 4, command="install")),
    # --- interpreters ---------------------------------------------------------------------------
    Case("verify-python-ls", args("verify", "--python", "/bin/ls", "--timeout", "30")),
    Case("verify-python-missing", args("verify", "--python", "{tmp}/in/python9")),
    Case("install-python-version", args("install", "--python", "3.12", "--dry-run")),
    Case(
        "install-no-env",
        args("install", "--no-gpu", "--dry-run"),
        says="--python",
        env=(("VIRTUAL_ENV", None), ("CONDA_PREFIX", None)),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(
    case: Case,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "in").mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for name, value in case.env:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    argv = case.build(tmp_path)
    before = _snapshot(tmp_path, skip="out")
    code, out, err = run_cli(capsys, *argv)
    assert code == case.code, (code, err[-500:])
    assert "Traceback" not in out + err
    assert len(err.encode()) < 2048, err[:300]
    errors = [line for line in err.splitlines() if line.startswith("gpuresolve: error:")]
    assert len(errors) == 1, err[-500:]
    assert case.says in errors[0]
    assert _snapshot(tmp_path, skip="out") == before  # nothing written outside out/
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no half-written file


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 60


@pytest.mark.slow
def test_a_hanging_interpreter_times_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    hang = script("python3", "#!/bin/sh\nsleep 60\n")(tmp_path)
    code, out, err = run_cli(capsys, "verify", "--python", str(hang), "--timeout", "1")
    assert code == 1 and "Traceback" not in out + err
    assert "did not finish within 1 s" in out


def test_a_relative_python_is_that_file_not_a_name_on_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--python py` with a ./py here runs ./py, even when PATH holds another `py`."""
    (tmp_path / "in").mkdir()
    here = tmp_path / "in"
    script("py", "#!/bin/sh\necho 3.10\n")(tmp_path)
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    other = elsewhere / "py"
    other.write_text("#!/bin/sh\necho 3.13\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{elsewhere}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(here)
    code, out, _ = run_cli(capsys, "suggest", "--no-gpu", "--python", "py", "--json")
    assert code == 0 and json.loads(out)["target"]["python"] == "3.10"


def test_an_internal_error_is_one_line_and_exit_70(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from resolver import catalog

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(catalog, "load", broken)
    monkeypatch.delenv("GPURESOLVE_DEBUG", raising=False)
    code, _, err = run_cli(capsys, "suggest", "--no-gpu")
    assert code == 70 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "gpuresolve: internal error: RuntimeError: a bug over two lines; run with "
        "GPURESOLVE_DEBUG=1 for the traceback and please report it"
    ]
    # Under --json the same line is also the JSON error object on stdout.
    code, out, _ = run_cli(capsys, "suggest", "--no-gpu", "--json")
    assert code == 70
    assert json.loads(out) == {
        "error": {
            "code": 70,
            "message": "internal error: RuntimeError: a bug over two lines; run with "
            "GPURESOLVE_DEBUG=1 for the traceback and please report it",
        }
    }
    monkeypatch.setenv("GPURESOLVE_DEBUG", "1")
    code, _, err = run_cli(capsys, "suggest", "--no-gpu")
    assert code == 70 and "Traceback" in err and "RuntimeError: a bug" in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_on_stdout_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "GPURESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "resolver", "suggest", "--no-gpu", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "gpuresolve: error: cannot write output: No space left on device"
    ]


def test_a_read_only_home_and_cache_are_no_traceback(tmp_path: Path) -> None:
    """The cache cannot be written: the command still answers."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "cache").write_text("a file where the cache folder should be")
    env = {
        **os.environ,
        "HOME": str(home),
        "GPURESOLVE_CACHE_DIR": str(home / "cache" / "gpuresolve"),
        "XDG_DATA_HOME": str(home / "data-is-a-file" / "x"),
    }
    (home / "data-is-a-file").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "resolver", "suggest", "--no-gpu"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def _snapshot(root: Path, skip: str) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] != skip
    }
