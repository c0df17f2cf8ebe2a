"""The gates that decide an extension build (issue 38), each on the recorded facts of
data/extensions.yaml: an import-time torch check (torchao), the CUDA runtime its libraries link
and its loader's rule (bitsandbytes), the image the CUDA runtime loads (.nv_fatbin), a kernel
ceiling the package enforces (xformers), and the C++ ABI of each torch build (flash-attn)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from cli_support import run_cli

from resolver import catalog
from resolver.core.platforms import BY_NAME, PythonVersion
from resolver.core.versions import cc_str
from resolver.db.models import Ceiling
from resolver.db.torchabi import uses_cxx11
from resolver.present.ext_words import misfit
from resolver.solve.extensions import Place, choose
from resolver.solve.findings import Gate, Reach

H100 = ["--gpu", "H100", "--driver", "580.65.06", "--python", "3.12"]


def suggest(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _err = run_cli(capsys, "suggest", "--json", *args)
    return code, json.loads(out)


def extension(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = next(e for e in doc["selection"]["extensions"] if e["package"] == name)
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize(("torch", "want"), [("2.10.0", "0.16.0"), ("2.11.0", "0.18.0")])
def test_torchao_release_for_the_torch_its_import_names(
    capsys: pytest.CaptureFixture[str], torch: str, want: str
) -> None:
    """torchao 0.16.0's __init__ loads its kernels only with torch 2.10.0, 0.17/0.18's only with
    2.11.0 or later: a pinned torch 2.10.0 gets 0.16.0 (it got 0.18.0, whose kernels it skips)."""
    code, doc = suggest(capsys, *H100, "--torch", f"=={torch}", "--with", "torchao")
    assert code == 0 and doc["selection"]["torch"] == torch
    assert extension(doc, "torchao")["version"] == want


def test_torchao_import_gate_is_recorded_as_read() -> None:
    pkg = catalog.load().extensions["torchao"]
    gates = {
        rel.version: {b.import_gate.torch for b in rel.builds if b.import_gate}
        for rel in pkg.releases
    }
    gates = {v: g for v, g in gates.items() if g}
    assert gates == {
        "0.18.0": {">=2.11.0"},
        "0.17.0": {">=2.11.0"},
        "0.16.0": {"==2.10.0"},
        # the history's, read from each wheel's __init__.py table
        "0.15.0": {"==2.9.1"},
        "0.14.1": {"==2.9.0"},
        # from the sources at the release commits (build-config): 0.14.0's check names no
        # released torch for it, 0.13.0 is built against 2.8.0 (its check is no table)
        "0.14.0": {"<0"},
        "0.13.0": {"==2.8.0"},
    }
    old = next(r for r in pkg.releases if r.version == "0.16.0")
    gated = next(b for b in old.builds if b.import_gate)
    assert set(gated.platforms) == {"linux-x86_64"}  # the abi3 wheel: the pure one has no kernels
    assert gated.import_gate is not None and gated.import_gate.prov.grade == "observed"


def test_a_pinned_old_torchao_names_its_import_gate(capsys: pytest.CaptureFixture[str]) -> None:
    """--explain and the hint name the gate, and the JSON carries it as data."""
    code, doc = suggest(capsys, *H100, "--with", "torchao==0.16.0")
    assert code == 0 and doc["selection"]["torch"] == "2.10.0"
    assert any(
        "torchao 0.16.0 loads its kernels only with torch 2.10.0 (its own import check" in h
        for h in doc["hints"]
    )
    held = [c for c in doc["rejected"] if c["torch"] == "2.11.0"]
    gates = [g for c in held for g in c["gates"]]
    assert gates and {g["gate"] for g in gates} == {"import"}
    assert gates[0]["values"]["gate"] == "==2.10.0" and gates[0]["version"] == "0.16.0"
    code, out, _ = run_cli(
        capsys, "suggest", *H100, "--with", "torchao==0.16.0", "--explain", "2.11.0+cu130"
    )
    assert "FAIL packages: torchao 0.16.0 loads its kernels only with torch 2.10.0" in out


def test_bitsandbytes_loader_takes_the_nearest_library_of_the_major(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bitsandbytes 0.50.2 has no CUDA 12.9 library; its loader (cextension.py) takes 12.8, so a
    cu129 torch runs it (it was refused: "has no library for CUDA 12.9")."""
    code, doc = suggest(capsys, *H100, "--cuda", "12.9", "--with", "bitsandbytes")
    assert code == 0 and doc["selection"]["variant"] == "cu129"
    bnb = extension(doc, "bitsandbytes")
    assert (bnb["version"], bnb["cuda"], bnb["cuda_match"]) == ("0.50.2", "12.8", "nearest")
    assert bnb["coverage"][0].startswith("loads its CUDA 12.8 library (none for 12.9")


