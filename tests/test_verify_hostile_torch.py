"""A broken or hostile `torch` in the environment being verified: its output is foreign input.

A real interpreter (a virtual environment) runs a real module named torch that lies in its
version and device names with terminal escapes and a bidi override, or floods its output:
verify must print them escaped, stop the flood at a bound with a clear verdict, and exit 1
(a check failed), never 70.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from resolver.verify.run import PROBE_OUTPUT_MAX, run_probe

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="a venv's bin/python layout")


def _env_with_torch(where: Path, source: str) -> Path:
    """A virtual environment whose site-packages holds ``torch/__init__.py`` = ``source``."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / "torch").mkdir(parents=True)
    (Path(purelib) / "torch" / "__init__.py").write_text(source, encoding="utf-8")
    return python


def _verify(python: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "resolver", "verify", "--python", str(python), "--no-record"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


LIAR = f"""
__version__ = {("2.8.0+cu128" + HOSTILE)!r}
class version:
    cuda = {("12.8" + HOSTILE)!r}
    git_version = "0123456789abcdef"
class cuda:
    @staticmethod
    def is_available(): return True
    @staticmethod
    def device_count(): return 1
    @staticmethod
    def get_device_name(i=0): return {("NVIDIA H100" + HOSTILE)!r}
    @staticmethod
    def get_device_capability(i=0): return (9, 0)
    @staticmethod
    def get_arch_list(): return [{("sm_90" + HOSTILE)!r}]
import sys
print({("torch says" + HOSTILE)!r}, file=sys.stderr)
"""


def test_escapes_and_bidi_from_torch_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    python = _env_with_torch(tmp_path / "env", LIAR)
    done = _verify(python)
    assert done.returncode == 1, done.stderr  # a check failed: not 70, not 0
    assert "Traceback" not in done.stderr
    for stream in (done.stdout, done.stderr):
        assert "\x1b" not in stream and "\x07" not in stream and "\u202e" not in stream
    assert "\\x1b" in done.stdout + done.stderr  # shown, escaped
    run = run_probe(str(python), timeout_s=120)
    assert run.data is not None
    torch = run.data["torch"]
    assert "\x1b" not in str(run.data) and "\u202e" not in str(run.data)
    assert torch["version"].startswith("2.8.0+cu128\\x1b")


FLOOD = "import os\nwhile True:\n    os.write(2, b'x' * 65536)\n"
FLOOD_STDOUT = "import os\nwhile True:\n    os.write(3, b'y' * 65536)\n"


@pytest.mark.parametrize("source", [FLOOD, FLOOD_STDOUT], ids=["stderr", "probe's-fd"])
def test_a_torch_that_floods_its_output_is_stopped_with_a_verdict(
    tmp_path: Path, source: str
) -> None:
    python = _env_with_torch(tmp_path / "env", source)
    done = _verify(python)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert f"more than {PROBE_OUTPUT_MAX // 2**20} MiB" in done.stdout + done.stderr


PATCHER = """
import json
__version__ = "2.8.0+cu128"
_dumps = json.dumps
# a torch that patches what the probe writes with: its keys, other types
def dumps(obj, **kw):
    if isinstance(obj, dict) and "stage" in obj:
        obj = dict(obj, python=[1], cuda={"devices": [None]}, gpu_tests={"a": 1})
    return _dumps(obj, **kw)
json.dumps = dumps
"""


def test_a_result_of_other_types_is_damaged_not_exit_70(tmp_path: Path) -> None:
    """Seen with a probe document of the right keys and other types (a list for `python`, a
    null device): exit 70 from a TypeError deep in a check. Its shape is checked as it is read."""
    done = _verify(_env_with_torch(tmp_path / "env", PATCHER))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert "damaged (python: expected an object)" in done.stdout + done.stderr
