"""Launching the probe: a crash, a hang, a missing or unusable interpreter, an old Python."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from cli_support import run_cli
from test_verify_checks import H100, cpu_build

from resolver.core.errors import UserError
from resolver.core.hostprofile import STATE_NO_DRIVER, HostProfile
from resolver.flows import verify as verify_flow
from resolver.host.interpreter import resolve_python
from resolver.verify import checks
from resolver.verify.checks import CHECKS as ORDER
from resolver.verify.result import FAIL, SKIP
from resolver.verify.run import PROBE_FILE, run_probe

CHECKS = [c.id for c in ORDER]  # every check's id, in report order

ROOT = Path(__file__).resolve().parent.parent


def fake_python(tmp_path: Path, body: str) -> Path:
    """An executable that stands in for an interpreter (it ignores the probe it is given)."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ if env is None else env)
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "resolver", "verify", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )


posix_only = pytest.mark.skipif(os.name != "posix", reason="signals and #! scripts")


@posix_only
def test_crash_is_a_fail_with_its_signal_and_stage(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path, "echo '@@gpuresolve-stage import-torch' >&2\necho 'boom' >&2\nkill -SEGV $$"
    )
    run = run_probe(str(python), timeout_s=30)
    assert run.signal == "SIGSEGV" and run.stage == "import-torch"
    assert run.failure == "the probe crashed with SIGSEGV during 'import-torch'"
    result, *others = checks.evaluate(
        run.data, None, None, probe_failure=run.failure, stderr_tail=run.stderr_tail
    )
    assert (result.id, result.status) == ("probe", FAIL)
    assert "stderr: boom" in result.details
    assert {r.status for r in others} == {SKIP}


@posix_only
def test_crash_through_the_cli_exits_1_without_a_traceback(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "echo '@@gpuresolve-stage cuda-init' >&2\nkill -SEGV $$")
    done = cli("--python", str(python), "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "fail"
    assert report["checks"][0]["reason"] == "the probe crashed with SIGSEGV during 'cuda-init'"
    assert [c["id"] for c in report["checks"]] == list(CHECKS)
    assert {c["status"] for c in report["checks"][1:]} == {"skip"}
    assert report["probe_run"]["signal"] == "SIGSEGV"


@pytest.mark.slow
@posix_only
def test_hang_is_killed_at_the_timeout(tmp_path: Path) -> None:
    # The child and a grandchild both hang: the whole process group must go.
    python = fake_python(
        tmp_path, "echo '@@gpuresolve-stage gpu-tests' >&2\nsleep 300 &\nsleep 300"
    )
    run = run_probe(str(python), timeout_s=1)
    assert run.timed_out and run.data is None
    assert run.failure == "the probe did not finish within 1 s (hung during 'gpu-tests')"
    assert run.elapsed_s < 60


@pytest.mark.slow
@posix_only
def test_hang_through_the_cli(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "sleep 300")
    done = cli("--python", str(python), "--timeout", "1")
    assert done.returncode == 1
    assert "FAIL  probe ran         the probe did not finish within 1 s" in done.stdout
    assert "SKIP  GPU compute       the probe did not finish: no facts to judge" in done.stdout
    assert "1 failed, 14 skipped" in done.stdout


def test_missing_interpreter_exits_2(tmp_path: Path) -> None:
    done = cli("--python", str(tmp_path / "nope" / "python"))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"gpuresolve: error: --python {tmp_path}/nope/python: no such interpreter"
    )
    assert done.stdout == ""


def test_unreadable_lock_exits_2(tmp_path: Path) -> None:
    done = cli("--lock", str(tmp_path / "missing.txt"))
    assert done.returncode == 2
    assert "no such file (expected a lock file)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@posix_only
def test_an_interpreter_that_cannot_run_the_probe_exits_2(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "echo 'SyntaxError: invalid syntax' >&2\nexit 1")
    done = cli("--python", str(python))
    assert done.returncode == 2
    assert "cannot run the probe" in done.stderr and "SyntaxError" in done.stderr


