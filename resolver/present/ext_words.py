"""The words for an extension gate: a ``Misfit`` (the gate and its values) said in one line.

The extension decision (``extensions.choose``) returns data: which gate held a build back and
the values it compared (``solve/findings.py``). This module is the one place those values become
a sentence, beside the solver's other records' (``findings``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from resolver.solve.findings import CeilingFallback, Gate, LoaderPick, Misfit

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


def misfit(m: Misfit) -> str:
    return phrase(m.gate, m.package, m.version, dict(m.values))


def reached(r: LoaderPick | CeilingFallback) -> str:
    """An extension's own way to a GPU, where SASS or PTX of one GPU is not what decides."""
    if isinstance(r, LoaderPick):
        return loader_words(r.cuda, r.loaded)
    return f"{r.gpu}: {ceiling_words(r.ceiling, r.fallback, r.grade)}"
