"""GPU model names: how a ``--gpu`` value or an nvidia-smi name finds its compute capability.

Names are compared as lower-case words without the brand words ("NVIDIA GeForce RTX 3090" is
"rtx 3090"). Two places know names: the curated records of ``gpus.yaml`` (graded, preferred)
and the name table ``gpu_names.json``, generated from the PCI ID database by
``tools/gen_gpu_names.py`` (every NVIDIA device with its chip code; the chip code gives the
CC). The table is read only when the curated records cannot answer by themselves, so the usual
exact name costs nothing. The words nvidia-smi appends for the board (form factor, memory) may
follow a model's name; anything else is an unknown GPU rather than a wrong guess.

No ``from __future__ import annotations``: typing.NamedTuple would compile each string
annotation on every start (see db/models.py).
"""

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from resolver.core.errors import DataError, UserError
from resolver.core.versions import CC, cc_str, parse_cc
from resolver.core.vocab import Grade
from resolver.db.evidence import weakest
from resolver.db.location import shipped_data_dir


class _Gpu(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def cc(self) -> CC: ...


class GpuTable(Protocol):
    """What the lookups read of a Catalog (models.py imports this module, not the reverse)."""

    @property
    def origin(self) -> str: ...
    @property
    def gpus(self) -> Sequence[_Gpu]: ...
    @property
    def architectures(self) -> Mapping[CC, object]: ...
    @property
    def name_index(self) -> Mapping[tuple[str, ...], _Gpu]: ...
    def gpu_by_name(self, name: str) -> _Gpu | None: ...


TABLE_FILE = "gpu_names.json"
TABLE_SCHEMA = 1
TABLE_SOURCE = "PCI_IDS_DEBIAN"  # the sources.yaml key the generated table cites
_TABLE_LIMIT = 4 * 1024 * 1024  # the shipped table is about 150 KB
_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce"})
_WORD_RE = re.compile(r"[a-z0-9]+")
# What a described --gpu name may hold.
_GPU_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()/+-]{0,99}$")
# The words nvidia-smi (and pci.ids) add after a model's name for the board: form factor, memory,
# mobile part, driver: "Tesla V100-SXM2-32GB", "H100 80GB HBM3", "RTX 4090 Laptop GPU",
# "1050 Ti Max-Q", "GTX 1060 with Max-Q Design", "Orin (nvgpu)" (JetPack 6's nvidia-smi).
# Patterns as text, compiled by `re` (and cached there) when first matched: only a name with
# words after a model's needs them, and compiling them cost every start ~0.3 ms.
BOARD_WORD = (
    r"^([0-9]+gb|[0-9]+g|sxm[0-9]*|pcie|pci|e|nvl|hbm[0-9]*e?|laptop|mobile|notebook|gpu|max|q|oem|dgx|lhr"
    r"|[0-9]+w|with|design|nvgpu)$"
)
# After a curated name also the variant words of the same chip generation ("RTX 4080 SUPER").
_NAME_SUFFIX = BOARD_WORD[:-2] + r"|ti|super|generation)$"
_FIND_CC = "`nvidia-smi --query-gpu=compute_cap --format=csv` prints it"


def name_words(name: str) -> tuple[str, ...]:
    """A GPU name's words, lower case, without "NVIDIA", "Tesla" or "GeForce": the one
    normaliser every GPU name is compared by (the name table, the peak-speed table)."""
    return tuple(w for w in _WORD_RE.findall(name.lower()) if w not in _NOISE_WORDS)


def table_key(name: str) -> tuple[str, ...]:
    """A name's key in the name table: its words without the board words that end it."""
    words = list(name_words(name))
    while words and re.match(BOARD_WORD, words[-1]):
        words.pop()
    return tuple(words)


