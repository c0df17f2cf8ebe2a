"""`lock --with xformers/bitsandbytes/flash-attn` (issue 32): pinned beside torch, checked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from cli_support import run_cli

from resolver import catalog

H100 = ["--gpu", "H100", "--driver", "580.65.06", "--python", "3.12"]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped database the test may change."""
    where = tmp_path / "db"
    shutil.copytree(catalog.shipped_data_dir(), where)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(where))
    return where


def _drop_release(db: Path, package: str, version: str) -> None:
    path = db / "extensions.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    pkg = next(p for p in doc["packages"] if p["name"] == package)
    pkg["releases"] = [r for r in pkg["releases"] if r["version"] != version]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


def test_lock_pins_extensions_beside_torch(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    args = ["lock", *H100, "--with", "flash-attn", "--with", "bitsandbytes", "-o", str(out)]
    code, _stdout, _err = run_cli(capsys, *args)
    assert code == 0
    lines = (out / "requirements.txt").read_text(encoding="utf-8").splitlines()
    body = [ln for ln in lines if not ln.startswith("#")]
    assert body == [
        "--extra-index-url https://download.pytorch.org/whl/cu128",
        "torch==2.8.0+cu128",
        "flash-attn @ https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3.post1/"
        "flash_attn-2.8.3.post1+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl",
        "bitsandbytes==0.50.2",
    ]
    code, _stdout, _err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0


@pytest.mark.slow
def test_check_is_stale_when_an_extensions_facts_change(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    _drop_release(db, "bitsandbytes", "0.50.2")
    code, _stdout, _err = run_cli(capsys, "lock", *H100, "--with", "bitsandbytes", "-o", str(out))
    assert code == 0
    assert "bitsandbytes==0.50.1" in (out / "requirements.txt").read_text(encoding="utf-8")
    shutil.copy(catalog.shipped_data_dir() / "extensions.yaml", db / "extensions.yaml")
    code, stdout, _err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 1
    assert "-bitsandbytes==0.50.1" in stdout and "+bitsandbytes==0.50.2" in stdout


def test_conda_forge_environment_refuses_extensions(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["lock", *H100, "--with", "bitsandbytes", "--format", "conda"]
    code, _out, err = run_cli(capsys, *args, "--conda-source", "conda-forge", "-o", str(tmp_path))
    assert code == 2 and "cannot carry bitsandbytes yet" in err


def test_install_pins_torch_with_a_constraint_and_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import subprocess
    import sys

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = str(env / "bin" / "python")
    args = ["install", "--python", python, "--gpu", "H100", "--driver", "580.65.06"]
    code, out, _err = run_cli(capsys, *args, "--with", "bitsandbytes", "--dry-run", "--json")
    assert code == 0
    steps = json.loads(out)["plan"]["steps"]
    assert [s["purpose"] for s in steps] == ["install", "install", "check"]
    torch_pin = next(a for a in steps[0]["argv"] if a.startswith("torch=="))
    assert "+cu" in torch_pin
    ext = steps[1]["argv"]
    assert "bitsandbytes==0.50.2" in ext and ext[-2] in ("-c", "--constraint")
    assert not any(a.startswith("torch") for a in ext)  # torch comes from the first step
    constraints = Path(ext[-1])
    try:
        assert constraints.read_text(encoding="utf-8") == torch_pin + "\n"
    finally:
        shutil.rmtree(constraints.parent)
    # the check step, run for real: another torch in the environment is a failure naming both
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dist = Path(purelib) / "torch-2.9.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n")
    done = subprocess.run(steps[2]["argv"], capture_output=True, text=True)
    assert done.returncode == 1
    want = torch_pin.removeprefix("torch==")
    assert (
        done.stderr.strip() == f"torch changed: 2.9.0 is installed, the set was chosen for {want}"
    )


SPEC = """name: ext-team
python: "3.12"
packages:
  with: [bitsandbytes]
targets:
  - name: h100
    driver: "580.65.06"
    gpus: ["NVIDIA H100"]
  - name: v100
    driver: "580.65.06"
    gpus: ["Tesla V100-SXM2-32GB"]
"""


@pytest.mark.slow
def test_team_spec_packages_with_an_extension(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spec's packages.with takes extension packages: pinned for the whole fleet's build."""
    spec = tmp_path / "ext-team.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    code, _out, _err = run_cli(capsys, "lock", str(spec))
    assert code == 0
    text = (tmp_path / "ext-team" / "requirements.txt").read_text(encoding="utf-8")
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    # torch 2.15 has no V100 kernels: the fleet's torch is 2.14.1 cu126, with bitsandbytes'
    # CUDA 12.6 library
    assert body[1:] == ["torch==2.14.1+cu126", "bitsandbytes==0.50.2"]
    assert run_cli(capsys, "lock", str(spec), "--check")[0] == 0


@pytest.mark.slow
def test_a_damaged_extensions_file_fails_only_where_it_is_read(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """extensions.yaml is parsed when an extension is asked for: a damaged one leaves torch's
    own answers alone and is one line, exit 2, where it is read (never a traceback)."""
    path = db / "extensions.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["packages"][0]["releases"][0]["builds"] = "not a list"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, out, err = run_cli(capsys, "suggest", *H100)
    assert code == 0 and "torch==" in out, err
    code, out, err = run_cli(capsys, "suggest", *H100, "--with", "bitsandbytes")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "extensions.yaml" in line and "Traceback" not in err
    doc["packages"][0]["releases"][0] = ["not", "a", "mapping"]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _out, err = run_cli(capsys, "suggest", *H100, "--with", "xformers")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "extensions.yaml" in err


@pytest.mark.slow
def test_with_takes_the_packages_the_database_lists(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--with` knows the extension packages from extensions.yaml, not from a list in the code:
    one the file drops is refused, and the refusal names what the file lists."""
    path = db / "extensions.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    names = [p["name"] for p in doc["packages"]]
    code, _out, err = run_cli(capsys, "suggest", *H100, "--with", "torchtext")
    assert code == 2 and err.rstrip().endswith(", ".join(["torchvision", "torchaudio", *names]))
    doc["packages"] = [p for p in doc["packages"] if p["name"] != "xformers"]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _out, err = run_cli(capsys, "suggest", *H100, "--with", "xformers")
    assert code == 2 and "--with 'xformers': the packages are" in err and "xformers," not in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "want"),
    [
        # an older release pinned: vllm 0.16.0 requires torch ==2.9.1 (its METADATA)
        (["--with", "vllm==0.16.0"], ["torch==2.9.1+cu128", "vllm==0.16.0"]),
        # R535 runs no CUDA 13 torch: the newest vllm for CUDA 12 (0.19.1, torch ==2.10.0)
        (["--with", "vllm"], ["torch==2.10.0+cu128", "vllm==0.19.1"]),
    ],
)
def test_lock_over_the_history_pins_an_older_release(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], want: list[str]
) -> None:
    out = tmp_path / "lock"
    a100_r535 = ["--gpu", "A100", "--driver", "535.230.02", "--python", "3.12"]
    code, _stdout, _err = run_cli(capsys, "lock", *a100_r535, *args, "-o", str(out))
    assert code == 0
    lines = (out / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert [ln for ln in lines if not ln.startswith(("#", "--"))] == want
    code, stdout, _err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, stdout
    # the release pinned leaves the database: --check fails, naming the pin that no longer fits
    if "vllm==0.16.0" in want:
        _drop_release(db, "vllm", "0.16.0")
        code, stdout, _err = run_cli(capsys, "lock", "--check", "-o", str(out))
        assert code == 1 and "vllm: no release in the database matches ==0.16.0" in stdout


def test_install_pins_torch_for_an_older_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """V100: xformers 0.0.30 is the newest with sm_70 kernels; torch is held at its ==2.7.0 by
    a constraint while xformers installs."""
    import json
    import subprocess
    import sys

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    args = ["install", "--python", str(env / "bin" / "python"), "--gpu", "V100"]
    args += ["--driver", "525.147.05", "--with", "xformers", "--dry-run", "--json"]
    code, out, _err = run_cli(capsys, *args)
    assert code == 0
    steps = json.loads(out)["plan"]["steps"]
    assert "torch==2.7.0+cu126" in steps[0]["argv"]
    ext = steps[1]["argv"]
    assert "xformers==0.0.30" in ext and ext[-2] in ("-c", "--constraint")
    constraints = Path(ext[-1])
    try:
        assert constraints.read_text(encoding="utf-8") == "torch==2.7.0+cu126\n"
    finally:
        shutil.rmtree(constraints.parent)
