"""What gpuresolve prints cannot be turned against the user: one control-character rule
(``core.errors.escaped``) for everything printed, held by a contract over the source; and every
``-o FILE`` writes only a regular file that is none of the command's inputs."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli

from resolver.core.errors import escaped, escaped_lines, shown, unsafe_char

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "resolver"
RULE = "resolver/core/errors.py"
# a standalone script imports nothing of gpuresolve: its copy is held equal to the rule below
COPIES = {"resolver/standalone/startup.py"}
VERIFY = ROOT / "tests" / "fixtures" / "verify" / "h100_diag"
DESCRIBED = ["--platform", "linux-x86_64", "--python", "3.12", "--driver", "560.35.03"]
DESCRIBED += ["--gpu", "8.9"]

# C0 with tab, CR and the other line breaks, DEL, C1 with NEL and CSI, the separators, the bidi
# embeddings, overrides and isolates, a mark, a zero-width joiner, a surrogate, private use
UNSAFE = [
    *"\x00\x07\x08\t\r\x0b\x0c\x1b\x1c\x7f\x85\x9b\u2028\u2029",
    *"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u200d\ud800\ue000",
]


@pytest.mark.parametrize("ch", UNSAFE, ids=[f"U+{ord(c):04X}" for c in UNSAFE])
def test_the_rule_escapes_each_control_separator_and_bidi_character(ch: str) -> None:
    assert unsafe_char(f"a{ch}b") == ch
    out = escaped(f"a{ch}b")
    assert out.startswith("a\\") and out.endswith("b") and out.isascii() and out.isprintable()
    assert escaped(out) == out  # what it writes is safe as it stands: escaping twice is a no-op


def test_the_rule_leaves_text_and_keeps_only_newlines_in_lines() -> None:
    for text in ("torch==2.9.0+cu128", "café → H100 · 80GB", "C:\\Users\\x", "\u00a0 nbsp"):
        assert escaped(text) == text and unsafe_char(text) is None
    assert escaped_lines("a\x1b[2J\nb\u2028c\n") == "a\\x1b[2J\nb\\u2028c\n"
    assert escaped("a\nb") == "a\\nb"
    assert shown("x\x1b]0;t\x07") == "'x\\x1b]0;t\\x07'" and shown(5) == "5"


# --- the contract: one rule, and every print goes through it -----------------------------------

_PRINTERS = {("click", "echo"), ("sys.stdout", "write"), ("sys.stderr", "write"), ("", "print")}
_ESCAPERS = {"escaped", "escaped_lines", "shown"}
# a raw write that needs none: ASCII JSON in PIPE_BUF pieces (json.dumps, ensure_ascii)
_RAW_ALLOWED = {"resolver/commands/emit.py"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _printer(call: ast.Call) -> bool:
    name = _dotted(call.func)
    owner, _, attr = name.rpartition(".")
    return (owner, attr) in _PRINTERS


def _safe(node: ast.expr) -> bool:
    """Text that the rule has escaped, or that holds nothing from outside (a constant, a number
    formatted with a spec, ASCII JSON)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call):
        name = _dotted(node.func).rpartition(".")[2]
        if name in _ESCAPERS:
            return True
        return _dotted(node.func) == "json.dumps" and not any(
            k.arg == "ensure_ascii" for k in node.keywords
        )
    if isinstance(node, ast.JoinedStr):
        return all(
            isinstance(v, ast.Constant)
            or (isinstance(v, ast.FormattedValue) and (v.format_spec is not None or _safe(v.value)))
            for v in node.values
        )
    if isinstance(node, ast.Subscript):
        return _safe(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _safe(node.left) and _safe(node.right)
    return False


def rule_problems(source: str, where: str) -> list[str]:
    """A second copy of the rule (unicodedata's categories, unicode_escape, isprintable, a
    translate table, ascii()) outside core/errors.py, and a print whose text skips the rule."""
    problems: list[str] = []
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute | ast.Name)
            and id(node) not in called
            and isinstance(node.ctx, ast.Load)
            and not where.startswith("resolver/standalone/")
            and tuple(_dotted(node).rpartition(".")[::2]) in _PRINTERS
        ):  # handed on (a callback), it prints whatever it is given
            problems.append(f"{where}:{node.lineno}: {_dotted(node)} passed as a printer")
        if where != RULE and where not in COPIES:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "unicodedata" in names:
                    problems.append(f"{where}:{node.lineno}: imports unicodedata")
            if isinstance(node, ast.Constant) and node.value == "unicode_escape":
                problems.append(f"{where}:{node.lineno}: unicode_escape")
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                if name.endswith((".isprintable", ".maketrans")) or name == "ascii":
                    problems.append(f"{where}:{node.lineno}: {name}()")
        if (
            isinstance(node, ast.Call)
            and _printer(node)
            and where not in _RAW_ALLOWED
            and not where.startswith("resolver/standalone/")  # print for gpuresolve to read
            and not (node.args and _safe(node.args[0]))
        ):
            problems.append(f"{where}:{node.lineno}: prints text the rule has not escaped")
    return problems