def test_bitsandbytes_loader_never_crosses_a_major() -> None:
    cat = catalog.load()
    rel = next(r for r in cat.releases if r.version == "2.9.0")
    var = next(v for v in rel.variants if v.name == "cu130")
    newest = cat.extensions["bitsandbytes"].releases[0]
    only12 = newest._replace(builds=tuple(b for b in newest.builds if b.cudart != 13))
    pkg = cat.extensions["bitsandbytes"]._replace(releases=(only12,))
    narrowed = dataclasses.replace(cat, extensions={"bitsandbytes": pkg})
    place = Place(BY_NAME["linux-x86_64"], PythonVersion.parse("3.12"), (((9, 0), "H100"),))
    got, miss, _ = choose(
        narrowed, place, rel, var, "bitsandbytes", None, lambda a, cc: Reach(False, cc)
    )
    assert got is None and miss is not None
    assert miss.gate is Gate.CUDART  # its libraries link libcudart.so.11 or .12
    assert "which a cu130 torch build does not bring" in misfit(miss)


def test_bitsandbytes_facts_read_from_the_loaded_image() -> None:
    """No PTX: bitsandbytes 0.50.x's PTX sits only in __nv_relfatbin, never loaded; each library
    links the CUDA runtime of its own major."""
    from packaging.version import Version

    for rel in catalog.load().extensions["bitsandbytes"].releases:
        for b in rel.builds:  # the loader's fallback came with 0.50.0 (the history: exact)
            new = Version(rel.version) >= Version("0.50.0")
            major = int((b.cuda or "0").split(".")[0])
            assert b.cuda_match == ("nearest" if new else "exact")
            # the history's CUDA 11 libraries link cuBLAS only (no libcudart.so.11): none said
            assert b.cudart == major or (not new and b.cudart is None and major == 11)
            for arch in b.platforms.values():
                assert arch is not None and arch.ptx == () and arch.sass


def test_cudart_of_another_major_does_not_load() -> None:
    """A library that needs libcudart.so.12 does not load with a CUDA 13 torch build."""
    cat = catalog.load()
    xf = cat.extensions["xformers"].releases[0]
    build = dataclasses.replace(xf.builds[0], cudart=12, cuda_match="any")
    pkg = cat.extensions["xformers"]._replace(releases=(xf._replace(builds=(build,)),))
    narrowed = dataclasses.replace(cat, extensions={"xformers": pkg})
    rel = next(r for r in cat.releases if r.version == "2.11.0")
    var = next(v for v in rel.variants if v.name == "cu130")
    place = Place(BY_NAME["linux-x86_64"], PythonVersion.parse("3.12"), (((9, 0), "H100"),))
    got, miss, _ = choose(
        narrowed, place, rel, var, "xformers", None, lambda a, cc: Reach(False, cc)
    )
    assert got is None and miss is not None and miss.gate is Gate.CUDART
    assert "libcudart.so.12" in misfit(miss)


