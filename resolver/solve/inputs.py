"""Turn what the user asked for (--torch, --with, --cuda, a policy) into the solver's Request.

Every bad value becomes a UserError with one line that says what was wrong and what is accepted.
The machine is made a Target in ``target.py``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from resolver.core.errors import UserError, shown
from resolver.core.vocab import DriverPolicy, EvidenceLevel
from resolver.solve import COMPANIONS, Policy, Request

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*?)\s*$")
_VARIANT_RE = re.compile(r"^(cpu|cu[0-9]{3})$")
_LONG_NUMBER = re.compile(r"[0-9]{13}")


def _specifier(text: str, what: str) -> tuple[SpecifierSet, str | None]:
    """A PEP 440 specifier; a local tag on an == pin (==2.8.0+cu126) names the variant."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    text = text.strip()
    if _LONG_NUMBER.search(text):  # int() of it would raise past Python's digit limit
        raise UserError(f"{what}: {shown(text)}: a version number far too long to be real")
    if text and "0" <= text[0] <= "9":
        text = "==" + text
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        raise UserError(
            f"{what}: not a version specifier: {shown(text)} (e.g. '>=2.4,<2.9')"
        ) from None
    variants = {s.version.split("+", 1)[1] for s in spec if "+" in s.version}
    if len(variants) > 1:
        raise UserError(f"{what}: mixes builds {', '.join(sorted(variants))}")
    variant = variants.pop() if variants else None
    if variant is not None and not _VARIANT_RE.match(variant):
        raise UserError(f"{what}: unknown build tag +{variant} (cpu, cu118 ... cu132)")
    if variant is not None:
        # The database's versions carry no build tag: match the public version, keep the variant.
        spec = SpecifierSet(",".join(f"{s.operator}{s.version.split('+', 1)[0]}" for s in spec))
    return spec, variant


def build_request(
    *,
    torch: str | None,
    with_: Sequence[str],
    cuda: str | None,
    policy: Policy | str,
    allow_unconfirmed: bool = False,
    evidence: EvidenceLevel | str = EvidenceLevel.DOCUMENTED,
    extensions: Collection[str] = (),
) -> Request:
    """The request; any two parts that name different CUDA variants are an error.
    ``extensions``: the extension packages `--with` takes besides torch's companions (the
    database's, ``Catalog.extensions``: looked into only for a name that is no companion)."""
    torch_spec, variant = _specifier(torch, "--torch") if torch else (None, None)
    named: dict[str, str] = {}
    if variant:
        named["--torch"] = variant
    companions: list[tuple[str, SpecifierSet | None]] = []
    chosen: list[tuple[str, SpecifierSet | None]] = []  # the extensions asked for
    for item in with_:
        match = _REQ_RE.match(item)
        if match is None:
            raise UserError(
                f"--with {item!r}: expected a package like torchvision or 'torchvision>=0.20'"
            )
        name = match.group(1).lower().replace("_", "-")
        # a companion is answered without ``extensions``: looking into it builds every
        # package of extensions.yaml (its history), the cost `--with torchvision` never needs
        extension = name not in COMPANIONS
        if extension and name not in extensions:
            raise UserError(
                f"--with {item!r}: the packages are {', '.join((*COMPANIONS, *extensions))}"
            )
        spec, comp_variant = (
            _specifier(match.group(2), f"--with {name}") if match.group(2) else (None, None)
        )
        if comp_variant:
            named[f"--with {name}"] = comp_variant
        if extension:
            if any(n == name for n, _ in chosen):
                raise UserError(f"--with {name} is given twice")
            chosen.append((name, spec))
        else:
            companions.append((name, spec))
    if cuda is not None:
        if not re.match(r"^[0-9]+\.[0-9]+$", cuda.strip()):
            raise UserError(f"--cuda {cuda!r}: expected a CUDA version like 12.8")
        cuda = cuda.strip()
        named["--cuda"] = "cu" + cuda.replace(".", "")
    if len(set(named.values())) > 1:
        parts = ", ".join(f"{k} → {v}" for k, v in named.items())
        raise UserError(f"the request mixes CUDA variants ({parts}); one environment has one")
    return Request(
        torch=torch_spec,
        companions=tuple(companions),
        extensions=tuple(chosen),
        cuda=cuda,
        variant=next(iter(named.values()), None) if named else None,
        policy=DriverPolicy(policy),  # a word the options or the spec checked
        allow_unconfirmed=allow_unconfirmed,
        evidence=EvidenceLevel(evidence),
    )
