"""What a newcomer meets first: the help with no arguments, a mistyped command at any level, a
GPU given by its model's number."""

from __future__ import annotations

import pytest
from cli_support import run_cli

DESCRIBED = ("--driver", "570.124.06", "--python", "3.12", "--platform", "linux-x86_64")


@pytest.mark.parametrize("args", [(), ("db",), ("fleet",)])
def test_a_group_without_a_command_prints_its_help_on_stdout(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    code, out, err = run_cli(capsys, *args)
    assert code == 0
    assert err == ""
    assert out.startswith(f"Usage: gpuresolve {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
    assert "\nCommands:\n" in out
    assert len(out.splitlines()) > 5  # readable lines, not one squashed error line


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (("sugest",), "suggest"),
        (("lokc", "--check"), "lock"),
        (("db", "shwo"), "show"),
        (("db", "updte"), "update"),
        (("fleet", "reprot"), "report"),
    ],
)
def test_a_mistyped_command_gets_the_close_one_at_every_level(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], meant: str
) -> None:
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "No such command" in err
    assert f"Did you mean {meant!r}?" in err


def test_a_name_far_from_every_command_gets_no_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "zzzzzz")
    assert code == 2
    assert "No such command 'zzzzzz'." in err
    assert "Did you mean" not in err


@pytest.mark.parametrize(
    ("number", "shown"),
    [
        ("4090", "sm_89 (NVIDIA GeForce RTX 4090)"),
        ("3060", "sm_86 (NVIDIA GeForce RTX 3060)"),
        ("1080", "sm_61 (NVIDIA GeForce GTX 1080)"),
    ],
)
def test_a_bare_model_number_is_the_model(
    capsys: pytest.CaptureFixture[str], number: str, shown: str
) -> None:
    code, out, err = run_cli(capsys, "suggest", "--gpu", number, *DESCRIBED)
    assert code == 0, err
    assert shown in out.splitlines()[0]


def test_a_bare_number_that_is_a_compute_capability_stays_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "suggest", "--gpu", "86", *DESCRIBED)
    assert code == 0, err
    assert "sm_86, driver" in out.splitlines()[0]


def test_a_number_several_models_share_is_exit_2_naming_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "suggest", "--gpu", "6000", *DESCRIBED)
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "Quadro RTX 6000 (7.5)" in err
    assert "NVIDIA RTX 6000 Ada Generation (8.9)" in err


def test_a_number_no_model_has_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "suggest", "--gpu", "9999", *DESCRIBED)
    assert code == 2
    assert "'9999' is neither a known compute capability" in err
    assert "999.9" not in err  # not read as a compute capability
