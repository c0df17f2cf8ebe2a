"""What a torch wheel carries, read from its own files: version, CUDA, compiled architectures.

- ``torch/version.py`` is parsed as Python source (``ast``, never executed) for ``__version__``,
  ``git_version`` and ``cuda``.
- The architecture list is the string ``torch._C._cuda_getArchFlags()`` returns and
  ``torch.cuda.get_arch_list()`` splits on whitespace: the build's ``CUDA_ARCH_FLAGS`` compiled
  into the Python extension library (``torch/lib/libtorch_python.so`` on Linux,
  ``torch/lib/torch_python.dll`` on Windows) as one NUL-terminated read-only string of
  space-separated tokens, ``sm_XY`` for SASS and ``compute_XY`` for PTX — e.g.
  ``b"sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120\\0"`` in the 2.8.0 cu128 wheel. It is found by
  scanning the library as it inflates; the string before it need not end in NUL (2.8.0 packs
  a non-terminated literal right before it), so a match is anchored on its terminating NUL.
- ``*.dist-info/METADATA`` gives the cuDNN and NCCL the wheel pins (``nvidia-cudnn-cu12==…``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from email.parser import HeaderParser
from typing import TYPE_CHECKING

from resolver.core.platforms import PythonVersion, marker_env, of_wheel_tag
from resolver.io.bounded import problem
from resolver.io.http import Client
from resolver.io.ranges import Progress, Source, open_source, url_sha256
from resolver.io.zip import RemoteZip
from resolver.markers import applicable
from resolver.wheels import WheelError

if TYPE_CHECKING:
    from resolver.core.documents.reports import DbInspectWheelDoc

VERSION_MEMBER = "torch/version.py"
ARCH_MEMBERS = ("torch/lib/libtorch_python.so", "torch/lib/torch_python.dll")
MAX_VERSION_PY = 64 * 1024
MAX_METADATA = 1024 * 1024
MAX_LIBRARY = 1024 * 1024 * 1024  # inflated bytes scanned at most (the 2.11 .so is 32 MB)
_OVERLAP = 1024  # longer than any arch string (~20 tokens of <= 12 bytes)
_TOKEN = rb"(?:sm|compute)_[1-9][0-9]{1,2}[af]?"
ARCH_STRING = re.compile(rb"(" + _TOKEN + rb"(?: " + _TOKEN + rb")*)\x00")
_WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>[0-9][^-]*))?-(?P<py>[^-]+)-"
    r"(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)
_PIN_NAME = re.compile(r"^nvidia-(cudnn|nccl)-cu[0-9]+$")


@dataclass
class WheelReport:
    """One wheel's facts. ``as_json`` is the ``db inspect-wheel --json`` contract."""

    file: str
    source: str  # the URL or path read
    sha256: str | None
    version: str
    git_version: str | None
    cuda: str | None
    sass: list[str]
    ptx: list[str]
    bytes_read: int
    size: int
    platform: str | None = None  # a name of core.platforms.PLATFORMS
    variant: str | None = None  # the local version tag: cu128, cpu, rocm6.4
    cudnn: str | None = None  # pinned by the wheel's metadata (Linux wheels of the index)
    nccl: str | None = None
    arch_flags: str | None = None  # the raw compiled-in string
    arch_member: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> DbInspectWheelDoc:
        return {
            "file": self.file,
            "sha256": self.sha256,
            "version": self.version,
            "git_version": self.git_version,
            "cuda": self.cuda,
            "sass": self.sass,
            "ptx": self.ptx,
            "bytes_read": self.bytes_read,
            "source": self.source,
            "size": self.size,
            "platform": self.platform,
            "variant": self.variant,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "arch_flags": self.arch_flags,
            "arch_member": self.arch_member,
            "notes": self.notes,
        }

    @property
    def sass_cc(self) -> list[str]:
        """SASS as compute capabilities ("7.0"), the database's notation."""
        return [token_cc(t) for t in self.sass]

    @property
    def ptx_cc(self) -> list[str]:
        return [token_cc(t) for t in self.ptx]


