"""Shared stores under concurrency, full disks and read-only folders.

Eight `db import`s at once, or eight verify runs recording into one HOME, each read the
observations, add theirs and write back: every entry must land. A write to a full disk or a
read-only folder is one line, exit 2, and leaves the old file whole and no temporary file.
The full and read-only disks are real: a small tmpfs mounted by the test (root only).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from resolver.db.yamlfile import dump_yaml
from resolver.io.filelock import locked
from resolver.observe import store

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 8
EACH = 3


def _runtime(n: int) -> dict[str, str]:
    """A valid runtime observation, distinct for each ``n`` (its git commit)."""
    return {
        "torch": "2.8.0",
        "variant": "cu128",
        "platform": "linux-x86_64",
        "python": "3.12",
        "version": "2.8.0+cu128",
        "git_version": f"{n:07x}abcdef",
        "cuda": "12.8",
        "seen": "2026-11-26",
    }


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _user_observations() -> Path:
    from resolver import catalog as catalog_mod

    return catalog_mod.user_data_dir() / store.FILE


@pytest.mark.slow
def test_concurrent_imports_lose_no_observation(tmp_path: Path) -> None:
    files = []
    for w in range(WORKERS):
        path = tmp_path / f"share-{w}.yaml"
        entries = [_runtime(w * EACH + i) for i in range(EACH)]
        path.write_text(dump_yaml({"observations": [], "runtime": entries}), encoding="utf-8")
        files.append(path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "resolver", "db", "import", str(f)],
            env=_env(),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert f"imported {EACH} new observation(s)" in out
    recorded = store.load(_user_observations()).runtime
    assert len(recorded) == WORKERS * EACH
    assert not [p.name for p in _user_observations().parent.iterdir() if p.suffix == ".tmp"]


@pytest.mark.slow
def test_concurrent_records_lose_no_observation(tmp_path: Path) -> None:
    """What verify does after a run (`store.record`), from eight processes at once."""
    target = tmp_path / "home" / "data" / store.FILE
    script = (
        "import sys\nfrom resolver.observe import store\nfrom test_stores import _runtime\n"
        "for i in range(int(sys.argv[2]), int(sys.argv[2]) + 3):\n"
        "    store.record(__import__('pathlib').Path(sys.argv[1]), _runtime(i), 'runtime')\n"
    )
    env = {**_env(), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(target), str(w * EACH)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert len(store.load(target).runtime) == WORKERS * EACH


def test_a_held_lock_is_waited_for_then_refused_in_one_line(tmp_path: Path) -> None:
    store_dir = tmp_path / "data"
    store_dir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib\nfrom resolver.io.filelock import locked\n"
            "with locked(pathlib.Path(sys.argv[1])):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n",
            str(store_dir),
        ],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        from resolver.core.errors import UserError

        with pytest.raises(UserError, match="another gpuresolve"), locked(store_dir, wait_s=0.3):
            pass
    finally:
        holder.communicate("", timeout=30)
    with locked(store_dir, wait_s=0.3):  # released when its holder ended
        pass


# --- full and read-only disks ----------------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(where: Path, *options: str) -> Iterator[Path]:
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    opts = ",".join(("size=256k", "mode=0755", *options))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], check=False)
    if done.returncode != 0:
        pytest.skip("this container cannot mount a tmpfs")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> None:
    """Fill ``disk`` up to its last byte."""
    with contextlib.suppress(OSError), open(disk / "filler", "wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 4096)


def _gpuresolve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "resolver", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _one_line_exit_2(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr


LOCK_ARGS: tuple[str, ...] = ("lock", "--top-level", "--driver", "570.124.06", "--gpu", "8.6")
LOCK_ARGS += ("--platform", "linux-x86_64")  # top-level: the disk, not an index, is under test


def test_a_lock_to_a_full_disk_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk") as disk:
        (disk / "out").mkdir()
        _fill(disk)
        done = _gpuresolve(*LOCK_ARGS, "--python", "3.12", "-o", str(disk / "out"), env=_env())
        _one_line_exit_2(done)
        assert list((disk / "out").iterdir()) == []


@pytest.mark.slow
def test_a_db_import_to_a_full_disk_keeps_the_old_file_whole(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk") as disk:
        env = {**_env(), "XDG_DATA_HOME": str(disk)}
        first = tmp_path / "first.yaml"
        first.write_text(dump_yaml({"observations": [], "runtime": [_runtime(1)]}))
        assert _gpuresolve("db", "import", str(first), env=env).returncode == 0
        data = disk / "gpuresolve"
        before = {p.name: p.read_bytes() for p in data.rglob("*") if p.is_file()}
        assert store.FILE in before
        _fill(disk)
        more = tmp_path / "more.yaml"
        entries = [_runtime(i) for i in range(2, 400)]
        more.write_text(dump_yaml({"observations": [], "runtime": entries}))
        done = _gpuresolve("db", "import", str(more), env=env)
        _one_line_exit_2(done)
        assert "full" in done.stderr
        after = {p.name: p.read_bytes() for p in data.rglob("*") if p.is_file()}
        assert after == before  # the old file whole, no temporary file left


def test_writes_to_a_read_only_disk_are_one_line(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "ro") as disk:
        env = {**_env(), "XDG_DATA_HOME": str(disk)}
        share = tmp_path / "share.yaml"
        share.write_text(dump_yaml({"observations": [], "runtime": [_runtime(1)]}))
        done = _gpuresolve("db", "import", str(share), env=env)
        _one_line_exit_2(done)
        assert "read-only" in done.stderr.lower()
        _one_line_exit_2(_gpuresolve(*LOCK_ARGS, "--python", "3.12", "-o", str(disk), env=env))
        assert list(disk.iterdir()) == []


def test_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    """Without root: a folder without write permission (root would write to it anyway)."""
    if os.name != "posix" or os.geteuid() == 0:
        pytest.skip("permissions do not stop root")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        env = {**_env(), "XDG_DATA_HOME": str(folder)}
        share = tmp_path / "share.yaml"
        share.write_text(dump_yaml({"observations": [], "runtime": [_runtime(1)]}))
        _one_line_exit_2(_gpuresolve("db", "import", str(share), env=env))
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_recording_what_the_file_holds_leaves_it_untouched(tmp_path: Path) -> None:
    """A verify of a build already seen today writes nothing: a rewrite's new time made the next
    command's catalog cache, keyed on it, a miss (issue 40)."""
    path = tmp_path / store.FILE
    assert store.record(path, _runtime(1), "runtime")[0] == "added"
    before = path.stat()
    assert store.record(path, _runtime(1), "runtime")[0] == "same"
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    later = {**_runtime(1), "seen": "2026-11-27"}  # a later day is news: written
    assert store.record(path, later, "runtime")[0] == "same"
    assert store.load(path).runtime[0]["seen"] == "2026-11-27"
    assert path.stat().st_ino != before.st_ino
