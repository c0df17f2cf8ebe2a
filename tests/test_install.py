"""`gpuresolve install` end to end: real virtualenvs, real pip and uv, a local PEP 503 index.

The index runs on 127.0.0.1 in a thread and serves tiny stub wheels shaped like PyTorch's (a
``torch-2.14.1+cu126`` that requires its ``nvidia-*-cu12`` libraries, a cu130 one that requires
CUDA 13's). pip and uv are cut off from any configured index or cache outside the test.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from cli_support import top_level, write_db
from conftest import STARTING_ENV, scrubbed_env

from resolver.cli import main
from resolver.host.platform import probe as probe_platform

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
HOST = probe_platform().platform


def _uv() -> str | None:
    """uv as gpuresolve finds it (a dependency: its own environment's, else PATH's)."""
    from resolver.core.errors import UserError
    from resolver.writers.closure.pip_resolve import find_uv

    try:
        return find_uv()
    except UserError:
        return None


UV = _uv()
needs_uv = pytest.mark.skipif(UV is None, reason="no uv (a dependency of gpuresolve)")
GPU = ["--gpu", "8.6", "--driver", "580.65.06"]  # a GPU host as described to the solver

CU12 = {"nvidia-cublas-cu12": "12.6.4.1", "nvidia-cudnn-cu12": "9.10.2.21"}
CU12 |= {"nvidia-cuda-runtime-cu12": "12.6.77"}
CU13 = {"nvidia-cublas": "13.0.0.19", "nvidia-cudnn-cu13": "9.13.0.50"}
CU13 |= {"nvidia-cuda-runtime": "13.0.48"}


# --- stub wheels and the index ------------------------------------------------------------------


def build_wheel(directory: Path, name: str, version: str, requires: Sequence[str] = ()) -> Path:
    """A minimal valid wheel: one module, METADATA, WHEEL and a RECORD with hashes."""
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    module = (
        f"{dist}/__init__.py" if not name.startswith("nvidia") else f"nvidia/{dist}/__init__.py"
    )
    files = {
        module: f'__version__ = "{version}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: gpuresolve-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{path},sha256={b64},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    out = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return out


def stub_wheels(directory: Path) -> list[Path]:
    def pins(libs: Mapping[str, str]) -> list[str]:
        return [f"{n}=={v}" for n, v in libs.items()]

    wheels = [
        build_wheel(directory, "torch", "2.14.1+cu126", [*pins(CU12), "filelock"]),
        build_wheel(directory, "torch", "2.14.1+cu130", [*pins(CU13), "filelock"]),
        build_wheel(directory, "torch", "2.14.1+cpu", ["filelock"]),
        build_wheel(directory, "torchvision", "0.29.1+cu126", ["torch==2.14.1"]),
        build_wheel(directory, "torchvision", "0.29.1+cpu", ["torch==2.14.1"]),
        build_wheel(directory, "filelock", "3.16.1"),
    ]
    for libs in (CU12, CU13):
        for name, version in libs.items():
            cublas = next(n for n in libs if "cublas" in n)
            wheels.append(
                build_wheel(directory, name, version, [cublas] if "cudnn" in name else [])
            )
    return wheels


class Index:
    """A PEP 503 simple index: ``/whl/<variant>/<project>/`` lists that variant's files."""

    def __init__(self, files: Sequence[Path], login: tuple[str, str] | None = None) -> None:
        self.files = {f.name: f for f in files}
        self.server: http.server.ThreadingHTTPServer | None = None
        self.login = login  # set: a private index, 401 to a request without this Basic login

    def project_files(self, variant: str, project: str) -> list[str]:
        out = []
        for name in sorted(self.files):
            dist, version = name.split("-")[:2]
            local = version.partition("+")[2]
            if re.sub(r"[-_.]+", "-", dist).lower() == project and local in ("", variant):
                out.append(name)
        return out

    def page(self, path: str) -> bytes | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "files" and parts[1] in self.files:
            return self.files[parts[1]].read_bytes()
        if parts and parts[0] == "whl" and len(parts) in (2, 3) and parts[-1] in self.files:
            return self.files[parts[-1]].read_bytes()  # where PyTorch's index keeps its files
        if len(parts) == 3 and parts[0] == "whl":
            links = "".join(
                f'<a href="/files/{urllib.parse.quote(n)}">{n}</a>\n'
                for n in self.project_files(parts[1], parts[2])
            )
            return f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
        return None

    def start(self) -> str:
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 30

            def do_GET(self, head: bool = False) -> None:
                if index.login is not None:
                    wanted = base64.b64encode(":".join(index.login).encode()).decode()
                    if self.headers.get("Authorization") != f"Basic {wanted}":
                        self.send_response(401)
                        self.send_header("WWW-Authenticate", "Basic")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                body = index.page(urllib.parse.unquote(self.path.split("?")[0]))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                kind = "text/html" if not self.path.startswith("/files/") else "application/zip"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_HEAD(self) -> None:  # uv asks before it downloads
                self.do_GET(head=True)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/whl"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    index = Index(stub_wheels(tmp_path_factory.mktemp("wheels")))
    try:
        yield index.start()
    finally:
        index.stop()


