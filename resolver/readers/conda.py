"""environment.yml and conda-lock.yml (version 1) read as pins.

A conda match spec (``pytorch=2.5.1=cuda124*``, ``numpy>=1.26``, ``conda-forge::python 3.12.*``)
is parsed by py-rattler's ``MatchSpec`` (conda's grammar, brackets included) where the ``conda``
extra installs it. The base install, which can still `verify` against an environment.yml, reads
the common forms (``name``, ``name=ver``, ``name==ver``, ``name ver build``, ``name=ver=build``,
``name>=ver``, an optional ``channel::``) with a small validated pattern; a test holds the two to
the same pins. As in conda, a version given with a build is exact.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError
from resolver.core.platforms import CONDA_SUBDIRS
from resolver.readers.pins import (
    FORMAT_CONDA_LOCK,
    FORMAT_ENVIRONMENT,
    LockPins,
    Pin,
    canonical,
    variant_of_conda_build,
    variant_of_local,
)
from resolver.readers.requirements import read_requirements

# conda package name -> Python distribution name, where they differ.
CONDA_TO_DIST = {"pytorch": "torch"}
# conda packages that are no Python distribution but name the CUDA build of the environment.
_CONDA_CUDA_META = {"pytorch-cuda", "cuda-version"}
_SPEC_RE = re.compile(
    r"^(?:[\w.\-/:]+::)?(?P<name>[A-Za-z0-9_.\-]+)"
    r"\s*(?:(?P<op>==|=|>=|<=|>|<|!=|~=)?\s*(?P<version>[^=\s]+)?)?"
    r"(?:=(?P<build>\S+))?$"
)


def read_environment(doc: dict[str, Any], path: str) -> LockPins:
    deps = doc.get("dependencies")
    if not isinstance(deps, list):
        raise UserError(f"{path}: 'dependencies' must be a list")
    pins: list[Pin] = []
    urls: list[str] = []
    pip_lines: list[str] = []
    for item in deps:
        if isinstance(item, dict) and "pip" in item:
            section = item["pip"]
            if not isinstance(section, list):
                raise UserError(f"{path}: the 'pip:' section must be a list")
            pip_lines.extend(str(x) for x in section)
        elif isinstance(item, str):
            pin = conda_spec_pin(item, f"{Path(path).name}: {item}")
            if pin is not None:
                pins.append(pin)
    if pip_lines:
        more, urls = read_requirements("\n".join(pip_lines), Path(path))
        pins.extend(more)
    return LockPins(path, FORMAT_ENVIRONMENT, tuple(_with_conda_cuda(pins)), tuple(urls))


def conda_spec_pin(spec: str, line: str) -> Pin | None:
    """A conda match spec as a pin; None when it names no version (nothing to check)."""
    parsed = _parse_spec(spec, line)
    if parsed is None:
        return None
    name, op, ver, build = parsed
    dist = canonical(CONDA_TO_DIST.get(name, name))
    if op in ("", "=", "==") and not any(c in ver for c in ",|<>!~"):
        exact = ver.rstrip("*").rstrip(".")
        fuzzy = ver.endswith("*") or (op != "==" and not build)
        spec_text = f"{exact}.*" if fuzzy else f"=={exact}"
        return Pin(dist, exact, spec_text, variant_of_conda_build(build), "conda", line=line)
    return Pin(dist, None, f"{op}{ver}", None, "conda", None, line)


def _parse_spec(spec: str, line: str) -> tuple[str, str, str, str | None] | None:
    """(name, operator, version, build) of a spec, or None when it names no version."""
    try:
        from rattler import MatchSpec
        from rattler.exceptions import InvalidMatchSpecError
    except ImportError:
        return _parse_spec_plain(spec, line)
    try:
        match = MatchSpec(spec.strip())
    except InvalidMatchSpecError as exc:
        raise UserError(f"{line}: not a conda package spec ({exc})") from None
    if match.name is None or match.version is None:
        return None
    name, version = match.name.normalized, str(match.version)
    m = re.match(r"^(==|>=|<=|!=|~=|>|<|=)?(.*)$", version)
    op, ver = (m.group(1) or "", m.group(2)) if m else ("", version)
    return name, op, ver, match.build


def _parse_spec_plain(spec: str, line: str) -> tuple[str, str, str, str | None] | None:
    text = spec.strip()
    if " " in text and "=" not in text.split(" ", 1)[0]:  # "pytorch 2.5.1 cuda124*"
        parts = text.split()
        op = "" if parts[1][:1] in "=<>!~" else "=="  # as in conda: a bare version is exact
        text = parts[0] + op + parts[1] + "".join(f"={b}" for b in parts[2:3])
    m = _SPEC_RE.match(text)
    if m is None:
        raise UserError(f"{line}: not a conda package spec")
    if not m.group("version"):
        return None
    return m.group("name").lower(), m.group("op") or "", m.group("version"), m.group("build")


def _with_conda_cuda(pins: list[Pin]) -> list[Pin]:
    """``pytorch-cuda=12.4`` / ``cuda-version=12.9`` name the CUDA build of a conda pytorch."""
    cuda = next(
        (p.version for p in pins if p.manager == "conda" and p.name in _CONDA_CUDA_META), None
    )
    out: list[Pin] = []
    for p in pins:
        if p.manager == "conda" and p.name in _CONDA_CUDA_META:
            continue  # not a Python distribution: nothing to compare with
        if cuda and p.manager == "conda" and p.name == "torch" and p.variant in (None, "cuda"):
            major, _, minor = cuda.partition(".")
            variant = f"cu{major}{minor.split('.')[0] or '0'}"
            p = Pin(p.name, p.version, p.spec, variant, "conda", p.marker, p.line, p.hashes)
        out.append(p)
    return out


def read_conda_lock(doc: dict[str, Any], path: str, platform: str | None) -> LockPins:
    version = doc.get("version")
    if version not in (1, None):
        raise UserError(f"{path}: conda-lock file version {version!r} (gpuresolve reads version 1)")
    packages = doc.get("package")
    if not isinstance(packages, list):
        raise UserError(f"{path}: 'package' must be a list")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    platforms = tuple(str(p) for p in (meta or {}).get("platforms") or ())
    wanted = CONDA_SUBDIRS.get(platform or "", platform)
    seen = {str(e.get("platform")) for e in packages if isinstance(e, dict)}
    if wanted and wanted not in seen:
        have = ", ".join(sorted(seen)) or "none"
        raise UserError(f"{path}: nothing locked for {wanted} (it has {have})")
    pins: list[Pin] = []
    for i, entry in enumerate(packages):
        if not isinstance(entry, dict) or "name" not in entry or "version" not in entry:
            raise UserError(f"{path}: package[{i}] needs at least name and version")
        if wanted and str(entry.get("platform")) != wanted:
            continue
        manager = str(entry.get("manager") or "conda")
        name = str(entry["name"])
        ver = str(entry["version"])
        line = f"{Path(path).name}: {name} {ver} ({manager}, {entry.get('platform')})"
        sha = (
            (entry.get("hash") or {}).get("sha256") if isinstance(entry.get("hash"), dict) else None
        )
        hashes = (f"sha256:{sha}",) if sha else ()
        if manager == "pip":
            public, _, local = ver.partition("+")
            variant = variant_of_local(local or None)
            pins.append(
                Pin(canonical(name), public, f"=={ver}", variant, "pip", None, line, hashes)
            )
            continue
        build = entry.get("build") or _conda_build_from_url(str(entry.get("url") or ""), name)
        dist = canonical(CONDA_TO_DIST.get(name.lower(), name))
        variant = variant_of_conda_build(build)
        pins.append(Pin(dist, ver, f"=={ver}", variant, "conda", None, line, hashes))
    return LockPins(path, FORMAT_CONDA_LOCK, tuple(_with_conda_cuda(pins)), (), platforms)


def _conda_build_from_url(url: str, name: str) -> str | None:
    """``.../pytorch-2.9.1-cuda129_generic_py311_h0_202.tar.bz2`` -> the build string."""
    filename = url.rsplit("/", 1)[-1]
    for ext in (".tar.bz2", ".conda"):
        if filename.endswith(ext):
            filename = filename[: -len(ext)]
            break
    else:
        return None
    if not filename.lower().startswith(name.lower() + "-"):
        return None
    parts = filename[len(name) + 1 :].split("-")
    return parts[1] if len(parts) == 2 else None
