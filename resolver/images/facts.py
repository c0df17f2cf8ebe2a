"""``data/images.yaml``: how official images are built per release, and NGC containers, graded.

Loaded and validated into typed records; a malformed file is a DataError naming the record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from resolver.core.errors import DataError, UserError
from resolver.core.platforms import PythonVersion
from resolver.core.versions import CudaVersion
from resolver.core.vocab import Grade, words

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from resolver.catalog import Catalog

GRADES = words(Grade)
_T = TypeVar("_T")


def weakest(*grades: str) -> str:
    """The weakest of some evidence grades: a chain of facts is as strong as its weakest link."""
    return max(grades, key=GRADES.index)


@dataclass(frozen=True)
class Fact:
    """One graded value (None: unknown)."""

    value: str | None
    grade: str
    source: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class Era:
    """How a range of torch releases installs torch into the official images."""

    torch: SpecifierSet
    install: Fact  # wheel | conda | unknown
    python: Fact
    note: str | None
    base: Fact | None = None  # the OS base of the images ("ubuntu:24.04"), where known
    devel: Fact | None = None  # what the devel flavour is built on, where it differs by era

    def flavour_note(self, flavour: str) -> str | None:
        """The era's own account of a flavour (the devel base changed in 2.10), if it has one."""
        fact = self.devel if flavour == "devel" else None
        return fact.note if fact is not None and fact.note else None


@dataclass(frozen=True)
class Official:
    repository: str
    names: tuple[str, ...]
    tag: str
    platform: str
    flavours: Mapping[str, str]
    link: Fact  # the build rule that ties a tag to a release's CUDA build
    eras: tuple[Era, ...]

    def era(self, version: str) -> Era | None:
        return next((e for e in self.eras if e.torch.contains(version, prereleases=True)), None)


@dataclass(frozen=True)
class NgcRelease:
    release: str  # "25.12"
    torch: Fact
    cuda: Fact
    python: Fact
    cudnn: Fact
    nccl: Fact
    note: str | None
    # ``cuda`` and ``python`` typed where images.yaml is read (the facts keep the text, as said)
    cuda_version: CudaVersion | None = None
    python_version: PythonVersion | None = None


@dataclass(frozen=True)
class FcBranch:
    """A driver branch NGC containers of one CUDA major run on in forward-compatibility mode."""

    branch: int
    fact: Fact  # value: the branch ("570"), graded and sourced


@dataclass(frozen=True)
class ForwardCompat:
    """CUDA forward compatibility of NGC containers: which GPUs, and per CUDA major of the
    container, which older driver branches (NVIDIA's cuda-compat package in the image)."""

    gpu_kinds: Fact  # value: comma-separated gpus.yaml kinds ("datacenter")
    branches: Mapping[int, tuple[FcBranch, ...]]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k.strip() for k in (self.gpu_kinds.value or "").split(",") if k.strip())

    def branch(self, cuda_major: int, branch: int) -> FcBranch | None:
        return next((b for b in self.branches.get(cuda_major, ()) if b.branch == branch), None)


@dataclass(frozen=True)
class Ngc:
    repository: str
    tag: str
    platform: str
    releases: tuple[NgcRelease, ...]
    forward_compat: ForwardCompat | None = None

    def release(self, name: str) -> NgcRelease | None:
        return next((r for r in self.releases if r.release == name), None)


@dataclass(frozen=True)
class ImageFacts:
    official: Official
    ngc: Ngc
    sources: Mapping[str, Mapping[str, Any]]
    updated: str | None
    origin: str