# --- the generated name table ------------------------------------------------------------------
class TableEntry(NamedTuple):
    name: str  # pci.ids' spelling: "GeForce RTX 5090 D"
    chips: tuple[str, ...]  # chip codes the name is used for: ("GB202",)
    devices: tuple[str, ...]  # PCI device ids: ("0x2b87",)


class NameTable(NamedTuple):
    names: dict[tuple[str, ...], TableEntry]
    chips: dict[str, tuple[CC, str]]  # chip code -> (CC, grade of the chip's CC)
    devices: dict[str, tuple[str, str]]  # "0x2b87" -> (chip code, name or "")
    version: str  # the pci.ids version the table was generated from

    def ccs(self, chips: tuple[str, ...]) -> tuple[CC, ...]:
        return tuple(sorted({self.chips[c][0] for c in chips}))

    def grade(self, chips: tuple[str, ...]) -> str:
        """A name's CC: pci.ids names the chip (a transcription), the chip's CC is graded apart."""
        return weakest(["transcription", *(self.chips[c][1] for c in chips)])


_tables: dict[Path, NameTable] = {}
_paths: dict[str, Path] = {}  # a database's origin -> the table it uses (looked up once)


def name_table(catalog: GpuTable) -> NameTable:
    """The name table beside the catalog's database, else the shipped one (each read once, and
    each database's choice made once: a 10,000-machine fleet looks names up 10,000 times)."""
    path = _paths.get(catalog.origin)
    if path is None:
        path = shipped_data_dir() / TABLE_FILE
        if catalog.origin and not catalog.origin.startswith("<"):
            own = Path(catalog.origin) / TABLE_FILE
            if own.is_file():
                path = own
        _paths[catalog.origin] = path
    table = _tables.get(path)
    if table is None:
        table = _tables[path] = _read_table(path)
    return table


def _read_table(path: Path) -> NameTable:
    try:
        if path.resolve() == (shipped_data_dir() / TABLE_FILE).resolve():
            data: Any = json.loads(path.read_bytes())  # ours, generated
        else:  # another database's: bounded in size and nesting like any file read back
            from resolver.io.bounded import load_json

            data = load_json(path, limit=_TABLE_LIMIT, what="a GPU name table")
        return _parse_table(data)
    except (OSError, UserError, ValueError, TypeError, KeyError, AttributeError) as exc:
        detail = " ".join(str(exc).split())[:160]
        raise DataError(f"{path}: not a GPU name table ({detail})") from None


def _parse_table(data: Any) -> NameTable:
    """Check every value of the table (a damaged or hostile file is an error, not a guess).

    The patterns are compiled here, not on import: only an uncurated name reads the table."""
    key_re = re.compile(r"^[a-z0-9]{1,20}( [a-z0-9]{1,20}){0,15}$")
    chip_re = re.compile(r"^[A-Z][A-Z0-9]{1,9}$")
    device_re = re.compile(r"^[0-9a-f]{4}$")
    text_re = re.compile(r"^[ -~]{0,120}$")  # printable ASCII: names are shown
    if data.get("schema") != TABLE_SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r}, expected {TABLE_SCHEMA}")
    version = str(data["source"]["pci_ids_version"])
    chips: dict[str, tuple[CC, str]] = {}
    for chip, (cc, grade) in data["chips"].items():
        if not chip_re.match(chip) or grade not in (
            Grade.OFFICIAL,
            Grade.TRANSCRIPTION,
            Grade.INFERRED,
        ):
            raise ValueError(f"chip {chip!r}")
        chips[chip] = (parse_cc(cc), grade)
    devices: dict[str, tuple[str, str]] = {}
    for device, (chip, name) in data["devices"].items():
        if not device_re.match(device) or chip not in chips or not text_re.match(name):
            raise ValueError(f"device {device!r}")
        devices["0x" + device] = (chip, name)
    names: dict[tuple[str, ...], TableEntry] = {}
    for key, (name, entry_chips, entry_devices) in data["names"].items():
        if not key_re.match(key) or not text_re.match(name) or not entry_chips:
            raise ValueError(f"name {key!r}")
        if any(c not in chips for c in entry_chips) or any(
            "0x" + d not in devices for d in entry_devices
        ):
            raise ValueError(f"name {key!r}: unknown chip or device")
        names[tuple(key.split())] = TableEntry(
            name, tuple(entry_chips), tuple("0x" + d for d in entry_devices)
        )
    return NameTable(names, chips, devices, version)


