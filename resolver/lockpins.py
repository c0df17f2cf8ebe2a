"""Read the pins out of a lock file: requirements.txt, environment.yml, conda-lock.yml (v1) or
pylock.toml (PEP 751, read in resolver/readers/pylock.py).

Small and standalone (no resolver imports beyond errors), so that `verify` checks an environment
against a lock and `install` can reuse the same reader. A pin keeps what both need: the
distribution's name as installed (conda's ``pytorch`` is the ``torch`` distribution), the exact
version or the specifier, the build variant it names (``+cu126``, a conda build ``cuda126_*``, or
a PyTorch index URL ``.../whl/cu126``), its environment marker and the line it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resolver.core.errors import UserError
from resolver.core.platforms import BY_NAME
from resolver.readers.bounded import LOCK_LIMIT, LOCK_MAX_NODES, load_yaml, read_text

FORMAT_REQUIREMENTS = "requirements"
FORMAT_ENVIRONMENT = "environment"
FORMAT_CONDA_LOCK = "conda-lock"
FORMAT_PYLOCK = "pylock"

# conda package name -> Python distribution name, where they differ.
CONDA_TO_DIST = {"pytorch": "torch"}
# conda packages that are no Python distribution but name the CUDA build of the environment.
_CONDA_CUDA_META = {"pytorch-cuda", "cuda-version"}
_MAX_INCLUDES = 16
_VARIANT_RE = re.compile(r"^(cpu|cu\d{3}|rocm\d+(\.\d+)*|xpu)$")
_INDEX_VARIANT_RE = re.compile(r"/whl/(?:(?:nightly|test)/)?(cpu|cu\d{3}|rocm[\d.]+|xpu)/?$")
_CONDA_BUILD_CUDA_RE = re.compile(r"(?:^|_)cuda(\d+)(?:\.(\d+))?(?:_|$)")


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock, as the installed environment should satisfy it."""

    name: str  # canonical distribution name: "torch", "nvidia-cudnn-cu12"
    version: str | None  # the exact version pinned, without local tag ("2.8.0"); None: a range
    spec: str  # the specifier as written ("==2.8.0+cu126", ">=2.4", conda "2.5.1.*")
    variant: str | None  # the build it names: "cu126", "cpu", "cuda" (any CUDA build) or None
    manager: str  # "pip" | "conda"
    marker: str | None = None  # a PEP 508 environment marker, evaluated against the target
    line: str = ""  # where it came from, for messages
    hashes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The pin as a person would write it: ``torch==2.8.0+cu126``."""
        if self.version is None:
            return f"{self.name}{self.spec}"
        local = f"+{self.variant}" if self.variant and self.manager == "pip" else ""
        return f"{self.name}=={self.version}{local}"


@dataclass(frozen=True)
class LockPins:
    path: str
    format: str  # requirements | environment | conda-lock | pylock
    pins: tuple[Pin, ...]
    index_urls: tuple[str, ...] = ()  # --index-url / --extra-index-url, in order
    platforms: tuple[str, ...] = ()  # conda-lock: the platforms it was locked for

    def get(self, name: str) -> Pin | None:
        wanted = canonical(name)
        return next((p for p in self.pins if p.name == wanted), None)


def canonical(name: str) -> str:
    """PEP 503 normalised name: "Nvidia_CUDNN.cu12" -> "nvidia-cudnn-cu12"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def variant_of_local(local: str | None) -> str | None:
    """A local version label that names a build ("cu126", "cpu"), else None."""
    if local and _VARIANT_RE.match(local):
        return local
    return None


def variant_of_index(url: str) -> str | None:
    """The build a PyTorch-index URL serves: ".../whl/cu126" -> "cu126"."""
    m = _INDEX_VARIANT_RE.search(url.strip())
    return m.group(1) if m else None


def variant_of_conda_build(build: str | None) -> str | None:
    """A conda build string's variant: "cuda126_mkl_py312_h0" -> "cu126", "cpu_..." -> "cpu"."""
    if not build:
        return None
    b = build.lower().rstrip("*")
    m = _CONDA_BUILD_CUDA_RE.search(b)
    if m:  # "cuda126" or "cuda12.6"
        return f"cu{m.group(1)}{m.group(2) or ''}"
    if "cuda" in b:
        return "cuda"
    if b.startswith("cpu") or "_cpu" in b:
        return "cpu"
    return None


