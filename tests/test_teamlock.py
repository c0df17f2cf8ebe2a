"""Team environments end to end: the shipped examples regenerate byte for byte; --check guards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.lockpins import read as read_pins

ROOT = Path(__file__).resolve().parent.parent / "environments"
EXAMPLES = {"research-lab": [], "dev-cpu-mac": []}  # each spec records its split: no flags


run = run_cli


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def copy_examples(tmp_path: Path) -> Path:
    envs = tmp_path / "environments"
    shutil.copytree(ROOT, envs)
    return envs


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_regenerate_byte_identically(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = tmp_path / "environments"
    envs.mkdir()
    shutil.copy(ROOT / f"{name}.yaml", envs)
    if (ROOT / "hosts").is_dir():
        shutil.copytree(ROOT / "hosts", envs / "hosts")
    code, _, err = run(capsys, "lock", str(envs / f"{name}.yaml"), *EXAMPLES[name])
    assert code == 0, err
    assert tree(envs / name) == tree(ROOT / name)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_check_passes_on_committed_files(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "lock", str(ROOT / f"{name}.yaml"), *EXAMPLES[name], "--check")
    assert code == 0, out + err
    assert "all current" in out


def test_check_fails_after_any_edit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envs = copy_examples(tmp_path)
    req = envs / "research-lab" / "pascal-laptop" / "requirements.txt"
    text = req.read_text()
    req.write_text(text.replace("torch==2.7.1+cu126", "torch==2.7.0+cu126"))
    before = tree(envs)
    code, out, err = run(capsys, "lock", str(envs / "research-lab.yaml"), "--check")
    assert code == 1
    assert "-torch==2.7.0+cu126" in out and "+torch==2.7.1+cu126" in out
    assert "pascal-laptop/requirements.txt" in err
    assert tree(envs) == before  # --check writes nothing
    # A one-byte drift in the report is caught too.
    req.write_text(text)
    report = envs / "research-lab" / "report.md"
    report.write_bytes(report.read_bytes() + b" ")
    code, _, _ = run(capsys, "lock", str(envs / "research-lab.yaml"), "--check")
    assert code == 1


def test_no_common_set_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envs = copy_examples(tmp_path)
    shutil.rmtree(envs / "research-lab")
    code, out, err = run(capsys, "lock", str(envs / "research-lab.yaml"), "--no-split")
    assert code == 1
    assert "pascal-laptop needs" in out and "b200-node needs" in out
    assert "--split" in err
    assert not (envs / "research-lab").exists()


def test_bad_spec_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envs = copy_examples(tmp_path)
    spec = envs / "dev-cpu-mac.yaml"
    spec.write_text(spec.read_text().replace("platform: macos-arm64", "platfrom: macos-arm64"))
    shutil.rmtree(envs / "dev-cpu-mac")
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2
    assert "dev-cpu-mac.yaml: targets[2].platfrom: unknown key" in err
    assert len(err.strip().splitlines()) == 1
    assert not (envs / "dev-cpu-mac").exists()


def test_target_options_belong_in_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lock", str(ROOT / "dev-cpu-mac.yaml"), "--gpu", "8.6")
    assert code == 2 and "--gpu belongs in the spec" in err


def test_verify_reads_the_team_lock() -> None:
    lock = read_pins(ROOT / "research-lab" / "a100-servers" / "requirements.txt")
    pins = {p.name: p for p in lock.pins}
    assert (pins["torch"].version, pins["torch"].variant) == ("2.10.0", "cu128")
    assert pins["torchvision"].variant == "cu128"
    assert "numpy" in pins  # the spec's other packages travel with the set
    assert lock.index_urls == ("https://download.pytorch.org/whl/cu128",)


def test_files_no_longer_generated_are_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    old = envs / "dev-cpu-mac" / "windows-x86_64" / "requirements.txt"
    old.parent.mkdir()
    old.write_text("torch==2.0.0+cpu\n")
    notes = envs / "dev-cpu-mac" / "NOTES.md"  # not ours: never touched
    notes.write_text("team notes\n")
    code, _, err = run(capsys, "lock", str(envs / "dev-cpu-mac.yaml"), "--check")
    assert code == 1 and "windows-x86_64/requirements.txt" in err
    code, out, _ = run(capsys, "lock", str(envs / "dev-cpu-mac.yaml"))
    assert code == 0 and "removed" in out
    assert not old.parent.exists() and notes.exists()
    assert tree(envs / "dev-cpu-mac") == {**tree(ROOT / "dev-cpu-mac"), "NOTES.md": b"team notes\n"}


def _spec_with_split(envs: Path, value: str | None) -> Path:
    spec = envs / "research-lab.yaml"
    text = spec.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("split:"))
    spec.write_text(text.replace(line + "\n", "" if value is None else f"split: {value}\n"))
    return spec


def test_split_auto_splits_only_without_a_common_set_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    spec = _spec_with_split(envs, None)  # the default: auto
    code, out, err = run(capsys, "lock", str(spec), "--check")
    assert code == 0, out + err
    assert "split into 2 groups (split: auto" in err
    # dev-cpu-mac has a common set: auto does not split it.
    code, out, err = run(capsys, "lock", str(envs / "dev-cpu-mac.yaml"), "--check")
    assert code == 0 and "split" not in err


def test_split_false_in_the_spec_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    spec = _spec_with_split(envs, "false")
    before = tree(envs)
    code, out, err = run(capsys, "lock", str(spec))
    assert code == 1 and "no set runs on every target" in out
    assert tree(envs) == before
    code, _, err = run(capsys, "lock", str(spec), "--split", "--check")
    assert code == 0 and "--split overrides the spec's split: false" in err


def test_split_value_is_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    envs = copy_examples(tmp_path)
    spec = _spec_with_split(envs, "sometimes")
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2 and "split: 'sometimes': expected true, false or auto" in err


def test_team_lock_json_lists_files(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = run(capsys, "lock", str(ROOT / "research-lab.yaml"), "--check", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ok"] is True and data["check"] == "current" and data["split"] is True
    assert {f["status"] for f in data["files"]} == {"current"}
    assert {Path(f["path"]).name for f in data["files"]} == {"requirements.txt", "report.md"}
    assert [g["label"] for g in data["groups"]] == ["a100-servers", "pascal-laptop"]
    assert data["groups"][1]["platforms"]["linux-x86_64"]["torch"] == "2.7.1"


def test_team_check_uses_the_recorded_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    spec = str(envs / "dev-cpu-mac.yaml")
    code, _, err = run(capsys, "lock", spec, "--format", "requirements", "--format", "conda")
    assert code == 0, err
    assert (envs / "dev-cpu-mac" / "linux-x86_64" / "environment.yml").is_file()
    code, out, err = run(capsys, "lock", spec, "--check")  # no --format: as recorded
    assert code == 0, out + err
    assert "all current: 7 file(s)" in out
