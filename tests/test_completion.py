"""Shell completion as a shell asks for it: `_GPURESOLVE_COMPLETE=bash_complete gpuresolve`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def complete(words: str, shell: str = "bash") -> list[str]:
    """The values click offers for the last word of ``words`` (bash's plain,VALUE lines)."""
    from click.shell_completion import split_arg_string

    count = len(split_arg_string(words))
    env = {
        **os.environ,
        "COMP_WORDS": words,
        "COMP_CWORD": str(count if words.endswith(" ") else count - 1),
        "_GPURESOLVE_COMPLETE": f"{shell}_complete",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", "from resolver.cli import main; main()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line]


def test_platform_values() -> None:
    assert complete("gpuresolve lock --platform li") == ["linux-x86_64", "linux-aarch64"]
    assert complete("gpuresolve suggest --platform ma") == ["macos-arm64"]


@pytest.mark.slow
def test_format_values() -> None:
    assert complete("gpuresolve lock --format py") == ["pylock"]
    assert set(complete("gpuresolve lock --format ")) >= {"requirements", "pylock", "uv", "all"}


@pytest.mark.slow
def test_gpu_model_names_and_compute_capabilities() -> None:
    names = complete("gpuresolve lock --gpu 'NVIDIA GeForce RTX 409")
    assert "NVIDIA GeForce RTX 4090" in names
    assert "NVIDIA GeForce RTX 4090" in complete("gpuresolve suggest --gpu 'rtx 409")
    assert "8.9" in complete("gpuresolve lock --gpu 8.")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_documented_source_scripts_exist(shell: str) -> None:
    env = {**os.environ, "_GPURESOLVE_COMPLETE": f"{shell}_source", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", "from resolver.cli import main; main()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and "_GPURESOLVE_COMPLETE" in proc.stdout


def test_schema_names() -> None:
    from resolver import schemas

    assert complete("gpuresolve schema ") == list(schemas.NAMES)
    assert complete("gpuresolve schema lo") == ["lock", "lock-check"]


@pytest.mark.slow
def test_with_values() -> None:
    offered = complete("gpuresolve suggest --with ")
    assert offered[:2] == ["torchvision", "torchaudio"]
    assert {"xformers", "flash-attn", "vllm"} <= set(offered)
    assert complete("gpuresolve lock --with x") == ["xformers"]
    assert complete("gpuresolve install --with torchau") == ["torchaudio"]
    verify = complete("gpuresolve verify --with ")  # extension packages only: no companions
    assert "xformers" in verify and "torchvision" not in verify