def test_resolve_python(tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    (env_dir / "bin").mkdir(parents=True)
    exe = env_dir / "bin" / "python3"
    exe.write_text("", encoding="utf-8")
    exe.chmod(0o755)
    assert resolve_python(None, {"VIRTUAL_ENV": str(env_dir)}) == str(exe)
    assert resolve_python(None, {"CONDA_PREFIX": str(env_dir)}) == str(exe)
    assert resolve_python(str(env_dir)) == str(exe)  # an environment's directory
    assert resolve_python(None, {}) == sys.executable
    with pytest.raises(UserError, match="holds no Python interpreter"):
        resolve_python(None, {"VIRTUAL_ENV": str(tmp_path)})
    plain = tmp_path / "plain"
    plain.write_text("", encoding="utf-8")
    plain.chmod(0o644)
    with pytest.raises(UserError, match="not executable"):
        resolve_python(str(plain))


def test_probe_source_is_python_3_9_syntax() -> None:
    ast.parse(PROBE_FILE.read_text(encoding="utf-8"), feature_version=(3, 9))


def _python39() -> str | None:
    """A working Python 3.9: on PATH, or one of pyenv's versions."""
    candidates = [shutil.which("python3.9")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        versions = Path(root.stdout.strip() or "/nonexistent") / "versions"
        candidates += [str(p / "bin" / "python3") for p in sorted(versions.glob("3.9*"))]
    for path in candidates:
        if path is None or not Path(path).exists():
            continue
        done = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.stdout.strip() == "True":
            return path
    return None


def test_probe_runs_on_python_3_9() -> None:
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 interpreter on PATH")
    run = run_probe(python, timeout_s=60)
    assert run.failure is None, run.stderr_tail
    assert run.data is not None and run.data["python"]["version"].startswith("3.9.")


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv without torch (and without pip: nothing is installed)."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False).create(where)
    return where


@pytest.mark.slow
def test_environment_without_torch(bare_venv: Path) -> None:
    run = run_probe(str(bare_venv / "bin" / "python"), timeout_s=60)
    assert run.failure is None, run.stderr_tail
    assert run.data is not None
    assert run.data["torch"]["imported"] is False
    assert run.data["python"]["prefix"] == str(bare_venv)
    done = cli("--python", str(bare_venv), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["import"]["reason"] == "torch is not installed in this environment"


def test_virtual_env_is_the_default(bare_venv: Path) -> None:
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(bare_venv)
    env.pop("CONDA_PREFIX", None)
    done = cli("--json", env=env)
    report = json.loads(done.stdout)
    assert report["python"] == str(bare_venv / "bin" / "python3")


@posix_only
def test_cpu_build_report_lists_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text and --json name every check, SKIP where it does not apply; SKIP keeps exit 0."""
    probe = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    cpu_build(probe)
    (tmp_path / "probe.json").write_text(json.dumps(probe), encoding="utf-8")
    python = fake_python(tmp_path, f"cat '{tmp_path / 'probe.json'}'")
    bare = HostProfile(platform="linux-x86_64", python="3.12", state=STATE_NO_DRIVER)
    monkeypatch.setattr(verify_flow, "detect", lambda catalog: bare)
    code, out, _ = run_cli(capsys, "verify", "--python", str(python), "--json")
    assert code == 0
    report = json.loads(out)
    assert [c["id"] for c in report["checks"]] == list(CHECKS)
    by_id = {c["id"]: c for c in report["checks"]}
    assert (by_id["cudnn"]["status"], by_id["cudnn"]["reason"]) == (
        "skip",
        "not a CUDA build (cpu)",
    )
    assert report["summary"] == {"pass": 5, "warn": 0, "fail": 0, "skip": 10}
    code, out, _ = run_cli(capsys, "verify", "--python", str(python))
    assert code == 0
    lines = out.splitlines()
    assert [ln[:4] for ln in lines[1:-1]] == [
        "SKIP" if by_id[k]["status"] == "skip" else "PASS" for k in CHECKS
    ]
    assert "SKIP  cuDNN             not a CUDA build (cpu)" in lines
    assert lines[-1] == "result: PASS: 5 passed, 0 warning(s), 0 failed, 10 skipped"


@posix_only
@pytest.mark.parametrize(("tf32", "status"), [(364.2, "pass"), (90.0, "fail")])
def test_benchmark_fraction_of_peak_end_to_end(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tf32: float,
    status: str,
) -> None:
    """The recorded H100 probe with the recorded benchmark figures: fractions, verdict, causes."""
    probe = json.loads((H100 / "probe.json").read_text(encoding="utf-8"))
    probe["benchmark"] = {
        "device": 0,
        "conv2d_cudnn": {"ms": 0.089, "tflops": 82.9},
        "conv2d_no_cudnn": {"ms": 0.843, "tflops": 8.8},
        "matmul_tf32": {"ms": 0.377, "tflops": tf32},
        "matmul_fp32": {"ms": 2.692, "tflops": 51.1},
        "shapes": {"conv2d": "32x64x56x56 * 64x64x3x3 fp32", "matmul": "4096x4096x4096 fp32"},
    }
    (tmp_path / "probe.json").write_text(json.dumps(probe), encoding="utf-8")
    python = fake_python(tmp_path, f"cat '{tmp_path / 'probe.json'}'")
    monkeypatch.setattr(verify_flow, "detect", lambda catalog: None)
    code, out, _ = run_cli(capsys, "verify", "--python", str(python), "--benchmark", "--json")
    report = json.loads(out)
    (speed,) = [c for c in report["checks"] if c["id"] == "speed"]
    assert speed["status"] == status
    bench = report["benchmark"]
    assert bench["peak_gpu"]["name"] == "H100 SXM5"
    assert bench["matmul_tf32"]["fraction"] == pytest.approx(tf32 / 494.7, abs=1e-3)
    if status == "fail":
        assert code == 1 and "MIG" in speed["fix"]
    code, out, _ = run_cli(capsys, "verify", "--python", str(python), "--benchmark")
    row = next(line for line in out.splitlines() if "matmul, TF32" in line)
    assert row.split()[-1] == f"{tf32 / 494.7:.0%}"
    assert "of peak: the H100 SXM5 datasheet's dense peak" in out
    assert ("FAIL  GPU speed" in out) == (status == "fail")


def test_every_recorded_probe_document_has_the_probe_shape() -> None:
    """The shape verify holds a probe's result to must accept what real probes wrote."""
    import glob

    from resolver.verify.run import SHAPE, foreign, misshapen

    docs = []
    for name in glob.glob(
        str(Path(__file__).parent / "fixtures" / "**" / "*.json"), recursive=True
    ):
        try:
            data = json.loads(Path(name).read_text(encoding="utf-8"))
        except ValueError:
            continue
        found = [data, *data.values()] if isinstance(data, dict) else []  # alone or in a report
        docs += [(name, d) for d in found if isinstance(d, dict) and "probe" in d and "stage" in d]
    assert len(docs) >= 10
    for name, doc in docs:
        assert misshapen(foreign(doc), SHAPE) is None, name
    assert misshapen({"cuda": {"devices": [None]}}, SHAPE) == "cuda.devices[0]: expected an object"
    assert misshapen({"python": [1]}, SHAPE) == "python: expected an object"
    assert misshapen({"companions": {"torchvision": None}}, SHAPE) is None