# --- database, isolation, virtualenvs ------------------------------------------------------------


def series(minor: str, version: str, variants: list[str]) -> dict[str, Any]:
    def variant(name: str) -> dict[str, Any]:
        if name == "cpu":
            return {"name": "cpu", "source": ["PRIM"], "platforms": {HOST: {}}}
        arch = {"sass": ["7.5", "8.0", "8.6", "9.0"], "ptx": [], "source": ["PRIM"]}
        cuda = f"{name[2:-1]}.{name[-1]}"
        return {"name": name, "cuda": cuda, "source": ["PRIM"], "platforms": {HOST: arch}}

    return {
        "minor": minor,
        "python": {HOST: [PY]},
        "releases": [
            {"version": version, "torchvision": "0.29.1", "torchaudio": None, "source": ["PRIM"]}
        ],
        "variants": [variant(v) for v in variants],
    }


@pytest.fixture
def isolated(
    scrubbed_tools: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Path:
    tmp_path = scrubbed_tools
    """The synthetic database plus 2.13/2.14 series; pip and uv see no config, cache or index."""
    raw = synth_raw
    raw["torch.yaml"]["series"] += [
        series("2.13", "2.13.0", ["cpu"]),
        series("2.14", "2.14.1", ["cpu", "cu126", "cu128", "cu130"]),  # no cu128 wheel is served
    ]
    db = write_db(tmp_path / "db", raw)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(db))
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    return tmp_path


def interpreter(venv: Path) -> str:
    for rel in ("bin/python", "Scripts/python.exe"):
        if (venv / rel).exists():
            return str(venv / rel)
    raise AssertionError(f"no interpreter in {venv}")


def make_venv(where: Path, installer: str) -> str:
    """A fresh virtualenv: with pip (ensurepip, offline) for pip, bare for uv."""
    if installer == "uv":
        assert UV is not None
        cmd = [UV, "venv", "--quiet", "--python", sys.executable, str(where)]
    else:
        cmd = [sys.executable, "-m", "venv", str(where)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300, env=scrubbed_env())
    return interpreter(where)


def installed(python: str) -> dict[str, str]:
    """What the environment holds, read independently of gpuresolve."""
    code = (
        "import json, re, importlib.metadata as m;"
        "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version"
        " for d in m.distributions()}))"
    )
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def gpuresolve(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(top_level(args))
    out, err = capfd.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def nvidia(dists: dict[str, str]) -> set[str]:
    return {n for n in dists if n.startswith("nvidia-")}


# --- the tests -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("installer", "before"),
    [
        ("pip", "cu130"),
        pytest.param("uv", "cu130", marks=needs_uv),
        pytest.param("uv", "cpu", marks=needs_uv),
    ],
)
def test_wrong_build_is_replaced_without_mixing_cuda_majors(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str], installer: str, before: str
) -> None:
    python = make_venv(isolated / "venv", installer)
    common = ["--python", python, "--pytorch-index", index_url, "--installer", installer]
    build = ["--no-gpu"] if before == "cpu" else [*GPU, "--cuda", "13.0"]
    code, out, err = gpuresolve(capfd, "install", *common, *build, "--no-verify")
    assert code == 0, out + err
    first = installed(python)
    assert first["torch"] == f"2.14.1+{before}"
    assert nvidia(first) == (set(CU13) if before == "cu130" else set())

    code, out, err = gpuresolve(
        capfd, "install", *common, *GPU, "--cuda", "12.6", "--with", "torchvision", "--no-verify"
    )
    assert code == 0, out + err
    after = installed(python)
    assert (after["torch"], after["torchvision"]) == ("2.14.1+cu126", "0.29.1+cu126")
    assert nvidia(after) == set(CU12)  # no CUDA 13 library left behind
    assert f"remove torch 2.14.1+{before}" in out
    assert "\n$ " in out  # each command is shown, then the installer's own lines stream
    assert "Successfully installed" in out or "Installed" in out


