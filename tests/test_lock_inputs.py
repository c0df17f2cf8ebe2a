"""The lock-inputs model (`writers.recorded.LockInputs`): one JSON form, written by every file
of a lock and read back by `--check`, older forms included, each value checked without Click."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.core.errors import UserError
from resolver.writers import recorded
from resolver.writers.recorded import LockInputs

DESCRIBED = ["--platform", "linux-x86_64", "--python", "3.12", "--driver", "560.35.03"]
DESCRIBED += ["--gpu", "8.9", "--gpu", "8.9", "--gpu", "9.0"]
TEAM = """\
name: inputs-team
python: "3.12"
split: true
packages: {torch: ">=2.4", with: [torchvision], pip: [numpy]}
targets:
  - name: a
    platform: linux-x86_64
    driver: "560.35.03"
    gpus: ["8.9"]
  - name: b
    platform: linux-x86_64
    driver: "570.124.06"
    gpus: ["9.0"]
"""


def _record(path: Path) -> dict[str, Any]:
    found = recorded.read(path.name, path.read_text())
    assert found is not None
    return {k: v for k, v in found.items() if k not in ("v", "sha256")}


def test_a_single_lock_record_reads_back_to_the_same_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    argv = ["lock", *DESCRIBED, "--format", "conda", "--format", "requirements", "--name", "x"]
    assert run_cli(capsys, *argv, "--with", "torchvision", "-o", str(out))[0] == 0
    for name in ("requirements.txt", "environment.yml"):
        raw = _record(out / name)
        inputs = LockInputs.from_json(raw, name)
        assert inputs.to_json() == raw
        assert inputs.files is not None and inputs.files.formats == ("conda", "requirements")
        assert inputs.request is not None and inputs.request.with_ == ("torchvision",)
        assert inputs.target is not None and [g.cc for g in inputs.target.gpus] == [
            (8, 9),
            (8, 9),
            (9, 0),
        ]


def test_every_file_of_a_team_lock_reads_back_to_the_same_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "inputs-team.yaml"
    spec.write_text(TEAM)
    out = tmp_path / "env"
    formats = ("--format", "requirements", "--format", "conda", "--format", "uv")
    assert run_cli(capsys, "lock", str(spec), *formats, "-o", str(out))[0] == 0
    names = [p for p in out.rglob("*") if p.is_file() and p.name != ".gpuresolve-manifest.json"]
    groups: set[str | None] = set()
    for path in names:
        raw = recorded.read(path.name, path.read_text())
        if raw is None:
            continue
        raw = {k: v for k, v in raw.items() if k not in ("v", "sha256")}
        inputs = LockInputs.from_json(raw, path.name)
        assert inputs.spec == "inputs-team.yaml" and inputs.to_json() == raw, path
        groups.add(inputs.group)
    assert None in groups and "a" in groups  # report.md records none, a set its group
    report = LockInputs.from_json(_record(out / "report.md"), "report.md")
    assert (
        report.python == "3.12"
        and report.targets is not None
        and set(report.targets)
        == {
            "a",
            "b",
        }
    )
    assert report.request is not None and report.request.pip == ("numpy",)


def test_an_older_record_without_top_level_reads_its_hashes_choice() -> None:
    """Recorded before full locks were the default: no hashes meant top-level pins."""
    for hashes, top in ((False, True), (True, False)):
        files = {"formats": ["requirements"], "hashes": hashes}
        older = {"request": {"torch_spec": None}, "files": files}
        inputs = LockInputs.from_json(older, "requirements.txt")
        assert inputs.files is not None and inputs.files.top_level is top
        assert inputs.knows("files", "top_level") and not inputs.knows("request", "cuda")


@pytest.mark.parametrize(
    ("part", "key", "value", "says"),
    [
        ("request", "pytorch_index", "https://x.example/whl\n--extra-index-url e", "not one"),
        ("files", "default_index", "javascript:alert(1)", "not valid"),
        ("request", "driver_policy", "lenient", "not valid"),
        ("request", "with_", "torchvision", "not one the option takes"),
        ("request", "allow_unconfirmed", "yes", "not one the option takes"),
        ("files", "formats", ["requirements", "evil"], "not valid"),
        ("files", "channel", "conda forge", "not valid"),
        ("files", "hashes", "no", "not one the option takes"),
        ("files", "env_name", "x\u202e", "not one the option takes"),
    ],
)
def test_a_forged_value_is_one_line_naming_its_option(
    part: str, key: str, value: Any, says: str
) -> None:
    record: dict[str, dict[str, Any]] = {
        "request": {"torch_spec": ">=2.4"},
        "files": {"formats": ["requirements"]},
    }
    record[part] = {**record[part], key: value}
    with pytest.raises(UserError) as exc:
        LockInputs.from_json(record, "requirements.txt")
    message = str(exc.value)
    assert message.startswith("requirements.txt: the recorded " + recorded.flag(key))
    assert says in message and "\n" not in message
