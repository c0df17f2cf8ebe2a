"""What gpuresolve reads back is input: non-regular files, Unicode digits, control and bidi
characters, a closed stdout. Each case runs the real CLI and asserts exit 2, one error line, and
nothing written raw.

FIFO cases run in a child process with a timeout as the guard: a FIFO must be refused at once,
never read (which would wait for a writer forever).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli, top_level

ROOT = Path(__file__).resolve().parent.parent
HOST = Path(__file__).parent / "fixtures" / "host" / "h100_driver580" / "detect.json"
NODES = Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"
GOOD_SPEC = 'name: ok\npython: "3.12"\ntargets:\n  - {name: x, no_gpu: true}\n'
FIFO_GUARD_S = 20  # a hang is a timeout here; a refusal takes one interpreter start

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def gpuresolve(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPURESOLVE_CACHE_DIR": str(tmp / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "resolver", *top_level(argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=FIFO_GUARD_S,
        check=False,
    )


def one_error(err: str) -> str:
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpuresolve: error:")]
    assert len(lines) == 1, err[-500:]
    return lines[0]


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _cases(tmp: Path) -> dict[str, list[str]]:
    """Each way a FIFO can be handed to gpuresolve, as the argv that reads it."""
    py = sys.executable
    lock = fifo(tmp / "lock.txt")
    (tmp / "req.txt").write_text("-r lock.txt\n", encoding="utf-8")
    fifo(tmp / "detect.json")
    (tmp / "fleet").mkdir()
    fifo(tmp / "fleet" / "a.json")
    (tmp / "one.yaml").write_text(GOOD_SPEC.replace("no_gpu: true", "detect: detect.json"))
    (tmp / "many.yaml").write_text(GOOD_SPEC.replace("{name: x, no_gpu: true}", "detect: fleet/"))
    return {
        "host": ["suggest", "--host", str(tmp / "detect.json")],
        "spec": ["lock", str(fifo(tmp / "team.yaml")), "-o", str(tmp / "out")],
        "verify-lock": ["verify", "--lock", str(lock), "--python", py],
        "install-lock": ["install", "--lock", str(lock), "--python", py, "--dry-run"],
        "requirements-include": ["verify", "--lock", str(tmp / "req.txt"), "--python", py],
        "detect-file": ["lock", str(tmp / "one.yaml"), "-o", str(tmp / "out")],
        "detect-folder": ["lock", str(tmp / "many.yaml"), "-o", str(tmp / "out")],
    }


@needs_fifo
@pytest.mark.parametrize(
    "case",
    [
        "host",
        "spec",
        "verify-lock",
        "install-lock",
        "requirements-include",
        "detect-file",
        "detect-folder",
    ],
)
def test_a_fifo_is_refused_at_once(case: str, tmp_path: Path) -> None:
    argv = _cases(tmp_path)[case]
    proc = gpuresolve(tmp_path, *argv)  # the timeout is the guard against a hang
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "FIFO" in one_error(proc.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@needs_fifo
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_an_output_file_that_is_not_a_file_is_refused(kind: str, tmp_path: Path) -> None:
    """`lock --check` reads its own output back: a FIFO or a link to /dev/zero there is exit 2,
    not a hang or a MemoryError (exit 70)."""
    out = tmp_path / "out"
    first = gpuresolve(tmp_path, "lock", "--no-gpu", "--python", "3.12", "-o", str(out))
    assert first.returncode == 0, first.stderr
    target = out / "requirements.txt"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        if not Path("/dev/zero").exists():
            pytest.skip("needs /dev/zero")
        target.symlink_to("/dev/zero")
    proc = gpuresolve(tmp_path, "lock", "--top-level", "--check", "-o", str(out))
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "regular file" in one_error(proc.stderr)  # a link or a FIFO: refused as not a plain file
    assert target.is_symlink() == (kind == "dev-zero")  # left as it was


UNICODE_DIGITS = [
    ("driver-arabic-indic", ["suggest", "--driver", "٥٨٠.٩٥.٠٥", "--gpu", "8.0"]),
    ("driver-fullwidth", ["suggest", "--driver", "５８０.９５.０５", "--gpu", "8.0"]),
    ("gpu-fullwidth", ["suggest", "--driver", "580.95.05", "--gpu", "８.０"]),
    ("gpu-sm-arabic-indic", ["suggest", "--driver", "580.95.05", "--gpu", "sm_٩٠"]),
    ("python-fullwidth", ["suggest", "--no-gpu", "--python", "３.12"]),
]


@pytest.mark.parametrize("argv", [a for _, a in UNICODE_DIGITS], ids=[i for i, _ in UNICODE_DIGITS])
def test_unicode_digits_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and not out
    one_error(err)


def _host(tmp: Path, change: dict[str, object], gpu: dict[str, object] | None = None) -> Path:
    doc = json.loads(HOST.read_text(encoding="utf-8"))
    doc.update(change)
    if gpu:
        doc["gpus"][0].update(gpu)
    path = tmp / "host.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "gpu", "says"),
    [
        ({"driver": "٥٨٠.٩٥.٠٥"}, None, "driver"),
        ({}, {"cc": "٩.٠"}, "gpus[0].cc"),
        ({}, {"name": "NVIDIA H100\x1b]0;owned\x07"}, "U+001B"),
        ({}, {"name": "NVIDIA \u202eH100"}, "U+202E"),
        ({}, {"name": "NVIDIA H100\u2066"}, "U+2066"),
        ({"messages": ["ok\u200f"]}, None, "U+200F"),
    ],
    ids=["driver-digits", "cc-digits", "name-esc-bel", "name-rlo", "name-isolate", "message-rlm"],
)
def test_a_host_file_with_hostile_characters_is_refused(
    change: dict[str, object],
    gpu: dict[str, object] | None,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = _host(tmp_path, change, gpu)
    code, out, err = run_cli(capsys, "suggest", "--host", str(host))
    assert code == 2 and not out
    assert says in one_error(err)
    assert "\x1b" not in err and "\u202e" not in err and "\u2066" not in err


def test_a_detect_folder_with_a_bidi_name_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fleet").mkdir()
    _host(tmp_path / "fleet", {}, {"name": "NVIDIA H100\u202e txt.exe"})
    spec = tmp_path / "team.yaml"
    spec.write_text(GOOD_SPEC.replace("{name: x, no_gpu: true}", "detect: fleet/"))
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2 and "U+202E" in one_error(err)
    assert not (tmp_path / "out").exists()


def test_a_detect_folder_over_its_caps_fails_before_any_file_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count is checked while the folder is listed (a folder of millions of entries is not
    listed whole first) and the sizes before any file is parsed: exit 2, nothing written."""
    from resolver.host import records

    monkeypatch.setattr(records, "MAX_DETECT_FILES", 3)
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(4):
        (fleet / f"h{i}.json").write_text("not json: never parsed")
    (fleet / "notes.txt").write_text("not a detect file")
    spec = tmp_path / "team.yaml"
    spec.write_text(GOOD_SPEC.replace("{name: x, no_gpu: true}", "detect: fleet/"))
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2 and "more than 3 detect files" in one_error(err)
    (fleet / "h3.json").unlink()
    (fleet / "h2.json").write_bytes(b" " * (records.MAX_DETECT_FILE_BYTES + 1))
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2 and "h2.json" in one_error(err) and "cap 1 MiB" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("label", "value"),
    [
        ("nvidia.com/gpu.compute.major", "٩"),
        ("nvidia.com/cuda.driver-version.full", "٥٨٠.٩٥.٠٥"),
        ("nvidia.com/gpu.product", "NVIDIA-H100\u202e"),
    ],
)
def test_node_labels_with_unicode_digits_or_bidi_are_refused(
    label: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(NODES.read_text(encoding="utf-8"))
    node = next(i for i in doc["items"] if "nvidia.com/gpu.product" in i["metadata"]["labels"])
    node["metadata"]["labels"][label] = value
    (tmp_path / "nodes.json").write_text(json.dumps(doc), encoding="utf-8")
    spec = tmp_path / "cluster.yaml"
    spec.write_text('name: c\npython: "3.12"\ntargets:\n  - kubernetes: nodes.json\n')
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2 and label in one_error(err)
    assert "\u202e" not in err  # digits may be quoted back; a bidi character never raw
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "entry",
    ["description: 'a\x1b[2Jb'", 'description: "x\\u202Ey"', 'packages: {pip: ["a\\x07"]}'],
    ids=["description-esc", "description-rlo", "package-bel"],
)
def test_spec_strings_with_control_characters_are_refused(
    entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "team.yaml"
    spec.write_text(GOOD_SPEC + entry + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2
    one_error(err)
    assert "\x1b" not in err and "\u202e" not in err and "\x07" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["my\nenv", "a b", "ok\u202e", "x:y", ""])
def test_a_conda_env_name_conda_refuses_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys, "lock", "--no-gpu", "--python", "3.12", "--name", name, "-o", str(out)
    )
    assert code == 2 and "--name" in one_error(err)
    assert not out.exists() or not any(out.iterdir())