@pytest.mark.slow
def test_dry_run_prints_commands_a_user_can_paste(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(isolated / "venv", "pip")
    common = ["--python", python, "--pytorch-index", index_url, "--installer", "pip", *GPU]
    assert gpuresolve(capfd, "install", *common, "--cuda", "13.0", "--no-verify")[0] == 0
    before = installed(python)

    code, out, _ = gpuresolve(capfd, "install", *common, "--cuda", "12.6", "--dry-run")
    assert code == 0
    assert installed(python) == before  # a dry run changes nothing
    commands = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2  # remove the cu130 build and its CUDA 13 libraries, then install
    for line in commands:
        subprocess.run(
            shlex.split(line), check=True, capture_output=True, timeout=300, env=scrubbed_env()
        )
    after = installed(python)
    assert after["torch"] == "2.14.1+cu126"
    assert nvidia(after) == set(CU12)


def test_failing_install_reports_cleanly(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    installer = "uv" if UV else "pip"
    python = make_venv(isolated / "venv", installer)
    code, out, err = gpuresolve(
        capfd,
        "install",
        *("--python", python, "--pytorch-index", index_url, "--installer", installer, *GPU),
        *("--cuda", "12.8"),  # the database has the cu128 build; the index does not
    )
    assert code == 1
    assert "install step failed (exit status" in err
    tail = [line[4:] for line in err.splitlines() if line.startswith("  | ")]
    assert tail and any("torch" in line for line in tail)
    assert "as the installer left it" in err
    assert "verifying" not in out  # verify does not run after a failed install
    assert "torch" not in installed(python)


_FAILING_PLAN = """
import sys
from resolver.commands.install import _execute
from resolver.install.plan import Plan, Step
step = Step((sys.executable, "-c", "print('the-cause-' + 'line'); raise SystemExit(3)"), "install")
_execute(Plan("pip", (), (step,)))
"""


def test_a_failed_step_is_said_once_where_its_output_went_too() -> None:
    """The installer's lines stream as they come; where stderr reaches the same place (a
    terminal, `2>&1`), its failure is not repeated, else its last lines follow on stderr."""
    argv = [sys.executable, "-c", _FAILING_PLAN]
    env = {**scrubbed_env(), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    both = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, timeout=60, check=False)  # fmt: skip
    assert both.returncode == 1, both.stdout
    assert both.stdout.count("the-cause-line") == 1
    assert "install step failed (exit status 3); the installer's output above" in both.stdout
    apart = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert apart.returncode == 1 and "the-cause-line" in apart.stdout
    assert "  | the-cause-line" in apart.stderr  # stdout went elsewhere: the tail is here


@pytest.mark.slow
def test_an_index_out_of_reach_is_one_line_before_anything_runs(
    isolated: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Offline (refused, no route, no DNS): said at once, no installer started to retry it."""
    from pytorch_index import closed_port

    python = make_venv(isolated / "venv", "pip")
    nowhere = f"http://127.0.0.1:{closed_port()}/whl"
    code, out, err = gpuresolve(
        capfd, "install", "--python", python, "--pytorch-index", nowhere, "--installer", "pip", *GPU
    )
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"gpuresolve: error: cannot reach {nowhere}/"), err
    assert "(connection refused)" in last and "--pytorch-index" in last
    assert "\n$ " not in out  # no step ran
    assert "torch" not in installed(python)


@pytest.mark.slow
@needs_uv
def test_install_exits_with_verify_code(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(isolated / "venv", "uv")
    code, out, _ = gpuresolve(
        capfd, "install", "--python", python, "--pytorch-index", index_url, "--no-gpu"
    )
    assert f"verifying: gpuresolve verify --python {python}" in out
    verify = subprocess.run(
        [sys.executable, "-m", "resolver", "verify", "--python", python],
        capture_output=True,
        timeout=300,
        env=scrubbed_env(),
    )
    assert code == verify.returncode  # a stub torch: whatever verify says, install says


def test_refuses_a_lock_together_with_a_request(
    isolated: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    lock = isolated / "requirements.txt"
    lock.write_text("torch==2.14.1+cpu\n", encoding="utf-8")
    python = make_venv(isolated / "venv", "uv" if UV else "pip")
    code, _, err = gpuresolve(
        capfd, "install", "--python", python, "--lock", str(lock), "--torch", "==2.8.0"
    )
    assert code == 2
    assert "--lock installs the lock as written: drop --torch" in err


def test_lock_is_installed_through_a_mirror(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    installer = "uv" if UV else "pip"
    python = make_venv(isolated / "venv", installer)
    lock = isolated / "requirements.txt"
    lock.write_text(
        "--index-url https://download.pytorch.org/whl/cpu\ntorch==2.14.1+cpu\n", encoding="utf-8"
    )
    code, out, err = gpuresolve(
        capfd,
        "install",
        *("--python", python, "--lock", str(lock), "--pytorch-index", index_url),
        *("--installer", installer, "--no-verify"),
    )
    assert code == 0, out + err
    assert installed(python)["torch"] == "2.14.1+cpu"
    staged = re.search(r"in a copy: (\S+)", out)
    assert staged and not Path(staged.group(1)).exists()  # the mirrored copy is cleaned up


@needs_uv
def test_lock_index_wins_over_the_users_uv_index(
    isolated: Path,
    index_url: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uv lets UV_INDEX_URL replace a requirements file's own --index-url (pip does not):
    install runs uv without the user's UV_* index settings, so the lock's index is the one used."""
    from pytorch_index import closed_port

    python = make_venv(isolated / "venv", "uv")
    lock = isolated / "requirements.txt"
    lock.write_text(f"--index-url {index_url}/cpu\ntorch==2.14.1+cpu\n", encoding="utf-8")
    nowhere = f"http://127.0.0.1:{closed_port()}/simple"
    for var in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL"):
        monkeypatch.setenv(var, nowhere)
    monkeypatch.setenv("UV_OFFLINE", "1")  # would forbid the download were it passed
    code, out, err = gpuresolve(
        capfd,
        "install",
        *("--python", python, "--lock", str(lock), "--installer", "uv", "--no-verify"),
    )
    assert code == 0, out + err
    assert installed(python)["torch"] == "2.14.1+cpu"


@needs_uv
def test_a_login_mirror_installs_through_a_private_netrc(
    isolated: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock of PyTorch's index installed through a mirror that answers 401 without its login:
    the staged copy names the mirror without it, the installer gets it in a private netrc (never
    on its command line), and no line printed holds it."""
    secret = "Zq9-install-sEcReT"
    (isolated / "wheels").mkdir()
    index = Index(stub_wheels(isolated / "wheels"), login=("robot", secret))
    base = index.start()
    try:
        monkeypatch.setenv("NETRC", str(isolated / "no-netrc"))
        python = make_venv(isolated / "venv", "uv")
        lock = isolated / "requirements.txt"
        pt = "https://download.pytorch.org/whl"
        lock.write_text(f"--index-url {pt}/cpu\ntorch==2.14.1+cpu\n", encoding="utf-8")
        mirror = base.replace("http://", f"http://robot:{secret}@")
        argv = ["--python", python, "--lock", str(lock), "--installer", "uv", "--no-verify"]
        code, out, err = gpuresolve(capfd, "install", *argv, "--pytorch-index", mirror)
    finally:
        index.stop()
    assert code == 0, out + err
    assert installed(python)["torch"] == "2.14.1+cpu"
    assert secret not in out + err and "robot:****@" not in out  # the copy names no login


def _pylock_text(index_url: str) -> str:
    """A pylock.toml as PyTorch's index would serve it: torch 2.14.1+cpu and filelock."""
    import hashlib
    import urllib.request

    pt = "https://download.pytorch.org/whl"
    out = 'lock-version = "1.0"\ncreated-by = "tests"\n'
    for name, version, where in (("torch", "2.14.1+cpu", "cpu/"), ("filelock", "3.16.1", "")):
        wheel = f"{name}-{version}-py3-none-any.whl"
        quoted = urllib.parse.quote(wheel)
        with urllib.request.urlopen(f"{index_url}/{where}{quoted}", timeout=30) as response:
            sha = hashlib.sha256(response.read()).hexdigest()
        out += f'\n[[packages]]\nname = "{name}"\nversion = "{version}"\n'
        out += f'index = "{pt}/cpu"\n' if where else ""
        out += f'[[packages.wheels]]\nname = "{wheel}"\nurl = "{pt}/{where}{quoted}"\n'
        out += f'hashes = {{sha256 = "{sha}"}}\n'
    return out


def test_pylock_is_installed_with_uv_through_a_mirror(
    isolated: Path,
    index_url: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from resolver.writers.closure.pip_resolve import find_uv

    try:
        uv = find_uv()
    except Exception:
        pytest.skip("uv is not installed (a dependency of gpuresolve)")
    venv = isolated / "venv"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        check=True,
        env=scrubbed_env(),
    )
    python = interpreter(venv)
    text = _pylock_text(index_url)
    mirror = ("--pytorch-index", index_url)

    # Without uv (none on PATH, no `uv` package) there is no installer for it: one line, exit 2.
    from resolver.core.errors import UserError
    from resolver.writers.closure import pip_resolve

    packaged_uv = pip_resolve.find_uv

    def no_uv() -> str:
        raise UserError("no uv")

    monkeypatch.setenv("PATH", str(isolated / "no-tools"))
    monkeypatch.setattr(pip_resolve, "find_uv", no_uv)
    lock = isolated / "pylock.toml"
    lock.write_text(text, encoding="utf-8")
    code, out, err = gpuresolve(capfd, "install", "--python", python, "--lock", str(lock))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert f"installing {lock} needs uv or pip 26.1 or newer ({python} has no pip;" in line, err

    # With only the `uv` package (a dependency) and no uv on PATH, that uv installs it.
    monkeypatch.setattr(pip_resolve, "find_uv", packaged_uv)
    code, out, err = gpuresolve(
        capfd, "install", "--python", python, "--lock", str(lock), *mirror, "--dry-run"
    )
    assert code == 0 and uv in out, out + err
    kept = re.search(r"the copy (\S+) is kept for the command below", out)
    assert kept and Path(kept.group(1)).is_file()  # the command names it: the user runs it
    shutil.rmtree(Path(kept.group(1)).parent)

    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(uv).parent), os.environ["PATH"]]))
    # Found by its content under another name: uv gets a copy named as PEP 751 wants.
    other = isolated / "team.lock"
    other.write_text(text, encoding="utf-8")
    code, out, err = gpuresolve(
        capfd, "install", "--python", python, "--lock", str(other), *mirror, "--dry-run"
    )
    assert code == 0, out + err
    assert f"lock: {other} (pylock, 2 pins; torch==2.14.1+cpu)" in out
    (command,) = [line for line in out.splitlines() if line and not line.startswith("#")]
    argv = shlex.split(command)
    assert argv[:5] == [uv, "pip", "install", "--python", python] and argv[5] == "-r"
    copy = Path(argv[6])
    assert copy.name == "pylock.toml" and copy.parent != isolated
    assert f'url = "{index_url}/cpu/torch-2.14.1%2Bcpu-py3-none-any.whl"' in copy.read_text()
    assert "download.pytorch.org" not in copy.read_text()
    shutil.rmtree(copy.parent)

    code, out, err = gpuresolve(
        capfd, "install", "--python", python, "--lock", str(lock), *mirror, "--no-verify"
    )
    assert code == 0, out + err
    assert installed(python)["torch"] == "2.14.1+cpu"
    staged = re.search(r"in a copy: (\S+)", out)
    assert staged and not Path(staged.group(1)).exists()  # the mirrored copy is cleaned up


