"""A lock is a lock: `lock` pins the whole closure with hashes by default, each package from its
index, against a fixture index of real metadata (tests/closure_index.py); `--top-level` is
today's top-level pins and says so; no reachable index is one line and exit 2."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
from cli_support import write_db
from closure_index import FIXTURE, ClosureIndex, entry, manifest, serve_closure_index
from conda_channel import forge_packages, make_channel
from lock_support import lock_raw
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pytorch_index import closed_port

from resolver.cli import main
from resolver.core.platforms import marker_env
from resolver.writers.lockfiles import LockOptions

MAC = ("--platform", "macos-arm64", "--python", "3.11", "--no-gpu", "--with", "torchvision")
PIN = re.compile(r"^([a-z0-9-]+)==(\S+)")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`gpuresolve ARGS` as given: no --top-level added (cli_support's run_cli adds it)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return (exc.value.code if isinstance(exc.value.code, int) else 1), out, err


@pytest.fixture(autouse=True)
def _db(scrubbed_tools: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    db = write_db(scrubbed_tools / "db", lock_raw(synth_raw))
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(db))
    for var in ("GPURESOLVE_DEFAULT_INDEX", "GPURESOLVE_PYTORCH_INDEX"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def index() -> Iterator[ClosureIndex]:
    with serve_closure_index() as server:
        yield server


def _lock(capsys: pytest.CaptureFixture[str], ix: ClosureIndex, out: Path, *args: str) -> str:
    code, stdout, err = run_cli(
        capsys,
        "lock",
        *MAC,
        *("--pytorch-index", ix.pytorch, "--default-index", ix.default, "-o", str(out)),
        *args,
    )
    assert code == 0, stdout + err
    return (out / "requirements.txt").read_text(encoding="utf-8")


def _pins(text: str) -> dict[str, str]:
    return {m[1]: m[2] for ln in text.splitlines() if (m := PIN.match(ln.removesuffix(" \\")))}


def _closure_of(roots: list[str], pins: dict[str, str]) -> set[str]:
    """Every package the roots need on the target, read from the fixture's real METADATA."""
    env = {**marker_env("macos-arm64", "3.11"), "extra": ""}
    where = {n: f for f, ps in manifest()["indexes"].items() for n in ps}
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        folder = "whl/cpu" if name in manifest()["indexes"]["whl/cpu"] else where[name]
        meta = (
            FIXTURE / folder / name / f"{entry(folder, name)['filename']}.metadata"
        ).read_bytes()
        for line in BytesParser().parsebytes(meta, headersonly=True).get_all("Requires-Dist") or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(str(canonicalize_name(req.name)))
    return seen


@pytest.mark.slow
def test_default_lock_pins_the_whole_closure_with_hashes(
    tmp_path: Path, index: ClosureIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _lock(capsys, index, tmp_path / "out")
    pins = _pins(text)
    # Every package torch and torchvision need on the target is pinned, nothing else.
    assert set(pins) == _closure_of(["torch", "torchvision"], pins)
    assert pins["torch"] == "2.8.0" and pins["torchvision"] == "0.23.0"
    hashes = dict(
        re.findall(r"^([a-z0-9-]+)==\S+ \\\n    --hash=sha256:([0-9a-f]{64})$", text, re.M)
    )
    assert set(hashes) == set(pins)
    # Each package from the first index that has it: filelock is on both, newer on the
    # default index, and is taken (with its bytes' hash) from the PyTorch index all the same.
    assert pins["filelock"] == manifest()["indexes"]["whl/cpu"]["filelock"]
    assert hashes["filelock"] == entry("whl/cpu", "filelock")["hashes"]["sha256"]
    assert hashes["numpy"] == entry("simple", "numpy")["hashes"]["sha256"]
    assert "top-level" not in text and "with its sha256" in text
    assert not any(p.endswith(".whl") for p in index.log)  # metadata and pages alone
    # `--check` re-resolves from what the file records: current.
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(tmp_path / "out"))
    assert code == 0, err


