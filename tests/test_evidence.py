"""Truth v2 (issue 12): graded evidence, the newest build that really runs, driver windows.

Every case runs on the shipped database through the CLI, the way a user types it; the expected
answers follow from the graded facts in data/ (the comments name the evidence).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_support import run_cli

from resolver import catalog as catalog_mod
from resolver.core.errors import DataError
from resolver.db.check import check as db_check
from resolver.db.evidence import Provenance, make_provenance, trusted
from resolver.db.observations import apply_observations

LINUX = ("--platform", "linux-x86_64", "--python", "3.12")
WINDOWS = ("--platform", "windows-x86_64", "--python", "3.12")
AARCH64 = ("--platform", "linux-aarch64", "--python", "3.12")


def suggest(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _err = run_cli(capsys, "suggest", "--json", *args)
    return code, json.loads(out)


def picked(data: dict[str, Any]) -> tuple[str, str] | None:
    sel = data["selection"]
    return (sel["torch"], sel["variant"]) if sel else None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # sm_60 SASS runs on sm_61; cu126 keeps it through 2.14 (build config + RFC #190355).
        ((*LINUX, "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "580.65.06"), "2.14.1"),
        ((*LINUX, "--gpu", "Tesla V100-SXM2-32GB", "--driver", "580.65.06"), "2.14.1"),
        # Windows 566 is below the CUDA 13 floor: cu126 is the newest that runs there.
        ((*WINDOWS, "--gpu", "NVIDIA GeForce RTX 4090", "--driver", "566.36"), "2.14.1"),
        ((*WINDOWS, "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "566.36"), "2.14.1"),
        ((*LINUX, "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "535.104.05"), "2.14.1"),
        ((*AARCH64, "--gpu", "NVIDIA GH200", "--driver", "560.35.03"), "2.14.1"),
    ],
)
def test_defaults_pick_the_newest_documented_cu126(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], expected: str
) -> None:
    code, data = suggest(capsys, *args)
    assert code == 0 and picked(data) == (expected, "cu126")
    sel = data["selection"]
    assert sel["evidence"] in ("build-config", "official") and sel["confirmed"] is True
    facts = {d["fact"] for d in sel["evidence_detail"]}
    assert {"release", "build", "sass", "cudnn", "python", "driver floor"} <= facts
    assert all(d["source"] for d in sel["evidence_detail"])


def test_blackwell_on_570_follows_the_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    # 2.11 cu128 has sm_120 (printed, #182250) and pins cuDNN 9.19.0.56 (printed pip output of an
    # installed 2.11.0+cu128); 2.12+ need CUDA 13 (driver 580): the default takes 2.11.0 cu128.
    gpu = ("--gpu", "NVIDIA GeForce RTX 5090", "--driver", "570.124.06")
    code, data = suggest(capsys, *LINUX, *gpu)
    assert code == 0 and picked(data) == ("2.11.0", "cu128")
    assert data["selection"]["evidence"] == "observed"
    assert data["selection"]["cudnn"] == "9.19.0.56"
    assert not any("probably runs too" in h for h in data["hints"])
    code, data = suggest(capsys, *LINUX, *gpu, "--evidence", "any")
    assert picked(data) == ("2.11.0", "cu128")
    code, data = suggest(capsys, *LINUX, *gpu, "--allow-unconfirmed")
    assert picked(data) == ("2.11.0", "cu128")


@pytest.mark.parametrize(
    "args",
    [
        # Windows 2.8.x cu126 starts at sm_61; cu128/cu129 have no Maxwell either.
        (*WINDOWS, "--gpu", "NVIDIA GeForce GTX 980", "--driver", "566.36", "--torch", "==2.8.*"),
        # 2.11 cu128 printed ['sm_75', ..., 'sm_120']: no Volta (#182250, RFC #172352).
        (*LINUX, "--gpu", "7.0", "--driver", "580.65.06", "--torch", "==2.11.*", "--cuda", "12.8"),
        # 2.15 ships no cu126 (RFC #190385): no 2.15 build has Pascal kernels.
        (*LINUX, "--gpu", "6.1", "--driver", "580.65.06", "--torch", "==2.15.*"),
    ],
)
def test_no_build_has_the_kernels(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    code, data = suggest(capsys, *args)
    assert code == 1 and data["selection"] is None
    assert any("arch" in r["kinds"] for r in data["rejected"])


def test_volta_keeps_2_10_cu128(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--gpu", "7.0", "--driver", "580.65.06", "--torch", "==2.10.*", "--cuda", "12.8")
    code, data = suggest(capsys, *LINUX, *args)
    assert code == 0 and picked(data) == ("2.10.0", "cu128")
    assert data["selection"]["evidence"] == "observed"


@pytest.mark.parametrize(
    ("gpu", "driver", "branch", "why"),
    [
        ("NVIDIA GeForce GTX 1080 Ti", "590.48.01", "R580", "no longer supports Pascal GPUs"),
        ("NVIDIA GeForce RTX 5090", "535.104.05", "R570", "predates Blackwell GPUs"),
    ],
)
def test_driver_outside_the_gpus_window(
    capsys: pytest.CaptureFixture[str], gpu: str, driver: str, branch: str, why: str
) -> None:
    code, out, _err = run_cli(capsys, "suggest", *LINUX, "--gpu", gpu, "--driver", driver)
    assert code == 1
    assert why in out and branch in out
    first_hint = next(line for line in out.splitlines() if line.startswith("hint:"))
    assert branch in first_hint and "install" in first_hint


def test_evidence_observed_is_strict(capsys: pytest.CaptureFixture[str]) -> None:
    args = (*LINUX, "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "580.65.06")
    code, data = suggest(capsys, *args, "--evidence", "observed")
    assert code == 0 and data["selection"]["evidence"] == "observed"
    assert data["selection"]["torch"] != "2.14.1"
    assert any("evidence" in r["kinds"] for r in data["rejected"])


def test_text_names_the_grade_and_v_sorts_by_rank(capsys: pytest.CaptureFixture[str]) -> None:
    args = (*LINUX, "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "580.65.06", "-v")
    code, out, _err = run_cli(capsys, "suggest", *args)
    assert code == 0
    assert "evidence: build-config" in out or "evidence: official" in out
    also = [line for line in out.splitlines() if line.startswith("also fits:")]
    assert also and all(line.endswith("]") for line in also)


def test_grades_follow_the_best_source_and_check_refuses_overclaims() -> None:
    kinds = {"A": "transcription", "B": "official"}
    assert make_provenance(("A", "B"), None, kinds).grade == "official"
    capped = make_provenance(("A",), "observed", kinds)
    assert capped.grade == "transcription" and capped.declared == "observed"
    assert trusted("official", "documented") and not trusted("official", "observed")
    assert not trusted("transcription", "documented") and trusted("inferred", "any")


def test_db_check_refuses_a_grade_its_sources_do_not_support(
    synth_raw: dict[str, Any],
) -> None:
    raw = json.loads(json.dumps(synth_raw))
    raw["cuda.yaml"]["toolkits"][0]["source"] = ["SEC"]
    raw["cuda.yaml"]["toolkits"][0]["grade"] = "observed"
    raw["cuda.yaml"]["toolkits"][0].pop("confirmed", None)
    cat = catalog_mod.from_raw(raw)
    problems = db_check(cat)
    assert any(
        "grade observed but its best source supports only transcription" in p for p in problems
    )


def test_shipped_database_checks_clean_and_counts_grades(shipped: catalog_mod.Catalog) -> None:
    assert db_check(shipped) == []
    arch = shipped.release("2.11.0")
    assert arch is not None
    cu128 = next(v for v in arch.variants if v.name == "cu128")
    linux = cu128.platforms["linux-x86_64"]
    assert linux is not None and (7, 0) not in linux.sass and linux.prov.grade == "observed"
    assert any(c.value.startswith("7.0;") for c in linux.prov.contradicts)
    r27 = shipped.release("2.7.1")
    assert r27 is not None
    l27 = next(v for v in r27.variants if v.name == "cu128").platforms["linux-x86_64"]
    assert l27 is not None and l27.ptx == ((12, 0),) and (7, 0) not in l27.sass
    r215 = shipped.release("2.15.0")
    assert r215 is not None and "cu126" not in {v.name for v in r215.variants}


def test_observation_overlays_a_curated_fact(shipped: catalog_mod.Catalog) -> None:
    sha = "ab" * 32
    doc = {
        "observations": [
            {
                "wheel": "torch-2.14.1+cu126-cp312-cp312-manylinux_2_28_x86_64.whl",
                "sha256": sha,
                "read": "2026-11-24",
                "sass": ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"],
                "ptx": ["9.0"],
            }
        ]
    }
    cat = apply_observations(shipped, doc)
    rel = cat.release("2.14.1")
    assert rel is not None
    var = next(v for v in rel.variants if v.name == "cu126")
    arch = var.platforms["linux-x86_64"]
    assert arch is not None and arch.prov.grade == "observed" and var.prov.grade == "observed"
    assert arch.ptx == ((9, 0),) and arch.ptx_provenance.source == (f"WHEEL_{sha[:16]}",)
    assert any(c.value == "none" for c in arch.ptx_provenance.contradicts)  # curated: no PTX
    other = cat.release("2.14.0")
    assert other is not None
    old = next(v for v in other.variants if v.name == "cu126").platforms["linux-x86_64"]
    assert old is not None and old.prov.grade != "observed"  # only the named release
    assert db_check(cat) == []
    with pytest.raises(DataError):
        apply_observations(shipped, {"observations": [{"wheel": "x.whl", "sha256": sha}]})


def test_provenance_keeps_the_old_confirmed_meaning() -> None:
    assert Provenance(("A",), "build-config").confirmed
    assert not Provenance(("A",), "transcription").confirmed


def test_db_show_reports_grades(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "db", "show")
    assert code == 0 and "evidence grades" in out
    assert all(g in out for g in ("observed", "build-config", "official", "transcription"))
    code, out, _err = run_cli(capsys, "db", "show", "--json")
    data = json.loads(out)
    grades = {g["grade"]: g["facts"] for g in data["grades"]}
    assert list(grades) == ["observed", "build-config", "official", "transcription", "inferred"]
    assert sum(grades.values()) == data["counts"]["facts"]
    assert data["counts"]["contradictions"] >= 1
    rel = next(r for r in data["releases"] if r["version"] == "2.11.0")
    cu128 = next(v for v in rel["variants"] if v["name"] == "cu128")
    assert cu128["platforms"]["linux-x86_64"]["grade"] == "observed"
    assert cu128["cudnn_grade"] == "observed"
    cu126 = next(v for v in rel["variants"] if v["name"] == "cu126")
    assert cu126["cudnn_grade"] == "transcription"


def test_explain_names_every_check_with_its_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    args = (*LINUX, "--gpu", "NVIDIA GeForce GTX 1080 Ti", "--driver", "580.65.06")
    code, out, _err = run_cli(capsys, "suggest", *args, "--explain", "torch==2.15.0+cu132")
    assert code == 1
    assert "torch 2.15.0+cu132 on linux-x86_64: does not fit" in out
    assert "FAIL kernels: no kernels for sm_61" in out
    assert "ok   driver: needs >= 580" in out
    assert "sass: SASS sm_75" in out and "[observed: PYPI_BIN_2.15.0, WHEEL_" in out
    code, out, _err = run_cli(capsys, "suggest", *args, "--explain", "2.14.1")
    assert code == 0 and "torch 2.14.1+cu126 on linux-x86_64: fits" in out
    assert "ranking: selected" in out
    code, _out, err = run_cli(capsys, "suggest", *args, "--explain", "torch>=2")
    assert code == 2 and "--explain" in err


def test_explain_says_why_not_the_newest(capsys: pytest.CaptureFixture[str]) -> None:
    # 2.10.0 cu126's cuDNN rests on a transcription: shown, but it only describes the build (the
    # wheel pins it), so cu126 ranks behind cu128 for being off the Package Index, not for it.
    gpu = ("--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.65.06", "--torch", "==2.10.*")
    code, out, _err = run_cli(capsys, "suggest", *LINUX, *gpu, "--explain", "torch==2.10.0+cu126")
    assert code == 0
    assert "weak evidence" not in out
    assert "cudnn: cuDNN 9.10.2.21 [transcription" in out and "does not decide" in out
    assert "the Python Package Index's build" in out


def test_detect_names_a_gpu_the_driver_ignores(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    import resolver.host as host
    from resolver.core.hostprofile import HostProfile

    here = Path(__file__).parent / "fixtures" / "host" / "h100_driver580_cli" / "detect.json"
    doc = json.loads(here.read_text())
    doc["driver"] = "590.48.01"
    doc["gpus"][0].update(name="NVIDIA GeForce GTX 1080 Ti", cc="6.1", mig=None)
    monkeypatch.setattr(host, "detect", lambda **_kw: HostProfile.from_json(doc))
    code, out, err = run_cli(capsys, "detect")
    assert code == 0 and "state: gpu-outside-driver-window" in out
    assert "no longer supports Pascal GPUs" in err and "R580" in err  # a note: on stderr
    code, out, _err = run_cli(capsys, "detect", "--json")
    assert any("R580" in m for m in json.loads(out)["messages"])