def read(path: str | Path, platform: str | None = None) -> LockPins:
    """The pins of a lock file; ``platform`` (gpuresolve's name) selects conda-lock's entries.

    The format comes from the content, not the file name: a YAML document with ``package:`` is
    a conda-lock file, one with ``dependencies:`` an environment.yml, TOML with ``lock-version``
    (or a file PEP 751 names ``pylock.toml`` / ``pylock.<name>.toml``) a pylock.toml, anything
    else is read as requirements.txt. Raises UserError (one line) when the file cannot be read
    or parsed.
    """
    from resolver.readers import pylock

    p = Path(path)
    text = read_text(p, limit=LOCK_LIMIT, what="a lock file")
    if pylock.is_pylock_name(p.name) or pylock.looks_like_pylock(text):
        return pylock.read_pins(text, str(path), platform)
    if p.suffix.lower() in (".yml", ".yaml") or _looks_like_yaml_lock(text):
        doc = _yaml(text, path)
        if isinstance(doc, dict) and "package" in doc:
            return _conda_lock(doc, str(path), platform)
        if isinstance(doc, dict) and "dependencies" in doc:
            return _environment(doc, str(path))
        raise UserError(
            f"{path}: not a lock file gpuresolve reads (expected environment.yml with "
            "'dependencies:' or conda-lock.yml with 'package:')"
        )
    pins, urls = _requirements(text, p, depth=0)
    return LockPins(str(path), FORMAT_REQUIREMENTS, tuple(pins), tuple(urls))


def _looks_like_yaml_lock(text: str) -> bool:
    return bool(re.search(r"^(package|dependencies):\s*$", text, re.MULTILINE))


def _yaml(text: str, path: str | Path) -> Any:
    return load_yaml(text, path, max_nodes=LOCK_MAX_NODES)


