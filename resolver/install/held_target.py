"""`install --lock` holds the target a lock records against the environment it installs into.

A lock made for Python 3.12 planned into a 3.11 environment, or made for linux-aarch64 and
installed on x86-64, fails late (pip cannot find a wheel) or, worse, installs something else.
The platform and the Python decide which wheels fit: a mismatch is bad input (exit 2) naming both.
The GPUs and the driver only decide whether the build runs here, and images are built on hosts
without a GPU: a mismatch there (no GPU, an older driver, a GPU the lock was not made for) is
a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from resolver.core.errors import UserError
from resolver.core.hostprofile import STATE_OK, HostProfile
from resolver.core.versions import Driver, cc_str
from resolver.io.bounded import LOCK_LIMIT, read_text
from resolver.solve import Target
from resolver.writers import recorded


@dataclass(frozen=True)
class Held:
    """What the lock records (None: no target recorded: a multi-platform or hand-written file)
    and the warnings its GPU side gives on this host."""

    target: Target | None
    warnings: tuple[str, ...] = ()


def recorded_target(lock_file: str) -> Target | None:
    """The target a gpuresolve lock records (its inputs line); None for a file without one."""
    text = read_text(lock_file, limit=LOCK_LIMIT, what="a lock file")
    record = recorded.read(Path(lock_file).name, text)
    if not record or not isinstance(record.get("target"), dict):
        return None
    target, _ = recorded.target_from_record(record["target"], lock_file)
    return target


def describe(target: Target) -> str:
    """ "linux-x86_64, Python 3.12, driver 570.124.06, GPUs 8.0 x8" (what a user compares)."""
    parts = [str(target.platform), f"Python {target.python}"]
    if target.driver:
        parts.append(f"driver {target.driver}")
    if target.gpus:
        parts.append("GPUs " + _ccs([cc_str(g.cc) for g in target.gpus]))
    elif not target.nvidia:
        parts.append("no NVIDIA GPU")
    return ", ".join(parts)


def _ccs(ccs: list[str]) -> str:
    counted = {cc: ccs.count(cc) for cc in sorted(set(ccs))}
    return ", ".join(f"{cc} x{n}" if n > 1 else cc for cc, n in counted.items())


def hold(lock_file: str, platform: str, python: str, host: HostProfile | None) -> Held:
    """The lock's recorded target against this environment: a UserError (exit 2) naming both
    for another platform or Python; warnings for another GPU or driver."""
    target = recorded_target(lock_file)
    if target is None:
        return Held(None)
    here = f"{platform}, Python {python}"
    if str(target.platform) != platform or str(target.python) != python:
        raise UserError(
            f"{lock_file} was locked for {target.platform}, Python {target.python}; this "
            f"environment is {here}: lock for this environment (gpuresolve lock --python "
            f"{python} --platform {platform}), or --ignore-target to install it anyway"
        )
    return Held(target, tuple(_gpu_warnings(lock_file, target, host)))


def _gpu_warnings(lock_file: str, target: Target, host: HostProfile | None) -> list[str]:
    if host is None:
        return []
    gpu_here = host.state == STATE_OK and bool(host.gpus)
    said = f"{lock_file} was locked for {describe(target)}"
    if target.nvidia and not gpu_here:
        return [
            f"{said}; this host has no usable NVIDIA GPU (fine when building an image "
            "elsewhere; `gpuresolve verify` on the GPU host proves it)"
        ]
    if not target.nvidia:
        return [f"{said}; this host has NVIDIA GPUs the lock does not use"] if gpu_here else []
    # A team's lock records the union of its machines (their GPUs, the lowest driver): a host
    # is outside it only with an older driver or a GPU none of them has.
    out: list[str] = []
    if target.driver and host.driver and Driver.parse(host.driver) < target.driver:
        out.append(f"{said}; this host's driver is older: {host.driver}")
    if target.gpus:
        want = {cc_str(g.cc) for g in target.gpus}
        have = sorted(g.cc for g in host.gpus if g.cc)
        if not set(have) <= want or len(have) < len(host.gpus):
            out.append(f"{said}; this host's GPUs are {_ccs(have) or 'of unknown models'}")
    return out