def test_xformers_ceiling_says_what_runs_on_blackwell(capsys: pytest.CaptureFixture[str]) -> None:
    """xformers' own attention kernels refuse CC above 9.0: on an RTX 5090 its PTX 8.0 is never
    run; the coverage says what runs instead (PyTorch's flash kernels), graded."""
    rtx5090 = ["--gpu", "RTX 5090", "--driver", "570.86.16", "--python", "3.12"]
    code, doc = suggest(capsys, *rtx5090, "--with", "xformers")
    assert code == 0
    (how,) = extension(doc, "xformers")["coverage"]
    assert "its own kernels refuse CC above 9.0" in how and "PTX 8.0" not in how
    assert "PyTorch's own flash kernels" in how and how.endswith("(observed)")
    code, doc = suggest(capsys, *H100, "--with", "xformers")
    assert extension(doc, "xformers")["coverage"] == ["sm_90 (NVIDIA H100): SASS sm_90"]


def test_a_ceiling_without_fallback_refuses_the_gpu() -> None:
    cat = catalog.load()
    xf = cat.extensions["xformers"].releases[0]
    top = xf.builds[0].ceiling
    assert top is not None and cc_str(top.cc) == "9.0" and top.prov.grade == "observed"
    build = dataclasses.replace(xf.builds[0], ceiling=Ceiling(top.cc, None, top.prov))
    pkg = cat.extensions["xformers"]._replace(releases=(xf._replace(builds=(build,)),))
    narrowed = dataclasses.replace(cat, extensions={"xformers": pkg})
    rel = next(r for r in cat.releases if r.version == "2.11.0")
    var = next(v for v in rel.variants if v.name == "cu128")
    place = Place(BY_NAME["linux-x86_64"], PythonVersion.parse("3.12"), (((12, 0), "5090"),))
    got, miss, _ = choose(
        narrowed, place, rel, var, "xformers", None, lambda a, cc: Reach(True, cc)
    )
    assert got is None and miss is not None and miss.gate is Gate.CEILING
    assert miss.value("ceiling") == "9.0"


@pytest.mark.parametrize(("cuda", "abi"), [("12.6", "TRUE"), ("12.4", "FALSE")])
def test_flash_attn_abi_per_torch_build(
    capsys: pytest.CaptureFixture[str], cuda: str, abi: str
) -> None:
    """torch 2.6.0+cu126 uses the C++11 ABI (the 2.6 release notes), 2.6.0+cu124 the old one:
    each gets flash-attn's wheel of its own ABI (cu126 got cxx11abiFALSE, an undefined symbol)."""
    code, doc = suggest(capsys, *H100, "--torch", "==2.6.0", "--cuda", cuda, "--with", "flash-attn")
    assert code == 0
    assert f"cxx11abi{abi}-cp312" in extension(doc, "flash-attn")["requirement"]


def test_torch_abi_is_decided_per_build() -> None:
    cat = catalog.load()
    since, builds = cat.cxx11_since, cat.cxx11_builds
    assert uses_cxx11(since, builds, "2.6.0", "cu126", "linux-x86_64") is True
    assert uses_cxx11(since, builds, "2.6.0", "cu124", "linux-x86_64") is False
    assert uses_cxx11(since, builds, "2.6.0", "cpu", "linux-aarch64") is True
    assert uses_cxx11(since, builds, "2.5.1", "cu124", "linux-x86_64") is False
    assert uses_cxx11(since, builds, "2.7.0", "cu118", "linux-x86_64") is True
    assert uses_cxx11(None, (), "2.7.0", "cu118", "linux-x86_64") is None


def test_db_show_names_the_gates(capsys: pytest.CaptureFixture[str]) -> None:
    with_ = ("--with", "torchao", "--with", "xformers", "--with", "bitsandbytes")
    code, out, _ = run_cli(capsys, "db", "show", *with_)
    assert code == 0
    lines = {ln.split(":")[0].strip(): ln for ln in out.splitlines() if ln.startswith("  ")}
    assert lines["torchao 0.16.0"].endswith("its import loads its kernels with torch ==2.10.0")
    assert lines["xformers 0.0.35"].endswith("its kernels refuse CC above 9.0")
    assert (
        "links libcudart.so.11/12/13; its loader takes the nearest" in lines["bitsandbytes 0.50.2"]
    )
