"""The output folder (flows/output.py): one no-follow policy, the manifest written last, only
files provably ours removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resolver.core.errors import UserError
from resolver.flows.output import OutputFolder, owned_names
from resolver.writers import manifest, recorded

SPEC = "team.yaml"


def ours(name: str, body: str = "torch==2.8.0\n") -> str:
    """A file as a team lock writes it: stamped with its inputs, naming the spec."""
    return recorded.stamp(name.rsplit("/", 1)[-1], body, {"spec": SPEC, "target": {}})


def listed(folder: Path) -> set[str]:
    return set(json.loads((folder / manifest.MANIFEST).read_text())["files"])


def test_a_group_no_longer_generated_is_removed_and_the_manifest_follows(tmp_path: Path) -> None:
    out = OutputFolder(tmp_path)
    first = {"a/requirements.txt": ours("a/requirements.txt"), "report.md": ours("report.md")}
    out.replace(first, SPEC, owned_names())
    assert listed(tmp_path) == set(first)
    second = {"b/requirements.txt": ours("b/requirements.txt"), "report.md": ours("report.md")}
    done = out.replace(second, SPEC, owned_names())
    assert not (tmp_path / "a").exists()  # the file, and the folder it left empty
    assert [f.status for f in done.files] == ["removed", "written", "unchanged"]
    assert listed(tmp_path) == set(second)


def test_the_manifest_is_written_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run cut short while removing leaves the old manifest, which still names what to
    remove: the next run finishes the job."""
    out = OutputFolder(tmp_path)
    first = {"a/requirements.txt": ours("a/requirements.txt"), "report.md": ours("report.md")}
    out.replace(first, SPEC, owned_names())

    def cut_short(*args: object, **kwargs: object) -> list[Path]:
        raise KeyboardInterrupt

    monkeypatch.setattr(manifest, "remove", cut_short)
    second = {"report.md": ours("report.md", "torch==2.9.0\n")}
    with pytest.raises(KeyboardInterrupt):
        out.replace(second, SPEC, owned_names())
    assert (tmp_path / "report.md").read_text() == second["report.md"]  # the new files: in
    assert listed(tmp_path) == set(first)  # the manifest: still the old one
    monkeypatch.undo()
    out.replace(second, SPEC, owned_names())
    assert not (tmp_path / "a").exists() and listed(tmp_path) == set(second)


def test_a_users_file_with_our_name_is_kept(tmp_path: Path) -> None:
    out = OutputFolder(tmp_path)
    first = {"a/requirements.txt": ours("a/requirements.txt"), "report.md": ours("report.md")}
    out.replace(first, SPEC, owned_names())
    (tmp_path / "a" / "requirements.txt").write_text("numpy\n")  # edited since: the user's now
    done = out.replace({"report.md": ours("report.md")}, SPEC, owned_names())
    assert (tmp_path / "a" / "requirements.txt").read_text() == "numpy\n"
    assert [k.name for k in done.kept] == ["a/requirements.txt"]


def test_no_read_under_the_folder_follows_a_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = {"platform": "linux-x86_64", "python": "3.12"}  # a record `--check` can read
    text = recorded.stamp("requirements.txt", "torch\n", {"target": target})
    (elsewhere / "requirements.txt").write_text(text)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "requirements.txt").symlink_to(elsewhere / "requirements.txt")
    (folder / "pyproject.toml").symlink_to(elsewhere / "requirements.txt")
    assert OutputFolder(elsewhere).recorded_inputs() is not None
    assert OutputFolder(folder).recorded_inputs() is None  # not read through the link
    with pytest.raises(UserError, match="link"):
        OutputFolder(folder).existing(["pyproject.toml"], 1 << 20)