@pytest.mark.slow
def test_one_rule_and_every_print_goes_through_it() -> None:
    """A second copy of the control-character rule, or a print of unescaped text, fails here:
    commands print with ``commands.ui.echo``; the rest escape with ``core.errors``."""
    problems: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        problems += rule_problems(path.read_text(encoding="utf-8"), rel)
    assert problems == []


def test_the_start_up_checks_copy_is_the_rule() -> None:
    """The container's start-up check (standalone: no gpuresolve in the image) escapes what the
    environment says exactly as gpuresolve does, over every character of the first planes."""
    from resolver.standalone import startup

    for start in range(0, 0x30000, 0x1000):
        text = "".join(map(chr, range(start, start + 0x1000)))
        assert startup.shown(text) == escaped(text), hex(start)


def test_the_contract_finds_a_copy_and_a_raw_print() -> None:
    copy = "import unicodedata\nbad = [c for c in s if unicodedata.category(c) == 'Cc']\n"
    assert rule_problems(copy, "resolver/x.py")
    assert rule_problems("t = s.encode('unicode_escape')\n", "resolver/x.py")
    assert rule_problems("import click\nclick.echo(f'{name}: gone')\n", "resolver/x.py")
    assert rule_problems("import sys\nsys.stdout.write(diff)\n", "resolver/x.py")
    assert rule_problems("import click\nsay = click.echo\n", "resolver/x.py")
    assert not rule_problems("click.echo(f'{escaped(name)}: {n:.1f}s')\n", "resolver/x.py")
    assert not rule_problems(copy, RULE)


# --- printed text from files ------------------------------------------------------------------


