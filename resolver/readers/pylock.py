"""The pins of a pylock.toml (PEP 751), for `verify --lock` and `install --lock`.

The document is parsed with the standard library's ``tomllib`` (tomlkit on Python 3.10, where
there is none) and validated by ``packaging.pylock`` rather than by code of ours: the same
validation the writer runs, so what `gpuresolve lock` writes is what is read back. One file may
lock several platforms (a fleet's packages carry markers): only the packages whose marker can hold
on the target platform are pins, and each keeps its marker, so the interpreter being checked or
installed into settles the rest (its Python version).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.core.errors import UserError
from resolver.io.bounded import problem
from resolver.readers.pins import (
    FORMAT_PYLOCK,
    LockPins,
    Pin,
    canonical,
    variant_of_index,
    variant_of_local,
)

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.pylock import Package

# PEP 751's file names: ``pylock.toml`` or ``pylock.<name>.toml`` (a name without dots).
_NAME_RE = re.compile(r"^pylock\.(?:[^.]+\.)?toml$")
_LOCK_VERSION_RE = re.compile(r"^\s*lock-version\s*=", re.MULTILINE)
# The Pythons a package's marker may name; the interpreter in use decides among them later.
_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 16))
_TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
# Marker variables that exist only in a lock file (PEP 751): installed without extras or groups.
_LOCK_ONLY_VARIABLES = ("extras", "dependency_groups")


def is_pylock_name(name: str) -> bool:
    """Whether PEP 751 names a file so (uv refuses to read a pylock file named otherwise)."""
    return bool(_NAME_RE.match(name))


def looks_like_pylock(text: str) -> bool:
    """TOML with a top-level ``lock-version`` key: no requirements.txt or YAML lock has one."""
    return bool(_LOCK_VERSION_RE.search(text))


def read_pins(text: str, path: str, platform: str | None) -> LockPins:
    """The pins of the pylock.toml ``text`` for ``platform`` (gpuresolve's name; None: all)."""
    lock = _parse(text, path)
    envs = _marker_envs(platform)
    if envs and lock.environments and not any(_holds(m, envs) for m in lock.environments):
        listed = "; ".join(str(m) for m in lock.environments)
        raise UserError(f"{path}: nothing locked for {platform} (its environments: {listed})")
    pins: list[Pin] = []
    indexes: list[str] = []
    for package in lock.packages:
        marker = package.marker
        lock_only = marker is not None and any(v in str(marker) for v in _LOCK_ONLY_VARIABLES)
        judged = envs or (_marker_envs(None, every_platform=True) if lock_only else [])
        if marker is not None and judged and not _holds(marker, judged):
            continue
        if package.index and package.index not in indexes:
            indexes.append(package.index)
        pins.append(_pin(package, path, None if lock_only else marker))
    return LockPins(path, FORMAT_PYLOCK, tuple(pins), tuple(indexes))


def _parse(text: str, path: str) -> Any:
    """The validated ``packaging.pylock.Pylock``; anything wrong is one UserError line."""
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:  # packaging < 26.0
        raise UserError(
            f"{path}: reading pylock.toml needs packaging >= 26.0 (packaging.pylock): "
            "pip install -U packaging"
        ) from None
    try:
        doc = _toml(text)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply: not a pylock.toml") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError, tomlkit's ParseError, digit limits
        raise UserError(f"{path}: invalid TOML: {problem(exc, 200)}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path}: not a pylock.toml (a TOML table is expected)")
    try:
        return Pylock.from_dict(doc)
    except PylockValidationError as exc:
        raise UserError(f"{path}: not a valid pylock.toml: {problem(exc, 200)}") from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a value of an odd type
        raise UserError(f"{path}: not a valid pylock.toml: {problem(exc, 200)}") from None


def _toml(text: str) -> Any:
    """Plain data from TOML text: tomllib where Python has it (3.11+), else tomlkit."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(text)
    import tomlkit  # Python 3.10: tomlkit is a dependency already (the writers use it)

    return tomlkit.parse(text).unwrap()


def _marker_envs(platform: str | None, every_platform: bool = False) -> list[dict[str, Any]]:
    """Marker environments of ``platform`` for each Python; none when it is not known."""
    from resolver.core.platforms import PLATFORMS, marker_env

    platforms: Iterable[str]
    if every_platform:
        platforms = PLATFORMS
    elif platform in PLATFORMS:
        platforms = (platform,)
    else:
        return []
    lock_only: dict[str, Any] = {"extras": frozenset(), "dependency_groups": frozenset()}
    return [{**marker_env(p, py), **lock_only} for p in platforms for py in _PYTHONS]


def _holds(marker: Marker, envs: Sequence[dict[str, Any]]) -> bool:
    """Whether the marker holds in one of the environments (an undecidable one counts as yes)."""
    for env in envs:
        try:
            if marker.evaluate(env, context="lock_file"):
                return True
        except Exception:  # a variable the environment lacks: not ours to reject
            return True
    return False


def _pin(package: Package, path: str, marker: Marker | None) -> Pin:
    """One package as a pin: its exact version and, for torch and companions, its build."""
    name = canonical(package.name)
    version = package.version
    wheels = package.wheels or []
    if version is None:  # optional in PEP 751 (a directory, a VCS checkout): try the wheel
        version = next((v for v in (_wheel_version(w.name) for w in wheels) if v), None)
    public = version.public if version is not None else None
    variant = variant_of_local(version.local) if version is not None else None
    if variant is None and name in _TORCH_FAMILY:
        urls = [package.index or ""] + [(w.url or "").rsplit("/", 1)[0] for w in wheels]
        variant = next((v for v in map(variant_of_index, urls) if v), None)
    files: list[Mapping[str, str]] = [w.hashes for w in wheels]
    if package.sdist is not None:
        files.append(package.sdist.hashes)
    hashes = [f"{algo}:{digest}" for found in files for algo, digest in sorted(found.items())]
    where = f"{Path(path).name}: {package.name} {version or ''}".rstrip()
    if marker is not None:
        where += f" ; {marker}"
    return Pin(
        name=name,
        version=public,
        spec=f"=={version}" if version is not None else "",
        variant=variant,
        manager="pip",
        marker=str(marker) if marker is not None else None,
        line=where,
        hashes=tuple(hashes),
    )


def _wheel_version(filename: str | None) -> Any:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not filename:
        return None
    try:
        return parse_wheel_filename(filename)[1]
    except (InvalidWheelFilename, ValueError):  # digits past the limit too
        return None