# --- requirements.txt ----------------------------------------------------------------------------


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined and comments dropped, with their first number."""
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = number
        line = raw.rstrip()
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        joined = " ".join(buf)
        buf = []
        joined = re.sub(r"(^|\s)#.*$", "", joined).strip()
        if joined:
            yield start, joined
    if buf:
        joined = re.sub(r"(^|\s)#.*$", "", " ".join(buf)).strip()
        if joined:
            yield start, joined


def _requirements(text: str, path: Path, depth: int) -> tuple[list[Pin], list[str]]:
    from packaging.requirements import InvalidRequirement

    pins: list[Pin] = []
    urls: list[str] = []
    for number, line in _logical_lines(text):
        where = f"{path.name}:{number}"
        if line.startswith("-"):
            option, _, value = line.partition(" ")
            if "=" in option and option.startswith("--"):
                option, _, value = option.partition("=")
            value = value.strip()
            if option in ("-i", "--index-url", "--extra-index-url") and value:
                urls.append(value)
            elif option in ("-r", "--requirement", "-c", "--constraint") and value:
                if depth >= _MAX_INCLUDES:
                    raise UserError(f"{where}: requirement files nested too deep")
                inc = (path.parent / value).resolve()
                try:
                    inc_text = read_text(inc, limit=LOCK_LIMIT, what="a requirements file")
                except UserError as exc:
                    raise UserError(f"{where}: {value}: {exc}") from None
                more, more_urls = _requirements(inc_text, inc, depth + 1)
                pins.extend(more)
                urls.extend(more_urls)
            continue  # other options (--find-links, --hash alone, -e ...) pin nothing
        try:
            pins.append(_pip_pin(line, where))
        except InvalidRequirement as exc:
            raise UserError(f"{where}: not a requirement: {line!r} ({exc})") from None
    # A pin without a local tag names the variant of the PyTorch index it is installed from.
    index_variant = next((v for v in map(variant_of_index, urls) if v), None)
    if index_variant:
        pins = [
            Pin(p.name, p.version, p.spec, index_variant, p.manager, p.marker, p.line, p.hashes)
            if p.variant is None and p.name in ("torch", "torchvision", "torchaudio")
            else p
            for p in pins
        ]
    return pins, urls


def _pip_pin(text: str, where: str) -> Pin:
    """One requirement line (its ``--hash`` options split off first)."""
    from packaging.requirements import Requirement
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    hashes = tuple(re.findall(r"--hash[=\s]+(\S+)", text))
    req_text = re.sub(r"\s--hash[=\s]+\S+", "", " " + text).strip()
    req = Requirement(req_text)
    name = canonical(req.name)
    marker = str(req.marker) if req.marker else None
    version: str | None = None
    variant: str | None = None
    spec = str(req.specifier)
    if req.url:
        from urllib.parse import unquote

        filename = unquote(req.url.rsplit("/", 1)[-1].split("#", 1)[0])
        fragment = req.url.partition("#")[2]
        if fragment.startswith("sha256="):
            hashes = (*hashes, "sha256:" + fragment.split("=", 1)[1])
        try:
            _, ver, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            ver = None
        if ver is not None:
            version, variant = ver.public, variant_of_local(ver.local)
            spec = f"=={ver}"
    else:
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            public, _, local = specs[0].version.partition("+")
            version, variant = public, variant_of_local(local or None)
    return Pin(name, version, spec, variant, "pip", marker, f"{where}: {text}", hashes)


# --- environment.yml -----------------------------------------------------------------------------


def _environment(doc: dict[str, Any], path: str) -> LockPins:
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
            pin = _conda_spec_pin(item, f"{Path(path).name}: {item}")
            if pin is not None:
                pins.append(pin)
    if pip_lines:
        more, urls = _requirements("\n".join(pip_lines), Path(path), depth=0)
        pins.extend(more)
    return LockPins(path, FORMAT_ENVIRONMENT, tuple(_with_conda_cuda(pins)), tuple(urls))


_CONDA_SPEC_RE = re.compile(
    r"^(?:(?P<channel>[\w.\-/:]+)::)?(?P<name>[A-Za-z0-9_.\-]+)"
    r"\s*(?:(?P<op>==|=|>=|<=|>|<|!=|~=)?\s*(?P<version>[^=\s]+)?)?"
    r"(?:=(?P<build>\S+))?$"
)


def _conda_spec_pin(spec: str, line: str) -> Pin | None:
    """A conda match spec ``pytorch=2.5.1=cuda124*`` / ``numpy>=1.26`` / ``python``."""
    text = spec.strip()
    if " " in text and "=" not in text.split(" ", 1)[0]:
        parts = text.split()  # "pytorch 2.5.1 cuda124*" (space-separated form)
        text = "=".join(parts[:3])
    m = _CONDA_SPEC_RE.match(text)
    if m is None:
        raise UserError(f"{line}: not a conda package spec")
    name = m.group("name").lower()
    op, ver, build = m.group("op"), m.group("version"), m.group("build")
    if not ver:
        return None  # any version: nothing to check
    dist = CONDA_TO_DIST.get(name, name)
    if op in (None, "=", "==") and not any(c in ver for c in ",|<>!~"):
        exact = ver.rstrip("*").rstrip(".")
        fuzzy = op in (None, "=") or ver.endswith("*")
        return Pin(
            name=canonical(dist),
            version=exact,
            spec=f"{exact}.*" if fuzzy else f"=={exact}",
            variant=variant_of_conda_build(build),
            manager="conda",
            line=line,
        )
    return Pin(canonical(dist), None, f"{op or ''}{ver}", None, "conda", None, line)


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


# --- conda-lock.yml (v1) -------------------------------------------------------------------------


def _conda_lock(doc: dict[str, Any], path: str, platform: str | None) -> LockPins:
    version = doc.get("version")
    if version not in (1, None):
        raise UserError(f"{path}: conda-lock file version {version!r} (gpuresolve reads version 1)")
    packages = doc.get("package")
    if not isinstance(packages, list):
        raise UserError(f"{path}: 'package' must be a list")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    platforms = tuple(str(p) for p in (meta or {}).get("platforms") or ())
    wanted = BY_NAME[platform].conda_subdir if platform in BY_NAME else platform
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