def test_a_hand_edited_lock_line_is_escaped_in_the_drift_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window title, a clear screen, a NUL, a line separator and a bidi override written into
    requirements.txt reach the terminal as escapes, each on the one line the file has."""
    out = tmp_path / "lock"
    code, _, err = run_cli(capsys, "lock", *DESCRIBED, "-o", str(out))
    assert code == 0, err
    path = out / "requirements.txt"
    hostile = "# \x1b]0;pwned\x07\x1b[2J\x00 a\u2028b \u202eevil\x85"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\ntorch==", f"\n{hostile}\ntorch==", 1), encoding="utf-8")
    code, stdout, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 1 and "(drift): requirements.txt" in err
    assert "-# \\x1b]0;pwned\\x07\\x1b[2J\\x00 a\\u2028b \\u202eevil\\x85\n" in stdout
    assert unsafe_char(stdout.replace("\n", "")) is None
    assert unsafe_char(err.replace("\n", "")) is None


def test_an_error_naming_a_hostile_file_name_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = str(tmp_path / "r\x1b[2J\u202e\u2028\x1c.json")
    code, _, err = run_cli(capsys, "fleet", "report", name)
    assert code == 2 and "r\\x1b[2J\\u202e\\u2028\\x1c.json" in err  # escaped, not made a space
    assert unsafe_char(err.rstrip("\n")) is None


# --- every -o writes only a regular file that is none of its inputs ----------------------------


def _child(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`gpuresolve ARGS` as a child, bounded: a FIFO opened for writing would block."""
    return subprocess.run(
        [sys.executable, "-m", "resolver", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_a_fifo_a_device_or_a_folder_as_output_is_exit_2_at_once(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_bytes((VERIFY / "healthy.json").read_bytes())
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for target in ("fifo", os.devnull, "folder"):
        proc = _child("fleet", "report", "r.json", "-o", target, cwd=tmp_path)
        assert proc.returncode == 2, (target, proc.stderr)
        assert proc.stderr.startswith("gpuresolve: error:") and proc.stderr.count("\n") == 1
    # lock's -o is a folder: a FIFO or a device there is one line too
    for target in ("fifo", os.devnull):
        proc = _child("lock", "--top-level", *DESCRIBED, "-o", target, cwd=tmp_path)
        assert proc.returncode == 2 and f"{target}: not a folder" in proc.stderr, proc.stderr
    assert (tmp_path / "fifo").is_fifo() and os.path.exists(os.devnull)


def test_output_refused_when_it_is_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same file by its name, a link, a hard link, a file of a folder given, or the plan
    --expect reads: exit 2 and the input as it was."""
    results = tmp_path / "results"
    results.mkdir()
    data = (VERIFY / "healthy.json").read_bytes()
    (results / "n1.json").write_bytes(data)
    (tmp_path / "link.md").symlink_to(results / "n1.json")
    os.link(results / "n1.json", tmp_path / "hard.md")
    lockdir = tmp_path / "lock"
    lockdir.mkdir()
    (lockdir / "fleet.yaml").write_text("fleet: 1\ngroups: []\n", encoding="utf-8")
    cases = [
        ([str(results / "n1.json")], results / "n1.json"),
        ([str(results / "n1.json")], tmp_path / "link.md"),
        ([str(results / "n1.json")], tmp_path / "hard.md"),
        ([str(results)], results / "n1.json"),
        ([str(results), "--expect", str(lockdir)], lockdir / "fleet.yaml"),
    ]
    for args, output in cases:
        code, _, err = run_cli(capsys, "fleet", "report", *args, "-o", str(output))
        assert code == 2 and "the same file as the input" in err, (output, err)
        assert str(output) in err
    assert (results / "n1.json").read_bytes() == data
    assert (lockdir / "fleet.yaml").read_text(encoding="utf-8") == "fleet: 1\ngroups: []\n"


def test_a_missing_folder_names_the_path_given_and_a_link_is_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "no-such" / "report.md"
    code, _, err = run_cli(
        capsys, "fleet", "report", str(VERIFY / "healthy.json"), "-o", str(given)
    )
    assert code == 2 and f"-o {given}: cannot write it: no folder {given.parent}" in err
    assert ".tmp" not in err
    # a link to a regular file (or to none yet): the file it names is written, the link stays
    (tmp_path / "out.md").symlink_to("real.md")
    code, out, err = run_cli(capsys, "fleet", "report", str(VERIFY / "healthy.json"), "-o",
                             str(tmp_path / "out.md"))  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "out.md").is_symlink()
    assert (tmp_path / "real.md").read_text(encoding="utf-8") == out


def test_a_lock_never_writes_over_its_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster spec saved as fleet.yaml, locked into its own folder: the plan the lock writes
    would replace it. Exit 2, the spec as it was, nothing written."""
    nodes = ROOT / "tests" / "fixtures" / "slurm" / "scontrol_show_node_oneliner.txt"
    (tmp_path / "nodes.txt").write_bytes(nodes.read_bytes())
    spec = (
        'name: hpc\npython: "3.12"\npackages:\n  torch: ">=2.4"\ntargets:\n  - slurm: nodes.txt\n'
    )
    (tmp_path / "fleet.yaml").write_text(spec, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_cli(capsys, "lock", str(tmp_path / "fleet.yaml"), "-o", str(tmp_path))
    assert code == 2 and "the same file as the input" in err, err
    assert (tmp_path / "fleet.yaml").read_text(encoding="utf-8") == spec
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("ch", ["\u2028", "\u2029", "\x85", "\u202e", "\x1b"])
def test_the_former_copies_refuse_what_the_rule_refuses(ch: str) -> None:
    """writers.outputs (file names), writers.recorded (a recorded string) and writers.check
    (a recorded value shown) follow the rule, U+2028/U+2029 included (their copies let them by)."""
    from resolver.core.errors import UserError
    from resolver.writers import check, outputs, recorded

    with pytest.raises(UserError):
        outputs.parts(f"group{ch}/requirements.txt")
    with pytest.raises(ValueError):
        recorded._text(f"3.12{ch}")
    assert check._shown(f"a{ch}b") == escaped(f"a{ch}b") != f"a{ch}b"


def test_the_start_up_check_says_the_environments_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from resolver.standalone import startup

    monkeypatch.delenv(startup.SKIP_ENV, raising=False)
    assert startup.main([str(tmp_path / "no\x1b]0;t\x07.txt")]) == 2
    err = capsys.readouterr().err
    assert "no\\x1b]0;t\\x07.txt" in err and unsafe_char(err.rstrip("\n")) is None