def test_names_nvidia_smi_prints_are_escaped_never_raw() -> None:
    """The rule for probe output: kept (the machine is what it is), escaped, never raw."""
    from resolver.host import smi

    row = "0, NVIDIA H100\x1b[31m\u202e 80GB HBM3, 580.95.05, 9.0, 0x233010DE, 81559 MiB, Disabled"
    _driver, gpus = smi.parse_query(row + "\n", smi.QUERY_FIELDS)
    assert [g.name for g in gpus] == ["NVIDIA H100\\x1b[31m\\u202e 80GB HBM3"]
    result = smi.CommandResult(returncode=9, stdout="", stderr="Failed\x1b]0;pwned\x07\n")
    assert smi.interpret(result).status == "Failed\\x1b]0;pwned\\x07"


def test_a_closed_stdout_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "GPURESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m resolver suggest --no-gpu >&-'],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gpuresolve: error: standard output is closed; redirect it to a file or /dev/null instead"
    ]


def test_yaml_nested_past_the_limit_is_our_refusal_whatever_libyaml_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deep enough that libyaml may stop it itself (PyYAML 6.0.4's does, with its own words)."""
    spec = tmp_path / "team.yaml"
    deep = "[" * 5000 + "]" * 5000
    spec.write_text(GOOD_SPEC + f"description: {deep}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out"))
    assert code == 2
    assert "nested more than 64 levels deep: refused" in one_error(err)
