"""Every `$ gpuresolve …` line of a ```console block in the site's pages and the README is run
here, against described hosts (options) or recorded ones (`environments/hosts/h100.json`:
`detect --json` recorded on an H100), and its stdout compared with what the page shows, the
version and the database date normalised. A page's blocks run in order in one fresh folder
holding a copy of `environments/` and nothing else the checkout does not ship, so a tutorial
runs with the files a reader has, and an example may lock and then `--check`. A shown line that
starts with `note:` or `warning:` is what stderr says (in order, among its other lines); every
other line is stdout, compared whole.
The command runs exactly as written (not through the suite's helper, which adds `--top-level`
to a bare `lock`): a page shows what a reader gets.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from resolver.cli import main

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```console\n(.*?)^```", re.M | re.S)


def pages() -> list[Path]:
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command line, the output lines shown under it) of every console block."""
    out: list[tuple[str, list[str]]] = []
    for block in FENCE.findall(text):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
            else:
                raise AssertionError(f"output before any command: {line!r}")
    return out


def normalise(text: str) -> str:
    text = re.sub(r"gpuresolve \d+\.\d+\.\d+\S*", "gpuresolve VERSION", text)
    text = re.sub(r"database \d{4}-\d{2}-\d{2}", "database DATE", text)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


WITH_EXAMPLES = [p for p in pages() if examples(p.read_text(encoding="utf-8"))]


def test_the_site_has_examples() -> None:
    assert len(WITH_EXAMPLES) >= 6


def test_every_tutorial_runs_here() -> None:
    """The tutorials are the first pages a reader follows: each one's examples run below."""
    tutorials = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
    assert len(tutorials) >= 3
    assert set(tutorials) <= set(WITH_EXAMPLES)


def test_the_recorded_host_the_tutorial_reads_is_the_tests_recording() -> None:
    """The shipped H100 host file is the recording the suite's fixtures hold, unedited."""
    fixture = ROOT / "tests" / "fixtures" / "host" / "h100_driver580_cli" / "detect.json"
    shipped = ROOT / "environments" / "hosts" / "h100.json"
    assert shipped.read_bytes() == fixture.read_bytes()


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_console_examples_print_what_the_page_shows(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(ROOT / "environments", tmp_path / "environments")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPURESOLVE_PYTORCH_INDEX", raising=False)
    for command, shown in examples(page.read_text(encoding="utf-8")):
        argv = shlex.split(command)
        assert argv[0] == "gpuresolve", f"{page.name}: only gpuresolve runs here: {command}"
        with pytest.raises(SystemExit):
            main(argv[1:])
        out, err = capsys.readouterr()
        said = [ln for ln in shown if ln.startswith(("note: ", "warning: "))]
        printed = [ln for ln in shown if ln not in said]
        assert normalise(out) == normalise("\n".join(printed)), f"{page.name}: $ {command}\n{err}"
        errors = iter(normalise(err).splitlines())
        assert all(line in errors for line in said), f"{page.name}: $ {command}\n{err}"
