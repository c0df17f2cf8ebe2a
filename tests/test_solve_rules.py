"""The solver's rules, each pinned on a small synthetic database."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from target_support import written

from resolver.catalog import Catalog, from_raw
from resolver.core.versions import parse_cc
from resolver.present import findings as words
from resolver.solve import Request, Target, TargetGpu, solve
from resolver.solve.findings import Covered, NoKernels, Reach, ReasonKind


def gpu(cc: str, name: str | None = None) -> TargetGpu:
    return TargetGpu(parse_cc(cc), name)


def linux(*ccs: str, driver: str | None = "580.65.06", python: str = "3.11") -> Target:
    return written("linux-x86_64", python, driver, "linux", tuple(gpu(c) for c in ccs), nvidia=True)


def pick(cat: Catalog, target: Target, **req: object) -> tuple[str, str] | None:
    sel = solve(cat, target, Request(**req)).selection  # type: ignore[arg-type]
    return (sel.release.version, sel.variant.name) if sel else None


def test_newest_torch_then_pypi_build(synth: Catalog) -> None:
    # 2.12.0: cu130 is the PyPI build, cu126 is unconfirmed -> cu130.
    assert pick(synth, linux("8.6")) == ("2.12.0", "cu130")
    # Python 3.10 has no 2.12 wheel: 2.8.0, where the PyPI build cu128 beats the newer-less cu126.
    assert pick(synth, linux("8.6", python="3.10")) == ("2.8.0", "cu128")


def test_sass_same_major_lower_minor(synth: Catalog) -> None:
    dec = solve(synth, linux("8.9"), Request(torch=SpecifierSet("==2.8.0")))
    assert dec.selection is not None
    assert words.coverage(dec.selection.coverage) == ["sm_89: SASS sm_86"]


def test_sass_never_across_majors(synth: Catalog) -> None:
    # 10.0 is not covered by sm_90 SASS: 2.1 cu118 reaches it only through its PTX 9.0.
    dec = solve(synth, linux("10.0"), Request(torch=SpecifierSet("<2.8")))
    assert dec.selection is not None
    assert words.coverage(dec.selection.coverage) == [
        "sm_100: PTX sm_90 (JIT-compiled on first use)"
    ]
    # the decision is data: how the GPU is reached is a field, not a sentence to parse
    assert dec.selection.coverage == (Covered("sm_100", (10, 0), Reach(True, (9, 0))),)
    assert dec.selection.jit
    # 2.8 cu126 has SASS up to sm_90 and no PTX: rejected.
    dec = solve(synth, linux("10.0"), Request(torch=SpecifierSet("==2.8.0"), cuda="12.6"))
    assert dec.selection is None
    (no_kernels,) = {r for c in dec.rejected for r in c.reasons if isinstance(r, NoKernels)}
    assert no_kernels == NoKernels("sm_100", (10, 0), no_kernels.sass, ())
    assert no_kernels.kind is ReasonKind.ARCH
    (cu126,) = [
        c for c in dec.rejected if c.variant.name == "cu126" and c.release.version == "2.8.0"
    ]
    assert [r.kind for r in cu126.reasons] == ["arch"]


def test_ptx_covers_newer_gpu_but_needs_toolkit_driver(synth: Catalog) -> None:
    # 2.1.0 cu118 has PTX 9.0 on Linux: a 10.0 GPU runs it through the JIT...
    # ...which needs CUDA 11.8's own driver (520.61.05), not just the 11.x floor (450.80.02).
    t_ok = linux("10.0", driver="530.30.02")
    assert pick(synth, t_ok, torch=SpecifierSet("==2.1.0")) == ("2.1.0", "cu118")
    t_old = linux("10.0", driver="470.82.01")
    dec = solve(synth, t_old, Request(torch=SpecifierSet("==2.1.0")))
    (cu118,) = [c for c in dec.rejected if c.variant.name == "cu118"]
    assert [r.kind for r in cu118.reasons] == ["driver"]
    assert "520.61.05" in words.reason(cu118.reasons[0])
    assert "PTX JIT" in words.reason(cu118.reasons[0])


def test_tegra_needs_exact_sass(synth: Catalog) -> None:
    # Jetson Orin (8.7) is not covered by desktop sm_80/sm_86 SASS.
    dec = solve(synth, linux("8.7"), Request())
    assert dec.selection is None
    assert all(r.kind in ("arch", "cpu", "unknown") for c in dec.rejected for r in c.reasons)


def test_compat_vs_strict_policy(synth: Catalog) -> None:
    t = linux("8.6", driver="535.104.05")
    # compat: 12.x builds run on >= 525.60.13, so 2.8.0 cu128 (PyPI) wins; 13.0 needs 580.
    assert pick(synth, t) == ("2.8.0", "cu128")
    # strict: cu128 needs 570.26 and cu126 560.28.03; cu118 (520.61.05) is what is left.
    assert pick(synth, t, policy="strict") == ("2.1.0", "cu118")


def test_every_gpu_must_be_covered(synth: Catalog) -> None:
    # A Pascal card beside an RTX 4090: cu128/cu130 lack sm_60, cu126 has it.
    assert pick(synth, linux("6.1", "8.9")) == ("2.8.0", "cu126")


def test_windows_driver_floor_and_unconfirmed_last_resort(synth: Catalog) -> None:
    t = written("windows-x86_64", "3.11", "560.94", "windows", (gpu("8.6"),), nvidia=True)
    dec = solve(synth, t, Request())
    # 2.8.0 cu126 on Windows is unconfirmed: the confirmed 2.1.0 cu118 is chosen, with a hint.
    assert dec.selection is not None
    assert (dec.selection.release.version, dec.selection.variant.name) == ("2.1.0", "cu118")
    assert any("--evidence any" in h for h in words.hints(dec.hints))
    dec = solve(synth, t, Request(allow_unconfirmed=True))
    assert dec.selection is not None and dec.selection.release.version == "2.8.0"
    # Windows floors: 528.33 for 12.x; a 527 Windows driver cannot run cu126.
    t_old = written("windows-x86_64", "3.11", "527.41", "windows", (gpu("8.6"),), nvidia=True)
    assert pick(synth, t_old, allow_unconfirmed=True) == ("2.1.0", "cu118")


def test_gpu_target_never_silently_gets_cpu(synth: Catalog) -> None:
    t = linux("8.6", driver="470.82.01")
    dec = solve(synth, t, Request(torch=SpecifierSet(">=2.8")))
    assert dec.selection is None
    assert dec.cpu_fallback is not None and dec.cpu_fallback.variant.name == "cpu"
    assert any("needs driver >= " in h and "470.82.01" in h for h in words.hints(dec.hints))


def test_driver_upgrade_hint_names_newest_release(synth: Catalog) -> None:
    dec = solve(synth, linux("8.6", driver="570.124.06"), Request())
    assert dec.selection is not None and dec.selection.release.version == "2.8.0"
    assert any(h.startswith("torch 2.12.0 needs driver >= 580 ") for h in words.hints(dec.hints))


def test_no_gpu_target_gets_cpu(synth: Catalog) -> None:
    t = written("linux-x86_64", "3.11")
    assert pick(synth, t) == ("2.12.0", "cpu")
    # ...unless a CUDA version is pinned explicitly (building an image on a GPU-less machine).
    assert pick(synth, t, cuda="12.6") == ("2.12.0", "cu126")


def test_companions_same_variant_and_torchaudio_end(synth: Catalog) -> None:
    spec = SpecifierSet()
    dec = solve(synth, linux("8.6"), Request(companions=(("torchaudio", spec),)))
    assert dec.selection is not None
    assert dict(dec.selection.packages) == {"torch": "2.8.0+cu128", "torchaudio": "2.8.0+cu128"}
    assert any("held back by the companions" in h for h in words.hints(dec.hints))


def test_no_driver_given_states_need(synth: Catalog) -> None:
    dec = solve(synth, linux("8.6", driver=None), Request())
    assert dec.selection is not None and dec.selection.variant.name == "cu130"
    assert any("no driver given" in h and "580" in h for h in words.hints(dec.hints))


def test_cuda_11_0_runs_on_its_own_older_driver(synth_raw: dict[str, object]) -> None:
    cat = from_raw(synth_raw)
    # 11.0's own minimum (450.51.05) is below the 11.x floor (450.80.02): the lower one counts.
    assert str(cat.compat_min_driver("11.0", "linux")) == "450.51.05"
    assert str(cat.compat_min_driver("11.8", "linux")) == "450.80.02"
    assert str(cat.compat_min_driver("13.0", "linux")) == "580"


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("Tesla V100-SXM2-32GB", (7, 0)),
        ("NVIDIA GeForce RTX 4090", (8, 9)),
        ("NVIDIA H100 80GB HBM3", (9, 0)),
        ("sm_86", (8, 6)),
        ("12.0", (12, 0)),
    ],
)
def test_gpu_spec_resolution(synth: Catalog, name: str, cc: tuple[int, int]) -> None:
    assert synth.resolve_gpu(name)[0] == cc


def test_native_kernels_before_ptx_jit(synth: Catalog) -> None:
    # sm_100: 2.1 cu118 reaches it only by PTX (confirmed), 2.8 cu128 natively.
    dec = solve(synth, linux("10.0", driver="580.65.06", python="3.10"), Request())
    assert dec.selection is not None and dec.selection.variant.name == "cu128"
    assert not dec.selection.jit


def test_driver_hint_only_when_the_upgrade_changes_the_answer(synth: Catalog) -> None:
    # Windows: the newer builds are unconfirmed, so a driver upgrade alone changes nothing.
    t = written("windows-x86_64", "3.11", "527.41", "windows", (gpu("8.6"),), nvidia=True)
    dec = solve(synth, t, Request())
    assert dec.selection is not None and dec.selection.release.version == "2.1.0"
    assert not any("needs driver" in h for h in words.hints(dec.hints))


def test_arch_hint_not_when_a_driver_upgrade_would_do(synth: Catalog) -> None:
    # sm_120 on R570: 2.12 cu130 has its kernels but needs 580; no "no kernels" hint for 2.12.
    dec = solve(synth, linux("12.0", driver="570.124.06"), Request())
    assert dec.selection is not None and dec.selection.release.version == "2.8.0"
    assert any(h.startswith("torch 2.12.0 needs driver >= 580") for h in words.hints(dec.hints))
    assert not any("no kernels" in h for h in words.hints(dec.hints))


def test_python_hint_for_a_too_new_python(synth: Catalog) -> None:
    hints = words.hints(solve(synth, linux("8.6", python="3.13t"), Request()).hints)
    assert "torch 2.12.0 has no wheel for Python 3.13t on linux-x86_64 (it has 3.11, 3.12)" in hints
    assert not any("needs Python" in h for h in hints)
    hints = words.hints(solve(synth, linux("8.6", python="3.9"), Request()).hints)
    assert "torch 2.12.0 needs Python 3.11+ (this target has 3.9)" in hints