def from_raw(raw: Any, origin: str = "<memory>") -> ImageFacts:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    top = _mapping(raw, "images.yaml")
    sources = _mapping(top.get("sources"), "images.yaml sources")
    for key, src in sources.items():
        s = _mapping(src, f"images.yaml source {key}")
        if not str(s.get("cite") or "").strip() or not isinstance(s.get("primary"), bool):
            raise DataError(f"images.yaml source {key}: needs cite and primary: true|false")

    def fact(data: Any, where: str) -> Fact:
        d = _mapping(data, where)
        grade = d.get("grade")
        if grade not in GRADES:
            raise DataError(f"{where}: grade must be one of {', '.join(GRADES)}")
        source = d.get("source")
        if not isinstance(source, list) or not source:
            raise DataError(f"{where}: no source")
        missing = [s for s in source if s not in sources]
        if missing:
            raise DataError(f"{where}: unknown source key(s) {', '.join(map(str, missing))}")
        value = d.get("value")
        if value is not None and not isinstance(value, str):
            raise DataError(f"{where}: value must be a quoted string or null")
        return Fact(value, grade, tuple(source), d.get("note"))

    off = _mapping(top.get("official"), "images.yaml official")
    eras = []
    for i, e in enumerate(off.get("eras") or []):
        where = f"images.yaml official era {i + 1}"
        em = _mapping(e, where)
        try:
            spec = SpecifierSet(str(em.get("torch") or ""))
        except InvalidSpecifier:
            raise DataError(f"{where}: torch must be a PEP 440 specifier") from None
        eras.append(
            Era(
                spec,
                fact(em.get("install"), f"{where} install"),
                fact(em.get("python"), f"{where} python"),
                em.get("note"),
                fact(em["base"], f"{where} base") if em.get("base") is not None else None,
                fact(em["devel"], f"{where} devel") if em.get("devel") is not None else None,
            )
        )
    if not eras:
        raise DataError("images.yaml official: no eras")
    link = fact(
        {"value": off.get("tag"), "grade": off.get("grade"), "source": off.get("source")},
        "images.yaml official",
    )
    official = Official(
        repository=str(off.get("repository")),
        names=tuple(str(n) for n in off.get("names") or ()),
        tag=str(off.get("tag")),
        platform=str(off.get("platform")),
        flavours={str(k): str(v) for k, v in _mapping(off.get("flavours"), "flavours").items()},
        link=link,
        eras=tuple(eras),
    )
    ng = _mapping(top.get("ngc"), "images.yaml ngc")
    rels = []
    for r in ng.get("releases") or []:
        rm = _mapping(r, "images.yaml ngc release")
        where = f"images.yaml ngc {rm.get('release')}"
        cuda, python = (
            fact(rm.get("cuda"), f"{where} cuda"),
            fact(rm.get("python"), f"{where} python"),
        )
        rels.append(
            NgcRelease(
                release=str(rm.get("release")),
                torch=fact(rm.get("torch"), f"{where} torch"),
                cuda=cuda,
                python=python,
                cudnn=fact(rm.get("cudnn"), f"{where} cudnn"),
                nccl=fact(rm.get("nccl"), f"{where} nccl"),
                note=rm.get("note"),
                cuda_version=_typed(CudaVersion.parse, cuda.value, f"{where} cuda"),
                python_version=_typed(PythonVersion.parse, python.value, f"{where} python"),
            )
        )
    fc = _forward_compat(ng.get("forward_compat"), fact)
    ngc = Ngc(
        str(ng.get("repository")), str(ng.get("tag")), str(ng.get("platform")), tuple(rels), fc
    )
    updated = top.get("updated")
    return ImageFacts(official, ngc, sources, str(updated) if updated else None, origin)


def _forward_compat(data: Any, fact: Callable[[Any, str], Fact]) -> ForwardCompat | None:
    """``ngc.forward_compat``: absent means none is claimed."""
    if data is None:
        return None
    where = "images.yaml ngc forward_compat"
    fc = _mapping(data, where)
    kinds = fact(fc.get("gpu_kinds"), f"{where} gpu_kinds")
    branches: dict[int, tuple[FcBranch, ...]] = {}
    for major, items in _mapping(fc.get("branches"), f"{where} branches").items():
        if not re.fullmatch(r"[0-9]{1,2}", str(major)) or not isinstance(items, list):
            raise DataError(f'{where} branches: a CUDA major ("13") maps to a list of branches')
        rows: list[FcBranch] = []
        for i, item in enumerate(items):
            at = f"{where} CUDA {major} [{i}]"
            m = _mapping(item, at)
            branch = m.get("branch")
            if not isinstance(branch, str) or not re.fullmatch(r"[0-9]{3,4}", branch):
                raise DataError(f'{at}: branch must be a quoted branch number ("570")')
            rows.append(FcBranch(int(branch), fact({**m, "value": branch}, at)))
        branches[int(major)] = tuple(rows)
    return ForwardCompat(kinds, branches)


def _mapping(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise DataError(f"{where}: expected a mapping")
    return data


def _typed(parse: Callable[[str], _T], text: str | None, where: str) -> _T | None:
    """A version fact's value parsed once, here where images.yaml is read."""
    if text is None:
        return None
    try:
        return parse(text)
    except (UserError, ValueError):
        raise DataError(f"{where}: not a version: {text[:40]!r}") from None


def check(catalog: Catalog, facts: ImageFacts) -> list[str]:
    """``db check``'s rules for images.yaml once loaded: NGC CUDA versions known to cuda.yaml
    (only for an images.yaml beside the database: the shipped one is checked against the shipped
    database), an era for the newest torch release (gpu_peaks.yaml is verify's: the db command
    checks it)."""
    problems: list[str] = []
    beside = Path(facts.origin).parent == Path(catalog.origin)
    for rel in facts.ngc.releases if beside else ():
        cuda = rel.cuda.value
        if cuda is not None and cuda not in catalog.toolkits:
            problems.append(f"images.yaml ngc {rel.release}: CUDA {cuda} not in cuda.yaml")
    if not any(facts.official.era(r.version) for r in catalog.releases[:1]):
        problems.append("images.yaml official: no era covers the newest torch release")
    return problems