# --- lookups -----------------------------------------------------------------------------------
class NameMatch(NamedTuple):
    """What a name resolved to: a curated record, or a name-table entry (one CC or several)."""

    name: str  # the record's name, or the table's with "NVIDIA " before it
    ccs: tuple[CC, ...]  # more than one: pci.ids uses the name for chips of different CCs
    extra: tuple[str, ...]  # the query's words after the matched name
    model: _Gpu | None  # the curated record; None for a table entry
    devices: tuple[str, ...] = ()  # a table entry's PCI device ids
    grade: str = "transcription"  # a table entry's grade (see data/SCHEMA.md)

    @property
    def kind(self) -> str:
        return "geforce" if self.name.startswith("NVIDIA GeForce") else "other"


def _longest(index: Mapping[tuple[str, ...], Any], words: tuple[str, ...]) -> int:
    """How many leading words of ``words`` form the longest name in ``index`` (0: none)."""
    for end in range(len(words), 0, -1):
        if words[:end] in index:
            return end
    return 0


def find(catalog: GpuTable, name: str) -> NameMatch | None:
    """The longest known name whose words begin ``name``'s; a curated record wins a tie.

    The name table is consulted only when the curated records leave words over (a variant such
    as "RTX 5090 D", a board suffix) or know no such name.
    """
    words = name_words(name)
    index = catalog.name_index
    curated = _longest(index, words)
    model = index[words[:curated]] if curated else None
    if curated == len(words) and model is not None:
        return NameMatch(model.name, (model.cc,), (), model)
    table = name_table(catalog)
    found = _longest(table.names, words)
    if found > curated:
        entry = table.names[words[:found]]
        return _table_match(table, entry, words[found:])
    if model is None:
        return None
    return NameMatch(model.name, (model.cc,), words[curated:], model)


def _table_match(table: NameTable, entry: TableEntry, extra: tuple[str, ...]) -> NameMatch:
    ccs = table.ccs(entry.chips)
    return NameMatch(
        "NVIDIA " + entry.name, ccs, extra, None, entry.devices, table.grade(entry.chips)
    )


def find_pci_id(catalog: GpuTable, device_id: str) -> NameMatch | None:
    """A PCI device id ("0x2b87") the name table knows: its chip gives the CC."""
    table = name_table(catalog)
    wanted = device_id.lower()
    hit = table.devices.get(wanted)
    if hit is None:
        return None
    chip, name = hit
    return _table_match(table, TableEntry(name or f"{chip} GPU", (chip,), (wanted,)), ())


def close_names(catalog: GpuTable, name: str, n: int = 5) -> list[str]:
    """Up to ``n`` known names that look like ``name``, for a "did you mean" hint."""
    import difflib

    names = {" ".join(name_words(g.name)): g.name for g in catalog.gpus}
    for key, entry in name_table(catalog).names.items():
        names.setdefault(" ".join(key), "NVIDIA " + entry.name)
    query = " ".join(name_words(name))
    hits = difflib.get_close_matches(query, list(names), n=n, cutoff=0.5)
    return [names[h] for h in hits]


