"""Decide by the facts that decide: Windows driver numbers are not branches (issue 21 asked for it).

Every answer runs on the shipped database through the CLI, the way a user types it; the comments
name the evidence the expected answer rests on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli
from test_evidence import picked, suggest

from resolver import catalog as catalog_mod
from resolver.db.check import check as db_check

LINUX = ("--platform", "linux-x86_64")
WINDOWS = ("--platform", "windows-x86_64")


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


# --- 1. only deciding facts set the grade ----------------------------------------------------


@pytest.mark.parametrize("gpu", ["Tesla T4", "Tesla V100-SXM2-32GB"])
def test_t4_v100_on_470_get_a_2_6_or_newer_cu118(
    capsys: pytest.CaptureFixture[str], gpu: str
) -> None:
    # Linux 2.6 cu118's list is printed by users (sm_37 ... sm_90); its cuDNN 9.1.0.70, however
    # graded, only describes the build and no longer drops it to 2.5.1.
    code, data = suggest(capsys, *LINUX, "--python", "3.10", "--gpu", gpu, "--driver", "470.82.01")
    assert code == 0
    sel = data["selection"]
    assert sel["variant"] == "cu118" and version(sel["torch"]) >= (2, 6, 0)
    assert sel["confirmed"] is True
    detail = {d["fact"]: d for d in sel["evidence_detail"]}
    assert detail["cudnn"]["decides"] is False and detail["sass"]["decides"] is True


def test_r470_python_3_8_without_a_gpu_gets_2_4_1_cu118(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 2.4.1 is the last release with Python 3.8 wheels; its cu118 NCCL version is inferred,
    # which no longer sends the answer back to 2.0.1 cu117.
    code, data = suggest(capsys, *LINUX, "--python", "3.8", "--driver", "470.82.01")
    assert code == 0 and picked(data) == ("2.4.1", "cu118")
    nccl = next(d for d in data["selection"]["evidence_detail"] if d["fact"] == "nccl")
    assert nccl["decides"] is False


def test_rtx_3090_strict_on_535_gets_a_2_6_or_newer_cu118(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--python", "3.10", "--gpu", "NVIDIA GeForce RTX 3090", "--driver", "535.104.05")
    code, data = suggest(capsys, *LINUX, *args, "--driver-policy", "strict")
    assert code == 0
    sel = data["selection"]
    assert sel["variant"] == "cu118" and version(sel["torch"]) >= (2, 6, 0)


def test_describing_facts_are_shown_beside_the_grade(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--python", "3.8", "--driver", "470.82.01")
    code, out, _err = run_cli(capsys, "suggest", *LINUX, *args)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("described by (does not decide):"))
    assert "NCCL" in line and "inferred" in line
    assert not any(x.startswith("evidence:") and "NCCL" in x for x in out.splitlines())


# --- 3. Windows driver numbers are not branch numbers -----------------------------------------


def test_windows_1080_ti_on_581_57_is_r580_and_gets_2_14_1_cu126(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--python", "3.12", "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "581.57")
    code, data = suggest(capsys, *WINDOWS, *args)
    assert code == 0 and picked(data) == ("2.14.1", "cu126")
    branch = [d for d in data["selection"]["evidence_detail"] if d["fact"] == "driver branch"]
    assert branch and "R580" in branch[0]["what"]
    # 5. the way forward: stay on R580
    assert any(
        "R580 is the last driver branch" in h and "do not upgrade" in h for h in data["hints"]
    )


@pytest.mark.parametrize("driver", ["591.44", "591.59"])
def test_windows_pascal_on_r590_is_exit_1_naming_r590(
    capsys: pytest.CaptureFixture[str], driver: str
) -> None:
    args = ("--python", "3.12", "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", driver)
    code, out, _err = run_cli(capsys, "suggest", *WINDOWS, *args)
    assert code == 1
    assert "R590" in out and "no longer supports Pascal GPUs" in out
    first_hint = next(line for line in out.splitlines() if line.startswith("hint:"))
    assert "install an R580-branch driver (Windows 580.88-582.66)" in first_hint


def test_an_unplaced_windows_number_is_said_to_be_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No R580 or R590 Windows driver numbered 590.xx was seen: say so rather than guess.
    args = ("--python", "3.12", "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "590.10")
    code, out, _err = run_cli(capsys, "suggest", *WINDOWS, *args)
    assert code == 1 and "unknown" in out and "R580" in out


def test_branch_of_a_driver_number(shipped: catalog_mod.Catalog) -> None:
    assert shipped.driver_branch("581.57", "windows").exact == 580
    assert shipped.driver_branch("582.66", "windows").exact == 580
    assert shipped.driver_branch("591.44", "windows").exact == 590
    assert shipped.driver_branch("581.57", "linux").exact == 581  # Linux: the major
    assert shipped.driver_branch("590.48.01", "linux").exact == 590
    b = shipped.driver_branch("590.10", "windows")  # between the table's rows: bounds only
    assert b.exact is None and (b.lo, b.hi) == (580, 590)


def test_windows_table_is_checked(synth_raw: dict[str, Any]) -> None:
    raw = json.loads(json.dumps(synth_raw))
    raw["cuda.yaml"]["windows_driver_branches"] = [
        {"branch": "580", "windows": {"first": "580.88", "last": "582.66"}, "source": ["SEC"]},
        {"branch": "590", "windows": {"first": "582.10", "last": "591.59"}, "source": ["SEC"]},
    ]
    problems = db_check(catalog_mod.from_raw(raw))
    assert any("overlap R580" in p for p in problems)
    raw["cuda.yaml"]["windows_driver_branches"] = [
        {"branch": "580", "windows": {"first": "582.66", "last": "580.88"}, "source": ["SEC"]}
    ]
    with pytest.raises(catalog_mod.DataError):
        catalog_mod.from_raw(raw)


def test_detect_shows_the_branch(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import resolver.host as host
    from resolver.core.hostprofile import HostProfile

    here = Path(__file__).parent / "fixtures" / "host" / "h100_driver580_cli" / "detect.json"
    doc = json.loads(here.read_text())
    doc.update(platform="windows-x86_64", driver="581.57")
    doc["gpus"][0].update(name="NVIDIA GeForce GTX 1080 Ti", cc="6.1", mig=None)
    monkeypatch.setattr(host, "detect", lambda **_kw: HostProfile.from_json(doc))
    code, out, err = run_cli(capsys, "detect")
    assert code == 0 and "branch R580 [database]" in out
    assert "no longer supports" not in out + err
    code, out, _err = run_cli(capsys, "detect", "--json")
    data = json.loads(out)
    assert data["driver_branch"] == "580" and data["sources"]["driver_branch"] == "database"
    doc.update(driver="591.44")
    code, out, err = run_cli(capsys, "detect")
    assert "state: gpu-outside-driver-window" in out and "dropped in R590" in err  # a note
    doc.update(driver="590.10")
    code, out, err = run_cli(capsys, "detect")
    assert "not in the database's table" in err


def test_nvml_names_a_build_branch_that_never_decides(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """nvmlSystemGetDriverBranch names the branch a driver was built from: the device machine's
    Linux 580.159.04 (release branch R580) answered "r582_49" (recorded 2026-11-24). It is shown
    and read back validated, but the release branch comes from the driver version."""
    from resolver.host import nvml

    probed = nvml.parse({"driver_version": "580.159.04", "driver_branch": "r582_49", "errors": {}})
    assert (
        probed.driver_build_branch == "r582_49" and probed.sources["driver_build_branch"] == "nvml"
    )
    assert nvml.branch_str("582; rm -rf /") is None and nvml.branch_str("\x1b[2J") is None

    here = Path(__file__).parent / "fixtures" / "host" / "h100_driver580_cli" / "detect.json"
    doc = json.loads(here.read_text())
    doc.update(platform="windows-x86_64", driver="590.10", driver_build_branch="r580_00")
    doc["gpus"][0].update(name="NVIDIA GeForce GTX 1080 Ti", cc="6.1", mig=None)
    host = tmp_path / "host.json"
    host.write_text(json.dumps(doc))
    code, out, _err = run_cli(capsys, "suggest", "--host", str(host))
    assert code == 1 and "unknown" in out  # a build branch does not place a Windows number
    doc["driver_build_branch"] = "58; rm"
    host.write_text(json.dumps(doc))
    code, _out, err = run_cli(capsys, "suggest", "--host", str(host))
    assert code == 2 and "driver_build_branch" in err


# --- 2. grades as strong as the evidence -------------------------------------------------------


def test_windows_5090_on_581_57_gets_a_2_14_cuda_13_build(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Windows 2.12-2.14 cu130/cu132 lists: PyTorch's cuda_config.bat of the era (build-config).
    args = ("--python", "3.12", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "581.57")
    code, data = suggest(capsys, *WINDOWS, *args)
    assert code == 0
    sel = data["selection"]
    assert version(sel["torch"]) >= (2, 14, 0) and sel["variant"] in ("cu130", "cu132")
    assert sel["evidence"] == "build-config"
    # 5. the newest release a stronger fact would unlock is the one named
    assert any(h.startswith("torch 2.15.0 may run too") for h in data["hints"])


@pytest.mark.parametrize(
    ("minor", "variant", "sass", "ptx"),
    [
        ("2.8", "cu128", (6, 1), ()),  # Windows cu128 kept 6.1 until PR #164470
        ("2.8", "cu128", (7, 0), ()),
        ("2.9", "cu128", (7, 0), ()),  # and 7.0 until 2.11
        ("2.7", "cu118", (3, 7), ((3, 7),)),  # the 2.7.1 wheel prints compute_37
    ],
)
def test_windows_lists_found_wrong_are_fixed(
    shipped: catalog_mod.Catalog,
    minor: str,
    variant: str,
    sass: tuple[int, int],
    ptx: tuple[tuple[int, int], ...],
) -> None:
    rel = next(r for r in shipped.releases if r.minor == minor)
    arch = next(v for v in rel.variants if v.name == variant).platforms["windows-x86_64"]
    assert arch is not None and sass in arch.sass and arch.ptx == ptx
    if ptx:  # whether CUDA 11.8's libraries run through that PTX on new GPUs is unknown
        assert arch.ptx_provenance.grade == "inferred"


def test_dates_and_yanked_companions(shipped: catalog_mod.Catalog) -> None:
    assert shipped.release("2.1.1").date == "2023-11-15"  # type: ignore[union-attr]
    assert shipped.release("2.2.1").date == "2024-02-22"  # type: ignore[union-attr]
    r200 = shipped.release("2.0.0")
    assert r200 is not None and r200.torchvision == "0.15.1"
    assert r200.yanked == {"torchvision": ("0.15.0",), "torchaudio": ("2.0.0",)}


def test_asking_for_a_yanked_companion_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--python", "3.10", "--torch", "==2.0.0", "--with", "torchvision==0.15.0")
    code, out, _err = run_cli(
        capsys, "suggest", *LINUX, *args, "--gpu", "8.6", "--driver", "535.104.05"
    )
    assert code == 1 and "0.15.0 is yanked" in out


def test_official_images_from_2_10_are_ubuntu_24_04_python_3_12(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ref = "pytorch/pytorch:2.10.0-cuda12.8-cudnn9-devel"
    code, out, _err = run_cli(capsys, "image", ref, "--gpu", "8.9", "--driver", "580.65.06")
    assert code == 0 and "Python 3.12" in out and "ubuntu:24.04" in out and "nvcc" in out
    ref = "pytorch/pytorch:2.9.0-cuda12.8-cudnn9-devel"
    code, out, _err = run_cli(capsys, "image", ref, "--gpu", "8.9", "--driver", "580.65.06")
    assert code == 0 and "Python 3.11" in out and "nvidia/cuda devel image" in out


# --- 5. hints that name the way forward ------------------------------------------------------


def test_no_self_contradicting_kernel_hint(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--python", "3.12", "--gpu", "6.1", "--driver", "580.65.06")
    code, data = suggest(capsys, *LINUX, *args)
    assert code == 0
    for hint in data["hints"]:
        assert not ("builds have no kernels" in hint and "unknown" in hint), hint


def test_db_show_counts_grades_per_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "db", "show")
    assert code == 0 and "grades per kind of fact" in out and "cudnn*" in out
    code, out, _err = run_cli(capsys, "db", "show", "--json")
    kinds = {k["kind"]: k for k in json.loads(out)["grades_by_kind"]}
    assert kinds["cudnn"]["decides"] is False and kinds["sass"]["decides"] is True
    assert sum(kinds["windows branch"]["grades"].values()) >= 10
