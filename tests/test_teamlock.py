"""Team environments end to end: the shipped examples regenerate byte for byte; --check guards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import assert_schema, run_cli

from resolver.readers.lockfile import read as read_pins

ROOT = Path(__file__).resolve().parent.parent / "environments"
EXAMPLES: dict[str, list[str]] = {
    "research-lab": [],
    "dev-cpu-mac": [],
    "gpu-cluster": [],
}  # splits recorded: no flags
INPUTS = ("hosts", "clusters")  # the examples' detect files and node lists, beside the specs


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
    for folder in INPUTS:
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, envs / folder)
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
    req.write_text(text.replace("torch==2.14.1+cu126", "torch==2.14.0+cu126"))
    before = tree(envs)
    code, out, err = run(capsys, "lock", str(envs / "research-lab.yaml"), "--check")
    assert code == 1
    assert "-torch==2.14.0+cu126" in out and "+torch==2.14.1+cu126" in out
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
    assert (pins["torch"].version, pins["torch"].variant) == ("2.11.0", "cu128")
    assert pins["torchvision"].variant == "cu128"
    assert "numpy" in pins  # the spec's other packages travel with the set
    assert lock.index_urls == ("https://download.pytorch.org/whl/cu128",)


def _two_platform_spec(directory: Path) -> Path:
    spec = directory / "pair.yaml"
    spec.write_text(
        "name: pair\npython: '3.12'\npackages: {torch: '>=2.6'}\ntargets:\n"
        "  - {name: linux, platform: linux-x86_64, no_gpu: true}\n"
        "  - {name: mac, platform: macos-arm64}\n"
    )
    return spec


def _drop_mac(spec: Path) -> None:
    spec.write_text(spec.read_text().replace("  - {name: mac, platform: macos-arm64}\n", ""))


def test_files_no_longer_generated_are_removed_when_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _two_platform_spec(tmp_path)
    out_dir = tmp_path / "pair"
    assert run(capsys, "lock", str(spec))[0] == 0
    mac = out_dir / "macos-arm64" / "requirements.txt"
    assert mac.is_file() and (out_dir / ".gpuresolve-manifest.json").is_file()
    notes = out_dir / "NOTES.md"  # not ours: never touched
    notes.write_text("team notes\n")
    _drop_mac(spec)
    code, _, err = run(capsys, "lock", str(spec), "--check")
    assert code == 1 and "macos-arm64/requirements.txt" in err
    code, out, _ = run(capsys, "lock", str(spec), "--check", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["check"] == "drift" and doc["files"]
    assert all(f["status"] == "removed" and f["changes"] == [] for f in doc["files"])
    assert_schema("lock-check", doc)  # each file listed as --check lists files: with changes
    code, out, _ = run(capsys, "lock", str(spec))
    assert code == 0 and f"removed {mac}" in out
    assert not mac.parent.exists() and notes.read_text() == "team notes\n"
    assert run(capsys, "lock", str(spec), "--check")[0] == 0


def test_user_files_with_generated_names_are_never_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lock SPEC -o .` in a project root: the project's own files stay byte-identical."""
    spec = _two_platform_spec(tmp_path)
    root = tmp_path / "project"
    mine = {
        "backend/requirements.txt": b"flask==3.0\n",
        "docs/report.md": b"# quarterly report\n",
        ".venv/lib/environment.yml": b"name: x\n",
        "a/b/c/conda-lock.yml": b"package: []\n",
        "macos-arm64/virtual-packages.yml": b"subdir: osx-arm64\n",
        "windows-x86_64/requirements.txt": b"# Generated by gpuresolve 0.0.1\ntorch\n",
    }
    for rel, data in mine.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    assert run(capsys, "lock", str(spec), "-o", str(root))[0] == 0
    _drop_mac(spec)
    assert run(capsys, "lock", str(spec), "-o", str(root))[0] == 0
    for rel, data in mine.items():
        assert (root / rel).read_bytes() == data, rel
    assert not (root / "macos-arm64" / "requirements.txt").exists()  # ours, recorded: gone
    assert (root / "macos-arm64").is_dir()  # still holds the user's file


