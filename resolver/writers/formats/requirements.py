"""requirements.txt: the variant's index line and exact pins, or the hashed closure."""

from __future__ import annotations

from collections.abc import Sequence

from resolver.catalog import Catalog
from resolver.solve import Candidate, Decision
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats.header import header_lines


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
    hashed: Sequence[ResolvedDist] | None = None,
    extra_requirements: Sequence[str] = (),
    default_index: str | None = None,
) -> str:
    """The file's text. ``hashed``: the resolved closure, pinned with sha256 hashes.

    ``extra_requirements``: other packages of the environment (a team spec's ``packages.pip``),
    written as given after the torch set.
    """
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    target = decision.target
    extra = [
        f"for {target.platform} and Python {target.python} only: other machines need their own"
    ]
    if hashed is not None:
        extra.append(
            "every package of the set pinned with its sha256: pip install -r requirements.txt "
            "checks each download"
        )
    index = index_lines(catalog, cand, pytorch_index, bool(extra_requirements), default_index)
    if not index[-1].startswith("--index-url "):  # the installer's default index serves some
        extra.append(default_index_line(default_index))
    lines = header_lines(catalog, decision, extra)
    lines.extend(index)
    if hashed is None:
        lines.extend(pins(cand))
        lines.extend(extra_requirements)
    else:
        for dist in hashed:
            lines.append(f"{dist.name}=={dist.version} \\")
            lines.append(f"    --hash=sha256:{dist.sha256}")
    return "\n".join(lines) + "\n"