def resolve_gpu(catalog: GpuTable, spec: str) -> tuple[CC, str | None]:
    """A --gpu value: "8.6", "sm_86" or a model name -> (CC, model name or None)."""
    text = spec.strip()
    if re.fullmatch(r"(?i)(sm_|compute_)?[0-9]+(\.[0-9])?[af]?", text):
        cc = parse_cc(text)
        if cc not in catalog.architectures and text.isdigit():  # "4090": a model's number
            return resolve_gpu(catalog, _numbered_model(catalog, text))
        if cc not in catalog.architectures:
            known = ", ".join(cc_str(c) for c in sorted(catalog.architectures))
            raise UserError(f"unknown compute capability {cc_str(cc)} (known: {known})")
        return cc, None
    if not _GPU_NAME_RE.match(text):
        raise UserError(
            f"unknown GPU {text[:60]!r}: a model name has letters, digits, spaces and "
            "- . _ ( ) / + only (or give its compute capability, e.g. --gpu 8.6)"
        )
    hit = find(catalog, text)
    if hit is None:
        close = close_names(catalog, text)
        hint = f"; did you mean: {', '.join(_with_cc(catalog, c) for c in close)}?" if close else ""
        raise UserError(
            f"unknown GPU {text!r}{hint} (otherwise pass its compute capability, "
            f"e.g. --gpu 8.9; {_FIND_CC})"
        )
    junk = [w for w in hit.extra if not re.match(_NAME_SUFFIX, w)]
    if junk:  # "RTX 4090 foo" is not an RTX 4090 with a form factor or memory size
        raise UserError(
            f"unknown GPU {text!r}: {' '.join(junk)!r} is not part of the model name "
            f"{hit.name!r} (form factors and memory sizes such as SXM4, PCIe, 80GB are); "
            f"give its compute capability instead ({_FIND_CC})"
        )
    if len(hit.ccs) > 1:
        options = " or ".join(f"--gpu {cc_str(c)}" for c in hit.ccs)
        raise UserError(
            f"GPU {text!r}: the name {hit.name!r} is used for chips of different compute "
            f"capabilities; give yours: {options} ({_FIND_CC})"
        )
    cc = hit.ccs[0]
    if cc not in catalog.architectures:
        raise UserError(
            f"GPU {text!r} has compute capability {cc_str(cc)}, unknown to the database"
        )
    return cc, hit.name


def _numbered_model(catalog: GpuTable, number: str) -> str:
    """The one model a bare number names ("4090": the RTX 4090, not its variants such as the
    RTX 4090 D): the known names up to that number; a number that names none, or several models
    ("6000": Quadro RTX 6000, RTX 6000 Ada, RTX PRO 6000; exit 2, listing them), is an error."""
    keys = {name_words(g.name) for g in catalog.gpus} | set(name_table(catalog).names)
    found: dict[str, str] = {}  # the model's name -> the words to resolve it by
    ccs: set[tuple[CC, ...]] = set()
    for key in keys:
        if number in key:
            model = key[: key.index(number) + 1]
            hit = find(catalog, " ".join(model)) or find(catalog, " ".join(key))
            if hit is not None:
                found.setdefault(hit.name, " ".join(model if hit.extra == () else key))
                ccs.add(hit.ccs)
    if len(found) == 1 or (found and len(ccs) == 1 and len(next(iter(ccs))) == 1):
        return found[min(found, key=len)]  # one model, or its variants ("GTX 2080 ES"): one CC
    if found:
        listed = ", ".join(_with_cc(catalog, n) for n in sorted(found)[:8])
        raise UserError(
            f"GPU {number!r} is no compute capability and names several models: {listed}; "
            'give the model name (e.g. --gpu "RTX 4090") or the compute capability'
        )
    raise UserError(
        f"GPU {number!r} is neither a known compute capability (e.g. 8.6, sm_86) nor the number "
        f"of a GPU model (e.g. 4090 for the RTX 4090); {_FIND_CC} for a GPU"
    )


def _with_cc(catalog: GpuTable, name: str) -> str:
    hit = find(catalog, name)
    return f"{name} ({cc_str(hit.ccs[0])})" if hit is not None and len(hit.ccs) == 1 else name