def token_cc(token: str) -> str:
    """``sm_120`` / ``compute_90a`` -> ``12.0`` / ``9.0a``: the last digit is the minor."""
    digits = re.sub(r"^(?:sm|compute)_", "", token)
    suffix = digits[-1] if digits[-1].isalpha() else ""
    digits = digits.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def platform_of(filename: str) -> str | None:
    """The database's platform for a wheel file name's platform tag."""
    m = _WHEEL_NAME.match(filename)
    if not m:
        return None
    tags = m.group("plat").split(".")
    return next((p for tag in tags if (p := of_wheel_tag(tag)) is not None), None)


def parse_version_py(text: str) -> dict[str, str | None]:
    """``__version__``, ``git_version``, ``cuda`` (and ``hip``) as literal assignments; no exec.

    The text is a wheel's, so anyone's: Python's parser answers a long enough chain of
    operators (``x = ------...1``, within the 64 KiB cap) with RecursionError or MemoryError,
    and a 5,000-digit literal with advice to raise a limit; each is this wheel's error."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        raise WheelError(f"torch/version.py does not parse ({problem(exc)})") from None
    except (RecursionError, MemoryError):  # the parser's own depth limits, not a real OOM
        raise WheelError("torch/version.py does not parse (nested too deeply)") from None
    found: dict[str, str | None] = {}
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not isinstance(value, ast.Constant):
            continue
        literal = value.value
        if not (isinstance(literal, str) or literal is None):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = literal
    return found


def scan_arch_strings(chunks: Iterable[bytes]) -> list[tuple[int, str]]:
    """Every compiled-in arch string in a streamed binary: (offset of its NUL, the string)."""
    found: dict[int, str] = {}
    carry = b""
    consumed = 0  # absolute offset of the byte after ``carry``
    for chunk in chunks:
        buf = carry + chunk
        base = consumed - len(carry)
        for m in ARCH_STRING.finditer(buf):
            end = base + m.end() - 1
            if end < consumed:  # its NUL lay in the carried-over part: seen whole before
                continue
            found[end] = m.group(1).decode("ascii")
        consumed += len(chunk)
        carry = buf[-_OVERLAP:]
    return sorted(found.items())


def choose_arch_string(candidates: list[tuple[int, str]]) -> tuple[str | None, list[str]]:
    """The arch string among the candidates, and notes when that took a choice."""
    distinct = sorted({text for _off, text in candidates}, key=lambda t: (-len(t.split()), t))
    if not distinct:
        return None, []
    notes = []
    if len(distinct) > 1:
        notes.append(
            "several arch-like strings in the library; took the longest: "
            + " | ".join(distinct[:5])
        )
    return distinct[0], notes


def split_arch(flags: str) -> tuple[list[str], list[str]]:
    """SASS (``sm_``) and PTX (``compute_``) tokens, each in the string's order."""
    tokens = flags.split()
    sass = [t for t in tokens if t.startswith("sm_")]
    return sass, [t for t in tokens if t.startswith("compute_")]


def metadata_pins(text: str, platform: str | None, python: str | None) -> dict[str, str]:
    """cuDNN and NCCL versions the wheel pins (``==``) for its own platform and Python."""
    msg = HeaderParser().parsestr(text, headersonly=True)
    requires = [str(r) for r in msg.get_all("Requires-Dist") or []]
    if platform is None:
        return {}
    pins: dict[str, str] = {}
    for req in applicable(requires, marker_env(platform, python or "3.12")):
        m = _PIN_NAME.match(req.name.lower())
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if m and len(exact) == 1 and m.group(1) not in pins:
            pins[m.group(1)] = exact[0]
    return pins


