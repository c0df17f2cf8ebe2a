"""The cross-record consistency rules of ``gpuresolve db check`` (and of ``db update``).

Loading (resolver/db/parse.py) already rejects what is malformed within one record; these rules
look across records and files: every source key known and its grade supported, every CUDA
version a known toolkit, every compute capability a known architecture, nothing listed twice.
"""

from __future__ import annotations

import re
from typing import Any

from resolver.core.platforms import PLATFORMS
from resolver.core.versions import cc_str, cuda_key
from resolver.db.evidence import GRADES, Provenance
from resolver.db.models import Catalog, CondaForge, Release, Variant


def check(catalog: Catalog) -> list[str]:
    """Cross-record rules of ``db check``; returns the problems (empty when consistent)."""
    problems: list[str] = []
    len(catalog.extensions)  # loaded first: their sources join catalog.sources (db/extdefer)

    def prov_ok(where: str, prov: Provenance) -> None:
        if not prov.source:
            problems.append(f"{where}: no source")
            return
        missing = [s for s in prov.source if s not in catalog.sources]
        if missing:
            problems.append(f"{where}: unknown source key(s) {', '.join(missing)}")
        elif prov.declared is not None and prov.declared != prov.grade:
            problems.append(
                f"{where}: grade {prov.declared} but its best source supports only {prov.supported}"
            )
        for c in prov.contradicts:
            unknown = [s for s in c.source if s not in catalog.sources]
            if not c.source or unknown:
                problems.append(
                    f"{where}: contradiction {c.value!r} needs known source keys"
                    + (f" (unknown: {', '.join(unknown)})" if unknown else "")
                )

    for src_key, src in catalog.sources.items():
        if not str(src.get("cite") or "").strip():
            problems.append(f"sources.yaml {src_key}: no cite")
        kind = src.get("kind")
        if kind is None and not isinstance(src.get("primary"), bool):
            problems.append(f"sources.yaml {src_key}: no kind ({', '.join(GRADES)})")
        elif kind is not None and kind not in GRADES:
            problems.append(f"sources.yaml {src_key}: kind {kind!r} is not one of the grades")
    for v, tk in catalog.toolkits.items():
        prov_ok(f"cuda.yaml toolkit {v}", tk.prov)
    for m, fl in catalog.compat_floors.items():
        prov_ok(f"cuda.yaml minor_version_compat {m}", fl.prov)
    previous = None
    for wb in catalog.windows_branches:
        prov_ok(f"cuda.yaml windows_driver_branches R{wb.branch}", wb.prov)
        if previous is not None and wb.first <= previous.last:
            problems.append(
                f"cuda.yaml windows_driver_branches R{wb.branch}: Windows numbers from {wb.first} "
                f"overlap R{previous.branch}'s (up to {previous.last})"
            )
        if wb.first.branch < wb.branch:
            problems.append(
                f"cuda.yaml windows_driver_branches R{wb.branch}: {wb.first} is below the branch"
            )
        previous = wb
    for arch in catalog.architectures.values():
        prov_ok(f"gpus.yaml architecture {cc_str(arch.cc)}", arch.prov)
        if arch.drivers is not None:
            prov_ok(f"gpus.yaml architecture {cc_str(arch.cc)} drivers", arch.drivers.prov)
    seen: set[str] = set()
    for gpu in catalog.gpus:
        prov_ok(f"gpus.yaml gpu {gpu.name!r}", gpu.prov)
        if gpu.cc not in catalog.architectures:
            problems.append(f"gpus.yaml gpu {gpu.name!r}: CC {cc_str(gpu.cc)} not in architectures")
        if gpu.name in seen:
            problems.append(f"gpus.yaml gpu {gpu.name!r}: listed twice")
        seen.add(gpu.name)
    versions: set[str] = set()
    for rel in catalog.releases:
        where = f"torch.yaml {rel.version}"
        if rel.version in versions:
            problems.append(f"{where}: listed twice")
        versions.add(rel.version)
        prov_ok(where, rel.prov)
        if rel.python_prov is not None:
            prov_ok(f"{where} python", rel.python_prov)
        for comp, cprov in rel.companion_prov.items():
            prov_ok(f"{where} {comp}", cprov)
        if rel.torchvision is None:
            problems.append(f"{where}: no torchvision pairing")
        if rel.torchaudio is None and rel.key < (2, 12):
            problems.append(f"{where}: no torchaudio pairing (torchaudio exists up to 2.11)")
        if not rel.variants:
            problems.append(f"{where}: no variants")
        for plat in rel.python:
            if plat not in PLATFORMS:
                problems.append(f"{where}: unknown platform {plat!r} in python")
        names = [v.name for v in rel.variants]
        for twice in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"{where}: variant {twice} listed twice")
        for var in rel.variants:
            _check_variant(catalog, f"{where} {var.name}", var, rel, prov_ok, problems)
    if catalog.conda_forge is not None:
        _check_conda_forge(catalog, catalog.conda_forge, prov_ok, problems)
    if catalog.extensions:
        from resolver.db.extensions import check_extensions

        problems.extend(check_extensions(catalog, prov_ok))
    return problems


