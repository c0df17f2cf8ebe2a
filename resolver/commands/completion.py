"""Shell completion for option values: platforms, GPU models and compute capabilities, `--with`
packages, schema names.

Click completes commands, options and choices (``--format``) itself once the shell is set up
(`gpuresolve completion bash`, or ``_GPURESOLVE_COMPLETE=bash_source gpuresolve``); these
callbacks add the values click cannot know. They never raise: a broken database completes
nothing.
"""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

from resolver.commands.config import standard_options
from resolver.commands.ui import echo


def _cc_text(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def complete_platform(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from resolver.core.platforms import PLATFORMS

    return [CompletionItem(p) for p in PLATFORMS if p.startswith(incomplete.lower())]


def complete_gpu(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """GPU model names of the database (and their compute capabilities) matching the prefix.

    A prefix matches a name case-insensitively, with or without its "NVIDIA " brand, so
    "rtx 40" offers "NVIDIA GeForce RTX 4090" as well as "GeForce RTX 4090 ...".
    """
    try:
        from resolver import catalog as catalog_mod

        catalog = catalog_mod.load()
    except Exception:  # completion must never print a traceback into the shell
        return []
    wanted = incomplete.lower()
    items: dict[str, str] = {}
    for gpu in catalog.gpus:
        names = [gpu.name, *gpu.aliases]
        bare = gpu.name.removeprefix("NVIDIA ")
        keys = [n.lower() for n in (*names, bare)]
        if any(k.startswith(wanted) or (wanted and wanted in k.split(" ", 1)[-1]) for k in keys):
            items.setdefault(gpu.name, f"sm_{gpu.cc[0]}{gpu.cc[1]}")
    for cc in sorted({g.cc for g in catalog.gpus}):
        text = _cc_text(cc)
        if text.startswith(wanted):
            items.setdefault(text, "compute capability")
    return [CompletionItem(name, help=why) for name, why in sorted(items.items())]


def complete_with(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """`--with` values: torch's companions, then the extension packages the database knows."""
    from resolver.solve.solver import COMPANIONS

    wanted = incomplete.lower()
    ours = [CompletionItem(n, help="built with torch's variant") for n in COMPANIONS]
    return [c for c in ours if c.value.startswith(wanted)] + complete_extension(ctx, param, wanted)


def complete_extension(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The extension packages the database knows (`verify --with`)."""
    try:
        from resolver import catalog as catalog_mod

        names = sorted(catalog_mod.load().extensions)
    except Exception:  # completion must never print a traceback into the shell
        return []
    wanted = incomplete.lower()
    return [CompletionItem(n, help="extension package") for n in names if n.startswith(wanted)]


def complete_schema(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The published schemas' names (`gpuresolve schema --list`)."""
    from resolver import schemas

    return [CompletionItem(name) for name in schemas.NAMES if name.startswith(incomplete)]


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@standard_options
def completion(shell: str) -> None:
    """Print the shell completion script Click generates for gpuresolve.

    bash: eval "$(gpuresolve completion bash)" in ~/.bashrc; zsh: the same in ~/.zshrc;
    fish: gpuresolve completion fish > ~/.config/fish/completions/gpuresolve.fish.
    The script calls gpuresolve with _GPURESOLVE_COMPLETE set, which keeps working on its own.
    """
    from click.shell_completion import get_completion_class

    root = click.get_current_context().find_root()
    cls = get_completion_class(shell)
    if cls is None:  # Click knows the three choices; a missing one is a bug, not bad input
        raise RuntimeError(f"Click has no completion for {shell}")
    prog = root.info_name or "gpuresolve"
    script = cls(root.command, {}, prog, "_GPURESOLVE_COMPLETE").source()
    echo(script)
