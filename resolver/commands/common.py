"""Options and helpers shared by the commands that take a target and a request."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def target_options(func: F) -> F:
    """--driver/--gpu/--no-gpu/--python/--platform/--host: describe a machine, not probe it."""
    options = [
        click.option("--driver", metavar="VERSION", help="NVIDIA driver version, e.g. 570.124.06."),
        click.option(
            "--gpu",
            "gpus",
            multiple=True,
            metavar="SPEC",
            help="A GPU: compute capability (8.6, sm_86) or model name; repeat for several.",
        ),
        click.option("--no-gpu", is_flag=True, help="Describe a machine without an NVIDIA GPU."),
        click.option("--python", metavar="X.Y|PATH", help="Python version or interpreter path."),
        click.option(
            "--platform",
            metavar="NAME",
            help="linux-x86_64, linux-aarch64, windows-x86_64 or macos-arm64.",
        ),
        click.option(
            "--host",
            "host_file",
            type=click.Path(dir_okay=False),
            help="A file written by `gpuresolve detect --json` on the target machine.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def request_options(func: F) -> F:
    """--torch/--with/--cuda/--driver-policy/--allow-unconfirmed: what to install."""
    options = [
        click.option(
            "--torch", "torch_spec", metavar="SPEC", help="PEP 440 specifier, e.g. '>=2.4,<2.9'."
        ),
        click.option(
            "--with",
            "with_",
            multiple=True,
            metavar="PKG",
            help="Companion: torchvision or torchaudio (with an optional specifier).",
        ),
        click.option("--cuda", metavar="X.Y", help="Only builds for this CUDA version."),
        click.option(
            "--driver-policy",
            type=click.Choice(["compat", "strict"]),
            default="compat",
            show_default=True,
            help="compat: CUDA minor-version compatibility; strict: the toolkit's own driver.",
        ),
        click.option(
            "--allow-unconfirmed",
            is_flag=True,
            help="Rank builds whose arch list rests on secondary sources with the rest.",
        ),
        click.option(
            "--pytorch-index",
            metavar="URL",
            help="A mirror of the PyTorch index (the variant name is appended).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
