"""WSL detection: on WSL2 the GPU driver is the *Windows* driver, mapped into /usr/lib/wsl/lib.

That matters twice: Windows driver floors apply, and NVML / nvidia-smi live outside the usual
paths (there is no /proc/driver/nvidia or /sys/module/nvidia in WSL2).
"""

from pathlib import Path
from typing import NamedTuple

LIB_DIR = "usr/lib/wsl/lib"
SMI = f"{LIB_DIR}/nvidia-smi"
NVML_LIB = f"{LIB_DIR}/libnvidia-ml.so.1"


def wsl_version(
    proc_version: str | None, osrelease: str | None, *, lib_dir: bool = False
) -> int | None:
    """1 or 2 when the kernel strings say WSL, else None.

    WSL2 kernels read like "5.15.153.1-microsoft-standard-WSL2"; WSL1 like "4.4.0-19041-Microsoft".
    A custom WSL2 kernel may drop those markers, so the /usr/lib/wsl/lib folder also counts.
    """
    text = " ".join(t for t in (proc_version, osrelease) if t).lower()
    if "microsoft" not in text and "wsl" not in text:
        return None
    if "wsl2" in text or "microsoft-standard" in text or lib_dir:
        return 2
    return 1


class WslInfo(NamedTuple):
    version: int | None  # None: not WSL
    smi: str | None  # the Windows driver's nvidia-smi, where present
    nvml_lib: str | None  # the Windows driver's libnvidia-ml.so.1, where present


def probe(root: Path | str = "/") -> WslInfo:
    """Read the kernel strings and look for the driver's WSL folder under ``root``."""
    base = Path(root)

    def read(rel: str) -> str | None:
        try:
            return (base / rel).read_text(errors="replace")
        except OSError:
            return None

    lib_dir = (base / LIB_DIR).is_dir()
    version = wsl_version(read("proc/version"), read("proc/sys/kernel/osrelease"), lib_dir=lib_dir)
    if version is None:
        return WslInfo(None, None, None)
    smi, lib = base / SMI, base / NVML_LIB
    return WslInfo(version, str(smi) if smi.exists() else None, str(lib) if lib.exists() else None)
