"""What a lock format is: one ``LockFormatUnit`` value (``FORMAT``) in its own module, listed once
in writers/lockformats.py. Rendering (lockfiles.render_files), a team's grouping (flows/team.py),
``--format``'s choices, the recorded formats' check and a written file's format in ``--json``
all read the list: a new format is one module and one line there (ARCHITECTURE.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.solve import Decision, Target
    from resolver.writers.closure.conda_solve import CondaRecord
    from resolver.writers.closure.pip_resolve import ResolvedDist

__all__ = [
    "CondaSolver",
    "LockFormatUnit",
    "Options",
    "PipResolver",
    "RenderContext",
    "TeamContext",
    "TeamWrite",
]

# (requirements, index lines, target, glibc) -> the resolved closure with hashes
PipResolver = Callable[[Sequence[str], Sequence[str], "Target", str | None], list["ResolvedDist"]]
# (channels, specs, conda subdir, virtual packages) -> the solved records
CondaSolver = Callable[[Sequence[str], Sequence[str], str, Mapping[str, str]], list["CondaRecord"]]


class Options(Protocol):
    """What a format reads of the lock's options (lockfiles.LockOptions)."""

    @property
    def formats(self) -> frozenset[str]: ...
    @property
    def pytorch_index(self) -> str | None: ...
    @property
    def conda_source(self) -> str: ...
    @property
    def channel(self) -> str | None: ...
    @property
    def top_level(self) -> bool: ...
    @property
    def name(self) -> str | None: ...
    @property
    def extra_requirements(self) -> tuple[str, ...]: ...
    @property
    def default_index(self) -> str | None: ...
    @property
    def every(self) -> bool: ...
    @property
    def with_hashes(self) -> bool: ...


class Lock(Protocol):
    """What a format reads of the target's choices (lockfiles.LockInput)."""

    @property
    def decision(self) -> Decision: ...
    @property
    def conda_decision(self) -> Decision | None: ...
    @property
    def glibc(self) -> str | None: ...


# lockfiles.making: a file whose index or channel cannot be read, said in one line
Making = Callable[[str, Options], AbstractContextManager[None]]

# the advice of a file that pins the whole closure (a format's ``advice`` says otherwise)
CLOSURE_ADVICE = "{name} always pins the whole closure{given}: {mirror}; or {drop}"


class TeamWrite(Enum):
    """How a team lock writes a format's files."""

    PER_SET = "per-set"  # in each set's folder, for the set's platform
    PER_GROUP = "per-group"  # once for a group's GPU sets (by platform marker); not for a CPU set
    MERGED = "merged"  # per set alone; once for the group (by marker) when it has several


@dataclass(frozen=True)
class LockFormatUnit:
    """A lock format: its ``--format`` word, the files it writes (in order), what it is made
    from, how a team writes it, and how it renders."""

    name: str  # --format's word (ours: a core.vocab.LockFormat member)
    files: tuple[str, ...]
    render: Callable[[RenderContext], Mapping[str, str]]  # its own files ({} : none here)
    uses: tuple[str, ...] = ()  # formats whose files it needs beside its own (listed before it)
    needs_wheels: bool = False  # made from the PyTorch-index decision
    needs_conda: bool = False  # made from the conda environment's decision
    needs_closure: bool = False  # pins the whole closure: needs an index to resolve
    in_place: bool = False  # edits the user's file: never removed, its record a table of its own
    team: TeamWrite = TeamWrite.PER_SET
    render_team: Callable[[TeamContext], str] | None = None  # PER_GROUP/MERGED: the one file
    # what to do when its index or channel cannot be read: {name} {mirror} {drop} {given}
    advice: str = CLOSURE_ADVICE
    summary: str = ""  # what it writes, as --format's help says it


@dataclass
class RenderContext:
    """One target's rendering: what every format reads, the files rendered so far, and the
    closures resolved (each requirement set once, whichever format asks)."""

    catalog: Catalog
    lock: Lock
    options: Options
    pip_run: PipResolver
    conda_run: CondaSolver
    custom_pip: bool  # a resolver was handed in (tests): its closure is taken as given
    existing: Mapping[str, str]  # the current text of files edited in place
    making: Making
    files: dict[str, str] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)  # what two formats share (conda's env)
    _closures: dict[tuple[tuple[str, ...], tuple[str, ...]], list[ResolvedDist]] = field(
        default_factory=dict
    )

    @property
    def decision(self) -> Decision:
        return self.lock.decision

    def closure(
        self, reqs: Sequence[str], index: Sequence[str], target: Target
    ) -> list[ResolvedDist]:
        """The resolved closure of ``reqs`` from ``index`` (once per requirement set)."""
        key = (tuple(reqs), tuple(index))
        if key not in self._closures:
            self._closures[key] = self.pip_run(reqs, index, target, self.lock.glibc)
        return self._closures[key]

    @contextmanager
    def reaching(self, name: str) -> Iterator[None]:
        """``name`` needs an index or a channel: one line naming the file when unreachable."""
        with self.making(name, self.options):
            yield


@dataclass(frozen=True)
class TeamContext:
    """A team group's one file of a PER_GROUP or MERGED format: the group's GPU sets."""

    catalog: Catalog
    options: Options
    making: Making
    decisions: tuple[Decision, ...]
    builds: tuple[str, ...]  # each decision's build, described (for a header)
    team: str
    label: str  # the group ("" for a team in one group)
    existing: str | None  # the current text of an in-place file
