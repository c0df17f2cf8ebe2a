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
        (["--with", "torchtext"], "the packages are torchvision, torchaudio"),
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


def _host(tmp_path: Path, **fields: Any) -> str:
    data = {"platform": "linux-x86_64", "python": "3.11", "state": "ok", **fields}
    path = tmp_path / "host.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_wsl_keeps_windows_floors_when_driver_given(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, wsl=True, driver="527.41", gpus=[{"index": 0, "name": "x", "cc": "8.6"}])
    for extra in ([], ["--driver", "527.41"]):
        code, out, _ = run(capsys, "suggest", "--json", "--host", host, *extra)
        data = json.loads(out)
        # 527.41 is below the Windows 12.x floor (528.33): only the CUDA 11.8 build runs.
        assert code == 0 and data["target"]["driver_os"] == "windows"
        assert data["selection"]["variant"] == "cu118"


def test_unknown_gpu_is_named_not_dropped(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpus = [
        {"index": 0, "name": "Tesla V100-SXM2-32GB", "cc": "7.0"},
        {"index": 1, "name": "NVIDIA Future GPU 9000", "cc": None},
    ]
    host = _host(tmp_path, driver="580.65.06", gpus=gpus)
    code, out, _ = run(capsys, "suggest", "--json", "--host", host)
    data = json.loads(out)
    assert code == 0
    assert data["target"]["unknown_gpus"] == ["NVIDIA Future GPU 9000"]
    assert any("NVIDIA Future GPU 9000" in w for w in data["selection"]["warnings"])
    assert any("compute capability unknown" in h for h in data["hints"])
    assert not any("no GPU model given" in h for h in data["hints"])


@pytest.mark.parametrize(
    "text", ["[1, 2]", '{"platform": "linux-x86_64", "python": "3.11", "gpus": "abc"}']
)
def test_malformed_host_file_is_one_line(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "suggest", "--host", str(path))
    assert code == 2 and "not a `gpuresolve detect --json` file" in err
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1


def test_windows_device_manager_driver_version(
    synth_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "suggest",
        "--json",
        "--platform",
        "windows-x86_64",
        "--python",
        "3.11",
        "--gpu",
        "8.6",
        "--driver",
        "32.0.15.6094",
        "--allow-unconfirmed",
    )
    data = json.loads(out)
    assert code == 0 and data["target"]["driver"] == "560.94"
    assert data["selection"]["variant"] == "cu126"


def test_cpu_build_by_name_on_a_gpu_host(
    synth_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "suggest",
        "--json",
        "--gpu",
        "8.6",
        "--driver",
        "560.35.03",
        "--python",
        "3.11",
        "--torch",
        "==2.8.0+cpu",
    )
    sel = json.loads(out)["selection"]
    assert code == 0 and sel["variant"] == "cpu"
    assert any("stays unused" in w for w in sel["warnings"])


def test_request_that_matches_nothing_says_so(
    synth_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "suggest",
        "--gpu",
        "8.6",
        "--driver",
        "560.35.03",
        "--python",
        "3.11",
        "--cuda",
        "12.7",
    )
    assert code == 1
    assert "nothing in the database matches the request" in out
    assert "no build in the database is for CUDA 12.7" in out


def test_a_newer_cuda_build_of_the_chosen_release_is_named_as_such(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The cu130 build of the selected release needing a newer driver must not read as if the
    release itself did not run here."""
    import json

    code, out, _ = run_cli(
        capsys, "suggest", "--json", "--platform", "linux-x86_64", "--python", "3.12",
        "--driver", "570.124.06", "--gpu", "NVIDIA L4", "--torch", "==2.14.*",
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["selection"]["variant"] == "cu126"
    assert any(
        h.startswith("the cu130 build of torch 2.14.1 needs driver >= 580")
        and h.endswith("so its cu126 build is the answer")
        for h in data["hints"]
    )


@pytest.mark.parametrize(
    ("machine", "named"),
    [
        (["--no-gpu"], "--no-gpu"),
        (["--platform", "macos-arm64"], "--platform macos-arm64"),
        (["--platform", "macos-arm64", "--no-gpu"], "--platform macos-arm64"),  # the platform
    ],
)
@pytest.mark.parametrize("command", ["suggest", "lock"])
def test_a_cuda_request_for_a_machine_described_without_cuda(
    synth_dir: Path,
    capsys: pytest.CaptureFixture[str],
    machine: list[str],
    named: str,
    command: str,
) -> None:
    """The request is refused naming the one option that rules CUDA out (before any probe)."""
    out_dir = ["-o", str(synth_dir / "out")] if command == "lock" else []
    code, _, err = run(capsys, command, *machine, "--cuda", "12.4", *out_dir)
    assert code == 2
    assert err.strip() == (
        f"gpuresolve: error: {named} describes a machine without CUDA, but the request asks "
        "for --cuda 12.4: drop one of them"
    )
    assert not (synth_dir / "out").exists()
