"""Observation entries from what was read: a wheel's report, or verify's probe of a build."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from resolver.core.platforms import covered
from resolver.observe.store import today, tool_name
from resolver.wheels.torchwheel import WheelReport, token_cc

_LOCAL = re.compile(r"^(cpu|cu[0-9]{2,3}|rocm[0-9]{1,2}(\.[0-9]{1,2}){0,2}|xpu)$")
_ARCH_TOKEN = re.compile(r"^(sm|compute)_[0-9]{2,3}[af]?$")


def wheel_entry(report: WheelReport, read: str | None = None) -> dict[str, Any]:
    """The ``observations:`` entry for a wheel read (its sha256 must be known)."""
    if not report.sha256:
        raise ValueError("a wheel observation needs the wheel's sha256")
    public, _, local = report.version.partition("+")
    variant = local or ("cpu" if report.cuda is None else _cuda_variant(report.cuda))
    entry: dict[str, Any] = {
        "wheel": report.file,
        "sha256": report.sha256,
        "read": read or today(),
        "tool": tool_name("wheel reader"),
        "torch": public,
        "variant": variant,
        "platform": report.platform,
        "version": report.version,
        "git_version": report.git_version,
        "cuda": report.cuda,
    }
    if report.cuda is not None:  # a CPU build carries no kernels: no arch facts to give
        entry["sass"] = report.sass_cc
        entry["ptx"] = report.ptx_cc
        entry["arch_flags"] = report.arch_flags
    entry["cudnn"], entry["nccl"] = report.cudnn, report.nccl
    return {k: v for k, v in entry.items() if v is not None}


def runtime_entry(probe: Mapping[str, Any], seen: str | None = None) -> dict[str, Any] | None:
    """The ``runtime:`` entry for the build verify's probe imported; None when it has none.

    Only facts of the build itself: torch's version strings, its compiled arch list, the
    CUDA, cuDNN and NCCL it reports, the platform and Python. Nothing of the machine.
    """
    torch = probe.get("torch") or {}
    version = torch.get("version")
    if not torch.get("imported") or not isinstance(version, str):
        return None
    public, _, local = version.partition("+")
    if not re.match(r"^[0-9]+\.[0-9]+\.[0-9]+$", public):
        return None  # a nightly or a local build: not a release the database names
    markers = probe.get("markers") or {}
    platform = covered(str(markers.get("platform_system")), str(markers.get("platform_machine")))
    if platform is None:
        return None
    cuda = torch.get("cuda")
    if local and not _LOCAL.match(local):
        return None
    variant = local or ("cpu" if not cuda else _cuda_variant(str(cuda)))
    python = markers.get("python_version")
    if python and (probe.get("python") or {}).get("gil_disabled"):
        python += "t"
    entry: dict[str, Any] = {
        "torch": public,
        "variant": variant,
        "platform": platform,
        "python": python,
        "version": version,
        "git_version": torch.get("git_version"),
        "cuda": str(cuda) if cuda else None,
    }
    arch = torch.get("arch_list")
    if (
        cuda
        and isinstance(arch, list)
        and all(isinstance(t, str) and _ARCH_TOKEN.match(t) for t in arch)
    ):
        entry["sass"] = [token_cc(t) for t in arch if t.startswith("sm_")]
        entry["ptx"] = [token_cc(t) for t in arch if t.startswith("compute_")]
    cudnn = probe.get("cudnn") or {}
    nccl = probe.get("nccl") or {}
    if cudnn.get("available") and cudnn.get("version_text"):
        entry["cudnn"] = str(cudnn["version_text"])
    if nccl.get("available") and nccl.get("version_text"):
        entry["nccl"] = str(nccl["version_text"])
    entry["seen"] = seen or today()
    entry["tool"] = tool_name("verify")
    return {k: v for k, v in entry.items() if v is not None}


def _cuda_variant(cuda: str) -> str:
    major, _, minor = cuda.partition(".")
    return f"cu{major}{minor.split('.')[0] or '0'}"
