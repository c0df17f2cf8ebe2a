"""Evidence grades: how strongly each fact in the database is known (see data/SCHEMA.md).

A fact's grade is its best source's kind, never above it; the solver trusts `documented` facts
(observed, build-config, official) by default. This module holds the vocabulary, the provenance
record every fact carries, and the grading of one build (the weakest of its own facts).

No ``from __future__ import annotations``: typing.NamedTuple would compile each string
annotation on every start (see db/models.py).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from resolver.core.versions import CC, Driver
from resolver.core.vocab import EvidenceLevel, Grade, words

GRADES: tuple[str, ...] = words(Grade)
DOCUMENTED = frozenset(GRADES[:3])
GRADE_TEXT = {
    "observed": "read from the wheel itself or its printed get_arch_list()",
    "build-config": "PyTorch's build scripts/config of that release",
    "official": "RELEASE.md, an RFC, a maintainer's PR or NVIDIA's documents",
    "transcription": "a third-party copy",
    "inferred": "carried over or reasoned; no source states it",
}
Level = EvidenceLevel
LEVELS: tuple[str, ...] = words(EvidenceLevel)
_RANK = {g: i for i, g in enumerate(GRADES)}


def rank(grade: str) -> int:
    """0 for `observed` ... 4 for `inferred` (smaller is stronger)."""
    return _RANK.get(grade, len(GRADES) - 1)


def weakest(grades: Iterable[str]) -> str:
    return max(grades, key=rank, default="observed")


def strongest(grades: Iterable[str]) -> str:
    return min(grades, key=rank, default="inferred")


def trusted(grade: str, level: str) -> bool:
    """Whether a build of this grade ranks with the rest under --evidence LEVEL."""
    if level == EvidenceLevel.ANY:
        return True
    if level == EvidenceLevel.OBSERVED:
        return grade == Grade.OBSERVED
    return grade in DOCUMENTED


def source_kind(src: Mapping[str, Any]) -> str:
    """A sources.yaml entry's kind: `kind:`, else the old `primary:` flag."""
    kind = src.get("kind")
    if isinstance(kind, str) and kind in _RANK:
        return kind
    if kind is None and isinstance(src.get("primary"), bool):
        return "official" if src["primary"] else "transcription"
    return "inferred"


class Contradiction(NamedTuple):
    """A value another source gives for the same fact, which lost (kept, never hidden)."""

    value: str
    source: tuple[str, ...]
    note: str | None = None


class Provenance(NamedTuple):
    """Where a fact comes from and how strongly it is known.

    ``grade`` is the effective grade: the stated one, but never above what the best source
    supports (``supported``); ``declared`` is what the file states (None: from the sources).
    A NamedTuple: thousands are built at every start, and class creation costs import time.
    """

    source: tuple[str, ...]
    grade: str = "official"
    declared: str | None = None
    supported: str = "official"
    contradicts: tuple[Contradiction, ...] = ()

    @property
    def confirmed(self) -> bool:
        """The old yes/no: documented (observed, build-config or official)."""
        return self.grade in DOCUMENTED


def make_provenance(
    source: tuple[str, ...],
    declared: str | None,
    kinds: Mapping[str, str],
    contradicts: tuple[Contradiction, ...] = (),
) -> Provenance:
    supported = strongest(kinds.get(s, "inferred") for s in source) if source else "inferred"
    grade = supported if declared is None else weakest((declared, supported))
    return Provenance(source, grade, declared, supported, contradicts)


# What a graded fact is about, as data (``resolver.present.findings.about`` says it).


@dataclass(frozen=True)
class Exists:
    torch: str
    variant: str | None = None  # None: the release; else its build of that variant


@dataclass(frozen=True)
class PythonTags:
    platform: str


@dataclass(frozen=True)
class Pairing:
    name: str  # the companion paired with the release


@dataclass(frozen=True)
class Pinned:
    library: str  # "cudnn" or "nccl": a library the wheel pins
    version: str


@dataclass(frozen=True)
class Kernels:
    ptx: bool  # the PTX list, else the SASS list
    ccs: tuple[CC, ...]
    platform: str | None = None  # the platform a SASS list is for


@dataclass(frozen=True)
class Drivers:
    """The drivers of a CUDA version (its floor), or of a GPU architecture (its window)."""

    of: str  # the CUDA version, or the architecture's name
    cuda: bool
    first: int | None = None  # the window's edges, where they are the fact
    cut: int | None = None
    edges: bool = False


@dataclass(frozen=True)
class WindowsIs:
    """Which branch a Windows driver number belongs to (and the branch's numbers, where said)."""

    driver: Driver
    branch: int
    numbers: tuple[Driver, Driver] | None = None


About = Exists | PythonTags | Pairing | Pinned | Kernels | Drivers | WindowsIs


class Fact(NamedTuple):
    """One graded fact a build rests on, for `evidence_detail` and --explain.

    A NamedTuple, not a dataclass: the solver makes a few per candidate, for every build.
    """

    name: str  # "release", "build", "python", "sass", "ptx", "driver floor", "cudnn", ...
    grade: str
    source: tuple[str, ...]
    what: About  # what it is about: "SASS sm_50 ... sm_90 for linux-x86_64", as data
    # Whether the fact decides if the build runs (wheel for the platform and Python, kernels,
    # driver floor, driver window) or only describes it (cuDNN, NCCL, companions, pinned by the
    # wheel): only deciding facts set a build's evidence grade.
    decides: bool = True


def facts_grade(facts: Iterable[Fact]) -> tuple[str, Fact | None]:
    """The weakest grade among the deciding facts, and the fact that sets it.

    Facts that only describe a build (cuDNN, NCCL, companions) never lower it: they come with
    the wheel and do not decide whether it runs (torch_matrix notes, "Which facts decide").
    """
    worst: Fact | None = None
    for f in facts:
        if not f.decides:
            continue
        if worst is None or rank(deciding_grade(f)) > rank(deciding_grade(worst)):
            worst = f
    return (deciding_grade(worst) if worst else "observed"), worst


DRIVER_FACTS = frozenset({"driver floor", "driver window", "driver branch"})


def deciding_grade(fact: Fact) -> str:
    """A driver fact stated by NVIDIA's own documents is as strong as a driver fact can be (no
    wheel prints it): it lowers a build's grade only when it rests on a copy or an inference."""
    if fact.name in DRIVER_FACTS and fact.grade in DOCUMENTED:
        return "observed"
    return fact.grade