def _pip_of_this_interpreter_into(python: str) -> str:
    """Install the running pip into a fresh venv by copying it (pip is self-contained; offline)."""
    import importlib.metadata as md

    dist = md.distribution("pip")
    site = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = Path(str(dist.locate_file("pip")))
    shutil.copytree(source, Path(site) / "pip", ignore=shutil.ignore_patterns("__pycache__"))
    info = Path(str(dist._path))  # type: ignore[attr-defined]  # its .dist-info folder
    shutil.copytree(info, Path(site) / info.name)
    return dist.version


@pytest.mark.slow
def test_pylock_is_installed_with_pip_where_pip_reads_it(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """pip 26.1 and newer installs `-r pylock.toml`; an older pip is refused in one line."""
    from packaging.version import Version

    venv = isolated / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = interpreter(venv)
    version = _pip_of_this_interpreter_into(python)
    lock = isolated / "pylock.toml"
    lock.write_text(_pylock_text(index_url), encoding="utf-8")
    argv = ["install", "--python", python, "--lock", str(lock), "--installer", "pip"]
    if Version(version).release[:2] < (26, 1):
        code, out, err = gpuresolve(capfd, *argv, "--pytorch-index", index_url)
        assert code == 2 and f"({python} has pip {version};" in err, out + err
        pytest.skip(f"pip {version} cannot install a pylock.toml (26.1 and newer can)")
    code, out, err = gpuresolve(capfd, *argv, "--pytorch-index", index_url, "--no-verify")
    assert code == 0, out + err
    assert "with pip" in out
    assert installed(python)["torch"] == "2.14.1+cpu"
    assert installed(python)["filelock"] == "3.16.1"


# --- a real torch, offline -----------------------------------------------------------------------


def _pip_config() -> dict[str, list[str]]:
    """find-links and extra-index-url as pip is configured on this machine (``pip config list``,
    PIP_* at the suite's start): the one test that looks for a local torch wheel on purpose."""
    env = {k: v for k, v in STARTING_ENV.items() if k != "PIP_CONFIG_FILE"}
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env
    ).stdout
    found: dict[str, list[str]] = {"find-links": [], "extra-index-url": []}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in found:
            found[name] += value.strip().strip("'\"").split()
    for var, name in (("PIP_FIND_LINKS", "find-links"), ("PIP_EXTRA_INDEX_URL", "extra-index-url")):
        found[name] += STARTING_ENV.get(var, "").split()
    return found


