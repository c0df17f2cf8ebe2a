"""Small parsers for the version-like strings the domain is full of (drivers, CCs, CUDA)."""

from __future__ import annotations

import re

from resolver.core.errors import UserError

# Bounded digit runs: NVIDIA's parts have at most 3-5 digits, and int() of a 5,000-digit string
# raises instead of parsing (Python's int-conversion limit).
_DRIVER_RE = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$")
_CC_RE = re.compile(r"^(?:sm_|compute_)?([0-9]{1,3})\.?([0-9])?([af]?)$", re.IGNORECASE)
_MAX_CC_DIGITS = 4

DriverKey = tuple[int, ...]
CC = tuple[int, int]


def driver_key(version: str) -> DriverKey:
    """Numeric key of a driver version: "580.65.06" -> (580, 65, 6); "580" sorts before it."""
    v = version.strip()
    if not _DRIVER_RE.match(v):
        shown = version if len(version) <= 40 else f"{version[:37]}..."
        raise UserError(f"not a driver version: {shown!r} (expected e.g. 570.124.06)")
    return tuple(int(p) for p in v.split("."))


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


def cuda_key(version: str) -> tuple[int, int]:
    """ "12.8" -> (12, 8)."""
    major, _, minor = version.strip().partition(".")
    if not re.fullmatch(r"[0-9]{1,3}", major) or not re.fullmatch(r"[0-9]{0,3}", minor):
        raise UserError(f"not a CUDA version: {version[:40]!r} (expected e.g. 12.8)")
    return int(major), int(minor or 0)