def test_an_edited_stale_file_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _two_platform_spec(tmp_path)
    assert run(capsys, "lock", str(spec))[0] == 0
    mac = tmp_path / "pair" / "macos-arm64" / "requirements.txt"
    mac.write_text(mac.read_text() + "extra-package==1.0\n")
    _drop_mac(spec)
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 0 and mac.is_file()
    assert f"kept {mac}" in err and "edited since gpuresolve wrote it" in err


@pytest.mark.parametrize(
    "files",
    [
        {"../outside.txt": "0" * 64},
        {"/etc/passwd": "0" * 64},
        {"link/requirements.txt": "0" * 64},
    ],
    ids=["dotdot", "absolute", "through-a-link"],
)
def test_a_manifest_cannot_reach_outside_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> None:
    import hashlib
    import json

    spec = _two_platform_spec(tmp_path)
    out_dir = tmp_path / "pair"
    out_dir.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "requirements.txt").write_text("precious\n")
    (out_dir / "link").symlink_to(elsewhere)
    sha = hashlib.sha256(b"precious\n").hexdigest()
    doc = {"files": dict.fromkeys(files, sha)}
    (out_dir / ".gpuresolve-manifest.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "lock", str(spec))
    assert code in (0, 2) and "Traceback" not in err  # 2: a name no lock writes (one line)
    assert outside.read_text() == "precious\n"
    assert (elsewhere / "requirements.txt").read_text() == "precious\n"


def test_a_damaged_manifest_removes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _two_platform_spec(tmp_path)
    assert run(capsys, "lock", str(spec))[0] == 0
    manifest = tmp_path / "pair" / ".gpuresolve-manifest.json"
    manifest.write_text("{not json")
    before = tree(tmp_path / "pair")
    _drop_mac(spec)
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2 and "damaged" in err and len(err.strip().splitlines()) == 1
    assert tree(tmp_path / "pair") == before


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
    assert data["groups"][1]["platforms"]["linux-x86_64"]["torch"] == "2.14.1"


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


def test_a_cpu_node_gets_no_driver_hint() -> None:
    """A node without an NVIDIA GPU runs the fleet's CUDA build on the CPU: it needs no driver."""
    report = (ROOT / "gpu-cluster" / "report.md").read_text(encoding="utf-8")
    assert "| cpu |" in report or ", cpu," in report  # the CPU node is a member of the fleet
    assert "cpu: no driver given" not in report


def test_team_check_under_a_newer_dated_database_is_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `db update` brings only a newer date, the team check passes with a note (exit 0),
    as the single-machine check does: report.md is not "stale"."""
    from resolver.catalog import shipped_data_dir

    envs = copy_examples(tmp_path)
    db = tmp_path / "db"
    shutil.copytree(shipped_data_dir(), db)
    torch_yaml = db / "torch.yaml"
    torch_yaml.write_text(
        torch_yaml.read_text(encoding="utf-8").replace(
            'updated: "2026-11-24"', 'updated: "2026-12-31"', 1
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(db))
    before = tree(envs)
    code, out, err = run(capsys, "lock", str(envs / "research-lab.yaml"), "--check")
    assert code == 0, out + err
    assert "note: the same pins" in err and "2026-12-31" in err and "stale" not in err
    assert tree(envs) == before


def test_check_names_the_spec_target_and_field_that_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    spec = envs / "research-lab.yaml"
    spec.write_text(spec.read_text().replace('driver: "535.104.05"', 'driver: "550.54.15"', 1))
    code, _, err = run(capsys, "lock", str(spec), "--check")
    assert code == 1
    assert (
        "spec research-lab.yaml: target a100-servers: driver changed from 535.104.05 to 550.54.15"
        in err
    ), err
    assert "the changed inputs now" in err and "recorded inputs now" not in err
    assert "the target:" not in err  # the spec's target is named, not the platform's union
    import json

    code, out, _ = run(capsys, "lock", str(spec), "--check", "--json")
    data = json.loads(out)
    assert code == 1 and data["exit"] == 1 and data["check"] == "stale"
    assert data["changes"] == [
        "spec research-lab.yaml: target a100-servers: driver changed from 535.104.05 to 550.54.15"
    ]
    report = next(f for f in data["files"] if f["path"].endswith("report.md"))
    assert report["status"] == "stale" and report["changes"] == data["changes"]


def test_check_after_no_split_says_the_split_option_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = copy_examples(tmp_path)
    code, _, err = run(capsys, "lock", str(envs / "dev-cpu-mac.yaml"), "--no-split", "--check")
    assert code == 0, err  # the same pins: nothing to act on
    assert "the split option changed: the files were written with split: auto" in err
    assert "this run uses split: false" in err
    assert "database" not in err  # the database did not change: it is not blamed


def test_check_of_a_folder_without_lock_files_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, "lock", "--check", "-o", str(empty))
    assert code == 2 and out == ""
    assert f"no gpuresolve lock files in {empty}" in err
    code, out, err = run(
        capsys, "lock", str(ROOT / "dev-cpu-mac.yaml"), "--check", "-o", str(empty)
    )
    assert code == 2 and out == "" and f"no gpuresolve lock files in {empty}" in err
    assert not any(empty.iterdir())


def _readme_lock_examples() -> list[list[str]]:
    """The documentation's `gpuresolve lock environments/...` command lines (comments and a
    console block's `$ ` stripped), from the site's pages and the README."""
    import shlex

    docs = sorted((ROOT.parent / "docs").rglob("*.md"))
    text = "\n".join(p.read_text(encoding="utf-8") for p in [*docs, ROOT.parent / "README.md"])
    lines = [ln.split("#", 1)[0].strip().removeprefix("$ ") for ln in text.splitlines()]
    return [
        shlex.split(ln)[1:]
        for ln in lines
        if ln.startswith("gpuresolve lock environments/") and ".yaml" in ln
    ]


def test_readme_examples_leave_the_committed_examples_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running the documentation's team examples from a checkout rewrites no committed file (run
    here in a copy of the checkout's environments/)."""
    examples = _readme_lock_examples()
    assert len(examples) >= 4
    copy_examples(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path / "environments")
    for argv in examples:
        if "training-cluster" in argv[1]:  # the docs' own sketch: no such spec is committed
            continue
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, out, err)
    assert tree(tmp_path / "environments") == before


def test_a_fleet_of_any_size_records_its_targets_in_the_line_check_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named in full, by digest per target, then one digest for all: the record never outgrows
    the line `--check` reads back (the caps are lowered here; the real ones fit 50,000 targets)."""
    from resolver import catalog as catalog_mod
    from resolver.flows import team as team_lock
    from resolver.team.spec import load_spec

    lines = ["name: big", 'python: "3.12"', "targets:"]
    lines += [f'  - {{name: n{i}, driver: "570.{i}.01", gpus: ["8.6"]}}' for i in range(40)]
    path = tmp_path / "big.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = load_spec(str(path), catalog_mod.load())
    full = team_lock.targets_record(spec)
    assert full["n7"]["driver"] == "570.7.01" and full["n7"]["gpus"] == [{"cc": "8.6"}]
    monkeypatch.setattr(team_lock, "MAX_TARGETS_RECORD", 100)
    digests = team_lock.targets_record(spec)
    assert set(digests) == set(full) and digests["n7"].startswith("sha256:")
    monkeypatch.setattr(team_lock, "MAX_DIGESTS_RECORD", 200)
    assert list(team_lock.targets_record(spec)) == ["(all 40 targets)"]
