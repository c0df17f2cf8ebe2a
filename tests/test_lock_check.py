"""`gpuresolve lock --check` from the inputs a lock records: drift, stale, database newer only."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli, write_db
from lock_support import lock_raw
from pytorch_index import tree_snapshot

from resolver.host import platform as host_platform
from resolver.writers import recorded
from resolver.writers.recorded import KEY

run = run_cli
DESCRIBED = ["--platform", "linux-x86_64", "--python", "3.10", "--driver", "560.35.03"]
DESCRIBED += ["--gpu", "8.9"]


def _this_python(monkeypatch: pytest.MonkeyPatch, python: str) -> None:
    """Pretend gpuresolve runs under another interpreter (and another glibc)."""
    real = host_platform.probe()
    fake = host_platform.PlatformInfo(real.system, "linux-x86_64", python, f"{python}.1", "2.39")
    monkeypatch.setattr(host_platform, "probe", lambda: fake)


def test_check_reresolves_from_the_recorded_inputs_under_another_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's example, on the shipped database: no target flags on --check."""
    out = tmp_path / "lock"
    _this_python(monkeypatch, "3.11")
    code, _, err = run(capsys, "lock", *DESCRIBED, "-o", str(out))
    assert code == 0, err
    text = (out / "requirements.txt").read_text()
    record = recorded.read("requirements.txt", text)
    assert record is not None
    assert record["target"]["python"] == "3.10"
    assert record["target"]["gpus"] == [{"cc": "8.9"}] and record["target"]["driver"] == "560.35.03"
    assert record["request"]["evidence"] == "documented"
    assert recorded.intact("requirements.txt", text)

    _this_python(monkeypatch, "3.13")
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, stdout + err
    assert stdout.startswith("all current") and "override" not in err

    # The same flags again are no override; another value is, and says so.
    code, _, err = run(capsys, "lock", *DESCRIBED, "--check", "-o", str(out))
    assert code == 0 and "override" not in err
    code, _, err = run(capsys, "lock", "--check", "-o", str(out), "--python", "3.12")
    assert "--python from the command line override the inputs recorded in" in err

    # A hand edit is drift: a diff back to what gpuresolve writes, exit 1.
    pinned = next(ln for ln in text.splitlines() if ln.startswith("torch=="))
    (out / "requirements.txt").write_text(text.replace(pinned, "torch==2.0.0+cu118"))
    before = tree_snapshot(out)
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1
    assert "-torch==2.0.0+cu118" in stdout and f"+{pinned}" in stdout
    assert "(drift): requirements.txt" in err
    assert tree_snapshot(out) == before


@pytest.fixture
def synth_db(
    tmp_path: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    raw = lock_raw(synth_raw)
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(tmp_path / "db"))
    return raw


def _without_newest(raw: dict[str, Any]) -> dict[str, Any]:
    older = copy.deepcopy(raw)
    older["torch.yaml"]["series"] = [
        s for s in older["torch.yaml"]["series"] if s["minor"] != "2.12"
    ]
    older["conda_forge.yaml"]["releases"] = []
    return older


CPU = ["--platform", "linux-x86_64", "--no-gpu", "--python", "3.11", "--with", "torchvision"]