def _check_conda_forge(catalog: Catalog, cf: CondaForge, prov_ok: Any, problems: list[str]) -> None:
    prov_ok("conda_forge.yaml builds", cf.prov)
    seen_arch: set[int] = set()
    versions: set[str] = set()
    for rel in cf.releases:
        where = f"conda_forge.yaml {rel.version}"
        if rel.version in versions:
            problems.append(f"{where}: listed twice")
        versions.add(rel.version)
        prov_ok(where, rel.prov)
        for plat, builds in rel.builds.items():
            cudas = [b.cuda for b in builds]
            if len(set(cudas)) != len(cudas):
                problems.append(f"{where} {plat}: a CUDA version listed twice")
            for b in builds:
                if b.cuda is not None and b.cuda not in catalog.toolkits:
                    problems.append(f"{where} {plat}: CUDA {b.cuda} not in cuda.yaml toolkits")
                if b.arch is None or id(b.arch) in seen_arch:
                    continue
                seen_arch.add(id(b.arch))
                prov_ok(f"{where} {plat} CUDA {b.cuda} arch list", b.arch.prov)
                for cc in (*b.arch.sass, *b.arch.ptx):
                    if cc not in catalog.architectures:
                        problems.append(f"{where} {plat}: CC {cc_str(cc)} not in architectures")


def _check_variant(
    catalog: Catalog, where: str, var: Variant, rel: Release, prov_ok: Any, problems: list[str]
) -> None:
    prov_ok(where, var.prov)
    if var.kind == "cuda":
        if var.cuda is None or var.cuda not in catalog.toolkits:
            problems.append(f"{where}: CUDA {var.cuda} not in cuda.yaml toolkits")
        for label, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
            if pinned is not None and pinned.version is not None:
                prov_ok(f"{where} {label}", pinned.prov)
        tag = re.fullmatch(r"cu([0-9]+)([0-9])", var.name)
        if tag and var.cuda is not None and cuda_key(var.cuda) != (int(tag[1]), int(tag[2])):
            problems.append(f"{where}: a {var.name} build must be CUDA {tag[1]}.{tag[2]}")
    elif var.cuda is not None:
        problems.append(f"{where}: a {var.kind} build names CUDA {var.cuda}")
    for plat, arch in var.platforms.items():
        if plat not in PLATFORMS:
            problems.append(f"{where}: unknown platform {plat!r}")
        if plat not in rel.python:
            problems.append(f"{where}: built for {plat} but no Python versions listed for it")
        if arch is None or var.kind != "cuda":
            continue
        prov_ok(f"{where} {plat} arch list", arch.prov)
        if arch.ptx_prov is not None:
            prov_ok(f"{where} {plat} PTX list", arch.ptx_prov)
        for cc in (*arch.sass, *arch.ptx):
            if cc not in catalog.architectures:
                problems.append(f"{where} {plat}: CC {cc_str(cc)} not in architectures")
    for plat in var.pypi:
        if plat not in var.platforms:
            problems.append(f"{where}: pypi names {plat} but the variant is not built for it")
