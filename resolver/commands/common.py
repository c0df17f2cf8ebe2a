"""Options and helpers shared by the commands that take a target and a request.

`target_options` and `request_options` add the same options to every command and hand them to
it bundled (``target: TargetOptions``, ``request: RequestOptions``), so each command turns them
into the solver's inputs the same way.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.host.profile import HostProfile
    from resolver.solve import Request, Target

F = TypeVar("F", bound=Callable[..., Any])
PYTORCH_INDEX_ENV = "GPURESOLVE_PYTORCH_INDEX"


@dataclass(frozen=True)
class TargetOptions:
    """--driver/--gpu/--no-gpu/--python/--platform/--host as given."""

    driver: str | None
    gpus: tuple[str, ...]
    no_gpu: bool
    python: str | None
    platform: str | None
    host_file: str | None

    def given(self) -> list[str]:
        """The flags the user gave, for commands where they do not belong."""
        flags = ("--driver", "--gpu", "--no-gpu", "--python", "--platform", "--host")
        values = (self.driver, self.gpus, self.no_gpu, self.python, self.platform, self.host_file)
        return [flag for flag, value in zip(flags, values, strict=True) if value]

    def resolve(
        self, catalog: Catalog, python: str | None = None
    ) -> tuple[Target, HostProfile | None]:
        """The target: described by these options, or this machine probed (``python`` overrides)."""
        from resolver.inputs import resolve_target

        return resolve_target(
            catalog,
            driver=self.driver,
            gpus=self.gpus,
            no_gpu=self.no_gpu,
            python=python or self.python,
            platform=self.platform,
            host_file=self.host_file,
        )


@dataclass(frozen=True)
class RequestOptions:
    """--torch/--with/--cuda/--driver-policy/--allow-unconfirmed/--pytorch-index as given."""

    torch_spec: str | None
    with_: tuple[str, ...]
    cuda: str | None
    driver_policy: str
    allow_unconfirmed: bool
    pytorch_index: str | None

    def given(self) -> list[str]:
        """The package flags the user gave (a team spec carries its own)."""
        flags = ("--torch", "--with", "--cuda")
        return [
            f for f, v in zip(flags, (self.torch_spec, self.with_, self.cuda), strict=True) if v
        ]

    def request(self) -> Request:
        from resolver.inputs import build_request

        return build_request(
            torch=self.torch_spec,
            with_=self.with_,
            cuda=self.cuda,
            policy="strict" if self.driver_policy == "strict" else "compat",
            allow_unconfirmed=self.allow_unconfirmed,
        )


def _bundle(func: F, key: str, cls: type[Any], options: list[Callable[[Any], Any]]) -> F:
    names = [f.name for f in fields(cls)]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs[key] = cls(**{name: kwargs.pop(name) for name in names})
        return func(*args, **kwargs)

    command: Any = wrapper
    for option in reversed(options):
        command = option(command)
    return command  # type: ignore[no-any-return]


def _complete(name: str) -> Callable[[click.Context, click.Parameter, str], list[Any]]:
    """A completion callback of resolver.commands.completion, imported only when completing."""

    def callback(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from resolver.commands import completion

        result: list[Any] = getattr(completion, name)(ctx, param, incomplete)
        return result

    return callback


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
            shell_complete=_complete("complete_gpu"),
        ),
        click.option("--no-gpu", is_flag=True, help="Describe a machine without an NVIDIA GPU."),
        click.option("--python", metavar="X.Y|PATH", help="Python version or interpreter path."),
        click.option(
            "--platform",
            metavar="NAME",
            help="linux-x86_64, linux-aarch64, windows-x86_64 or macos-arm64.",
            shell_complete=_complete("complete_platform"),
        ),
        click.option(
            "--host",
            "host_file",
            type=click.Path(dir_okay=False),
            help="A file written by `gpuresolve detect --json` on the target machine.",
        ),
    ]
    return _bundle(func, "target", TargetOptions, options)


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
            envvar=PYTORCH_INDEX_ENV,
            help="A mirror of the PyTorch index (the variant name is appended) "
            f"[env: {PYTORCH_INDEX_ENV}].",
        ),
    ]
    return _bundle(func, "request", RequestOptions, options)


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
