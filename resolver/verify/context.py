"""What the verify checks read, and the readings of it that several checks share.

``Context`` holds the probe document, the host profile, the database and the lock, with the database
entry of the installed build looked up once. The helpers read versions, the build variant and
torch's own pinned requirements out of the probe in one way for every check.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from resolver.catalog import Catalog, Release, Variant
from resolver.core.hostprofile import STATE_MISMATCH, STATE_OK, HostProfile
from resolver.readers.pins import LockPins, variant_of_local
from resolver.verify.expects import Expects
from resolver.verify.result import SKIP, Check, CheckResult

_EMPTY_CATALOG = Catalog(
    sources={},
    toolkits={},
    compat_floors={},
    architectures={},
    gpus=(),
    releases=(),
    index_url_template="",
)


@dataclass
class Context:
    """Everything the checks read, with the lookups they share computed once."""

    probe: Mapping[str, Any]
    host: HostProfile | None
    catalog: Catalog | None
    catalog_error: str | None = None
    lock: LockPins | None = None
    torch: Mapping[str, Any] = field(default_factory=dict)
    release: Release | None = None
    variant: Variant | None = None
    expects: Expects | None = None  # --group: the machine the node's group expects

    @property
    def imported(self) -> bool:
        return bool(self.torch.get("imported"))

    @property
    def cuda_build(self) -> bool:
        return bool(self.torch.get("cuda"))

    @property
    def host_gpu(self) -> bool:
        h = self.host
        return h is not None and (h.state in (STATE_OK, STATE_MISMATCH) or bool(h.gpus))

    @property
    def dists(self) -> Mapping[str, Mapping[str, Any]]:
        d = self.probe.get("dists")
        return d if isinstance(d, dict) else {}

    @property
    def markers(self) -> dict[str, str]:
        m = self.probe.get("markers")
        return {str(k): str(v) for k, v in m.items()} if isinstance(m, dict) else {}

    @property
    def db(self) -> Catalog:
        return self.catalog or _EMPTY_CATALOG

    def db_note(self) -> str:
        return (
            f"the database could not be loaded ({self.catalog_error})"
            if self.catalog_error
            else ("the database has no record of this build")
        )


def public_version(version: Any) -> str | None:
    if not version:
        return None
    try:
        return Version(str(version)).public
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return str(version).split("+", 1)[0]


def local_tag(version: Any) -> str | None:
    if not version or "+" not in str(version):
        return None
    return str(version).split("+", 1)[1]


def build_variant(torch: Mapping[str, Any]) -> str | None:
    """The variant name of an imported torch: its local tag, else from its CUDA/HIP version."""
    if not torch.get("version"):
        return None
    tag = variant_of_local(local_tag(torch.get("version")))
    if tag:
        return tag
    if torch.get("hip"):
        return "rocm" + ".".join(str(torch["hip"]).split(".")[:2])
    if torch.get("cuda"):
        major, _, minor = str(torch["cuda"]).partition(".")
        return f"cu{major}{minor.split('.')[0] or '0'}"
    return "cpu"


def version_tuple(text: str | None, n: int = 3) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = re.findall(r"[0-9]+", str(text))
    return tuple(int(p) for p in parts[:n]) if parts else None


def req_pins(ctx: Context) -> list[Requirement]:
    """torch's own unconditional requirements (extras off), as this interpreter evaluates them."""
    torch_dist = ctx.dists.get("torch") or {}
    out: list[Requirement] = []
    for text in torch_dist.get("requires") or []:
        req = requirement(text)
        if req is not None and marker_ok(req.marker, ctx.markers, ("",)):
            out.append(req)
    return out


def requirement(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def marker_ok(marker: Marker | None, env: Mapping[str, str], extras: Sequence[str]) -> bool:
    if marker is None:
        return True
    if not env:
        return True  # no environment reported: do not drop pins on a guess
    for extra in extras:
        try:
            if marker.evaluate({**env, "extra": extra}):
                return True
        except Exception:  # an odd marker is not ours to reject
            return True
    return False


def quote_req(req: Requirement) -> str:
    name = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")
    return shlex.quote(f"{name}{req.specifier}")


def skipped(ctx: Context, check: Check, *, cuda: bool = True) -> CheckResult | None:
    """The SKIP of a check with nothing to judge: torch did not import or (``cuda``) is no CUDA
    build; None when it applies."""
    if not ctx.imported:
        return check.result(SKIP, "torch did not import")
    if cuda and not ctx.cuda_build:
        return check.result(SKIP, f"not a CUDA build ({build_variant(ctx.torch)})")
    return None