def test_stale_when_the_inputs_now_resolve_to_a_newer_torch(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    write_db(tmp_path / "db", _without_newest(synth_db))
    code, stdout, _ = run(capsys, "lock", *CPU, "-o", str(out))
    assert code == 0 and "torch 2.8.0" in stdout
    write_db(tmp_path / "db", synth_db)  # a database that knows torch 2.12.0
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1
    assert "torch 2.12.0 is now available for this target (the files pin torch 2.8.0)" in err
    assert "rerun `gpuresolve lock`" in err and "drift" not in err
    assert "+torch==2.12.0+cpu" in stdout


def test_a_newer_database_with_the_same_pins_passes_with_a_note(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    write_db(tmp_path / "db", synth_db)
    assert run(capsys, "lock", *CPU, "-o", str(out))[0] == 0
    newer = copy.deepcopy(synth_db)
    newer["torch.yaml"]["updated"] = "2026-06-30"
    write_db(tmp_path / "db", newer)
    before = tree_snapshot(out)
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, stdout + err
    assert "note: the same pins" in err and "2026-01-01" in err and "2026-06-30" in err
    assert tree_snapshot(out) == before
    code, stdout, _ = run(capsys, "lock", "--check", "-o", str(out), "--json")
    data = json.loads(stdout)
    assert data["ok"] is True and data["check"] == "database-newer" and data["exit"] == 0
    assert data["files"][0]["status"] == "comments"
    # --check --json says what changed, not the whole decision with every rejected build.
    assert "decision" not in data and data["build"]["torch"] == "2.12.0"
    assert data["changes"] == [
        "the database changed: the files record the database of 2026-01-01, this one is 2026-06-30"
    ]
    assert data["files"][0]["changes"] == data["changes"]
    assert any("note: the same pins" in m for m in data["messages"])
    assert len(stdout.splitlines()) < 100  # the whole decision is 1,500+ lines
    # An option given on the command line is named by its flag among the changes.
    code, _, err = run(capsys, "lock", "--check", "-o", str(out), "--torch", "<2.12")
    assert code == 1 and "--torch from the command line override" in err
    assert "changed since the files were written: --torch changed from none to <2.12" in err


def test_a_described_target_says_which_python_it_assumed(
    tmp_path: Path,
    synth_db: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_db(tmp_path / "db", synth_db)
    _this_python(monkeypatch, "3.12")
    out = tmp_path / "lock"
    code, _, err = run(capsys, "lock", "--platform", "linux-x86_64", "--no-gpu", "-o", str(out))
    assert code == 0
    assert "no --python given: the lock assumes Python 3.12" in err
    record = recorded.read("requirements.txt", (out / "requirements.txt").read_text())
    assert record is not None and record["target"]["python"] == "3.12"
    # --check under another interpreter keeps the recorded 3.12.
    _this_python(monkeypatch, "3.10")
    code, _, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, err


def test_lock_json_lists_files_and_the_decision(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    write_db(tmp_path / "db", synth_db)
    out = tmp_path / "lock"
    args = ["lock", *CPU, "--format", "requirements", "--format", "conda", "-o", str(out)]
    code, stdout, _ = run(capsys, *args, "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["ok"] is True and data["check"] is None
    assert [(Path(f["path"]).name, f["format"], f["status"]) for f in data["files"]] == [
        ("requirements.txt", "requirements", "written"),
        ("environment.yml", "conda", "written"),
        ("virtual-packages.yml", "conda", "written"),
    ]
    assert data["decision"]["selection"]["torch"] == "2.12.0"
    code, stdout, _ = run(capsys, *args, "--json")
    assert {f["status"] for f in json.loads(stdout)["files"]} == {"unchanged"}
    # No build: exit 1, still JSON.
    code, stdout, _ = run(capsys, "lock", *CPU, "--torch", ">=9", "-o", str(out), "--json")
    assert code == 1 and json.loads(stdout)["ok"] is False


def test_damaged_record_is_one_clear_error(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    write_db(tmp_path / "db", synth_db)
    out = tmp_path / "lock"
    assert run(capsys, "lock", *CPU, "-o", str(out))[0] == 0
    req = out / "requirements.txt"
    req.write_text(req.read_text().replace('"platform":"linux-x86_64"', '"platform":7'))
    code, _, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 2
    assert err.startswith("gpuresolve:") and "the recorded target is damaged" in err
    assert len(err.strip().splitlines()) == 1


def test_a_file_without_recorded_inputs_is_named_as_such(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    write_db(tmp_path / "db", synth_db)
    out = tmp_path / "lock"
    assert run(capsys, "lock", *CPU, "-o", str(out))[0] == 0
    req = out / "requirements.txt"
    req.write_text("".join(ln for ln in req.read_text().splitlines(True) if KEY not in ln))
    code, _, err = run(capsys, "lock", *CPU, "--top-level", "--check", "-o", str(out))
    assert code == 1 and "no recorded inputs" in err and "requirements.txt" in err


def test_a_stale_report_is_named_not_none() -> None:
    from resolver.writers import check as lockcheck

    result = lockcheck.CheckResult(
        (lockcheck.FileCheck("report.md", lockcheck.STALE, old_database="2026-11-24"),), ""
    )
    lines = lockcheck.messages(result, "2026-11-24", "")
    assert any("another report.md" in line for line in lines)
    assert not any("None" in line for line in lines)


def test_check_says_the_database_changed_and_no_input_did(
    tmp_path: Path, synth_db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    write_db(tmp_path / "db", _without_newest(synth_db))
    assert run(capsys, "lock", *CPU, "-o", str(out))[0] == 0
    newer = copy.deepcopy(synth_db)
    newer["torch.yaml"]["updated"] = "2026-06-30"
    write_db(tmp_path / "db", newer)
    code, _, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1
    assert (
        "changed since the files were written: the database changed: the files record the "
        "database of 2026-01-01, this one is 2026-06-30"
    ) in err
    assert "the target" not in err and "request" not in err  # no input is blamed
    # The same date with other facts: said so, not blamed on a date.
    older = _without_newest(synth_db)
    older["torch.yaml"]["series"][-1]["releases"][0]["torchvision"] = "0.99.0"
    write_db(tmp_path / "db", older)
    code, _, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1, err
    assert "with a database of the same date (2026-01-01) whose facts or rules changed" in err


def test_a_lock_checked_out_with_crlf_is_current_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """git's core.autocrlf on Windows checks every text file out with CRLF: the lock is current
    (exit 0) and --check says the line endings differ; a real edit under CRLF is still drift."""
    out = tmp_path / "lock"
    code, _, err = run(capsys, "lock", *DESCRIBED, "-o", str(out))
    assert code == 0, err
    path = out / "requirements.txt"
    text = path.read_text(encoding="utf-8")
    path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0 and stdout.startswith("all current"), stdout + err
    assert "line endings differ" in err and "requirements.txt" in err
    code, stdout, _ = run(capsys, "lock", "--check", "--json", "-o", str(out))
    data = json.loads(stdout)
    assert code == 0 and data["files"][0]["line_endings"] == "crlf"
    assert data["files"][0]["status"] == "current"

    pinned = next(ln for ln in text.splitlines() if ln.startswith("torch=="))
    edited = text.replace(pinned, "torch==2.0.0+cu118").replace("\n", "\r\n")
    path.write_bytes(edited.encode("utf-8"))
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1 and "(drift): requirements.txt" in err
    assert "-torch==2.0.0+cu118\n" in stdout and "\r" not in stdout  # a diff of lines
