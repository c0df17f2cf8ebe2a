"""Dockerfile: the lock installed on a fitting base, with `gpuresolve verify` as a start-up check.

The base is the official pytorch/pytorch runtime image whose torch build is the lock's (same
release, same CUDA variant, same Python), so the pins install nothing twice; otherwise the
official slim Python image of the target's Python, where the pinned wheels bring their own CUDA
libraries. `gpuresolve verify` runs from its own virtualenv, so it never changes the environment
it checks; the lines that add it are marked and can be deleted.
"""

from __future__ import annotations

from resolver import __version__
from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.platforms import is_free_threaded
from resolver.images.facts import ImageFacts
from resolver.solve import Decision
from resolver.writers.formats.header import header_lines

REQUIREMENTS_PATH = "/opt/gpuresolve/requirements.txt"
VERIFY_VENV = "/opt/gpuresolve/venv"


def base_image(facts: ImageFacts | None, decision: Decision) -> tuple[str, str]:
    """(FROM image, why) for the lock's target and build."""
    from resolver.images.evaluate import official_tag

    sel = decision.selection
    target = decision.target
    if sel is None:
        raise ValueError("no build selected: nothing to lock")
    if not target.platform.startswith("linux-"):
        raise UserError(
            f"--format dockerfile needs a Linux target (containers run Linux); this one is "
            f"{target.platform}: add --platform linux-x86_64"
        )
    if facts is not None and sel.variant.kind == "cuda":
        off = facts.official
        era = off.era(sel.release.version)
        if (
            era is not None
            and target.platform == off.platform
            and era.install.value == "wheel"
            and era.python.value == target.python
        ):
            image = official_tag(facts, sel.release, sel.variant, "runtime")
            base = f" on {era.base.value}" if era.base is not None and era.base.value else ""
            return image, (
                f"the official image of torch {sel.release.version} {sel.variant.name} "
                f"(Python {target.python}{base}): the pins below are already installed in it"
            )
    if is_free_threaded(target.python):
        raise UserError(
            f"no slim base image for free-threaded Python {target.python}: lock for a "
            "regular Python (--python 3.X)"
        )
    why = f"the official slim image of Python {target.python}"
    if sel.variant.kind == "cuda":
        why += ": the pinned wheels bring their CUDA libraries (no CUDA toolkit needed)"
    return f"python:{target.python}-slim", why


def render_dockerfile(catalog: Catalog, decision: Decision, facts: ImageFacts | None) -> str:
    """The Dockerfile's text (deterministic for fixed inputs)."""
    image, why = base_image(facts, decision)
    head = header_lines(
        catalog,
        decision,
        [
            f"base: {why}",
            "build: docker build -t my-image . (next to requirements.txt, which it installs)",
        ],
    )
    lines = [
        *head,
        f"FROM {image}",
        f"COPY requirements.txt {REQUIREMENTS_PATH}",
        f"RUN python -m pip install --no-cache-dir -r {REQUIREMENTS_PATH}",
        "",
        "# Start-up check (keep or delete from here to the end): before the container's command,",
        "# `gpuresolve verify` proves on the host's GPU that torch imports, matches the driver and",
        "# the lock, and computes correctly; the container stops with its report if not.",
        f"RUN python -m venv {VERIFY_VENV} \\",
        f"    && {VERIFY_VENV}/bin/python -m pip install --no-cache-dir "
        f'"gpuresolve=={__version__}"',
        "ENTRYPOINT "
        '["/bin/sh", "-c", '
        f'"{VERIFY_VENV}/bin/gpuresolve verify --python \\"$(command -v python)\\" '
        f'--lock {REQUIREMENTS_PATH} >&2 && exec \\"$@\\"", "gpuresolve-verify"]',
        'CMD ["python"]',
    ]
    return "\n".join(lines) + "\n"
