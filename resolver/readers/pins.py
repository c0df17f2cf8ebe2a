"""What a lock file pins, whatever its format: ``Pin`` and ``LockPins``, and the build variant
a local version tag, a PyTorch index URL or a conda build string names.

The readers (``requirements``, ``conda``, ``pylock``) produce these and ``lockfile.read`` picks
the reader; `verify` checks an environment against the pins and `install` plans from them. A pin
keeps what both need: the distribution's name as installed (conda's ``pytorch`` is the ``torch``
distribution), the exact version or the specifier, the build variant it names (``+cu126``, a conda
build ``cuda126_*``, or a PyTorch index URL ``.../whl/cu126``), its marker and the line it came
from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from resolver.core.versions import canonical_name

FORMAT_REQUIREMENTS = "requirements"
FORMAT_ENVIRONMENT = "environment"
FORMAT_CONDA_LOCK = "conda-lock"
FORMAT_PYLOCK = "pylock"

_VARIANT_RE = re.compile(r"^(cpu|cu[0-9]{3}|rocm[0-9]+(\.[0-9]+)*|xpu)$")
_INDEX_VARIANT_RE = re.compile(r"/whl/(?:(?:nightly|test)/)?(cpu|cu[0-9]{3}|rocm[0-9.]+|xpu)/?$")
_CONDA_BUILD_CUDA_RE = re.compile(r"(?:^|_)cuda([0-9]+)(?:\.([0-9]+))?(?:_|$)")


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock, as the installed environment should satisfy it."""

    name: str  # canonical distribution name: "torch", "nvidia-cudnn-cu12"
    version: str | None  # the exact version pinned, without local tag ("2.8.0"); None: a range
    spec: str  # the specifier as written ("==2.8.0+cu126", ">=2.4", conda "2.5.1.*")
    variant: str | None  # the build it names: "cu126", "cpu", "cuda" (any CUDA build) or None
    manager: str  # "pip" | "conda"
    marker: str | None = None  # a PEP 508 environment marker, evaluated against the target
    line: str = ""  # where it came from, for messages
    hashes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The pin as a person would write it: ``torch==2.8.0+cu126``."""
        if self.version is None:
            return f"{self.name}{self.spec}"
        local = f"+{self.variant}" if self.variant and self.manager == "pip" else ""
        return f"{self.name}=={self.version}{local}"


@dataclass(frozen=True)
class LockPins:
    path: str
    format: str  # requirements | environment | conda-lock | pylock
    pins: tuple[Pin, ...]
    index_urls: tuple[str, ...] = ()  # --index-url / --extra-index-url, in order
    platforms: tuple[str, ...] = ()  # conda-lock: the platforms it was locked for

    def get(self, name: str) -> Pin | None:
        wanted = canonical(name)
        return next((p for p in self.pins if p.name == wanted), None)


canonical = canonical_name  # PEP 503; the name its callers know


def variant_of_local(local: str | None) -> str | None:
    """A local version label that names a build ("cu126", "cpu"), else None."""
    if local and _VARIANT_RE.match(local):
        return local
    return None


def variant_of_index(url: str) -> str | None:
    """The build a PyTorch-index URL serves: ".../whl/cu126" -> "cu126"."""
    m = _INDEX_VARIANT_RE.search(url.strip())
    return m.group(1) if m else None


def variant_of_conda_build(build: str | None) -> str | None:
    """A conda build string's variant: "cuda126_mkl_py312_h0" -> "cu126", "cpu_..." -> "cpu"."""
    if not build:
        return None
    b = build.lower().rstrip("*")
    m = _CONDA_BUILD_CUDA_RE.search(b)
    if m:  # "cuda126" or "cuda12.6"
        return f"cu{m.group(1)}{m.group(2) or ''}"
    if "cuda" in b:
        return "cuda"
    if b.startswith("cpu") or "_cpu" in b:
        return "cpu"
    return None
