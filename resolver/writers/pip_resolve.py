"""Resolve a pinned set's whole closure for the target with pip's own resolver.

`pip install --dry-run --report` for the target's platform tags, Python and ABI (not this
machine's) gives every distribution with its URL and sha256: what ``--hashes`` pins and what
conda-lock.yml's pip entries hold. It needs the index (the network, or a mirror).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.conda import DEFAULT_GLIBC, DEFAULT_MACOS
from resolver.errors import UserError
from resolver.solve import Target

PIP_TIMEOUT_S = 900


@dataclass(frozen=True)
class ResolvedDist:
    """One distribution of the resolved closure."""

    name: str  # canonical: "nvidia-cudnn-cu12"
    version: str  # as the index has it: "2.8.0+cu126"
    url: str
    sha256: str
    requires: Mapping[str, str] = field(default_factory=dict)  # name -> specifier ("" any)


def pip_platforms(target: Target, glibc: str | None = None) -> list[str]:
    """pip ``--platform`` tags a wheel for the target may carry, most specific first."""
    plat = target.platform
    if plat.startswith("linux"):
        arch = plat.split("-", 1)[1]
        major, _, minor = (glibc or DEFAULT_GLIBC).partition(".")
        if major != "2" or not minor.isdigit():
            raise UserError(f"glibc {glibc!r}: expected a version like 2.28")
        tags = [f"manylinux_2_{m}_{arch}" for m in range(int(minor), 16, -1)]
        return [*tags, f"manylinux2014_{arch}"]  # pip adds manylinux2010 / manylinux1 itself
    if plat.startswith("windows"):
        return ["win_amd64"]
    if plat.startswith("macos"):
        return [f"macosx_{DEFAULT_MACOS.split('.')[0]}_0_arm64"]  # pip adds the older macOS
    raise UserError(f"no pip platform tags for {plat}")


def pip_command(
    requirements: Sequence[str],
    index_lines: Sequence[str],
    target: Target,
    report: Path,
    glibc: str | None = None,
) -> list[str]:
    """The pip invocation that resolves ``requirements`` for the target."""
    py = target.python.rstrip("t")
    abi = "cp" + py.replace(".", "") + ("t" if target.python.endswith("t") else "")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    cmd += ["--quiet", "--no-input", "--disable-pip-version-check", "--retries", "2"]
    # --target: older pip takes platform options only with it; nothing is installed (--dry-run).
    cmd += ["--report", str(report), "--target", str(report.parent / "target")]
    cmd += ["--only-binary=:all:"]
    cmd += ["--python-version", py, "--implementation", "cp", "--abi", abi]
    for tag in pip_platforms(target, glibc):
        cmd += ["--platform", tag]
    for line in index_lines:
        option, _, url = line.partition(" ")
        cmd += [option, url.strip()]
    return [*cmd, *requirements]


def resolve(
    requirements: Sequence[str],
    index_lines: Sequence[str],
    target: Target,
    glibc: str | None = None,
) -> list[ResolvedDist]:
    """The closure of ``requirements`` on the target, sorted by name, each with its sha256."""
    with tempfile.TemporaryDirectory(prefix="gpuresolve-pip-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = pip_command(requirements, index_lines, target, report, glibc)
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT_S,
                env={**os.environ, "PIP_NO_INPUT": "1"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise UserError(f"pip did not resolve the set within {PIP_TIMEOUT_S} s") from None
        except OSError as exc:
            raise UserError(f"cannot run pip ({exc})") from None
        if proc.returncode != 0 or not report.is_file():
            raise UserError(f"pip could not resolve the set for the target: {_pip_error(proc)}")
        data = json.loads(report.read_text(encoding="utf-8"))
    return parse_report(data, target)


def _pip_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    if "no such option: --report" in (proc.stderr or ""):
        return "this pip is too old for --report (pip >= 22.2 is needed)"
    if any("No module named pip" in ln for ln in lines):
        return "pip is not installed for this Python"
    text = (errors or lines or [f"exit code {proc.returncode}"])[0]
    return text.removeprefix("ERROR:").strip()


def parse_report(data: Mapping[str, Any], target: Target) -> list[ResolvedDist]:
    """pip's installation report -> the resolved distributions (every one needs a sha256)."""
    from packaging.utils import canonicalize_name

    from resolver.markers import applicable, marker_env

    env = marker_env(target.platform, target.python)
    out: list[ResolvedDist] = []
    for item in data.get("install") or []:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        name = str(canonicalize_name(str(meta.get("name"))))
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        sha256 = hashes.get("sha256")
        if not sha256:
            legacy = str((info.get("archive_info") or {}).get("hash") or "")
            sha256 = legacy.split("=", 1)[1] if legacy.startswith("sha256=") else None
        if not sha256:
            raise UserError(f"the index gave no sha256 for {name} ({info.get('url')})")
        requires: dict[str, str] = {}
        for req in applicable(meta.get("requires_dist") or [], env):
            dep = str(canonicalize_name(req.name))
            spec = str(req.specifier)
            requires[dep] = ",".join(x for x in (requires.get(dep), spec) if x)
        out.append(
            ResolvedDist(
                name=name,
                version=str(meta.get("version")),
                url=str(info.get("url")),
                sha256=str(sha256),
                requires=dict(sorted(requires.items())),
            )
        )
    return sorted(out, key=lambda d: d.name)
