"""extensions.yaml kept off the start path: the catalog holds its head, the packages load on demand.

The extension packages' history (every release since torch 2.1.0) is most of the database's
bytes. `suggest` without `--with` never looks at it, so the catalog cache and the shipped
snapshot (``catalog.json``) hold only its *head* — ``schema``, ``updated``, ``torch_cxx11_abi``
and the sources that cites — marked ``deferred`` with the file's stamp. The packages and their
sources are read when first looked up: from ``extensions.json`` (the shipped file parsed ahead,
used while its stamp matches) or else the YAML itself, through the same checks as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.core.errors import MALFORMED, malformed

if TYPE_CHECKING:
    from resolver.db.models import ExtPackage

# the parser's two steps (db/parse.py hands them in: this module imports nothing of it)
Parse = Callable[[Any, Mapping[str, str]], "dict[str, ExtPackage]"]
Merge = Callable[[dict[str, Any], Any], dict[str, Any]]

FILE = "extensions.yaml"
SNAPSHOT = (
    "extensions.json"  # the shipped extensions.yaml parsed ahead (tools/gen_catalog_snapshot)
)
DEFERRED = "deferred"  # the head's key: the stamp of the file its packages are read from
_HEAD = ("schema", "updated", "torch_cxx11_abi")


def _cited(value: Any, out: set[str]) -> None:
    """Every key a ``source: [...]`` list names anywhere in ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "source" and isinstance(item, list):
                out.update(str(s) for s in item)
            else:
                _cited(item, out)
    elif isinstance(value, list):
        for item in value:
            _cited(item, out)


def head(doc: Any, stamp: str) -> Any:
    """What the catalog cache and snapshot keep of extensions.yaml (see the module's docstring);
    anything but a mapping is kept whole (the parser names the damage)."""
    if not isinstance(doc, dict):
        return doc
    out = {k: doc[k] for k in _HEAD if k in doc}
    used: set[str] = set()
    _cited(out, used)
    sources = doc.get("sources")
    if isinstance(sources, dict):
        out["sources"] = {k: v for k, v in sources.items() if k in used}
    out[DEFERRED] = stamp
    return out


def stamp_of(directory: Path) -> str | None:
    """extensions.yaml's ``size:crc32`` in ``directory`` (None: absent or unreadable)."""
    from resolver.db import snapshot

    found = snapshot.stamp(directory, [FILE])
    return None if found is None else found.get(FILE)


def load(directory: Path, *, bounded: bool) -> Any:
    """The whole extensions.yaml of ``directory``: its parsed snapshot while that matches the
    file, else the YAML (DataError when it is broken)."""
    from resolver.db import snapshot

    raw = snapshot.read(directory, [FILE], file=SNAPSHOT)
    if raw is not None and FILE in raw:
        return raw[FILE]
    from resolver.db import yamlfile

    return yamlfile.read_yaml(directory / FILE, bounded=bounded)


class LazyExtensions(Mapping[str, "ExtPackage"]):
    """extensions.yaml's packages, checked and built the first time one is looked up.

    Only `--with` an extension, `db show` and `db check` look: parsing them (and importing
    `packaging` to check their specifiers) was ~5 ms of every `suggest`, and the history made
    the file many times larger. The checks are the same, only later: a damaged file is a
    DataError naming the record when first read. Where the catalog holds only the head, the
    whole file is read from the database's folder ``origin``; its sources then join the
    catalog's own dict ``sources`` (one key, one meaning), which `db show` and `db check` see."""

    def __init__(
        self,
        doc: Any,
        origin: str,
        sources: dict[str, Any],
        lenient: bool,
        hooks: tuple[Parse, Merge],
    ) -> None:
        self._doc, self._origin, self._sources, self._lenient = doc, origin, sources, lenient
        self._parse, self._merge = hooks
        self._parsed: dict[str, ExtPackage] | None = None

    def _packages(self) -> dict[str, ExtPackage]:
        if self._parsed is None:
            from resolver.db.evidence import source_kind

            try:
                doc = self._doc
                if isinstance(doc, dict) and DEFERRED in doc:
                    doc = load(Path(self._origin), bounded=self._lenient)
                merged = self._merge(self._sources, doc)
                self._sources.update(merged)
                kinds = {k: source_kind(v) for k, v in merged.items()}
                self._parsed = self._parse(doc, kinds)
            except MALFORMED as exc:
                # what the checks do not name is malformed all the same (as `catalog.load` says)
                raise malformed(f"{self._origin}: malformed extensions.yaml", exc) from None
        return self._parsed

    def __getitem__(self, name: str) -> ExtPackage:
        return self._packages()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._packages())

    def __len__(self) -> int:
        return len(self._packages())
