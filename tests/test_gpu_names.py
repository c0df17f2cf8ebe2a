"""Every name nvidia-smi prints: curated records first, then the table generated from pci.ids."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cli_support import run_cli

from resolver import catalog as catalog_mod
from resolver.catalog import Catalog
from resolver.core.errors import DataError, UserError
from resolver.core.hostprofile import GpuInfo, HostProfile
from resolver.db import gpunames
from resolver.host import smi
from resolver.solve.target import target_from_profile

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA GeForce RTX 5090 D", (12, 0)),  # China-market 5090 D, as nvidia-smi prints it
        ("NVIDIA GeForce RTX 5090 D V2", (12, 0)),
        ("nvidia geforce rtx 5090 d", (12, 0)),  # case does not matter
        ("RTX 5090 D", (12, 0)),
        ("NVIDIA GeForce RTX 4090 D", (8, 9)),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", (8, 9)),
        ("NVIDIA GeForce RTX 5070 Ti Laptop GPU", (12, 0)),
        ("NVIDIA GeForce RTX 3050 A Laptop GPU", (8, 9)),  # AD106/AD107, not Ampere
        ("NVIDIA GeForce RTX 2050", (8, 6)),  # GA107
        ("NVIDIA GeForce GTX 1060 with Max-Q Design", (6, 1)),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", (8, 9)),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", (12, 0)),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", (12, 0)),
        ("NVIDIA RTX PRO 5000 Blackwell Generation Laptop GPU", (12, 0)),
        ("NVIDIA RTX 2000E Ada Generation", (8, 9)),
        ("NVIDIA RTX A4500", (8, 6)),
        ("Quadro RTX 8000", (7, 5)),
        ("NVIDIA L20", (8, 9)),
        ("NVIDIA GH200 480GB", (9, 0)),
        ("NVIDIA GB200", (10, 0)),
        ("NVIDIA H100 NVL", (9, 0)),
        ("NVIDIA H100 PCIe", (9, 0)),
        ("NVIDIA A100-SXM4-80GB", (8, 0)),
        ("NVIDIA A100 80GB PCIe", (8, 0)),
        ("Tesla V100S-PCIE-32GB", (7, 0)),
        ("NVIDIA GB10", (12, 1)),
        ("Jetson AGX Orin", (8, 7)),
        # JetPack 6's nvidia-smi (anduril/jetpack-nixos#371, OE4T/linux-tegra-5.10#17)
        ("Orin (nvgpu)", (8, 7)),
        ("Jetson AGX Thor", (11, 0)),
    ],
)
def test_names_as_nvidia_smi_prints_them(shipped: Catalog, name: str, cc: tuple[int, int]) -> None:
    assert shipped.resolve_gpu(name)[0] == cc


def test_table_names_keep_their_own_spelling(shipped: Catalog) -> None:
    assert shipped.resolve_gpu("NVIDIA GeForce RTX 5090 D V2") == (
        (12, 0),
        "NVIDIA GeForce RTX 5090 D V2",
    )
    model = shipped.gpu_by_name("NVIDIA GeForce RTX 5090 D")
    assert model is not None and model.pci_ids == ("0x2b87",)
    assert model.prov.source == (gpunames.TABLE_SOURCE,) and model.prov.grade == "transcription"


def test_the_5090_d_gets_a_blackwell_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys,
        "suggest",
        "--json",
        "--platform",
        "linux-x86_64",
        "--python",
        "3.12",
        "--gpu",
        "NVIDIA GeForce RTX 5090 D",
        "--driver",
        "570.124.04",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert [(g["name"], g["cc"]) for g in doc["target"]["gpus"]] == [
        ("NVIDIA GeForce RTX 5090 D", "12.0")
    ]
    sel = doc["selection"]
    assert (sel["torch"], sel["variant"]) == ("2.11.0", "cu128")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("RTX 4090 banana", "'banana' is not part of the model name"),
        ("NVIDIA GeForce RTX 5090 D banana", "'banana' is not part of the model name"),
        ("NVIDIA GeForce RTX 5090 D V3", "'v3' is not part of the model name"),
        ("NVIDIA GeForce RTX 5090 DD", "'dd' is not part of the model name"),
    ],
)
def test_junk_after_a_name_is_refused(shipped: Catalog, name: str, says: str) -> None:
    with pytest.raises(UserError, match=says) as exc:
        shipped.resolve_gpu(name)
    assert "compute_cap" in str(exc.value)  # and says how to find the CC instead


def test_a_name_of_several_ccs_asks_for_the_cc(shipped: Catalog) -> None:
    # pci.ids: GTX 860M is both GK104 (Kepler) and GM107 (Maxwell)
    with pytest.raises(UserError) as exc:
        shipped.resolve_gpu("NVIDIA GeForce GTX 860M")
    assert "--gpu 3.0 or --gpu 5.0" in str(exc.value)
    assert shipped.gpu_by_name("NVIDIA GeForce GTX 860M") is None


def test_an_unknown_name_says_how_to_pass_the_cc(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "suggest", "--gpu", "NVIDIA Frobnicator 9000", "--driver", "580")
    assert code == 2
    assert "unknown GPU 'NVIDIA Frobnicator 9000'" in err
    assert "--gpu 8.9" in err and "--query-gpu=compute_cap" in err
    assert len(err.strip().splitlines()) == 1


def test_exact_curated_names_never_read_the_table(
    shipped: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path) -> gpunames.NameTable:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(gpunames, "_tables", {})
    monkeypatch.setattr(gpunames, "_read_table", refuse)
    assert shipped.resolve_gpu("NVIDIA GeForce RTX 3090") == ((8, 6), "NVIDIA GeForce RTX 3090")
    with pytest.raises(AssertionError, match="read"):
        shipped.resolve_gpu("NVIDIA GeForce RTX 5090 D")


def test_recorded_nvidia_smi_names_and_pci_ids_agree(shipped: Catalog) -> None:
    """Every GPU of the recorded nvidia-smi output: its name and its PCI id give its own CC."""
    files = [
        FIX / "host" / "h100_driver580" / "smi_query.out",
        FIX / "host" / "transcribed" / "smi_multi_gpu.out",
    ]
    seen = 0
    for path in files:
        _, gpus = smi.parse_query(path.read_text(encoding="utf-8"))
        for gpu in gpus:
            assert gpu.name and gpu.cc and gpu.pci_device_id, path
            cc = tuple(int(p) for p in gpu.cc.split("."))
            assert shipped.resolve_gpu(gpu.name)[0] == cc, gpu.name
            model = shipped.gpu_by_pci_id(gpu.pci_device_id)
            assert model is not None and model.cc == cc, gpu.pci_device_id
            seen += 1
    assert seen == 5


def test_an_old_driver_without_compute_cap_finds_the_cc_by_pci_id(shipped: Catalog) -> None:
    # R470's nvidia-smi has no compute_cap; a name unknown to both tables, a device pci.ids knows
    gpu = GpuInfo(index=0, name="NVIDIA Graphics Device", cc=None, pci_device_id="0x2b87")
    profile = HostProfile(platform="linux-x86_64", python="3.12", driver="570.124.04", gpus=[gpu])
    target = target_from_profile(shipped, profile)
    assert [g.cc for g in target.gpus] == [(12, 0)] and not target.unknown_gpus


def test_the_shipped_table_is_consistent(shipped: Catalog) -> None:
    path = catalog_mod.shipped_data_dir() / gpunames.TABLE_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    table = gpunames._parse_table(doc)
    assert len(table.names) > 400 and len(table.devices) > 700
    for key in table.names:  # keys are what the lookup computes from the key itself
        assert gpunames.table_key(" ".join(key)) == key
    for cc, grade in table.chips.values():
        assert cc in shipped.architectures and grade in ("official", "transcription", "inferred")
    cite = shipped.sources[gpunames.TABLE_SOURCE]
    assert cite["kind"] == "transcription"
    assert doc["source"]["pci_ids_version"] in cite["cite"]
    assert doc["source"]["pci_ids_sha256"] in cite["cite"]


def test_a_damaged_table_beside_a_database_is_a_data_error(
    shipped: Catalog, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    shutil.copytree(catalog_mod.shipped_data_dir(), db)
    (db / gpunames.TABLE_FILE).write_text('{"schema": 1, "chips": [[[[', encoding="utf-8")
    own = catalog_mod.load(db)
    assert own.resolve_gpu("NVIDIA GeForce RTX 3090")[0] == (8, 6)  # exact: the table unread
    with pytest.raises(DataError, match="not a GPU name table"):
        own.resolve_gpu("NVIDIA GeForce RTX 5090 D")


# --- the generator, fed a recorded excerpt of pci.ids --------------------------------------------
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_gpu_names", ROOT / "tools" / "gen_gpu_names.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_gpu_names"] = module
    spec.loader.exec_module(module)
    return module


def test_generator_reads_pci_ids() -> None:
    gen = _generator()
    text = (FIX / "pci_ids" / "pci_ids_2026.10.24_excerpt.ids").read_text(encoding="utf-8")
    header, devices = gen.parse_pci_ids(text)
    assert header == {"Version": "2026.10.24", "Date": "2026-10-24 03:15:02"}
    by_id = {d: (chip, name) for d, chip, name in devices}
    assert by_id["2b87"] == ("GB202", "GeForce RTX 5090 D")
    assert by_id["3200"] == ("GB112", None)
    assert "1aef" not in by_id  # the audio function of a GA102 board
    assert [gen.chip_of(c) for c in ("GA107BM", "GK110BGL", "GB10B", "GB203GLM", "GB112")] == [
        "GA107",
        "GK110B",
        "GB10B",
        "GB203",
        None,
    ]
    table, _ = gen.build(text)
    names = table["names"]
    assert names["rtx 5090 d v2"] == ["GeForce RTX 5090 D V2", ["GB202"], ["2b8c"]]
    assert names["rtx 5090"][1] == ["GB202", "GB203"]  # desktop and "Max-Q / Mobile"
    assert {"quadro rtx 6000", "quadro rtx 8000", "a2", "a16", "945a", "gh200"} <= set(names)
    assert "rtx 2000e ada generation" in names
    assert names["gt 1030"][1] == ["GK107", "GP108"]  # two CCs: the lookup asks
    assert not any("reserved" in k or "nvswitch" in k for k in names)
    assert "3200" not in table["devices"]  # GB112: no known CC
    assert table["source"]["pci_ids_version"] == "2026.10.24"
