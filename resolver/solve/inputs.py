"""Turn what the user typed (or what detection found) into the solver's Target and Request.

Every bad value becomes a UserError with one line that says what was wrong and what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from resolver.catalog import Catalog
from resolver.core.errors import UserError, shown
from resolver.core.hostprofile import STATE_OK, HostProfile
from resolver.core.platforms import MACOS, Platform, PythonVersion, python_option
from resolver.core.versions import Driver, parse_cc
from resolver.solve import COMPANIONS, Policy, Request, Target, TargetGpu
from resolver.solve.extensions import EXTENSIONS

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
    policy: Policy,
    allow_unconfirmed: bool = False,
    evidence: str = "documented",
) -> Request:
    """The request; any two parts that name different CUDA variants are an error."""
    torch_spec, variant = _specifier(torch, "--torch") if torch else (None, None)
    named: dict[str, str] = {}
    if variant:
        named["--torch"] = variant
    companions: list[tuple[str, SpecifierSet | None]] = []
    extensions: list[tuple[str, SpecifierSet | None]] = []
    for item in with_:
        match = _REQ_RE.match(item)
        if match is None:
            raise UserError(
                f"--with {item!r}: expected a package like torchvision or 'torchvision>=0.20'"
            )
        name = match.group(1).lower().replace("_", "-")
        if name not in COMPANIONS and name not in EXTENSIONS:
            raise UserError(
                f"--with {item!r}: the packages are {', '.join((*COMPANIONS, *EXTENSIONS))}"
            )
        spec, comp_variant = (
            _specifier(match.group(2), f"--with {name}") if match.group(2) else (None, None)
        )
        if comp_variant:
            named[f"--with {name}"] = comp_variant
        if name in EXTENSIONS:
            if any(n == name for n, _ in extensions):
                raise UserError(f"--with {name} is given twice")
            extensions.append((name, spec))
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
        extensions=tuple(extensions),
        cuda=cuda,
        variant=next(iter(named.values()), None) if named else None,
        policy=policy,
        allow_unconfirmed=allow_unconfirmed,
        evidence=evidence,
    )


def target_from_profile(catalog: Catalog, profile: HostProfile, name: str | None = None) -> Target:
    """A detected (or recorded) host as the solver sees it."""
    gpus: list[TargetGpu] = []
    unknown: list[str] = []
    for gpu in profile.gpus:
        cc = gpu.cc
        if cc is None:  # an old driver's nvidia-smi has no compute_cap: look the model up
            model = catalog.gpu_by_name(gpu.name) if gpu.name else None
            if model is None and gpu.pci_device_id:
                model = catalog.gpu_by_pci_id(gpu.pci_device_id)
            cc = f"{model.cc[0]}.{model.cc[1]}" if model else None
        if cc is None:  # a GPU newer than the database: still an NVIDIA GPU, coverage unknown
            unknown.append(gpu.name or f"GPU {gpu.index}")
            continue
        try:
            gpus.append(TargetGpu(parse_cc(cc), gpu.name))
        except UserError:
            raise UserError(f"GPU {gpu.index}: not a compute capability: {cc!r}") from None
    return Target(
        platform=Platform.parse(profile.platform),
        python=PythonVersion.parse(profile.python),
        driver=None if profile.driver is None else Driver.parse(profile.driver),
        driver_os=profile.driver_os,
        gpus=tuple(gpus),
        nvidia=profile.state in (STATE_OK, "driver-mismatch") or bool(gpus or unknown),
        name=name,
        unknown_gpus=tuple(unknown),
    )


def _python(python: str | PythonVersion) -> PythonVersion:
    given = python if isinstance(python, PythonVersion) else python_option(python)
    if given is None:  # an interpreter path is read by the caller first (host/interpreter.py)
        raise UserError(
            f"--python {shown(str(python))}: expected a version like 3.12 or an interpreter path"
        )
    return given if isinstance(given, PythonVersion) else PythonVersion.parse(given)


def is_described(
    *,
    driver: str | Driver | None,
    gpus: Sequence[str],
    no_gpu: bool,
    platform: str | None,
    host: str | Platform,
) -> bool:
    """Whether the options describe a machine (then this one's GPUs and driver are not probed)."""
    other_platform = platform is not None and platform.strip().lower() != str(host)
    return bool(gpus) or driver is not None or no_gpu or other_platform


def describe_target(
    catalog: Catalog,
    *,
    base: Target,
    driver: str | None,
    gpus: Sequence[str],
    no_gpu: bool,
    python: str | PythonVersion | None,
    platform: str | None,
) -> Target:
    """The target: ``base`` (detected host, or a bare one) with the facts the options give.

    Any of --driver/--gpu/--no-gpu, or another platform, describe the GPU side completely: a
    driver not given is not checked, GPUs not given are not checked, and a machine described with
    neither --gpu nor --driver has no NVIDIA GPU (so `--platform windows-x86_64` alone gets CPU).
    """
    if no_gpu and (gpus or driver):
        raise UserError("--no-gpu cannot be combined with --gpu or --driver")
    plat = base.platform if platform is None else Platform.parse(platform, "--platform")
    resolved = tuple(TargetGpu(*catalog.resolve_gpu(g)) for g in gpus)
    drv = None if driver is None else Driver.parse(driver)
    if plat.name == MACOS and (resolved or drv):
        raise UserError("macOS has no NVIDIA CUDA builds: drop --gpu/--driver for macos-arm64")
    py = base.python if python is None else _python(python)
    if not is_described(
        driver=drv, gpus=gpus, no_gpu=no_gpu, platform=platform, host=base.platform
    ):
        return replace(base, python=py)
    # The same platform keeps the base's driver OS: WSL2 (Linux) runs on a Windows driver.
    same = plat == base.platform
    return Target(
        platform=plat,
        python=py,
        driver=drv,
        driver_os="windows" if plat.os == "windows" else base.driver_os if same else "linux",
        gpus=resolved,
        nvidia=bool(resolved) or driver is not None,
        name=base.name,
    )
