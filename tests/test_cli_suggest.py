"""`gpuresolve suggest` end to end (in-process), on the synthetic database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli, write_db


@pytest.fixture
def synth_dir(tmp_path: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    write_db(tmp_path, synth_raw)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(tmp_path))
    return tmp_path


run = run_cli


def test_json_contract(synth_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "suggest",
        "--json",
        "--driver",
        "560.35.03",
        "--gpu",
        "NVIDIA GeForce GTX 1080 Ti",
        "--python",
        "3.11",
        "--with",
        "torchvision",
    )
    assert code == 0
    data = json.loads(out)
    assert {"target", "selection", "alternatives", "rejected", "hints"} <= set(data)
    sel = data["selection"]
    assert sel == {
        **sel,
        "torch": "2.8.0",
        "variant": "cu126",
        "cuda": "12.6",
        "cudnn": "9.10.2.21",
        "index_url": "https://download.pytorch.org/whl/cu126",
        "packages": {"torch": "2.8.0+cu126", "torchvision": "0.23.0+cu126"},
    }
    for alt in data["alternatives"]:
        assert {"torch", "variant", "cuda", "cudnn", "index_url", "packages"} <= set(alt)
    rejected = {(r["torch"], r["variant"]): r["reasons"] for r in data["rejected"]}
    assert any("no kernels for sm_61" in x for x in rejected[("2.8.0", "cu128")])
    assert data["target"]["gpus"] == [{"cc": "6.1", "name": "NVIDIA GeForce GTX 1080 Ti"}]


def test_cpu_build_has_null_cuda(synth_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "suggest", "--json", "--no-gpu", "--python", "3.11")
    assert code == 0
    sel = json.loads(out)["selection"]
    assert (sel["variant"], sel["cuda"], sel["cudnn"]) == ("cpu", None, None)


def test_no_compatible_build_exits_1(synth_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "suggest", "--driver", "418.67", "--gpu", "8.6", "--python", "3.11")
    assert code == 1
    assert "no compatible build" in out
    assert "CPU-only fallback" in out
    assert "needs driver >=" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--gpu", "RTX 4909"], "unknown GPU 'RTX 4909'; did you mean: NVIDIA GeForce RTX 4090"),
        (["--gpu", "4.2"], "unknown compute capability 4.2"),
        (["--driver", "banana"], "not a driver version"),
        (["--torch", "~~2"], "not a version specifier"),
        (["--torch", "==2.8.0+cu126", "--cuda", "12.8"], "mixes CUDA variants"),
        (["--with", "torchtext"], "companions are torchvision and torchaudio"),
        (["--platform", "solaris"], "--platform 'solaris'"),
        (["--python", "banana"], "--python 'banana'"),
        (["--no-gpu", "--gpu", "8.6"], "--no-gpu cannot be combined"),
        (["--host", "/nonexistent/detect.json"], "no such file"),
    ],
)
def test_bad_input_one_line_exit_2(
    synth_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, "suggest", *args)
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err + out


def test_host_file_round_trip(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = {
        "platform": "linux-x86_64",
        "python": "3.11",
        "driver": "580.159.04",
        "state": "ok",
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}],
    }
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(host), encoding="utf-8")
    code, out, _ = run(capsys, "suggest", "--json", "--host", str(path))
    assert code == 0
    data = json.loads(out)
    assert data["selection"]["variant"] == "cu130"
    assert data["target"]["driver"] == "580.159.04"


def test_broken_database_is_one_line(synth_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (synth_dir / "cuda.yaml").write_text("toolkits: [\n  {version: 12.8\n", encoding="utf-8")
    code, _, err = run(capsys, "suggest", "--no-gpu")
    assert code == 2
    assert "cuda.yaml" in err and "line" in err


def test_build_tag_in_torch_pin_selects_that_variant(
    synth_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "suggest",
        "--json",
        "--torch",
        "==2.8.0+cu126",
        "--gpu",
        "8.6",
        "--driver",
        "580.65.06",
        "--python",
        "3.11",
    )
    assert code == 0
    sel = json.loads(out)["selection"]
    assert (sel["torch"], sel["variant"]) == ("2.8.0", "cu126")
