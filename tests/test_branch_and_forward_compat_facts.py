"""Facts found missing in the 2026-11 database (issue 32): Rubin's first driver branch, Windows
driver numbers past R590 and R545's 546.33, and NGC containers in CUDA forward-compatibility mode.

Every answer runs on the shipped database through the CLI; the comments name the evidence.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_support import run_cli

from resolver import catalog as catalog_mod
from resolver.catalog import shipped_data_dir
from resolver.core.errors import DataError
from resolver.db import imagesdata
from resolver.images import facts as facts_mod

LINUX = ("--platform", "linux-x86_64", "--python", "3.12")
WINDOWS = ("--platform", "windows-x86_64", "--python", "3.12")
NGC = "nvcr.io/nvidia/pytorch:25.12-py3"


@pytest.fixture(autouse=True)
def shipped_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(shipped_data_dir()))


# --- 1. Rubin (CC 10.7) needs R615 --------------------------------------------------------------


def test_rubin_window_is_r615_from_nvidia(shipped: catalog_mod.Catalog) -> None:
    # NVIDIA's CUTLASS 4.8 notes: Rubin (SM107) kernels need R615; R610 is not sufficient.
    arch = shipped.architectures[(10, 7)]
    assert arch.name == "Rubin" and arch.drivers is not None
    assert arch.drivers.first == 615 and arch.drivers.prov.grade == "official"


@pytest.mark.parametrize("driver", ["610.43.02", "610.57.04"])
def test_rubin_on_r610_is_refused_naming_r615(
    capsys: pytest.CaptureFixture[str], driver: str
) -> None:
    code, out, _err = run_cli(capsys, "suggest", *LINUX, "--gpu", "10.7", "--driver", driver)
    assert code == 1
    assert "predates Rubin GPUs" in out and "R615" in out
    first_hint = next(line for line in out.splitlines() if line.startswith("hint:"))
    assert "R615" in first_hint and "install" in first_hint


def test_rubin_on_r615_gets_a_cuda_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "suggest", *LINUX, "--gpu", "10.7", "--driver", "615.20.03")
    assert code == 0 and "predates" not in out
    assert out.splitlines()[1].startswith("install: torch") and "+cu13" in out


# --- 2. Windows numbers: 546.33 is R545, 596.xx is R595 -----------------------------------------


@pytest.mark.parametrize(
    ("driver", "branch"),
    [("546.33", 545), ("546.12", 545), ("596.21", 595), ("596.36", 595), ("596.49", 595)],
)
def test_windows_numbers_map_to_their_branch(
    shipped: catalog_mod.Catalog, driver: str, branch: int
) -> None:
    b = shipped.driver_branch(driver, "windows")
    assert b.exact == branch and b.how == "windows table"


def test_windows_rows_past_r590_are_graded_as_copies(shipped: catalog_mod.Catalog) -> None:
    rows = {w.branch: w for w in shipped.windows_branches}
    assert rows[545].prov.grade == "transcription"  # 546.33 rests on user reports only
    assert rows[595].prov.grade == "transcription"  # 596.36 from a copy of NVIDIA's title


def test_windows_pascal_on_596_is_r595_and_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "596.36")
    code, out, _err = run_cli(capsys, "suggest", *WINDOWS, *args)
    assert code == 1 and "R595" in out and "no longer supports Pascal GPUs" in out
    assert "not certain" not in out


# --- 3. NGC containers in forward-compatibility mode --------------------------------------------


def image_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli(capsys, "image", *args, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_ngc_25_12_on_h100_r570_runs_in_forward_compat_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The case: CUDA 13.1 needs >= 580, but an H100 is a data-center GPU.
    code, out, _err = run_cli(capsys, "image", NGC, "--gpu", "H100", "--driver", "570.172.08")
    assert code == 0
    assert "RUNS on this target in CUDA forward-compatibility mode" in out
    assert "DOES NOT RUN" not in out
    fc_line = next(line for line in out.splitlines() if "runs in CUDA forward" in line)
    assert "R570" in fc_line and "NV_FWD_COMPAT" in fc_line and "[inferred" in fc_line


def test_ngc_forward_compat_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = image_json(capsys, NGC, "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "535.104.05")
    assert code == 0 and data["runs"] is True and data["forward_compat"] is True
    fc = next(e for e in data["evidence"] if e["fact"] == "forward_compat")
    assert fc["value"] == "R535" and fc["grade"] == "official"  # NVIDIA's support matrix
    assert "NV_DC_SUPPORT_615" in fc["source"]
    code, data = image_json(capsys, NGC, "--gpu", "H100", "--driver", "580.95.05")
    assert code == 0 and data["forward_compat"] is False  # no need: the driver is new enough


@pytest.mark.parametrize(
    ("args", "why"),
    [
        # A GeForce card: forward compatibility is for data-center GPUs only.
        (("--gpu", "NVIDIA GeForce RTX 4090", "--driver", "535.104.05"), "not to NVIDIA GeForce"),
        # A bare CC names no model: gpuresolve cannot tell it is a data-center part.
        (("--gpu", "9.0", "--driver", "570.172.08"), "name the model"),
        # R535 does not drive Blackwell (R570+), whatever the container carries.
        (("--gpu", "B200", "--driver", "535.104.05"), "R535 does not drive NVIDIA B200"),
        # R550 is no branch NVIDIA supports for CUDA 13 forward compatibility here.
        (("--gpu", "H100", "--driver", "550.54.14"), ""),
        # A Windows driver (WSL2): forward compatibility is for Linux drivers.
        (("--gpu", "H100", "--driver", "535.104.05", "--platform", "windows-x86_64"), ""),
    ],
)
def test_ngc_without_forward_compat_does_not_run(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], why: str
) -> None:
    code, data = image_json(capsys, NGC, *args)
    assert code == 1 and data["runs"] is False and data["forward_compat"] is False
    assert any("needs driver >= 580" in r for r in data["reasons"])
    assert any(why in n for n in data["notes"]) if why else True


def test_forward_compat_facts_are_graded_and_sourced() -> None:
    facts = facts_mod.from_raw(*imagesdata.read())
    fc = facts.ngc.forward_compat
    assert fc is not None and fc.kinds == ("datacenter",)
    assert {b.branch: b.fact.grade for b in fc.branches[13]} == {535: "official", 570: "inferred"}


def test_forward_compat_branch_must_be_quoted(tmp_path: Any) -> None:
    import yaml

    raw = yaml.safe_load((shipped_data_dir() / "images.yaml").read_text())
    raw["ngc"]["forward_compat"]["branches"]["13"][0]["branch"] = 535
    with pytest.raises(DataError, match="quoted branch"):
        facts_mod.from_raw(raw)
    raw["ngc"]["forward_compat"]["branches"]["13"][0]["branch"] = "535"
    raw["ngc"]["forward_compat"]["branches"]["13"][0]["source"] = ["NOPE"]
    with pytest.raises(DataError, match="unknown source"):
        facts_mod.from_raw(raw)
