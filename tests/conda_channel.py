"""A conda channel generated at test time: conda-forge style pytorch builds, no binaries committed.

Packages are real ``.tar.bz2`` archives (``info/index.json``, ``info/files``), indexed by a
hand-written ``repodata.json`` with their md5, sha256 and size, so a solver reads them as it reads
conda-forge: build strings ``cuda129_generic_py312_h0_202`` / ``cpu_generic_py312_h0_2``, CUDA
builds depending on ``__cuda`` and ``cuda-version``, ``cuda-version X.Y`` constraining
``__cuda >=X``, the CUDA 13 build needing ``__glibc >=2.28``.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUBDIRS = ("noarch", "linux-64", "linux-aarch64", "win-64", "osx-arm64")


@dataclass(frozen=True)
class Pkg:
    subdir: str
    name: str
    version: str
    build: str
    build_number: int = 0
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()


def _archive(index: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tf:
        for name, data in (
            ("info/index.json", json.dumps(index, sort_keys=True).encode()),
            ("info/files", b""),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_channel(root: Path, packages: Iterable[Pkg]) -> str:
    """Write the packages and each subdir's repodata.json; the channel's ``file://`` URL."""
    repodata: dict[str, dict[str, Any]] = {
        sub: {"info": {"subdir": sub}, "packages": {}, "packages.conda": {}, "repodata_version": 1}
        for sub in SUBDIRS
    }
    for p in packages:
        index: dict[str, Any] = {
            "name": p.name,
            "version": p.version,
            "build": p.build,
            "build_number": p.build_number,
            "depends": list(p.depends),
            "constrains": list(p.constrains),
            "subdir": p.subdir,
            "license": "BSD-3-Clause",
        }
        if p.subdir == "noarch":
            index["noarch"] = "generic"
        raw = _archive(index)
        filename = f"{p.name}-{p.version}-{p.build}.tar.bz2"
        (root / p.subdir).mkdir(parents=True, exist_ok=True)
        (root / p.subdir / filename).write_bytes(raw)
        repodata[p.subdir]["packages"][filename] = {
            **index,
            "md5": hashlib.md5(raw).hexdigest(),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "size": len(raw),
            "timestamp": 1_700_000_000_000,
        }
    for sub, data in repodata.items():
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / "repodata.json").write_text(json.dumps(data, indent=1, sort_keys=True))
    return root.resolve().as_uri()


def _py(python: str) -> tuple[str, str]:
    """ "3.12" -> ("py312", "python >=3.12,<3.13.0a0")."""
    major, minor = python.split(".")
    return f"py{major}{minor}", f"python >={python},<{major}.{int(minor) + 1}.0a0"


def forge_packages(
    torch: str = "2.12.0",
    torchvision: str = "0.27.0",
    pythons: Sequence[str] = ("3.11", "3.12"),
    cuda: dict[str, Sequence[str]] | None = None,
) -> list[Pkg]:
    """python, pip, cuda-version and pytorch/libtorch/torchvision builds per subdir.

    ``cuda``: subdir -> CUDA versions built there (every subdir also gets the CPU build).
    """
    cuda = cuda if cuda is not None else {"linux-64": ("12.9", "13.0"), "win-64": ("12.8",)}
    pkgs = [
        Pkg("noarch", "pip", "25.2", "pyh0_0", depends=("python >=3.9",)),
    ]
    for version in sorted({v for vs in cuda.values() for v in vs}):
        major = version.split(".")[0]
        pkgs.append(
            Pkg("noarch", "cuda-version", version, "h0_3", 3, constrains=(f"__cuda >={major}",))
        )
    for sub in ("linux-64", "win-64", "osx-arm64"):
        for python in pythons:
            pkgs.append(Pkg(sub, "python", f"{python}.11", "h0_0_cpython"))
        builds: list[tuple[str, int, tuple[str, ...]]] = [("cpu_generic", 2, ())]
        for version in cuda.get(sub, ()):
            cuda_major = int(version.split(".")[0])
            needs = ["__cuda", f"cuda-version >={cuda_major}.0,<{cuda_major + 1}"]
            if sub.startswith("linux") and cuda_major >= 13:
                needs.append("__glibc >=2.28")
            builds.append((f"cuda{version.replace('.', '')}_generic", 202, tuple(needs)))
        for prefix, number, deps in builds:
            lib_build = f"{prefix}_h0_{number}"
            pkgs.append(Pkg(sub, "libtorch", torch, lib_build, number, depends=deps))
            for python in pythons:
                tag, pydep = _py(python)
                build = f"{prefix}_{tag}_h0_{number}"
                pkgs.append(
                    Pkg(
                        sub,
                        "pytorch",
                        torch,
                        build,
                        number,
                        depends=(*deps, f"libtorch =={torch} {lib_build}", pydep),
                    )
                )
                pkgs.append(
                    Pkg(
                        sub,
                        "torchvision",
                        torchvision,
                        f"{prefix}_{tag}_h0_{number}",
                        number,
                        depends=(f"pytorch =={torch} {prefix}*", pydep),
                    )
                )
    return pkgs
