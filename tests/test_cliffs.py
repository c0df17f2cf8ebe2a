"""Resolution across the support cliffs of 2025–26, on the shipped database.

Each case is a real machine shape; the expectation follows from sourced facts in data/ (the
comment names the cliff). A database edit that moves one of these answers must be deliberate.
"""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from target_support import written

from resolver.catalog import Catalog
from resolver.db.check import check as db_check
from resolver.present import findings as words
from resolver.solve import Decision, Request, Target, TargetGpu, solve


def target(
    catalog: Catalog,
    *gpus: str,
    driver: str | None,
    python: str = "3.12",
    platform: str = "linux-x86_64",
) -> Target:
    resolved = tuple(TargetGpu(*catalog.resolve_gpu(g)) for g in gpus)
    driver_os = "windows" if platform.startswith("windows") else "linux"
    return written(platform, python, driver, driver_os, resolved, nvidia=bool(resolved))


def chosen(dec: Decision) -> tuple[str, str] | None:
    sel = dec.selection
    return (sel.release.version, sel.variant.name) if sel else None


def test_hopper_on_driver_580_gets_newest_pypi_build(shipped: Catalog) -> None:
    dec = solve(shipped, target(shipped, "NVIDIA H200", driver="580.159.04"), Request())
    assert chosen(dec) == ("2.15.0", "cu132")
    assert dec.selection is not None and dec.selection.variant.cudnn is not None
    assert dec.selection.variant.cudnn.version == "9.26.0.51"


def test_cuda13_needs_driver_580(shipped: Catalog) -> None:
    # An H100 on R570: every cu13x build is out; the newest cu12x build wins, with an upgrade hint.
    dec = solve(shipped, target(shipped, "NVIDIA H100 80GB HBM3", driver="570.124.06"), Request())
    assert dec.selection is not None
    assert dec.selection.variant.cuda is not None and dec.selection.variant.cuda.startswith("12.")
    assert any(h.startswith("torch 2.15.0 needs driver >= 580") for h in words.hints(dec.hints))
    for rej in dec.rejected:
        if rej.variant.name in ("cu130", "cu132") and rej.release.version == "2.15.0":
            assert any("needs driver >= 580" in words.reason(r) for r in rej.reasons)


def test_blackwell_needs_cuda_12_8(shipped: Catalog) -> None:
    # RTX 5090 (sm_120): no cu126 build has Blackwell kernels.
    dec = solve(shipped, target(shipped, "NVIDIA GeForce RTX 5090", driver="575.64"), Request())
    assert dec.selection is not None and dec.selection.variant.cuda is not None
    assert tuple(map(int, dec.selection.variant.cuda.split("."))) >= (12, 8)
    cu126 = [c for c in dec.rejected if c.variant.name == "cu126" and c.release.version == "2.8.0"]
    assert cu126 and any(r.kind == "arch" for r in cu126[0].reasons)
    # B200 (sm_100) likewise.
    dec = solve(shipped, target(shipped, "NVIDIA B200", driver="570.124.06"), Request())
    assert dec.selection is not None and dec.selection.variant.name in ("cu128", "cu129")


def test_cu128_disappears_after_2_11(shipped: Catalog) -> None:
    # Blackwell on R575: CUDA 13 is out of reach, and cu128 ends with 2.11, so 2.11 is the ceiling.
    dec = solve(
        shipped,
        target(shipped, "NVIDIA GeForce RTX 5090", driver="575.64"),
        Request(allow_unconfirmed=True),
    )
    assert chosen(dec) == ("2.11.0", "cu128")
    assert not any(r.variant.name == "cu128" and r.release.key >= (2, 12) for r in dec.rejected)


def test_volta_dropped_by_cuda_13(shipped: Catalog) -> None:
    dec = solve(shipped, target(shipped, "Tesla V100-SXM2-32GB", driver="580.95.05"), Request())
    sel = dec.selection
    assert sel is not None and sel.variant.cuda is not None and sel.variant.cuda < "13"
    v13 = [c for c in dec.rejected if c.variant.name == "cu130" and c.release.version == "2.11.0"]
    assert v13 and [r.kind for r in v13[0].reasons] == ["arch"]
    assert any("no kernels for sm_70" in h for h in words.hints(dec.hints))


def test_pascal_gets_the_newest_documented_cu126(shipped: Catalog) -> None:
    t = target(shipped, "NVIDIA GeForce GTX 1080 Ti", driver="560.35.03", python="3.11")
    dec = solve(shipped, t, Request())
    # cu128+ dropped sm_50/sm_60; cu126 kept sm_60 SASS (which runs on sm_61) up to 2.14,
    # documented by PyTorch's build config and the 2.14 RFC: no last resort needed.
    assert chosen(dec) == ("2.14.1", "cu126")
    assert dec.selection is not None and dec.selection.evidence in ("build-config", "official")


