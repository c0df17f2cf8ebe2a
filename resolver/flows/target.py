"""The target of a command: a recorded host (`--host`), a described one (`--gpu`, `--driver`,
...), or this machine, probed; the described facts laid over it. Probes and file reads happen
here, so the decision layer gets a finished `Target`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from resolver.catalog import Catalog
from resolver.core.errors import UserError, shown
from resolver.core.platforms import MACOS, Platform, PythonVersion, python_option
from resolver.core.versions import Driver
from resolver.host.interpreter import python_version
from resolver.solve import Target, TargetGpu
from resolver.solve.target import target_from_profile

if TYPE_CHECKING:  # a probed or recorded host only: a described one is not built from one
    from resolver.core.hostprofile import HostProfile

__all__ = ["TargetOptions", "resolve_target", "what_if", "with_python"]


class TargetOptions(NamedTuple):
    """--driver/--gpu/--no-gpu/--python/--platform/--host as given: the machine a command is
    asked about, still text, until `resolve` makes it a `Target` (here, in the target flow)."""

    driver: Driver | None  # parsed where Click reads it (commands/params.py)
    gpus: tuple[str, ...]
    no_gpu: bool
    python: str | None
    platform: str | None
    host_file: str | None

    def given(self) -> list[str]:
        """The flags the user gave, for commands where they do not belong."""
        flags = ("--driver", "--gpu", "--no-gpu", "--python", "--platform", "--host")
        values = (self.driver, self.gpus, self.no_gpu, self.python, self.platform, self.host_file)
        return [flag for flag, value in zip(flags, values, strict=True) if value]

    def without_cuda(self) -> str | None:
        """The option that describes a machine without CUDA (a CUDA request contradicts it)."""
        if (self.platform or "").strip().lower() == MACOS:
            return f"--platform {MACOS}"
        return "--no-gpu" if self.no_gpu else None

    def resolve(
        self, catalog: Catalog, python: str | PythonVersion | None = None
    ) -> tuple[Target, HostProfile | None]:
        """The target: described by these options, or this machine probed (``python``
        overrides); a --host file's profile notes which of its facts the options replaced."""
        target, profile = resolve_target(
            catalog,
            driver=self.driver,
            gpus=self.gpus,
            no_gpu=self.no_gpu,
            python=python or self.python,
            platform=self.platform,
            host_file=self.host_file,
        )
        if profile is not None and self.host_file:
            given = (self.driver, self.gpus, self.no_gpu, self.python, self.platform)
            profile.messages.extend(what_if(profile, self.host_file, *given))
        return target, profile


def resolve_target(
    catalog: Catalog,
    *,
    driver: Driver | None,
    gpus: Sequence[str],
    no_gpu: bool,
    python: str | PythonVersion | None,
    platform: str | None,
    host_file: str | None = None,
) -> tuple[Target, HostProfile | None]:
    """The target for a command: a recorded host, a described one, or this machine (probed)."""
    from resolver.host import platform as host_platform

    profile: HostProfile | None = None
    here = host_platform.probe()
    if isinstance(python, str):  # an interpreter path is run here, once: the solver gets a version
        python = python_version(python)
    if host_file:
        from resolver.host.records import load_profile  # with the host profile's records

        profile = load_profile(host_file)
        base = target_from_profile(catalog, profile)
    elif is_described(
        driver=driver, gpus=gpus, no_gpu=no_gpu, platform=platform, host=here.platform
    ):
        from resolver.host import wsl

        plat = Platform.parse(here.platform, "this machine's platform")
        on_wsl = plat.os == "linux" and wsl.probe().version is not None
        base = Target(
            plat, PythonVersion.parse(here.python), driver_os="windows" if on_wsl else "linux"
        )
    else:
        from resolver.host import detect

        profile = detect(lookup_cc=lambda name: _cc_of(catalog, name))
        base = target_from_profile(catalog, profile)
    target = describe_target(
        catalog,
        base=base,
        driver=driver,
        gpus=gpus,
        no_gpu=no_gpu,
        python=python,
        platform=platform,
    )
    if host_file and not no_gpu and target.platform == base.platform:
        # A what-if on a recorded host replaces only the facts given: `--host h.json --driver X`
        # keeps the recorded GPUs, `--gpu Y` the recorded driver.
        if not gpus:
            target = replace(target, gpus=base.gpus, unknown_gpus=base.unknown_gpus)
        if driver is None:
            target = replace(target, driver=base.driver, driver_os=base.driver_os)
        target = replace(target, nvidia=target.nvidia or base.nvidia)
    return target, profile


