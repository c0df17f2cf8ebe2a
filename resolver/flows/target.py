"""The target of a command: a recorded host (`--host`), a described one (`--gpu`, `--driver`,
...), or this machine, probed; the described facts laid over it. Probes and file reads happen
here, so the decision layer gets a finished `Target`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from resolver.catalog import Catalog
from resolver.core.platforms import MACOS, Platform, PythonVersion
from resolver.host.interpreter import python_version
from resolver.solve import Target
from resolver.solve.target import describe_target, is_described, target_from_profile

if TYPE_CHECKING:  # a probed or recorded host only: a described one is not built from one
    from resolver.core.hostprofile import HostProfile

__all__ = ["TargetOptions", "resolve_target", "what_if", "with_python"]


class TargetOptions(NamedTuple):
    """--driver/--gpu/--no-gpu/--python/--platform/--host as given: the machine a command is
    asked about, still text, until `resolve` makes it a `Target` (here, in the target flow)."""

    driver: str | None
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
    driver: str | None,
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


def with_python(target: Target, python: str) -> Target:
    """``target`` with another --python: a version, or an interpreter run once for its own."""
    return replace(target, python=PythonVersion.parse(python_version(python)))


def _cc_of(catalog: Catalog, name: str) -> str | None:
    model = catalog.gpu_by_name(name)
    return f"{model.cc[0]}.{model.cc[1]}" if model else None


def what_if(
    recorded: HostProfile,
    where: str,
    driver: str | None,
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