def python_of(filename: str) -> str | None:
    """The CPython version of a wheel's ABI tag: ``cp312`` -> 3.12, ``cp313t`` -> 3.13t."""
    m = _WHEEL_NAME.match(filename)
    tag = re.match(r"^cp([0-9])([0-9]+)(t?)$", m.group("abi")) if m else None
    if tag is None and m:
        tag = re.match(r"^cp([0-9])([0-9]+)(t?)$", m.group("py").split(".")[0])
    return str(PythonVersion(int(tag[1]), int(tag[2]), tag[3] == "t")) if tag else None


def _metadata_member(wheel: RemoteZip) -> str | None:
    for name in wheel.names():
        parts = name.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
            return name
    return None


def inspect(source: Source, file_name: str | None = None) -> WheelReport:
    """Read one torch wheel's facts from ``source`` (directory, version.py, metadata, library)."""
    name = file_name or source.name.rstrip("/").rsplit("/", 1)[-1]
    wheel = RemoteZip(source)
    if wheel.info(VERSION_MEMBER) is None:
        raise WheelError(f"{source.name}: not a torch wheel (no {VERSION_MEMBER})")
    text = wheel.read(VERSION_MEMBER, MAX_VERSION_PY)
    try:
        values = parse_version_py(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise WheelError(f"{source.name}: {VERSION_MEMBER} is not UTF-8") from None
    except WheelError as exc:
        raise WheelError(f"{source.name}: {exc}") from None
    version = values.get("__version__")
    if not version:
        raise WheelError(f"{source.name}: {VERSION_MEMBER} sets no __version__")
    cuda = values.get("cuda")
    report = WheelReport(
        file=name,
        source=source.name,
        sha256=None,
        version=version,
        git_version=values.get("git_version"),
        cuda=cuda,
        sass=[],
        ptx=[],
        bytes_read=0,
        size=source.size,
        platform=platform_of(name),
        variant=version.partition("+")[2] or None,
    )
    meta = _metadata_member(wheel)
    if meta is not None:
        raw = wheel.read(meta, MAX_METADATA)
        pins = metadata_pins(
            raw.decode("utf-8", errors="replace"), report.platform, python_of(name)
        )
        report.cudnn, report.nccl = pins.get("cudnn"), pins.get("nccl")
    if cuda is not None:
        _read_archs(wheel, report)
    report.bytes_read = source.bytes_read
    report.sha256 = source.sha256
    report.notes = [*source.notes, *report.notes]
    return report


def _read_archs(wheel: RemoteZip, report: WheelReport) -> None:
    source = wheel.source
    member = next((n for n in ARCH_MEMBERS if wheel.info(n) is not None), None)
    if member is None:
        raise WheelError(
            f"{source.name}: a CUDA {report.cuda} build without "
            f"{' or '.join(ARCH_MEMBERS)}: cannot read its architectures"
        )
    chunks: Iterator[bytes] = wheel.chunks(member, MAX_LIBRARY)
    flags, notes = choose_arch_string(scan_arch_strings(chunks))
    if flags is None:
        raise WheelError(f"{source.name}: no compiled-in CUDA arch list found in {member}")
    report.arch_flags, report.arch_member = flags, member
    report.sass, report.ptx = split_arch(flags)
    report.notes.extend(notes)


def inspect_wheel(
    where: str,
    *,
    budget: int | None = None,
    progress: Progress | None = None,
    sha256: str | None = None,
    client: Client | None = None,
) -> WheelReport:
    """Inspect the wheel at a URL or a local path (``sha256``: the index's, when known)."""
    with open_source(where, client=client, budget=budget, progress=progress) as source:
        name = where.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        report = inspect(source, name)
    expected = (sha256 or url_sha256(where) or "").lower() or None
    if report.sha256 is None:  # only part of the file was read: the index's word for it
        report.sha256 = expected
    elif expected and report.sha256 != expected:  # the whole file was read: check it
        raise WheelError(f"{where}: sha256 {report.sha256} is not the expected {expected}")
    return report
