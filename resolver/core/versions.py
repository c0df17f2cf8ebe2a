"""Small parsers for the version-like strings the domain is full of (drivers, CCs, CUDA)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from resolver.core.errors import UserError

# The one driver grammar (options, specs, node lists, host files, the locks' records): a branch
# and up to two more parts, each 1-4 ASCII digits ("580", "581.57", "570.124.06"). Bounded digit
# runs: NVIDIA's parts have at most 3 digits, and int() of a 5,000-digit string raises.
_DRIVER_RE = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,2}", re.ASCII)
GLIBC_RE = re.compile(r"^2\.[0-9]{1,3}\Z")  # a glibc version: every reader's ("2.28", "2.39")
# Windows' Device Manager spelling: 560.94 is 32.0.15.6094 (its last five digits), 456.71 is
# 27.21.14.5671.
_DEVICE_MANAGER_RE = re.compile(r"[0-9]{2}\.[0-9]{1,2}\.[0-9]{2}\.[0-9]{4}", re.ASCII)
_SHOWN = 40
_CC_RE = re.compile(r"^(?:sm_|compute_)?([0-9]{1,3})\.?([0-9])?([af]?)$", re.IGNORECASE)
_MAX_CC_DIGITS = 4

DriverKey = tuple[int, ...]
CC = tuple[int, int]


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Driver:
    """An NVIDIA driver version: one grammar wherever a driver is read, so every value one part
    accepts (``lock --driver``) another reads back (``lock --check``).

    ``str()`` is NVIDIA's own spelling, leading zeros kept ("570.124.06"); order and equality
    are numeric (570.124.6 == 570.124.06), and "580" sorts before every 580.x.
    """

    text: str

    @classmethod
    def parse(cls, value: str) -> Driver:
        """The driver ``value`` names; anything else is a UserError (exit 2 at the edge)."""
        if not isinstance(value, str):
            raise UserError(f"not a driver version: {value!r} (expected e.g. 570.124.06)")
        text = value.strip()
        if _DEVICE_MANAGER_RE.fullmatch(text):
            _, _, build, low = text.split(".")
            digits = (build + low)[-5:]
            text = f"{int(digits[:3])}.{digits[3:]}"
        if not _DRIVER_RE.fullmatch(text):
            shown = value if len(value) <= _SHOWN else f"{value[: _SHOWN - 3]}..."
            raise UserError(f"not a driver version: {shown!r} (expected e.g. 570.124.06)")
        return cls(text)

    @functools.cached_property
    def key(self) -> DriverKey:
        """(570, 124, 6): what order compares (worked out once per value)."""
        return tuple(int(p) for p in self.text.split("."))

    @property
    def branch(self) -> int:
        """The major number: a Linux driver's release branch (580 for 580.65.06). Windows
        numbers past a branch's own (581.57 is R580) need the database's table."""
        return self.key[0]

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Driver) and self.key == other.key

    def __lt__(self, other: Driver) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)


class AsWritten:
    """Equality and hash for a frozen record that names a machine: its fields, its ``driver`` by
    its text. ``Driver`` compares numerically, but two machines on 570.124.6 and 570.124.06 are
    two machines as written, and every output names each one's own spelling: a cache, group or
    set of such records must never merge them. (Subclasses: ``@dataclass(eq=False)``.)"""

    __slots__ = ()

    # A fleet's memo hashes its targets ~250,000 times: a few C-level steps each, no loop.
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        mine, theirs = vars(self), vars(other)
        return mine == theirs and str(mine.get("driver")) == str(theirs.get("driver"))

    def __hash__(self) -> int:
        return hash(tuple(vars(self).values()))  # the driver's by number: equal ones agree


@functools.lru_cache(maxsize=4096)  # a fleet asks for the same few hundred drivers again and again
def driver_key(version: str) -> DriverKey:
    """Numeric key of a driver version: "580.65.06" -> (580, 65, 6); "580" sorts before it."""
    return Driver.parse(version).key


@functools.lru_cache(maxsize=1024)  # the database names ~30 CCs ~1,800 times
def parse_cc(spec: str) -> CC:
    """Parse "8.6", "sm_86", "86", "12.0", "sm_120", "compute_90" into (major, minor)."""
    s = spec.strip().lower()
    if "." in s and not s.startswith(("sm_", "compute_")):
        major, _, minor = s.partition(".")
        if (
            major.isascii()
            and major.isdigit()
            and len(major) < _MAX_CC_DIGITS
            and minor.isascii()
            and minor.isdigit()
            and len(minor) == 1
        ):
            return int(major), int(minor)
        raise UserError(f"not a compute capability: {spec[:40]!r} (expected e.g. 8.6 or sm_86)")
    m = _CC_RE.match(s)
    if not m or m.group(2) is None:
        digits = s.removeprefix("sm_").removeprefix("compute_").rstrip("af")
        if digits.isascii() and digits.isdigit() and 2 <= len(digits) <= _MAX_CC_DIGITS:
            return int(digits[:-1]), int(digits[-1])
        raise UserError(f"not a compute capability: {spec[:40]!r} (expected e.g. 8.6 or sm_86)")
    return int(m.group(1)), int(m.group(2))


def cc_str(cc: CC) -> str:
    """(8, 6) -> "8.6"."""
    return f"{cc[0]}.{cc[1]}"


def cc_sm(cc: CC) -> str:
    """(8, 6) -> "sm_86"; (12, 0) -> "sm_120"."""
    return f"sm_{cc[0]}{cc[1]}"


@functools.lru_cache(maxsize=256)
def cuda_key(version: str) -> tuple[int, int]:
    """ "12.8" -> (12, 8)."""
    major, _, minor = version.strip().partition(".")
    if not re.fullmatch(r"[0-9]{1,3}", major) or not re.fullmatch(r"[0-9]{0,3}", minor):
        raise UserError(f"not a CUDA version: {version[:40]!r} (expected e.g. 12.8)")
    return int(major), int(minor or 0)


class CudaVersion(str):
    """A CUDA version as the database writes it ("12.8"), its parts read once where the text
    enters (`CudaVersion.parse`): ``key`` (12, 8) orders it, ``major`` picks a floor or runtime.

    A ``str`` so that it is its own text everywhere it is said or keyed on: equality, hashing,
    dict lookups by the text, f-strings and ``--json`` stay exactly what the text gives."""

    __slots__ = ("key",)
    key: tuple[int, int]

    @staticmethod
    @functools.lru_cache(maxsize=256)  # the database names a few dozen CUDA versions
    def parse(text: str) -> CudaVersion:
        """The CUDA version ``text`` names; anything else is a UserError."""
        key = cuda_key(text)
        value = CudaVersion(text)
        value.key = key
        return value

    @property
    def major(self) -> int:
        return self.key[0]


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name: "Nvidia_CUDNN.cu12" -> "nvidia-cudnn-cu12".

    The spec's one-line rule, here rather than `packaging.utils.canonicalize_name`: importing
    that module imports `packaging.tags` (platform, logging, subprocess), about 5 ms of every
    `suggest`, which reads the extension packages' names from the database."""
    return _SEPARATORS_RE.sub("-", name).lower()


_SEPARATORS_RE = re.compile(r"[-_.]+")
