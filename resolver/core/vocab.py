"""The vocabularies: each closed set of words a user, a file or the database may spell, one enum
each (Click's choices, the spec reader, the lock record, the database loader and the published
schemas take their words from here; tests/test_architecture.py refuses a second spelling).

A member is its word (``str`` mixin): it compares equal to the text, prints as the text and
serialises as it, so a record or a document written before reads the same.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["CondaSource", "DriverPolicy", "EvidenceLevel", "Grade", "LockFormat", "words"]


class Word(str, Enum):
    """A vocabulary's word: ``str()`` and ``format()`` give the word itself."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class DriverPolicy(Word):
    """--driver-policy: CUDA minor-version compatibility, or the toolkit's own driver."""

    COMPAT = "compat"
    STRICT = "strict"


class EvidenceLevel(Word):
    """--evidence: which builds rank first."""

    DOCUMENTED = "documented"
    OBSERVED = "observed"
    ANY = "any"


class Grade(Word):
    """A fact's evidence grade, strongest first (data/SCHEMA.md)."""

    OBSERVED = "observed"
    BUILD_CONFIG = "build-config"
    OFFICIAL = "official"
    TRANSCRIPTION = "transcription"
    INFERRED = "inferred"


class CondaSource(Word):
    """--conda-source: where a conda environment's torch comes from."""

    PIP = "pip"
    CONDA_FORGE = "conda-forge"


class LockFormat(Word):
    """--format: the files a lock writes (``all``: the first three)."""

    REQUIREMENTS = "requirements"
    CONDA = "conda"
    CONDA_LOCK = "conda-lock"
    PYLOCK = "pylock"
    UV = "uv"
    DOCKERFILE = "dockerfile"


def words(vocabulary: type[Word]) -> tuple[str, ...]:
    """A vocabulary's words, in its order (Click's choices, a schema's enum)."""
    return tuple(str(m.value) for m in vocabulary)
