"""The words for an extension gate: a ``Misfit`` (the gate and its values) said in one line.

The extension decision (``extensions.choose``) returns data: which gate held a build back and
the values it compared. This module is the one place those values become a sentence, so that
the decision carries no prose of its own; it stays in ``solve/`` only because the solver's
reasons and hints are still strings (issue 37 moves every sentence to the presentation layer,
and this module goes with them whole).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum


class Gate(str, Enum):
    """What holds an extension build back, read from the build's own facts."""

    NO_FACTS = "no-facts"  # the database has no facts for the package
    NO_MATCH = "no-match"  # no release within the user's specifier
    SOURCE_ONLY = "source-only"  # a source distribution only (needs nvcc)
    PLATFORM = "platform"  # no wheel for the target's platform
    TORCH = "torch"  # its Requires-Dist torch excludes the torch build
    TORCH_HISTORY = "torch-history"  # no release of the database is for that torch
    IMPORT = "import"  # its own import check loads its kernels only with another torch
    PYTHON = "python"  # Requires-Python
    CUDA = "cuda"  # compiled for another CUDA major than the torch build's
    CUDART = "cudart"  # its libraries need libcudart.so.N of another CUDA major
    LIBRARY = "library"  # it loads only the library of torch's CUDA, and has none for it
    LOADER = "loader"  # its loader finds no library in the torch build's CUDA major
    DEFAULT_BUILD = "default-build"  # built against the default index's torch build only
    NEEDS_CUDA = "needs-cuda"  # GPU code, and the torch build is not a CUDA one
    ABI = "abi"  # built for the other C++ ABI than the torch build's
    ARCH_UNKNOWN = "arch-unknown"  # device code whose architectures are not known
    KERNELS = "kernels"  # no SASS or PTX that runs on a GPU
    CEILING = "ceiling"  # its own kernels refuse the GPU, and nothing runs in their place


NEVER = "<0"  # an import gate no torch release meets (torchao 0.14.0's check, SCHEMA.md)


def phrase(gate: Gate, package: str, version: str, values: Mapping[str, str]) -> str:
    """One line for a misfit, naming the package and release it holds back."""
    v = values
    head = f"{package} {version}" if version else package
    if gate is Gate.NO_FACTS:
        return f"{package}: the database has no facts for it (extensions.yaml)"
    if gate is Gate.NO_MATCH:
        return f"{package}: no release in the database matches {v['spec']}"
    if gate is Gate.TORCH_HISTORY:
        newest = (
            f"; the newest with wheels, {v['newest']}, requires torch {v['newest_torch']}"
            if v.get("newest")
            else ""
        )
        count = v.get("count") or str(len(v["versions"].split(",")))
        return (
            f"{package}: none of its {count} releases in the database "
            f"({versions_words(v['versions'])}) is for torch {v['torch']} (gate: torch, "
            f"their Requires-Dist){newest}"
        )
    words: dict[Gate, Callable[[], str]] = {
        Gate.SOURCE_ONLY: lambda: (
            "has only a source distribution (compiling it needs nvcc and the CUDA toolkit)"
        ),
        Gate.PLATFORM: lambda: f"has no {v['platform']} wheel (only {v['have']})",
        Gate.TORCH: lambda: f"requires torch{v['requires']}, not {v['torch']}",
        Gate.IMPORT: lambda: (
            f"loads its kernels with no released torch (its own import check, {v['grade']}), "
            f"so not with {v['torch']}"
            if v["gate"] == NEVER
            else f"loads its kernels only with torch {torch_words(v['gate'])} (its own import "
            f"check, {v['grade']}), not {v['torch']}"
        ),
        Gate.PYTHON: lambda: f"requires Python {v['requires']}, not {v['python']}",
        Gate.CUDA: lambda: (
            f"is built with CUDA {v['cuda']}: it needs a CUDA {v['major']} torch build, "
            f"not {v['variant']}"
        ),
        Gate.CUDART: lambda: (
            f"links libcudart.so.{v['cudart']} (CUDA {v['cudart']}), which a "
            f"{v['variant']} torch build does not bring"
        ),
        Gate.LIBRARY: lambda: f"has no library for CUDA {v['cuda']}",
        Gate.LOADER: lambda: (
            f"has no library for CUDA {v['major']} (its loader takes one of torch's CUDA major "
            f"only; it has {v['have']}), not for {v['variant']}"
        ),
        Gate.DEFAULT_BUILD: lambda: (
            f"is built against torch's default-index build, not {v['variant']}"
        ),
        Gate.NEEDS_CUDA: lambda: "needs a CUDA torch build",
        Gate.ABI: lambda: (
            f"is built for the {'C++11' if v['abi'] == 'cxx11' else 'old'} ABI, but torch "
            f"{v['torch']} {v['variant']} uses the {'C++11' if v['abi'] != 'cxx11' else 'old'}"
            " ABI"
        ),
        Gate.ARCH_UNKNOWN: lambda: (
            f"has device code whose architectures are not known for {v['platform']}"
        ),
        Gate.KERNELS: lambda: f"has no kernels for {v['gpu']}: {v['arch']}",
        Gate.CEILING: lambda: (
            f"has no kernels for {v['gpu']}: its own kernels refuse compute capability above "
            f"{v['ceiling']} ({v['grade']})"
        ),
    }
    others = v.get("others")
    tail = ""
    if others:
        rest = "its other release" if others == "1" else f"its {others} other releases"
        by = v.get("by", "")
        if by == f"{gate.value} ({others})":
            tail = f"; the same gate ({gate.value}) holds back {rest} with wheels"
        else:
            tail = f"; {rest} with wheels: gate {by}"
    return f"{head} {words[gate]()}{tail}"


def versions_words(versions: str, shown: int = 3) -> str:
    """A long list of releases (newest first) in few words: the newest ``shown``, how many
    more, and the oldest; the whole history listed one by one is unreadable in a hint."""
    items = [x.strip() for x in versions.split(",") if x.strip()]
    if len(items) <= shown + 1:
        return ", ".join(items)
    more = len(items) - shown - 1
    return f"{', '.join(items[:shown])}, {more} more, down to {items[-1]}"


def ceiling_words(ceiling: str, fallback: str, grade: str) -> str:
    """How a GPU above a package's own kernel ceiling is reached: what runs instead."""
    return f"its own kernels refuse CC above {ceiling}; what runs: {fallback} ({grade})"


def loader_words(cuda: str, loaded: str) -> str:
    """Where a package's loader takes the library of another CUDA minor (bitsandbytes)."""
    return (
        f"loads its CUDA {loaded} library (none for {cuda}: its loader takes the nearest of "
        "the same CUDA major)"
    )


def torch_words(spec: str) -> str:
    """``==2.10.0`` -> ``2.10.0``, ``>=2.11.0`` -> ``2.11.0 or later``; else the specifier."""
    if spec.startswith("==") and "," not in spec:
        return spec[2:]
    if spec.startswith(">=") and "," not in spec:
        return f"{spec[2:]} or later"
    return spec
