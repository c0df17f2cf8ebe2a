"""A wheel's core metadata: parse it, and read it out of a remote wheel with a few range reads.

A CUDA torch wheel is 1–3 GB; its ``METADATA`` is a few kB near the end. Without PEP 658
``.metadata`` files it is read with ``resolver.io.zip`` (the standard ``zipfile`` over range
reads): the tail, the central directory, then the one member — never the whole wheel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import BytesHeaderParser

from packaging.utils import canonicalize_name
from packaging.version import Version

from resolver.core.errors import shown
from resolver.core.platforms import marker_env
from resolver.io import ReadError
from resolver.io.http import Client
from resolver.io.ranges import Source, open_source
from resolver.io.zip import RemoteZip
from resolver.markers import applicable

MAX_METADATA = 8 * 1024 * 1024
BUDGET = 16 * 1024 * 1024  # bytes one metadata read may take (a torch directory is ~2-3 MB)
TAIL = 64 * 1024  # the first (suffix) read: the end records, usually the whole directory too
_METADATA_RE = re.compile(r"^[^/]+\.dist-info/METADATA$")

# Requires-Dist names of the pins gpuresolve records ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13",
# or the suffix-less names CUDA 13 builds use).
_PIN_NAMES = {
    "cuda_runtime": re.compile(r"^nvidia-cuda-runtime(-cu[0-9]+)?$"),
    "cudnn": re.compile(r"^nvidia-cudnn(-cu[0-9]+)?$"),
    "nccl": re.compile(r"^nvidia-nccl(-cu[0-9]+)?$"),
    "torch": re.compile(r"^torch$"),
}


class MetadataError(ReadError):
    """Metadata that cannot be read or is not the wheel's (a broken zip, garbage, a mismatch)."""


@dataclass(frozen=True)
class CoreMetadata:
    name: str  # canonical
    version: str
    requires_dist: tuple[str, ...]

    def pins(self, platform: str, python: str) -> dict[str, str]:
        """The exact (``==``) pins gpuresolve records, for a wheel of this platform and Python.

        Keys: ``cuda_runtime``, ``cudnn``, ``nccl`` (torch) or ``torch`` (its companions);
        markers are evaluated for the wheel's own platform, never this machine's.
        """
        found: dict[str, str] = {}
        for req in applicable(self.requires_dist, marker_env(platform, python)):
            name = canonicalize_name(req.name)
            for key, pattern in _PIN_NAMES.items():
                if pattern.match(name):
                    exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
                    if exact and "*" not in exact[0]:
                        found[key] = _public(exact[0])
        return found


def _public(version: str) -> str:
    try:
        return Version(version).public
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return version


def parse_metadata(data: bytes, name: str, version: str) -> CoreMetadata:
    """Parse a METADATA file and check that it describes this wheel (else: garbage)."""
    if not data.lstrip().lower().startswith(b"metadata-version:"):
        raise MetadataError("not a core metadata file (no Metadata-Version)")
    msg = BytesHeaderParser().parsebytes(data)
    got_name, got_version = msg.get("Name"), msg.get("Version")
    if not got_name or not got_version:
        raise MetadataError("core metadata without Name or Version")
    if canonicalize_name(got_name) != canonicalize_name(name):
        raise MetadataError(f"metadata names {shown(got_name)}, expected {name}")
    try:  # the local tag ("+cu126") may or may not be repeated in the metadata
        same = Version(got_version).public == Version(version).public
    except ValueError:  # InvalidVersion, or digits past Python's limit
        same = False
    if not same:
        raise MetadataError(f"metadata says version {shown(got_version)}, expected {version}")
    return CoreMetadata(
        name=canonicalize_name(got_name),
        version=str(got_version),
        requires_dist=tuple(str(r) for r in msg.get_all("Requires-Dist") or ()),
    )


# --- remote zip ------------------------------------------------------------------------------


def remote_metadata(client: Client, url: str, name: str) -> bytes:
    """The METADATA of the wheel at ``url`` (of project ``name``), read with range requests."""
    with open_source(url, client=client, budget=BUDGET, first_tail=TAIL) as source:
        return metadata_from_zip(source, name)


def metadata_from_zip(source: Source, name: str) -> bytes:
    """The ``*.dist-info/METADATA`` member of the wheel ``source`` holds (a few range reads).

    ``name`` (the project) picks the dist-info directory when a wheel has more than one.
    """
    wheel = RemoteZip(source)
    found = [n for n in wheel.names() if _METADATA_RE.match(n)]
    if len(found) > 1:
        prefix = canonicalize_name(name).replace("-", "_") + "-"
        found = [n for n in found if n.lower().startswith(prefix)]
        if len(found) != 1:
            raise MetadataError(f"{source.name}: several dist-info directories")
    if not found:
        raise MetadataError(f"{source.name}: no *.dist-info/METADATA in the wheel")
    return wheel.read(found[0], MAX_METADATA)