def is_described(
    *,
    driver: str | Driver | None,
    gpus: Sequence[object],
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
    driver: Driver | None,
    gpus: Sequence[str],
    no_gpu: bool,
    python: str | PythonVersion | None,
    platform: str | None,
) -> Target:
    """The target: ``base`` (detected host, or a bare one) with the facts the options give: the
    one place options in text are made a `Target` (a spec's entry is made one by its reader).

    Any of --driver/--gpu/--no-gpu, or another platform, describe the GPU side completely: a
    driver not given is not checked, GPUs not given are not checked, and a machine described with
    neither --gpu nor --driver has no NVIDIA GPU (so `--platform windows-x86_64` alone gets CPU).
    """
    if no_gpu and (gpus or driver):
        raise UserError("--no-gpu cannot be combined with --gpu or --driver")
    host = base.platform
    described = is_described(driver=driver, gpus=gpus, no_gpu=no_gpu, platform=platform, host=host)
    plat = base.platform if platform is None else Platform.parse(platform, "--platform")
    from resolver.db.gpunames import resolve_gpu  # the GPU table's own lookup, not the facade's

    resolved = tuple(TargetGpu(*resolve_gpu(catalog, g)) for g in gpus)
    if plat.name == MACOS and (resolved or driver):
        raise UserError("macOS has no NVIDIA CUDA builds: drop --gpu/--driver for macos-arm64")
    py = base.python if python is None else _python(python)
    if not described:
        return replace(base, python=py)
    # The same platform keeps the base's driver OS: WSL2 (Linux) runs on a Windows driver.
    same = plat == base.platform
    return Target(
        platform=plat,
        python=py,
        driver=driver,
        driver_os="windows" if plat.os == "windows" else base.driver_os if same else "linux",
        gpus=resolved,
        nvidia=bool(resolved) or driver is not None,
        name=base.name,
    )


def _python(python: str | PythonVersion) -> PythonVersion:
    given = python if isinstance(python, PythonVersion) else python_option(python)
    if given is None:  # an interpreter path is read by the caller first (host/interpreter.py)
        raise UserError(
            f"--python {shown(str(python))}: expected a version like 3.12 or an interpreter path"
        )
    return given if isinstance(given, PythonVersion) else PythonVersion.parse(given)


def with_python(target: Target, python: str) -> Target:
    """``target`` with another --python: a version, or an interpreter run once for its own."""
    return replace(target, python=PythonVersion.parse(python_version(python)))


def _cc_of(catalog: Catalog, name: str) -> str | None:
    model = catalog.gpu_by_name(name)
    return f"{model.cc[0]}.{model.cc[1]}" if model else None


def what_if(
    recorded: HostProfile,
    where: str,
    driver: Driver | None,
    gpus: Sequence[str],
    no_gpu: bool,
    python: str | None,
    platform: str | None,
) -> list[str]:
    """What-if notes: which facts of the --host file ``where`` the other options replaced."""
    models = ", ".join(g.name or f"GPU {g.index}" for g in recorded.gpus) or "none"
    given = [
        (driver and f"--driver {driver}", f"driver {recorded.driver or 'none'}"),
        (gpus and f"--gpu {', '.join(gpus)}", f"GPUs ({models})"),
        (no_gpu and "--no-gpu", f"GPUs ({models})"),
        (python and f"--python {python}", f"Python {recorded.python}"),
        (platform and f"--platform {platform}", f"platform {recorded.platform}"),
    ]
    return [f"{option} replaces {where}'s {fact} (a what-if)" for option, fact in given if option]
