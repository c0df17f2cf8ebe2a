"""Options and helpers shared by the commands that take a target and a request.

`target_options` and `request_options` add the same options to every command and hand them to
it bundled (``target: TargetOptions``, ``request: RequestOptions``), so each command turns them
into the solver's inputs the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from resolver.commands.params import DRIVER, SAFE_TEXT, SafePath, check_url, lazy_complete
from resolver.commands.ui import echo
from resolver.core.errors import UserError
from resolver.core.vocab import DriverPolicy, EvidenceLevel, words
from resolver.flows.target import TargetOptions

if TYPE_CHECKING:
    from resolver.core.hostprofile import HostProfile
    from resolver.solve import Request

__all__ = [
    "PYTORCH_INDEX_ENV",
    "RequestOptions",
    "TargetOptions",
    "request_options",
    "target_options",
    "warn_lost",
]

F = TypeVar("F", bound=Callable[..., Any])
PYTORCH_INDEX_ENV = "GPURESOLVE_PYTORCH_INDEX"


def warn_lost(profile: HostProfile | None) -> None:
    """The warning for GPUs the probe saw go missing (the target flow never prints)."""
    if profile is not None and profile.lost_gpus:
        from resolver.host.detection import lost_note

        echo(f"gpuresolve: warning: {lost_note(profile)}", err=True)


class RequestOptions(NamedTuple):
    """--torch/--with/--cuda/--driver-policy/--allow-unconfirmed/--pytorch-index as given."""

    torch_spec: str | None
    with_: tuple[str, ...]
    cuda: str | None
    driver_policy: str
    allow_unconfirmed: bool
    evidence: str
    pytorch_index: str | None

    def given(self) -> list[str]:
        """The package flags the user gave (a team spec carries its own)."""
        flags = ("--torch", "--with", "--cuda")
        return [
            f for f, v in zip(flags, (self.torch_spec, self.with_, self.cuda), strict=True) if v
        ]

    def choices_given(self) -> list[str]:
        """The choice flags given other than their defaults (a lock's install takes none)."""
        used = ["--driver-policy"] if self.driver_policy != DriverPolicy.COMPAT else []
        used += ["--allow-unconfirmed"] if self.allow_unconfirmed else []
        return used + (["--evidence"] if self.evidence != EvidenceLevel.DOCUMENTED else [])

    def request(self, no_cuda: str | None = None, extensions: Collection[str] = ()) -> Request:
        """The request; with ``no_cuda`` (the option that describes a machine without CUDA:
        `TargetOptions.without_cuda`), a CUDA build asked for is an error. ``extensions``: the
        database's extension packages (``Catalog.extensions``)."""
        from resolver.solve.inputs import build_request

        request = build_request(
            torch=self.torch_spec,
            with_=self.with_,
            cuda=self.cuda,
            policy=DriverPolicy(self.driver_policy),
            allow_unconfirmed=self.allow_unconfirmed,
            evidence=self.evidence,
            extensions=extensions,
        )
        if no_cuda is not None and request.variant not in (None, "cpu"):
            asked = f"--cuda {self.cuda}" if self.cuda else f"a {request.variant} build"
            raise UserError(
                f"{no_cuda} describes a machine without CUDA, but the request asks for "
                f"{asked}: drop one of them"
            )
        return request


def _bundle(func: F, key: str, cls: type[Any], options: list[Callable[[Any], Any]]) -> F:
    names = list(cls._fields)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs[key] = cls(**{name: kwargs.pop(name) for name in names})
        return func(*args, **kwargs)

    command: Any = wrapper
    for option in reversed(options):
        command = option(command)
    return command  # type: ignore[no-any-return]


def target_options(func: F) -> F:
    """--driver/--gpu/--no-gpu/--python/--platform/--host: describe a machine, not probe it."""
    options = [
        click.option(
            "--driver",
            metavar="VERSION",
            type=DRIVER,
            help="NVIDIA driver version, e.g. 570.124.06.",
        ),
        click.option(
            "--gpu",
            "gpus",
            multiple=True,
            metavar="SPEC",
            help="A GPU: compute capability (8.6, sm_86) or model (RTX 4090, or 4090); repeatable.",
            shell_complete=lazy_complete("complete_gpu"),
        ),
        click.option("--no-gpu", is_flag=True, help="Describe a machine without an NVIDIA GPU."),
        click.option(
            "--python",
            metavar="X.Y|PATH",
            type=SAFE_TEXT,
            help="Python version or interpreter path.",
        ),
        click.option(
            "--platform",
            metavar="NAME",
            help="linux-x86_64, linux-aarch64, windows-x86_64 or macos-arm64.",
            shell_complete=lazy_complete("complete_platform"),
        ),
        click.option(
            "--host",
            "host_file",
            type=SafePath(dir_okay=False),
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
            help="Also install: torchvision, torchaudio, or an extension package (xformers, "
            "flash-attn, bitsandbytes, torchao, vllm, triton), with an optional specifier.",
            shell_complete=lazy_complete("complete_with"),
        ),
        click.option("--cuda", metavar="X.Y", help="Only builds for this CUDA version."),
        click.option(
            "--driver-policy",
            type=click.Choice(words(DriverPolicy)),
            default="compat",
            show_default=True,
            help="compat: CUDA minor-version compatibility; strict: the toolkit's own driver.",
        ),
        click.option(
            "--allow-unconfirmed",
            is_flag=True,
            help="Alias of --evidence any.",
        ),
        click.option(
            "--evidence",
            type=click.Choice(words(EvidenceLevel)),
            default="documented",
            show_default=True,
            help="Which builds rank first: documented (observed, build-config or official "
            "facts; weaker ones only when nothing documented fits), observed (only builds "
            "read from the binary), any (all alike).",
        ),
        click.option(
            "--pytorch-index",
            metavar="URL",
            envvar=PYTORCH_INDEX_ENV,
            callback=check_url,
            help="A mirror of the PyTorch index (the variant name is appended) "
            f"[env: {PYTORCH_INDEX_ENV}].",
        ),
    ]
    return _bundle(func, "request", RequestOptions, options)
