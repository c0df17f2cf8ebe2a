"""What a newcomer meets first: the help with no arguments, a mistyped command at any level, a
GPU given by its model's number."""

from __future__ import annotations

from pathlib import Path

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
    code, _, err = run_cli(capsys, "suggest", "--gpu", "6000", *DESCRIBED)
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "Quadro RTX 6000 (7.5)" in err
    assert "NVIDIA RTX 6000 Ada Generation (8.9)" in err


def test_a_number_no_model_has_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "suggest", "--gpu", "9999", *DESCRIBED)
    assert code == 2
    assert "'9999' is neither a known compute capability" in err
    assert "999.9" not in err  # not read as a compute capability


# --- offline: an index out of reach is said at once, not after seconds of retries -------------


def test_a_refused_connection_is_not_retried() -> None:
    from pytorch_index import closed_port

    from resolver.io.http import Client, FetchError

    pauses: list[float] = []
    client = Client(tries=3, sleep=pauses.append, timeout=10)
    with pytest.raises(FetchError, match=r"connection refused; not retried"):
        client.get(f"http://127.0.0.1:{closed_port()}/simple/torch/")
    assert client.requests == 1 and pauses == []


def test_a_name_that_does_not_resolve_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolver's answer as the socket module gives it offline (EAI_NONAME / EAI_AGAIN)."""
    import socket

    from resolver.io.http import Client, FetchError, unreachable

    def no_dns(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    pauses: list[float] = []
    client = Client(tries=3, sleep=pauses.append, timeout=10)
    with pytest.raises(FetchError, match=r"does not resolve.*not retried"):
        client.get("https://index.example/simple/torch/")
    assert client.requests == 1 and pauses == []
    said = unreachable("https://user:secret@index.example/whl/cu126")
    assert said is not None
    assert said.startswith("https://index.example/whl/cu126 (the host name does not resolve")
    assert "secret" not in said


def test_a_failure_a_retry_may_cure_is_still_retried() -> None:
    """A 503 (a server restarting) is worth another try: the classification keeps that."""
    from pytorch_index import Behaviour, serve

    from resolver.io.http import Client

    with serve({"/": (b"<html></html>", "text/html")}, Behaviour(mode="flaky")) as srv:
        pauses: list[float] = []
        client = Client(tries=3, sleep=pauses.append, timeout=10)
        assert client.get(srv.url + "/").body == b"<html></html>"
    assert client.requests == 3 and len(pauses) == 2


def test_a_reachable_host_is_not_unreachable() -> None:
    from pytorch_index import serve

    from resolver.io.http import unreachable

    with serve({"/": (b"<html></html>", "text/html")}) as srv:
        assert unreachable(srv.url + "/whl/cu126") is None


# --- the pre-commit hook's program: which lock each changed file checks -------------------------


def test_the_hook_checks_each_changed_files_lock_once(tmp_path: Path) -> None:
    from resolver.precommit import checks

    envs = tmp_path / "environments"
    (envs / "lab" / "ws").mkdir(parents=True)
    spec = envs / "lab.yaml"
    spec.write_text("name: lab\npython: '3.12'\ntargets:\n  - {no_gpu: true}\n", encoding="utf-8")
    (envs / "lab" / "ws" / "requirements.txt").write_text("# gpuresolve-inputs: {}\n")
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "requirements.txt").write_text("# gpuresolve-inputs: {}\ntorch==2.14.1\n")
    (locks / "pylock.toml").write_text("# gpuresolve-inputs: {}\n")
    (tmp_path / "requirements.txt").write_text("numpy\n")  # the project's own
    (tmp_path / "other.yaml").write_text("name: x\n")  # no team spec
    changed = [
        envs / "lab" / "ws" / "requirements.txt",
        spec,
        locks / "requirements.txt",
        locks / "pylock.toml",
        tmp_path / "requirements.txt",
        tmp_path / "other.yaml",
        tmp_path / "gone.txt",
    ]
    assert checks([str(p) for p in changed]) == [
        ["lock", str(spec), "--check"],
        ["lock", "--check", "-o", str(locks)],
    ]
