"""Host detection: NVML, then nvidia-smi, then the kernel module's files (see ``detection``).

Importing this package is nearly free: ``detect`` and its probes load on first use, so commands
that only read a recorded or described host (`suggest --gpu ...`) never pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resolver.core.hostprofile import HostProfile as HostProfile
    from resolver.host.detection import detect as detect

__all__ = ["HostProfile", "detect"]


def __getattr__(name: str) -> object:
    if name == "detect":
        from resolver.host.detection import detect

        return detect
    if name == "HostProfile":
        from resolver.core.hostprofile import HostProfile

        return HostProfile
    raise AttributeError(f"module 'resolver.host' has no attribute {name!r}")
