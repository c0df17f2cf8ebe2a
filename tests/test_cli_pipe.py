"""`gpuresolve ... | head -c 64`: a reader that stops early ends the writer with 141, never 1.

Exit 1 means "no compatible build" to a pipeline (`set -o pipefail`); a shell reports a writer
killed by SIGPIPE as 141, which is what gpuresolve exits with, without a traceback.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import write_db

fcntl = pytest.importorskip("fcntl")  # POSIX pipes
ROOT = Path(__file__).resolve().parent.parent
SUGGEST = [sys.executable, "-m", "resolver", "suggest", "--no-gpu", "--json"]


def env(data_dir: Path | None, unbuffered: bool) -> dict[str, str]:
    out = dict(os.environ, PYTHONPATH=str(ROOT))
    out.pop("PYTHONUNBUFFERED", None)
    if unbuffered:  # every write reaches the pipe at once: it breaks inside the command
        out["PYTHONUNBUFFERED"] = "1"
    if data_dir is not None:
        out["GPURESOLVE_DATA_DIR"] = str(data_dir)
    else:
        out.pop("GPURESOLVE_DATA_DIR", None)
    return out


@pytest.mark.parametrize("unbuffered", [False, True], ids=["final-flush", "mid-write"])
def test_reader_gone_before_the_first_write_exits_141(
    tmp_path: Path, synth_raw: dict[str, Any], unbuffered: bool
) -> None:
    write_db(tmp_path, synth_raw)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            SUGGEST,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env(tmp_path, unbuffered),
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == b""


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="Linux pipe sizes")
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_reader_leaving_early_exits_141(unbuffered: bool) -> None:
    """A reader that closes after 64 bytes (`head -c 64`; off a terminal the document is one
    line), with more output left than the pipe can hold."""
    full = subprocess.run(
        SUGGEST, capture_output=True, env=env(None, unbuffered), timeout=120, check=False
    )
    assert full.returncode == 0 and len(full.stdout) > 16384  # the shipped database
    json.loads(full.stdout)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the smallest: the writer must block
    with subprocess.Popen(
        SUGGEST, stdout=write_end, stderr=subprocess.PIPE, env=env(None, unbuffered)
    ) as proc:
        os.close(write_end)
        line = b""
        while len(line) < 64:  # one byte at a time: nothing more is taken
            assert select.select([read_end], [], [], 120)[0], "no output within 120 s"
            byte = os.read(read_end, 1)
            assert byte, "the output ended before its first line"
            line += byte
        os.close(read_end)
        _, err = proc.communicate(timeout=120)
    assert line.startswith(b'{"target":{') and b"\n" not in line
    assert proc.returncode == 141
    assert err == b""


def test_json_is_indented_on_a_terminal_and_one_line_elsewhere() -> None:
    """A person reads `--json` on a terminal; a program reads one line (a pipe, a file, a log)."""
    pty = pytest.importorskip("pty")
    piped = subprocess.run(
        SUGGEST, capture_output=True, env=env(None, False), timeout=120, check=True
    ).stdout
    assert piped.count(b"\n") == 1 and piped.endswith(b"}\n")
    leader, follower = pty.openpty()
    with subprocess.Popen(
        SUGGEST, stdout=follower, stderr=subprocess.DEVNULL, env=env(None, False)
    ) as proc:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the writer (EIO on Linux)
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=120)
    os.close(leader)
    assert proc.returncode == 0
    text = shown.replace(b"\r\n", b"\n")
    assert text.startswith(b'{\n  "target": {\n') and json.loads(text) == json.loads(piped)
