"""`gpuresolve image`: references, the official images' contents and verdicts, NGC, the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.catalog import shipped_data_dir
from resolver.core.errors import DataError, UserError
from resolver.db import imagesdata
from resolver.images import facts as facts_mod
from resolver.images.reference import parse

A100_535 = ("--driver", "535.104.05", "--gpu", "8.0")
JSON_KEYS = {"image", "contents", "runs", "reasons", "evidence", "suggestion", "target"}
CONTENT_KEYS = {"torch", "cuda", "cudnn", "nccl", "python", "sass", "ptx"}


@pytest.fixture(autouse=True)
def shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(shipped_data_dir()))


def image_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code, out, err = run_cli(capsys, "image", *args, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize(
    ("text", "name", "tag", "digest"),
    [
        (
            "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime",
            "pytorch/pytorch",
            "2.9.0-cuda12.8-cudnn9-runtime",
            None,
        ),
        ("2.9.0-cuda12.8-cudnn9-devel", "pytorch/pytorch", "2.9.0-cuda12.8-cudnn9-devel", None),
        ("docker.io/library/pytorch/pytorch:latest", "pytorch/pytorch", "latest", None),
        (
            "ghcr.io/pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime",
            "ghcr.io/pytorch/pytorch",
            "2.9.0-cuda12.8-cudnn9-runtime",
            None,
        ),
        ("nvcr.io/nvidia/pytorch:25.12-py3", "nvcr.io/nvidia/pytorch", "25.12-py3", None),
        ("pytorch/pytorch@sha256:" + "a" * 64, "pytorch/pytorch", None, "sha256:" + "a" * 64),
        ("localhost:5000/team/torch:v1", "localhost:5000/team/torch", "v1", None),
    ],
)
def test_parse(text: str, name: str, tag: str | None, digest: str | None) -> None:
    ref = parse(text)
    assert (ref.name, ref.tag, ref.digest) == (name, tag, digest)


@pytest.mark.parametrize(
    "text", ["", "Foo::bar", "PyTorch/PyTorch:2.9.0", "a" * 600, "x@sha256:12"]
)
def test_parse_refuses(text: str) -> None:
    with pytest.raises(UserError):
        parse(text)


def test_issue_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = image_json(capsys, "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime", *A100_535)
    assert code == 0 and data["runs"] is True
    assert set(data) >= JSON_KEYS and set(data["contents"]) >= CONTENT_KEYS
    c = data["contents"]
    assert (c["torch"], c["cuda"], c["cudnn"], c["python"]) == (
        "2.9.0",
        "12.8",
        "9.10.2.21",
        "3.11",
    )
    assert "sm_80" in c["sass"]
    assert {e["fact"] for e in data["evidence"]} >= {
        "torch",
        "cuda",
        "cudnn",
        "nccl",
        "kernels",
        "python",
    }
    assert all(e["grade"] in facts_mod.GRADES for e in data["evidence"])

    code, data = image_json(capsys, "pytorch/pytorch:2.9.0-cuda13.0-cudnn9-runtime", *A100_535)
    assert code == 1 and data["runs"] is False
    assert any("580" in r and "driver" in r for r in data["reasons"])
    assert data["suggestion"]["contents"]["cuda"].startswith("12.")

    code, data = image_json(capsys, *A100_535)
    assert code == 0 and data["contents"]["cuda"].startswith("12.")
    assert data["image"].startswith("pytorch/pytorch:") and data["image"].endswith("-runtime")


def test_text_has_run_line_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "image", "2.9.0-cuda13.0-cudnn9-runtime", *A100_535)
    assert code == 1
    assert "fix: upgrade the driver to >= 580" in out
    assert "docker run --gpus all" in out and "cuda12." in out.splitlines()[-1]


def test_devel_flavour_without_tag(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = image_json(capsys, "--devel", *A100_535)
    assert code == 0 and data["image"].endswith("-devel")


def test_kernels_missing_is_no_driver_fix(capsys: pytest.CaptureFixture[str]) -> None:
    # 2.9.0 cu130 has no sm_70: a V100 needs another image, no driver helps
    code, data = image_json(
        capsys, "2.9.0-cuda13.0-cudnn9-runtime", "--gpu", "7.0", "--driver", "580.95.05"
    )
    assert code == 1
    assert any("no kernels for sm_70" in r for r in data["reasons"])
    assert data["upgrades"] == []


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("2.9.0-cuda11.8-cudnn9-runtime", "no CUDA 11.8 build"),
        ("2.9.0-cuda12.8-cudnn8-runtime", "cudnn9"),
        ("1.13.1-cuda11.6-cudnn8-runtime", "unknown torch 1.13.1"),
        ("pytorch/pytorch:nightly", "unknown pytorch/pytorch tag"),
        ("nvidia/cuda:12.8.0-devel-ubuntu22.04", "unknown image"),
        ("nvcr.io/nvidia/pytorch:19.01-py3", "unknown NGC release 19.01"),
        ("pytorch/pytorch@sha256:" + "b" * 64, "digest"),
    ],
)
def test_unknown_reference_exit_2(capsys: pytest.CaptureFixture[str], ref: str, words: str) -> None:
    code, out, err = run_cli(capsys, "image", ref, *A100_535)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1


def test_latest_is_answered(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = image_json(capsys, "latest", *A100_535)
    assert data["contents"]["cuda"] is None
    assert any("latest" in n for n in data["notes"])
    assert data["suggestion"] is not None
    assert code == (0 if data["runs"] else 1)


def test_ngc_known_and_unknown_facts(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = image_json(capsys, "nvcr.io/nvidia/pytorch:25.12-py3", *A100_535)
    assert code == 1  # CUDA 13.1 needs the 580 floor
    c = data["contents"]
    assert (c["cuda"], c["python"], c["cudnn"], c["sass"]) == ("13.1", "3.12", None, None)
    code, data = image_json(
        capsys, "nvcr.io/nvidia/pytorch:25.12-py3", "--driver", "580.95.05", "--gpu", "9.0"
    )
    assert code == 0
    assert any("not checked" in n for n in data["notes"])


def test_shipped_facts_are_valid() -> None:
    facts = facts_mod.from_raw(*imagesdata.read())
    assert facts.official.era("2.9.0") is not None
    for era in facts.official.eras:
        for f in (era.install, era.python):
            assert set(f.source) <= set(facts.sources)


def test_bad_grade_is_data_error(tmp_path: Path) -> None:
    import yaml

    raw = yaml.safe_load(imagesdata.data_file().read_text(encoding="utf-8"))
    raw["official"]["eras"][0]["python"]["grade"] = "hearsay"
    with pytest.raises(DataError, match="grade"):
        facts_mod.from_raw(raw)
    raw["official"]["eras"][0]["python"] = {
        "value": "3.10",
        "grade": "inferred",
        "source": ["NOPE"],
    }
    with pytest.raises(DataError, match="NOPE"):
        facts_mod.from_raw(raw)


def test_db_check_reads_images_and_peaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(shipped_data_dir(), data)
    assert run_cli(capsys, "db", "check", "--data", str(data))[0] == 0
    text = (data / "images.yaml").read_text(encoding="utf-8")
    (data / "images.yaml").write_text(
        text.replace('cuda: {value: "13.1"', 'cuda: {value: "13.9"'), encoding="utf-8"
    )
    peaks = (data / "gpu_peaks.yaml").read_text(encoding="utf-8")
    (data / "gpu_peaks.yaml").write_text(
        peaks.replace("fail: 0.25", "fail: 0.75"), encoding="utf-8"
    )
    code, out, _ = run_cli(capsys, "db", "check", "--data", str(data))
    assert code == 1
    assert "CUDA 13.9 not in cuda.yaml" in out and "gpu_peaks.yaml verdict" in out


def test_windows_host_uses_windows_driver_floors(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--platform", "windows-x86_64", "--gpu", "RTX 4090")
    code, data = image_json(capsys, "2.9.0-cuda12.8-cudnn9-runtime", *args, "--driver", "528.33")
    assert code == 0 and any("WSL2" in n for n in data["notes"])
    code, data = image_json(capsys, "2.9.0-cuda12.8-cudnn9-runtime", *args, "--driver", "527.41")
    assert code == 1 and any("528.33" in r for r in data["reasons"])


def test_arm64_host_cannot_run_the_amd64_images(capsys: pytest.CaptureFixture[str]) -> None:
    gh200 = ("--platform", "linux-aarch64", "--driver", "580.95.05", "--gpu", "9.0")
    code, data = image_json(capsys, "2.9.0-cuda12.8-cudnn9-runtime", *gh200)
    assert code == 1 and data["reasons"] == [
        "the official CUDA image is linux/amd64 only; this host is linux-aarch64"
    ]
    assert data["suggestion"] is None and "lock --format dockerfile" in data["upgrades"][0]
    code, data = image_json(capsys, *gh200)
    assert code == 1 and data["image"] is None
