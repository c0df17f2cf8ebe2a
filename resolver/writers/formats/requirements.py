"""requirements.txt: the index lines and the whole closure pinned (with sha256 hashes by
default), or with ``--top-level`` only the pins asked for (not a lock: pip resolves the rest)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from resolver.catalog import Catalog
from resolver.core.vocab import LockFormat
from resolver.solve import Candidate, Decision
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats.header import header_lines
from resolver.writers.formats.unit import LockFormatUnit

if TYPE_CHECKING:
    from resolver.writers.formats.unit import RenderContext

NAME = "requirements.txt"

TOP_LEVEL_NOTE = (
    "top-level pins only (--top-level, or a spec's lock: top-level): NOT a full lock; the "
    "installer resolves what these need when it installs, so two installs may differ"
)


def index_lines(
    catalog: Catalog,
    cand: Candidate,
    pytorch_index: str | None = None,
    needs_default: bool = False,
    default_index: str | None = None,
) -> list[str]:
    """Where pip finds the set: only the variant's index, or it in addition to the default.

    Pins with a local tag (``+cu126``) exist only on the PyTorch index, which also carries their
    dependencies: ``--index-url``. Untagged pins (macOS), or other packages beside the torch set
    (``needs_default``), need the default index too, so the PyTorch index is only an extra one;
    a tagged pin still matches nothing but the PyTorch index's build. ``default_index``: that
    default, written when one was given or configured; None leaves it to the installer.
    """
    url = catalog.index_url(cand.variant.name, pytorch_index)
    tagged = any("+" in version for _, version in cand.packages)
    only = tagged and not needs_default
    if only:
        return [f"--index-url {url}"]
    default = [f"--index-url {default_index}"] if default_index else []
    return [*default, f"--extra-index-url {url}"]


def default_index_line(default_index: str | None) -> str:
    """The header's words for the index of the packages outside the PyTorch index."""
    where = default_index or "the installer's default index (none was given or configured)"
    return f"packages outside the PyTorch index: {where}"


def pins(cand: Candidate) -> list[str]:
    """``torch==2.8.0+cu126`` and the companions asked for, on the same variant."""
    return [f"{name}=={version}" for name, version in cand.packages]


def render_requirements(
    catalog: Catalog,
    decision: Decision,
    pytorch_index: str | None = None,
    closure: Sequence[ResolvedDist] | None = None,
    extra_requirements: Sequence[str] = (),
    default_index: str | None = None,
    *,
    hashes: bool = True,
) -> str:
    """The file's text. ``closure``: the resolved closure, every package pinned (with its sha256
    when ``hashes``); None: top-level pins only, the torch set and ``extra_requirements`` (a
    team spec's ``packages.pip``) written as given, which the header says is not a full lock.
    """
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    target = decision.target
    extra = [
        f"for {target.platform} and Python {target.python} only: other machines need their own"
    ]
    if closure is None:
        extra.append(TOP_LEVEL_NOTE)
    elif hashes:
        extra.append(
            "every package of the closure pinned with its sha256, each from the first index "
            "that has it: pip install -r requirements.txt checks each download"
        )
    else:
        extra.append(
            "every package of the closure pinned, each from the first index that has it "
            "(no hashes: --no-hashes)"
        )
    index = index_lines(catalog, cand, pytorch_index, bool(extra_requirements), default_index)
    if not index[-1].startswith("--index-url "):  # the installer's default index serves some
        extra.append(default_index_line(default_index))
    lines = header_lines(catalog, decision, extra)
    lines.extend(index)
    if closure is None:
        lines.extend(pins(cand))
        lines.extend(extra_requirements)
    elif not hashes:
        lines.extend(f"{dist.name}=={dist.version}" for dist in closure)
    else:
        for dist in closure:
            lines.append(f"{dist.name}=={dist.version} \\")
            lines.append(f"    --hash=sha256:{dist.sha256}")
    return "\n".join(lines) + "\n"


def render(ctx: RenderContext) -> Mapping[str, str]:
    """requirements.txt: the closure resolved from the index (``--top-level``: the pins)."""
    decision, options = ctx.decision, ctx.options
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    whole = None
    if not options.top_level:
        extra = options.extra_requirements
        index = index_lines(
            ctx.catalog, cand, options.pytorch_index, bool(extra), options.default_index
        )
        with ctx.reaching(NAME):
            whole = ctx.closure([*pins(cand), *extra], index, decision.target)
    text = render_requirements(
        ctx.catalog,
        decision,
        options.pytorch_index,
        whole,
        options.extra_requirements,
        options.default_index,
        hashes=options.with_hashes,
    )
    return {NAME: text}


FORMAT = LockFormatUnit(
    LockFormat.REQUIREMENTS,
    (NAME,),
    render,
    needs_wheels=True,
    advice="--top-level pins only what was asked, with no index to reach; or {mirror}",
    summary="requirements.txt",
)
