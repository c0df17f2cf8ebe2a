"""Generate data/gpu_names.json: every NVIDIA GPU name of the PCI ID database, with its CC.

The PCI ID database (pci.ids, https://pci-ids.ucw.cz/, packaged by Debian as `pci.ids` and
`hwdata`) names each NVIDIA device with its chip code and marketing name:
``2b87  GB202 [GeForce RTX 5090 D]``. The chip code gives the compute capability through
CHIPS below (NVIDIA states CCs per product; which chip a product uses comes from pci.ids). Each
chip's CC is checked against the curated records of data/gpus.yaml: a chip whose product NVIDIA
lists (an `official` record) is graded `official`, else the grade of its best record, else
`inferred`; a chip that two or more records contradict and none confirms stops the run
(a single contradicting record is reported: the curated record wins at lookup).

Run from the repository root whenever pci.ids has a new version (gpuresolve never imports this):

    apt-get install pci.ids            # or hwdata; any pci.ids file will do
    python tools/gen_gpu_names.py /usr/share/misc/pci.ids --package "pci.ids 0.0~2026.10.24-1"

then update the PCI_IDS_DEBIAN entry of data/sources.yaml (version, package, sha256) and run
the tests (tests/test_gpu_names.py checks the table against the lookup rules).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver import catalog as catalog_mod  # noqa: E402
from resolver.core.versions import cc_str  # noqa: E402
from resolver.db import gpunames  # noqa: E402
from resolver.db.evidence import rank  # noqa: E402

# Chip code -> CC, Kepler to Blackwell. Source: NVIDIA's CUDA GPUs pages (CC per product:
# sources.yaml CUDA_GPUS, CUDA_LEGACY_GPUS, OLD_CUDA_GPUS_COPY) joined with the chip code pci.ids
# gives those products, as collected in the shared reference nvidia_tables.yaml `arch_names`
# ("GA100 (8.0), GA10x (8.6)", "GB100/GB102 (10.0), GB110 (10.3)", "GB202..GB207 (12.0), GB20B
# (12.1)", "GB10B (11.0)"). Chips pci.ids names without a known CC (GB112, GB120, GR100,
# GR102) are left out: their names stay unknown rather than guessed.
CHIPS: dict[str, str] = {
    **dict.fromkeys(["GK104", "GK106", "GK107"], "3.0"),
    **dict.fromkeys(["GK110", "GK110B", "GK180", "GK208", "GK208B"], "3.5"),
    "GK210": "3.7",
    **dict.fromkeys(["GM107", "GM108"], "5.0"),
    **dict.fromkeys(["GM200", "GM204", "GM206"], "5.2"),
    "GP100": "6.0",
    **dict.fromkeys(["GP102", "GP104", "GP106", "GP107", "GP108"], "6.1"),
    "GV100": "7.0",
    **dict.fromkeys(["TU102", "TU104", "TU106", "TU116", "TU117"], "7.5"),
    "GA100": "8.0",
    **dict.fromkeys(["GA102", "GA103", "GA104", "GA106", "GA107"], "8.6"),
    **dict.fromkeys(["AD102", "AD103", "AD104", "AD106", "AD107"], "8.9"),
    "GH100": "9.0",
    **dict.fromkeys(["GB100", "GB102"], "10.0"),
    "GB110": "10.3",
    "GB10B": "11.0",
    **dict.fromkeys(["GB202", "GB203", "GB205", "GB206", "GB207"], "12.0"),
    "GB20B": "12.1",
}
# What pci.ids appends to a chip code for a board kind: GL workstation, M mobile, B a variant.
_CHIP_SUFFIXES = ("GLM", "GL", "BM", "M")
_DEVICE_LINE = re.compile(r"^\t([0-9a-f]{4})  (.+)$")
_DEVICE_TEXT = re.compile(r"^(\S+)(?: / \S+)?(?:\s+\[(.+)\])?$")
_NOT_A_PRODUCT = re.compile(r"(?i)reserved dev|initial dev|\bint sku\b|nvswitch")  # not GPUs


def chip_of(code: str) -> str | None:
    """ "GA107BM" -> "GA107"; "GK110BGL" -> "GK110B"; a chip of no known CC -> None."""
    if code in CHIPS:
        return code
    for suffix in _CHIP_SUFFIXES:
        if code.endswith(suffix) and code[: -len(suffix)] in CHIPS:
            return code[: -len(suffix)]
    return None


def _expand_slashes(tokens: list[str]) -> list[list[str]]:
    """ "Quadro RTX 6000/8000" -> "Quadro RTX 6000", "Quadro RTX 8000" (at most 8 spellings)."""
    choices = [t.split("/") if "/" in t else [t] for t in tokens]
    return [list(c) for c in itertools.islice(itertools.product(*choices), 8)]


def spellings(text: str) -> list[str]:
    """The names one pci.ids bracket stands for.

    "GeForce RTX 4080 Max-Q / Mobile" -> "... Max-Q", "... Mobile"; "A2 / A16" -> "A2", "A16";
    "GeForce 945M / 945A" -> "GeForce 945M", "GeForce 945A"; "GH200 120GB / 480GB". A later
    part is read both as a name of its own and as replacing the end of the first part (its board
    words, else its last word); readings that make no sense produce keys nobody types.
    """
    text = text.replace("Geforce", "GeForce")
    out: list[str] = []
    parts = [p.split() for p in text.split(" / ")]
    base = parts[0]
    for part in parts:
        for tokens in _expand_slashes(part):
            out.append(" ".join(tokens))
            if part is base or len(base) < 2:
                continue
            keep = len(base) - 1
            if gpunames.table_key(tokens[0]) == ():  # "Max-Q": replaces the base's board words
                while keep > 1 and gpunames.table_key(base[keep - 1]) == ():
                    keep -= 1
            for head in _expand_slashes(base[:keep]):
                out.append(" ".join(head + tokens))
    # "RTX Spark N1X (6144-core Blackwell RTX GPU)": also without the parenthesis
    out += [re.sub(r"\s*\(.*?\)", "", s) for s in out if "(" in s]
    return list(dict.fromkeys(out))


def _display(spelling: str) -> str:
    """ "A100 SXM4 40GB" -> "A100": the spelling without the board words that end it."""
    tokens = spelling.split()
    while len(tokens) > 1 and gpunames.table_key(tokens[-1]) == ():
        tokens.pop()
    return " ".join(tokens)


def parse_pci_ids(text: str) -> tuple[dict[str, str], list[tuple[str, str, str | None]]]:
    """The header (Version, Date) and vendor 10de's devices as (device id, chip code, name)."""
    header = dict(re.findall(r"(?m)^#\s*(Version|Date):\s*(.+?)\s*$", text[:2000]))
    devices: list[tuple[str, str, str | None]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("10de "):
            inside = True
            continue
        if inside and line and not line.startswith(("\t", "#")):
            break  # the next vendor
        m = _DEVICE_LINE.match(line) if inside else None
        if m is None:
            continue
        text_m = _DEVICE_TEXT.match(m.group(2))
        if text_m is None:  # audio, USB, bridges: "TU102 High Definition Audio Controller"
            continue
        devices.append((m.group(1), text_m.group(1), text_m.group(2)))
    return header, devices


def build(text: str) -> tuple[dict[str, object], list[str]]:
    """The table, and the report lines (chip grades, disagreements with gpus.yaml)."""
    header, devices = parse_pci_ids(text)
    shipped = catalog_mod.load(catalog_mod.shipped_data_dir())
    names: dict[tuple[str, ...], tuple[str, set[str], set[str]]] = {}
    poisoned: set[tuple[str, ...]] = set()  # also used for chips of no known CC
    table_devices: dict[str, tuple[str, str]] = {}
    for device, code, bracket in devices:
        chip = chip_of(code)
        if chip is not None:
            name = bracket if bracket and not _NOT_A_PRODUCT.search(bracket) else ""
            table_devices[device] = (chip, name.split(" / ")[0] if name else "")
        if not bracket or _NOT_A_PRODUCT.search(bracket):
            continue
        for spelling in spellings(bracket):
            key = gpunames.table_key(spelling)
            if not key or (len(key) == 1 and not re.search(r"\d", key[0])):
                continue  # "Max-Q" alone, "Quadro": no model
            if chip is None:
                poisoned.add(key)
                continue
            entry = names.setdefault(key, (_display(spelling), set(), set()))
            entry[1].add(chip)
            entry[2].add(device)
    for key in poisoned:
        names.pop(key, None)
    report: list[str] = []
    chip_grades = _grade_chips(shipped, names, report)
    for key, (spelling, chips, _) in sorted(names.items()):
        ccs = {CHIPS[c] for c in chips}
        record = shipped.name_index.get(key)
        if record is not None and {cc_str(record.cc)} != ccs:
            report.append(
                f"note: {spelling!r} is {'/'.join(sorted(ccs))} by chip, "
                f"{cc_str(record.cc)} in gpus.yaml (the curated record wins)"
            )
    table: dict[str, object] = {
        "schema": gpunames.TABLE_SCHEMA,
        "about": "generated by tools/gen_gpu_names.py from pci.ids; do not edit",
        "source": {
            "key": gpunames.TABLE_SOURCE,
            "pci_ids_version": header.get("Version", "unknown"),
            "pci_ids_date": header.get("Date", "unknown"),
            "pci_ids_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        },
        "chips": {c: [CHIPS[c], chip_grades[c]] for c in sorted(CHIPS)},
        "devices": dict(sorted(table_devices.items())),
        "names": {
            " ".join(key): [spelling, sorted(chips), sorted(devs)]
            for key, (spelling, chips, devs) in sorted(names.items())
        },
    }
    return table, report


def _grade_chips(
    shipped: catalog_mod.Catalog,
    names: dict[tuple[str, ...], tuple[str, set[str], set[str]]],
    report: list[str],
) -> dict[str, str]:
    """Each chip's CC checked against the curated records of its products; its grade."""
    votes: dict[str, list[tuple[str, str]]] = defaultdict(list)  # chip -> (cc, grade) per record
    for key, (_, chips, _) in names.items():
        record = shipped.name_index.get(key)
        if record is None or len({CHIPS[c] for c in chips}) != 1:
            continue  # a name of chips of different CCs ("GTX 750 Ti") anchors none of them
        for chip in chips:
            votes[chip].append((cc_str(record.cc), record.prov.grade))
    grades: dict[str, str] = {}
    for chip, cc in sorted(CHIPS.items()):
        agree = [g for c, g in votes[chip] if c == cc]
        disagree = [c for c, _ in votes[chip] if c != cc]
        if len(disagree) > 1 and not agree:  # the chip's CC here is wrong, not one record
            raise SystemExit(f"{chip}: CC {cc} here, {sorted(set(disagree))} in gpus.yaml")
        grades[chip] = min(agree, key=rank) if agree else "inferred"
        if grades[chip] == "observed":
            grades[chip] = "official"  # a record observed on a GPU still names one product
        report.append(f"{chip}: {cc} {grades[chip]} ({len(agree)} records agree)")
    return grades


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pci_ids", type=Path, help="a pci.ids file")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / gpunames.TABLE_FILE)
    parser.add_argument("--package", default="", help="where pci.ids came from, for the record")
    args = parser.parse_args()
    text = args.pci_ids.read_text(encoding="utf-8")
    table, report = build(text)
    if args.package:
        table["source"]["package"] = args.package  # type: ignore[index]
    body = json.dumps(table, ensure_ascii=True, separators=(",", ":"), sort_keys=False)
    args.out.write_text(body + "\n", encoding="utf-8")
    print("\n".join(report), file=sys.stderr)
    names = table["names"]
    print(f"{args.out}: {len(names)} names, {len(table['devices'])} devices")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