def test_maxwell_without_driver_states_the_need(shipped: Catalog) -> None:
    dec = solve(shipped, target(shipped, "5.2", driver=None, python="3.11"), Request())
    assert dec.selection is not None and dec.selection.variant.name in (
        "cu118",
        "cu121",
        "cu124",
        "cu126",
    )
    assert any(h.startswith("no driver given") for h in words.hints(dec.hints))


def test_python_3_10_dropped_in_2_15(shipped: Catalog) -> None:
    dec = solve(shipped, target(shipped, "9.0", driver="580.65.06", python="3.10"), Request())
    assert dec.selection is not None and dec.selection.release.version.startswith("2.14.")
    assert "torch 2.15.0 needs Python 3.11+ (this target has 3.10)" in words.hints(dec.hints)


def test_windows_driver_floors(shipped: Catalog) -> None:
    # R527 Windows is below the 12.x floor (528.33): only CUDA 11.x builds run.
    t = target(shipped, "8.6", driver="527.41", platform="windows-x86_64")
    dec = solve(shipped, t, Request(allow_unconfirmed=True))
    assert dec.selection is not None and dec.selection.variant.cuda is not None
    assert dec.selection.variant.cuda.startswith("11.")
    t = target(shipped, "8.6", driver="528.33", platform="windows-x86_64")
    dec = solve(shipped, t, Request(allow_unconfirmed=True))
    assert dec.selection is not None and dec.selection.variant.cuda is not None
    assert dec.selection.variant.cuda.startswith("12.")


def test_aarch64_gb10_vs_jetson(shipped: Catalog) -> None:
    gb10 = target(shipped, "NVIDIA GB10", driver="580.95.05", platform="linux-aarch64")
    dec = solve(shipped, gb10, Request())
    assert chosen(dec) == ("2.15.0", "cu132")  # sm_121 runs sm_120 SASS
    orin = target(shipped, "Jetson AGX Orin", driver="540.4.0", platform="linux-aarch64")
    dec = solve(shipped, orin, Request())
    assert dec.selection is None
    assert dec.cpu_fallback is not None and dec.cpu_fallback.variant.name == "cpu"
    assert any("Tegra" in h for h in words.hints(dec.hints))


def test_mixed_box_needs_a_build_for_every_gpu(shipped: Catalog) -> None:
    # A V100 beside an RTX 5090: sm_70 and sm_120 both in cu128 2.8–2.10 only.
    t = target(shipped, "Tesla V100-PCIE-16GB", "NVIDIA GeForce RTX 5090", driver="580.95.05")
    dec = solve(shipped, t, Request())
    assert dec.selection is not None and dec.selection.variant.name in ("cu128", "cu129")
    assert len(dec.selection.coverage) == 2


def test_torchaudio_ends_at_2_11(shipped: Catalog) -> None:
    t = target(shipped, "9.0", driver="580.65.06")
    dec = solve(shipped, t, Request(companions=(("torchaudio", SpecifierSet()),)))
    assert dec.selection is not None and dec.selection.release.version == "2.11.0"
    assert dict(dec.selection.packages)["torchaudio"] == "2.11.0+cu130"


def test_torchvision_pairs_on_same_variant(shipped: Catalog) -> None:
    t = target(shipped, "8.6", driver="560.35.03", python="3.12")
    dec = solve(
        shipped,
        t,
        Request(torch=SpecifierSet("==2.8.*"), companions=(("torchvision", SpecifierSet()),)),
    )
    assert dec.selection is not None
    assert dict(dec.selection.packages) == {"torch": "2.8.0+cu128", "torchvision": "0.23.0+cu128"}


def test_gpu_less_host_gets_cpu(shipped: Catalog) -> None:
    dec = solve(shipped, written("linux-x86_64", "3.12"), Request())
    assert chosen(dec) == ("2.15.0", "cpu")
    mac = solve(shipped, written("macos-arm64", "3.12"), Request())
    assert mac.selection is not None and dict(mac.selection.packages) == {"torch": "2.15.0"}


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("Tesla V100-SXM2-32GB", (7, 0)),
        ("NVIDIA GeForce RTX 4090", (8, 9)),
        ("NVIDIA H200", (9, 0)),
        ("NVIDIA A100-SXM4-80GB", (8, 0)),
        ("Quadro RTX 6000", (7, 5)),
        ("NVIDIA RTX 6000 Ada Generation", (8, 9)),
        ("NVIDIA RTX A6000", (8, 6)),
        ("NVIDIA GeForce GTX 1080 Ti", (6, 1)),
        ("NVIDIA GeForce RTX 5090", (12, 0)),
        ("NVIDIA B200", (10, 0)),
        ("Tesla T4", (7, 5)),
        ("NVIDIA GB10", (12, 1)),
    ],
)
def test_nvidia_smi_names_resolve(shipped: Catalog, name: str, cc: tuple[int, int]) -> None:
    assert shipped.resolve_gpu(name)[0] == cc


def test_shipped_database_is_consistent(shipped: Catalog) -> None:
    assert db_check(shipped) == []
    versions = {r.version for r in shipped.releases}
    for minor in range(16):
        assert any(v.startswith(f"2.{minor}.") for v in versions), f"no torch 2.{minor}"
