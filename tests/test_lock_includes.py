"""A requirements lock's `-r`/`-c` includes are a graph: each file read once, cycles refused
(as pip refuses them), the whole graph bounded; `install --lock` and `verify --lock` end at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import scrubbed_env

from resolver.core.errors import UserError
from resolver.readers import lockfile, requirements

LEVELS = 15


def _fan(tmp_path: Path, *, cycle: bool) -> Path:
    """15 tiny files, each including the next three times (3**15 reads if each include were
    read again); with ``cycle`` the last includes the first."""
    for i in range(LEVELS):
        nxt = (i + 1) % LEVELS if cycle or i + 1 < LEVELS else None
        lines = [f"pkg{i}==1.0"] + ([f"-r f{nxt}.txt"] * 3 if nxt is not None else [])
        if i == LEVELS - 1:
            lines.append("torch==2.8.0+cpu")
        (tmp_path / f"f{i}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path / "f0.txt"


def test_each_file_is_read_once(tmp_path: Path) -> None:
    start = time.monotonic()
    lock = lockfile.read(_fan(tmp_path, cycle=False))
    assert time.monotonic() - start < 10
    names = [p.name for p in lock.pins]
    assert sorted(names) == sorted([*(f"pkg{i}" for i in range(LEVELS)), "torch"])


def test_a_cycle_is_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"f14\.txt:\d: f0\.txt: includes itself"):
        lockfile.read(_fan(tmp_path, cycle=True))


def test_the_graph_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requirements, "MAX_INCLUDED_FILES", 10)
    with pytest.raises(UserError, match="more than 10 requirement files included"):
        lockfile.read(_fan(tmp_path, cycle=False))
    monkeypatch.setattr(requirements, "LOCK_LIMIT", 100)
    with pytest.raises(UserError, match="MiB in all"):
        lockfile.read(_fan(tmp_path, cycle=False))


@pytest.mark.parametrize("command", ["install", "verify"])
@pytest.mark.parametrize("cycle", [False, True], ids=["fan", "cycle"])
def test_install_and_verify_lock_end(tmp_path: Path, command: str, cycle: bool) -> None:
    """The issue's case: today both run forever. A cycle is exit 2 with one line; a fan is
    read (and then judged on this interpreter, which has no torch: any documented exit)."""
    lock = _fan(tmp_path, cycle=cycle)
    env = scrubbed_env()
    argv = [sys.executable, "-m", "resolver", command, "--lock", str(lock)]
    argv += ["--python", sys.executable]
    argv += ["--dry-run"] if command == "install" else ["--no-record"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    if cycle:
        assert proc.returncode == 2, proc.stderr
        assert "includes itself" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    else:
        assert proc.returncode in (0, 1), proc.stderr
        assert "includes itself" not in proc.stderr
        if command == "install":
            assert "(requirements, 16 pins; torch==2.8.0+cpu)" in proc.stdout