@pytest.mark.slow
def test_no_hashes_pins_the_same_closure_without_them(
    tmp_path: Path, index: ClosureIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    hashed = _pins(_lock(capsys, index, tmp_path / "a"))
    text = _lock(capsys, index, tmp_path / "b", "--no-hashes")
    assert _pins(text) == hashed and "--hash" not in text


@pytest.mark.slow
def test_extra_packages_are_pinned_not_passed_through(
    tmp_path: Path, index: ClosureIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's packages.pip range (numpy>=2) is resolved and pinned like the rest."""
    spec = tmp_path / "team.yaml"
    spec.write_text(
        "name: team\npython: '3.11'\npackages: {torch: '==2.8.0', with: [torchvision], "
        "pip: ['numpy>=2']}\ntargets:\n  - {name: mac, platform: macos-arm64}\n"
    )
    out = tmp_path / "team"
    code, stdout, err = run_cli(
        capsys,
        *("lock", str(spec), "--pytorch-index", index.pytorch),
        *("--default-index", index.default, "-o", str(out)),
    )
    assert code == 0, stdout + err
    text = (out / "requirements.txt").read_text()
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert "numpy>=2" not in body and _pins(text)["numpy"] == "2.3.2"
    assert set(_pins(text)) == _closure_of(["torch", "torchvision", "numpy"], _pins(text))
    assert '"top_level":false' in (out / "report.md").read_text()


def test_top_level_pins_only_what_was_asked_and_says_so(
    tmp_path: Path, index: ClosureIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _lock(capsys, index, tmp_path / "out", "--top-level")
    assert _pins(text) == {"torch": "2.8.0", "torchvision": "0.23.0"}
    assert "NOT a full lock" in text and "--hash" not in text
    code, _, err = run_cli(capsys, "lock", *MAC, "--top-level", "--hashes")
    assert code == 2 and "--top-level --hashes" in err and "Traceback" not in err


@pytest.mark.slow
def test_no_reachable_index_is_one_line_naming_it_and_top_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}/whl"
    code, _, err = run_cli(
        capsys,
        *("lock", *MAC, "--pytorch-index", nowhere, "--default-index", nowhere),
        *("-o", str(tmp_path / "out")),
    )
    assert code == 2 and not (tmp_path / "out").exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and nowhere in lines[0] and "--top-level" in lines[0], err


def test_options_default_to_a_full_lock_with_hashes() -> None:
    assert LockOptions().with_hashes and not LockOptions().top_level
    assert not LockOptions(top_level=True).with_hashes
    assert not LockOptions(hashes=False).with_hashes
    with pytest.raises(ValueError, match="top-level"):
        LockOptions(top_level=True, hashes=True)


def test_a_record_from_before_full_locks_checks_as_top_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files recorded without ``top_level`` and with ``hashes: false`` were top-level pins:
    `--check` re-resolves them as such (no index needed), not as a full lock."""
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "lock", *MAC, "--top-level", "-o", str(out))
    assert code == 0, err
    req = out / "requirements.txt"
    req.write_text(req.read_text().replace(',"top_level":true', ""))
    assert '"hashes":false' in req.read_text() and "top_level" not in req.read_text()
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, err


def test_a_spec_says_lock_top_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "team.yaml"
    body = "python: '3.11'\npackages: {torch: '==2.8.0'}\ntargets:\n  - {platform: macos-arm64}\n"
    spec.write_text(f"name: team\nlock: top-level\n{body}")
    code, _, err = run_cli(capsys, "lock", str(spec))  # no index reachable, none needed
    assert code == 0, err
    text = (tmp_path / "team" / "requirements.txt").read_text()
    assert "NOT a full lock" in text and _pins(text) == {"torch": "2.8.0"}
    code, _, err = run_cli(capsys, "lock", str(spec), "--check")
    assert code == 0, err
    code, _, err = run_cli(capsys, "lock", str(spec), "--hashes")
    assert code == 2 and "--top-level --hashes" in err
    spec.write_text(f"name: team\nlock: partial\n{body}")
    code, _, err = run_cli(capsys, "lock", str(spec))
    assert code == 2 and "lock: 'partial': expected full or top-level" in err


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("rattler") is None, reason="py-rattler not installed")
def test_format_all_writes_every_format(
    tmp_path: Path, index: ClosureIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--format all` is every format: the closures from the index, conda-lock.yml from a real
    solve of the channel; a macOS target gets no Dockerfile (containers run Linux)."""
    channel = make_channel(tmp_path / "channel", forge_packages(pythons=("3.11",)))
    out = tmp_path / "out"
    _lock(capsys, index, out, "--format", "all", "--channel", channel)
    assert sorted(p.name for p in out.iterdir()) == [
        "conda-lock.yml",
        "environment.yml",
        "pylock.toml",
        "pyproject.toml",
        "requirements.txt",
        "virtual-packages.yml",
    ]
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, err


def test_format_all_with_an_index_out_of_reach_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line naming the format that needs the index and what to do; no partial set, even where
    another format (a top-level requirements.txt) needs no index."""
    nowhere = f"http://127.0.0.1:{closed_port()}/whl"
    out = tmp_path / "out"
    out.mkdir()
    (out / "requirements.txt").write_text("old\n", encoding="utf-8")
    code, _, err = run_cli(
        capsys,
        *("lock", *MAC, "--top-level", "--format", "all", "--pytorch-index", nowhere),
        *("-o", str(out)),
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpuresolve: error: pylock.toml (--format pylock): ")
    assert "connection refused" in lines[0]
    assert "--top-level pins only" not in lines[0]  # given already: no use suggesting it
    assert "a top-level lock pins requirements.txt alone" in lines[0]
    assert [p.name for p in out.iterdir()] == ["requirements.txt"]
    assert (out / "requirements.txt").read_text(encoding="utf-8") == "old\n"
