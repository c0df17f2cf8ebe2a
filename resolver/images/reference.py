"""Parse a container image reference: registry/repository:tag@digest, as docker accepts it.

Only the shape is checked here; whether gpuresolve knows the image is ``facts``' question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from resolver.core import secrets
from resolver.core.errors import UserError

MAX_REFERENCE = 512
DOCKER_HUB = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?)"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
_REF_RE = re.compile(
    rf"^(?:(?P<registry>{_REGISTRY})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference: ``registry`` is docker.io for Docker Hub names."""

    registry: str
    repository: str  # "pytorch/pytorch" (Docker Hub's "library/" prefix kept as written)
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """registry/repository, with Docker Hub's registry left out as users write it."""
        return (
            self.repository if self.registry == DOCKER_HUB else f"{self.registry}/{self.repository}"
        )

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse(text: str) -> ImageRef:
    """``pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime``, ``nvcr.io/nvidia/pytorch:25.12-py3``,
    ``docker.io/pytorch/pytorch@sha256:…``; a bare tag (``2.9.0-cuda12.8-cudnn9-runtime``) means
    the official pytorch/pytorch image. Raises UserError on anything docker would refuse."""
    raw = text.strip()
    if not raw or len(raw) > MAX_REFERENCE:
        raise UserError(f"not an image reference: {secrets.redact_refused(text[:80])!r}")
    if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+-[A-Za-z0-9_.-]+|latest", raw):
        raw = f"pytorch/pytorch:{raw}"  # a bare tag of the official image
    m = _REF_RE.match(raw)
    if m is None:
        raise UserError(
            f"not an image reference: {secrets.redact_refused(text)!r} (expected "
            "NAME[:TAG][@sha256:DIGEST], "
            "e.g. pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime)"
        )
    registry = m["registry"]
    path = m["path"]
    # docker's rule: the first component is a registry only with a '.' or ':' or as localhost
    if registry is not None and not ("." in registry or ":" in registry or registry == "localhost"):
        path = f"{registry}/{path}"
        registry = None
    if not re.fullmatch(_COMPONENT + r"(?:/" + _COMPONENT + r")*", path):
        raise UserError(f"not an image reference: {text!r} (repository names are lower case)")
    reg = (registry or DOCKER_HUB).lower()
    if reg in ("index.docker.io", "registry-1.docker.io"):
        reg = DOCKER_HUB
    if reg == DOCKER_HUB and path.startswith("library/"):
        path = path[len("library/") :]
    return ImageRef(reg, path, m["tag"], m["digest"])
