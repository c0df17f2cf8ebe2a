"""The C++ ABI of each torch build, where an extension's builds differ by it (flash-attn).

``torch_cxx11_abi`` in extensions.yaml: every Linux build from ``since`` on uses the C++11 ABI,
and ``builds`` lists earlier ones that use it all the same (2.6's cu126, ROCm, XPU and aarch64
builds), so the ABI is decided per build, not per minor. Read with the catalog (a few records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from resolver.core.platforms import PLATFORMS
from resolver.db.evidence import Provenance
from resolver.db.models import AbiBuilds


class Reader(Protocol):
    """The parser's record reader (``db/parse.py``), as much of it as is used here."""

    def fail(self, msg: str) -> Exception: ...
    def req(self, key: str) -> str: ...
    def list(self, key: str, *, optional: bool = True) -> list[Any]: ...
    def prov(self) -> Provenance: ...


def abi_builds(doc: Reader, reader: Callable[[str, str, Any], Reader]) -> tuple[AbiBuilds, ...]:
    """``torch_cxx11_abi.builds``: a minor, and the variants and platforms of it (none: all);
    ``reader(file, where, data)`` reads one record."""
    out: list[AbiBuilds] = []
    for i, item in enumerate(doc.list("builds")):
        b = reader("extensions.yaml", f"torch_cxx11_abi builds[{i}]", item)
        minor = b.req("minor")
        parts = minor.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise b.fail(f"'minor' must be a torch minor like 2.6, got {minor!r}")
        platforms = frozenset(str(p) for p in b.list("platforms"))
        unknown = sorted(p for p in platforms if p not in PLATFORMS)
        if unknown:
            raise b.fail(f"unknown platform {unknown[0]!r}")
        variants = frozenset(str(v) for v in b.list("variants"))
        out.append(AbiBuilds(minor, variants, platforms, b.prov()))
    return tuple(out)


def uses_cxx11(
    since: str | None, builds: tuple[AbiBuilds, ...], version: str, variant: str, platform: str
) -> bool | None:
    """Whether torch ``version``'s ``variant`` build for ``platform`` uses the C++11 ABI (None:
    the database does not say)."""
    if since is None:
        return None
    minor = ".".join(version.split("+")[0].split(".")[:2])
    key = tuple(int(p) for p in minor.split("."))
    if key >= tuple(int(p) for p in since.split(".")):
        return True
    return any(
        b.minor == minor
        and (not b.variants or variant in b.variants)
        and (not b.platforms or platform in b.platforms)
        for b in builds
    )