def _offline_torch(version: str) -> Path | None:
    """The torch wheel pip's find-links offer for this interpreter and platform, if any."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    tags = set(sys_tags())
    for link in _pip_config()["find-links"]:
        directory = Path(link.removeprefix("file://"))
        for wheel in sorted(directory.glob(f"torch-{version}*.whl")) if directory.is_dir() else []:
            try:
                _, ver, _, wheel_tags = parse_wheel_filename(wheel.name)
            except InvalidWheelFilename:
                continue
            if ver.public == version and ver.local == "cpu" and wheel_tags & tags:
                return wheel
    return None


@pytest.mark.slow
def test_real_torch_installs_offline_and_verifies(
    tmp_path: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _offline_torch("2.13.0")
    if wheel is None:
        pytest.skip("no torch 2.13.0 CPU wheel in pip's find-links for this interpreter")
    extra = _pip_config()["extra-index-url"]
    if not extra or not all(u.startswith("file:") for u in extra):
        pytest.skip("torch's dependencies would not come from a local index")
    synth_raw["torch.yaml"]["series"].append(series("2.13", "2.13.0", ["cpu"]))
    db = write_db(tmp_path / "db", synth_raw)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(db))
    # torch through the local index; its dependencies from the local indexes pip's configuration
    # names here, passed explicitly to a pip that reads no configuration of its own
    env = scrubbed_env(
        PIP_CACHE_DIR=str(tmp_path / "pip-cache"), PIP_EXTRA_INDEX_URL=" ".join(extra)
    )
    index = Index([wheel])
    url = index.start()
    try:
        python = make_venv(tmp_path / "venv", "pip")
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "resolver", "install", "--python", python),
                *("--no-gpu", "--torch", "==2.13.*", "--pytorch-index", url, "--installer", "pip"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
    finally:
        index.stop()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert installed(python)["torch"] == "2.13.0+cpu"
    assert "verifying: gpuresolve verify" in proc.stdout
    assert re.search(r"^result: (PASS|WARN)\b", proc.stdout, re.MULTILINE), proc.stdout[-2000:]


@pytest.mark.slow
def test_install_json_gives_the_plan_and_the_outcome(
    isolated: Path, index_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(isolated / "venv", "pip")
    common = ["--python", python, "--pytorch-index", index_url, "--installer", "pip", *GPU]
    code, out, err = gpuresolve(capfd, "install", *common, "--cuda", "12.6", "--dry-run", "--json")
    assert code == 0, err
    data = json.loads(out)  # stdout is the JSON document alone
    assert data["ok"] is True and data["dry_run"] is True and data["outcome"] is None
    plan = data["plan"]
    assert plan["installer"] == "pip" and plan["python"] == python
    assert [s["purpose"] for s in plan["steps"]] == ["install"]
    assert any("torch==2.14.1+cu126" in a for a in plan["steps"][0]["argv"])
    assert "torch" not in installed(python)

    code, out, err = gpuresolve(
        capfd, "install", *common, "--cuda", "12.6", "--no-verify", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["outcome"] == {"installed": True, "verify": None}
    assert installed(python)["torch"] == "2.14.1+cu126"
    assert "$ " in err  # the installer's commands and lines went to stderr
