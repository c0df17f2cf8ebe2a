"""Helpers for the `gpuresolve lock` tests: the synthetic database with conda-forge builds and a
macOS platform, a PEP 503 index of stub wheels named like the real ones, and pip run in isolation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cli_support
from conftest import scrubbed_env
from pytorch_index import build_wheel, metadata_text

from resolver.catalog import Catalog, Variant, from_raw

P = ["PRIM"]

CONDA_FORGE: dict[str, Any] = {
    "channel": "conda-forge",
    "package": "pytorch",
    "builds": {
        "cuda_string": "cuda{major}{minor}",
        "cpu_string": "cpu",
        "cuda_package": "cuda-version",
        "source": ["CF_SYNTH"],
    },
    "arch_lists": {
        "cf-cu129": {
            "sass": ["6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
            "ptx": ["12.0"],
            "source": ["CF_SYNTH"],
        },
        "cf-cu130": {
            "sass": ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
            "ptx": ["12.0"],
            "source": ["CF_SYNTH"],
        },
    },
    "releases": [
        {
            "version": "2.12.0",
            "python": ["3.11", "3.12"],
            "builds": {
                "linux-x86_64": [
                    {"cuda": "12.9", "arch": "cf-cu129"},
                    {"cuda": "13.0", "arch": "cf-cu130", "glibc": "2.28"},
                    {"cuda": None},
                ],
                "windows-x86_64": [{"cuda": "12.8", "arch": "cf-cu129"}, {"cuda": None}],
                "macos-arm64": [{"cuda": None}],
            },
            "source": ["CF_SYNTH"],
        }
    ],
    # its own sources, merged into sources.yaml's by the loader
    "sources": {"CF_SYNTH": {"cite": "a synthetic conda-forge feedstock", "primary": True}},
}


def lock_raw(synth_raw: dict[str, Any]) -> dict[str, Any]:
    """The synthetic database plus CUDA 12.9, conda_forge.yaml and macOS CPU wheels of 2.8."""
    raw = copy.deepcopy(synth_raw)
    raw["cuda.yaml"]["toolkits"].append(
        {"version": "12.9", "min_driver": {"linux": "575.51.03", "windows": "576.02"}, "source": P}
    )
    raw["conda_forge.yaml"] = copy.deepcopy(CONDA_FORGE)
    (s28,) = [s for s in raw["torch.yaml"]["series"] if s["minor"] == "2.8"]
    s28["python"]["macos-arm64"] = ["3.10", "3.11", "3.12"]
    (cpu,) = [v for v in s28["variants"] if v["name"] == "cpu"]
    cpu["platforms"]["macos-arm64"] = {}
    cpu["pypi"] = [*cpu.get("pypi", []), "macos-arm64"]
    return raw


def lock_catalog(synth_raw: dict[str, Any]) -> Catalog:
    return from_raw(lock_raw(synth_raw))


write_db = cli_support.write_db


# --- a PEP 503 index of stub wheels ------------------------------------------------------------

_PLATFORM_TAGS = {
    "linux-x86_64": "manylinux_2_28_x86_64",
    "linux-aarch64": "manylinux_2_28_aarch64",
    "windows-x86_64": "win_amd64",
    "macos-arm64": "macosx_11_0_arm64",
}
FILELOCK = "3.13.1"


def wheel_name(name: str, version: str, python: str, platform: str) -> str:
    """Named like PyTorch's: torch-2.8.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl."""
    cp = "cp" + python.replace(".", "")
    abi = "none" if platform == "macos-arm64" else cp
    return f"{name}-{version}-{cp}-{abi}-{_PLATFORM_TAGS[platform]}.whl"


def _page(files: list[tuple[str, bytes]]) -> bytes:
    from urllib.parse import quote

    links = "".join(
        f'<a href="/files/{quote(fn)}#sha256={hashlib.sha256(data).hexdigest()}">{fn}</a><br>\n'
        for fn, data in sorted(files)
    )
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()


def stub_index(
    catalog: Catalog,
    torch_requires: tuple[str, ...] = ("filelock",),
    extra: tuple[tuple[str, str, bytes], ...] = (),
) -> dict[str, tuple[bytes, str]]:
    """Routes for ``serve``: ``/whl/<variant>/<project>/`` for every build of the catalog (each
    variant's index also serves filelock, as PyTorch's does), ``/simple/<project>/`` (a default
    index: filelock, and the untagged macOS wheels), and ``/files/<wheel>``.

    ``torch_requires``: torch's Requires-Dist (markers allowed); ``extra``: more wheels, each as
    (page, file name, bytes), e.g. ``("/simple/cuda-bindings/", "cuda_bindings-...whl", data)``.
    """

    def _local(version: str, var: Variant, plat: str) -> str:  # as the PyTorch index names it
        return version if plat == "macos-arm64" and var.name == "cpu" else f"{version}+{var.name}"

    pages: dict[str, list[tuple[str, bytes]]] = {}
    routes: dict[str, tuple[bytes, str]] = {}

    def add(page: str, filename: str, data: bytes) -> None:
        pages.setdefault(page, []).append((filename, data))
        routes[f"/files/{filename}"] = (data, "application/octet-stream")

    filelock = build_wheel("filelock", FILELOCK, metadata_text("filelock", FILELOCK, []))
    add("/simple/filelock/", f"filelock-{FILELOCK}-py3-none-any.whl", filelock)
    for rel in catalog.releases:
        for var in rel.variants:
            add(f"/whl/{var.name}/filelock/", f"filelock-{FILELOCK}-py3-none-any.whl", filelock)
            for plat in var.platforms:
                torch_v = _local(rel.version, var, plat)
                for python in rel.python.get(plat, ()):
                    meta = metadata_text("torch", torch_v, list(torch_requires))
                    fn = wheel_name("torch", torch_v, str(python), plat)
                    data = build_wheel("torch", torch_v, meta)
                    add(f"/whl/{var.name}/torch/", fn, data)
                    if torch_v == rel.version:  # untagged: the default index has it too
                        add("/simple/torch/", fn, data)
                    if rel.torchvision:
                        tv = _local(rel.torchvision, var, plat)
                        meta = metadata_text("torchvision", tv, [f"torch=={torch_v}"])
                        fn = wheel_name("torchvision", tv, str(python), plat)
                        data = build_wheel("torchvision", tv, meta)
                        add(f"/whl/{var.name}/torchvision/", fn, data)
                        if tv == rel.torchvision:
                            add("/simple/torchvision/", fn, data)
    for page, filename, data in extra:
        add(page, filename, data)
    for page, files in pages.items():
        routes[page] = (_page(files), "text/html")
    return routes


# --- pip, isolated from this machine's configuration -------------------------------------------


def pip_report(
    requirements: Path, platform_args: list[str], python: str, index_url: str | None = None
) -> dict[str, str]:
    """`pip install --dry-run --report -r requirements` for the target: {name: version}."""
    report = requirements.parent / "report.json"
    cp = "cp" + python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    cmd += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    cmd += ["--abi", cp, "--report", str(report), "--target", str(requirements.parent / "t")]
    cmd += [*platform_args, "-r", str(requirements)]
    env = scrubbed_env(**({"PIP_INDEX_URL": index_url} if index_url else {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in data["install"]}
