"""Load and validate the compatibility database (``data/*.yaml``) into typed records.

Loading checks structure (one clear error naming the file and the record); ``check()`` adds the
cross-file consistency rules that ``gpuresolve db check`` enforces. The solver only ever sees the
typed records, never raw YAML.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from resolver.db import cache as _cache
from resolver.db import location as _location
from resolver.db.evidence import GRADES, Contradiction, Provenance, make_provenance, source_kind
from resolver.errors import DataError, UserError
from resolver.versions import CC, cc_str, cuda_key, driver_key, parse_cc

PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64")
FILES = ("sources.yaml", "cuda.yaml", "gpus.yaml", "torch.yaml")
OPTIONAL_FILES = ("conda_forge.yaml", "observations.yaml")  # read where present
DATA_ENV = _location.DATA_ENV
_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce"})
_WORD_RE = re.compile(r"[a-z0-9]+")
# What a described --gpu name may hold, and the words nvidia-smi adds after a model's name
# (form factor, memory, variant of the board): "Tesla V100-SXM2-32GB", "H100 80GB HBM3".
_GPU_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()/+-]{0,99}$")
_NAME_SUFFIX_RE = re.compile(
    r"^(\d+gb|\d+g|sxm\d*|pcie|pci|e|nvl|hbm\d*e?|laptop|mobile|notebook|gpu|max|q|oem|dgx|lhr|\d+w"
    r"|ti|super|generation)$"
)
_PYTHON_RE = re.compile(r"^3\.\d+t?$")  # "3.12", "3.13t" (free-threaded)


__all__ = ["Contradiction", "Provenance"]  # re-exported: they live in resolver.db.evidence


class DriverWindow(NamedTuple):
    """Which driver branches drive GPUs of an architecture at all (major numbers, inclusive)."""

    first: int | None  # None: no edge known
    last: int | None  # None: still supported
    prov: Provenance


@dataclass(frozen=True)
class Toolkit:
    version: str
    min_driver: Mapping[str, str | None]  # "linux" / "windows" -> version or None (unknown)
    prov: Provenance


@dataclass(frozen=True)
class CompatFloor:
    major: int
    min_driver: Mapping[str, str | None]
    prov: Provenance


@dataclass(frozen=True)
class Architecture:
    cc: CC
    name: str
    tegra: bool
    prov: Provenance
    drivers: DriverWindow | None = None


@dataclass(frozen=True)
class GpuModel:
    name: str
    cc: CC
    kind: str
    pci_ids: tuple[str, ...]
    aliases: tuple[str, ...]
    prov: Provenance


@dataclass(frozen=True)
class ArchList:
    """The kernels compiled into a build for one platform."""

    sass: tuple[CC, ...]
    ptx: tuple[CC, ...]
    prov: Provenance
    ptx_prov: Provenance | None = None  # None: the same as the SASS list's

    @property
    def ptx_provenance(self) -> Provenance:
        return self.ptx_prov or self.prov


@dataclass(frozen=True)
class Pinned:
    """A library version a build ships with (cuDNN, NCCL)."""

    version: str | None
    prov: Provenance


@dataclass(frozen=True)
class Variant:
    name: str  # cpu | cu126 | rocm6.4 | xpu
    cuda: str | None
    cudnn: Pinned | None
    nccl: Pinned | None
    pypi: frozenset[str]  # platforms whose Python Package Index wheel is this build
    platforms: Mapping[str, ArchList | None]  # platform -> arch list (None: unknown)
    prov: Provenance

    @property
    def kind(self) -> str:
        """cpu, cuda, rocm or xpu: only cpu and cuda get solver logic."""
        if self.name == "cpu":
            return "cpu"
        if self.name.startswith("cu"):
            return "cuda"
        return "rocm" if self.name.startswith("rocm") else "xpu"


@dataclass(frozen=True)
class Release:
    version: str
    minor: str
    date: str | None
    python: Mapping[str, tuple[str, ...]]  # platform -> CPython versions with wheels
    torchvision: str | None
    torchaudio: str | None
    variants: tuple[Variant, ...]
    prov: Provenance
    companion_prov: Mapping[str, Provenance] = field(
        default_factory=dict
    )  # where not the release's
    companion_untagged: frozenset[str] = frozenset()  # py3-none wheels: no +cuXYZ tag
    python_prov: Provenance | None = None  # the Python tags' own sources (None: the release's)

    @cached_property
    def key(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    def companion(self, name: str) -> str | None:
        if name == "torchvision":
            return self.torchvision
        if name == "torchaudio":
            return self.torchaudio
        raise UserError(f"unknown companion package {name!r} (torchvision or torchaudio)")


@dataclass(frozen=True)
class CondaBuild:
    """One conda-forge build of a release on one platform: its CUDA (None: CPU), its kernels."""

    cuda: str | None
    arch: ArchList | None
    glibc: str | None  # the lowest glibc it needs on Linux, when above conda-forge's 2.17


@dataclass(frozen=True)
class CondaRelease:
    version: str
    python: tuple[str, ...]
    builds: Mapping[str, tuple[CondaBuild, ...]]  # platform -> its builds
    prov: Provenance


@dataclass(frozen=True)
class CondaForge:
    """conda-forge's own PyTorch builds (``conda_forge.yaml``), for conda environments."""

    channel: str  # a channel name ("conda-forge")
    package: str  # "pytorch"
    cuda_string: str  # build-string prefix of a CUDA build: "cuda{major}{minor}"
    cpu_string: str  # of a CPU build: "cpu"
    cuda_package: str  # the package pinned to the CUDA version: "cuda-version"
    releases: tuple[CondaRelease, ...]  # newest first
    prov: Provenance

    def build_prefix(self, cuda: str | None) -> str:
        """ "12.9" -> "cuda129"; None -> "cpu": what a build string starts with."""
        if cuda is None:
            return self.cpu_string
        major, _, minor = cuda.partition(".")
        return self.cuda_string.format(major=major, minor=minor or "0")


@dataclass
class Catalog:
    """The whole database, indexed for the solver and the CLI."""

    sources: Mapping[str, Mapping[str, Any]]
    toolkits: Mapping[str, Toolkit]
    compat_floors: Mapping[int, CompatFloor]
    architectures: Mapping[CC, Architecture]
    gpus: tuple[GpuModel, ...]
    releases: tuple[Release, ...]  # newest first
    index_url_template: str
    origin: str = "<memory>"
    updated: str | None = None
    conda_forge: CondaForge | None = None  # conda_forge.yaml, where the database has one
    _name_index: dict[tuple[str, ...], GpuModel] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for gpu in self.gpus:
            for spelling in (gpu.name, *gpu.aliases):
                self._name_index.setdefault(_name_words(spelling), gpu)

    # --- lookups -----------------------------------------------------------------------------
    def index_url(self, variant: str) -> str:
        return self.index_url_template.format(variant=variant)

    def release(self, version: str) -> Release | None:
        return next((r for r in self.releases if r.version == version), None)

    def is_tegra(self, cc: CC) -> bool:
        arch = self.architectures.get(cc)
        return bool(arch and arch.tegra)

    def gpu_by_name(self, name: str) -> GpuModel | None:
        """Longest database name whose words begin the query's ("Tesla V100-SXM2-32GB")."""
        words = _name_words(name)
        for end in range(len(words), 0, -1):
            hit = self._name_index.get(words[:end])
            if hit is not None:
                return hit
        return None

    def gpu_by_pci_id(self, device_id: str) -> GpuModel | None:
        wanted = device_id.lower()
        return next((g for g in self.gpus if wanted in g.pci_ids), None)

    def close_gpu_names(self, name: str, n: int = 5) -> list[str]:
        import difflib

        names = {g.name: " ".join(_name_words(g.name)) for g in self.gpus}
        query = " ".join(_name_words(name))
        hits = difflib.get_close_matches(query, list(names.values()), n=n, cutoff=0.5)
        by_norm = {v: k for k, v in names.items()}
        return [by_norm[h] for h in hits]

    def resolve_gpu(self, spec: str) -> tuple[CC, str | None]:
        """A --gpu value: "8.6", "sm_86" or a model name -> (CC, model name or None)."""
        text = spec.strip()
        if re.fullmatch(r"(?i)(sm_|compute_)?\d+(\.\d)?[af]?", text):
            cc = parse_cc(text)
            if cc not in self.architectures:
                known = ", ".join(cc_str(c) for c in sorted(self.architectures))
                raise UserError(f"unknown compute capability {cc_str(cc)} (known: {known})")
            return cc, None
        if not _GPU_NAME_RE.match(text):
            raise UserError(
                f"unknown GPU {text[:60]!r}: a model name has letters, digits, spaces and "
                "- . _ ( ) / + only (or give its compute capability, e.g. 8.6)"
            )
        gpu = self.gpu_by_name(text)
        if gpu is not None:
            extra = _name_words(text)[len(_name_words(gpu.name)) :]
            junk = [w for w in extra if not _NAME_SUFFIX_RE.match(w)]
            if junk:  # "RTX 4090 foo" is not an RTX 4090 with a form factor or memory size
                raise UserError(
                    f"unknown GPU {text!r}: {' '.join(junk)!r} is not part of the model name "
                    f"{gpu.name!r} (form factors and memory sizes such as SXM4, PCIe, 80GB are)"
                )
        if gpu is None:
            close = self.close_gpu_names(text)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise UserError(
                f"unknown GPU {text!r}{hint} (or give its compute capability, e.g. 8.6)"
            )
        return gpu.cc, gpu.name

    def toolkit_min_driver(self, cuda: str, driver_os: str) -> str | None:
        tk = self.toolkits.get(cuda)
        return tk.min_driver.get(driver_os) if tk else None

    def compat_min_driver(self, cuda: str, driver_os: str) -> str | None:
        """The lowest driver a build of this CUDA version runs on under minor-version compat.

        The major's floor, unless the toolkit itself shipped with an older driver (CUDA 11.0).
        """
        own = self.toolkit_min_driver(cuda, driver_os)
        floor = self.compat_floors.get(cuda_key(cuda)[0])
        floor_v = floor.min_driver.get(driver_os) if floor else None
        if floor_v is None:
            return own
        if own is None:
            return floor_v
        return own if driver_key(own) < driver_key(floor_v) else floor_v

    def driver_max_cuda(self, driver: str, driver_os: str) -> str | None:
        """Highest CUDA whose toolkit minimum driver this driver meets (what nvidia-smi shows)."""
        have = driver_key(driver)
        best: str | None = None
        for version, tk in self.toolkits.items():
            need = tk.min_driver.get(driver_os)
            if (
                need is not None
                and tk.prov.confirmed
                and driver_key(need) <= have
                and (best is None or cuda_key(version) > cuda_key(best))
            ):
                best = version
        return best

    # --- consistency -------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Cross-record rules of ``db check``; returns the problems (empty when consistent)."""
        problems: list[str] = []

        def prov_ok(where: str, prov: Provenance) -> None:
            if not prov.source:
                problems.append(f"{where}: no source")
                return
            missing = [s for s in prov.source if s not in self.sources]
            if missing:
                problems.append(f"{where}: unknown source key(s) {', '.join(missing)}")
            elif prov.declared is not None and prov.declared != prov.grade:
                problems.append(
                    f"{where}: grade {prov.declared} but its best source supports only "
                    f"{prov.supported}"
                )
            for c in prov.contradicts:
                unknown = [s for s in c.source if s not in self.sources]
                if not c.source or unknown:
                    problems.append(
                        f"{where}: contradiction {c.value!r} needs known source keys"
                        + (f" (unknown: {', '.join(unknown)})" if unknown else "")
                    )

        for src_key, src in self.sources.items():
            if not str(src.get("cite") or "").strip():
                problems.append(f"sources.yaml {src_key}: no cite")
            kind = src.get("kind")
            if kind is None and not isinstance(src.get("primary"), bool):
                problems.append(f"sources.yaml {src_key}: no kind ({', '.join(GRADES)})")
            elif kind is not None and kind not in GRADES:
                problems.append(f"sources.yaml {src_key}: kind {kind!r} is not one of the grades")
        for v, tk in self.toolkits.items():
            prov_ok(f"cuda.yaml toolkit {v}", tk.prov)
        for m, fl in self.compat_floors.items():
            prov_ok(f"cuda.yaml minor_version_compat {m}", fl.prov)
        for arch in self.architectures.values():
            prov_ok(f"gpus.yaml architecture {cc_str(arch.cc)}", arch.prov)
            if arch.drivers is not None:
                prov_ok(f"gpus.yaml architecture {cc_str(arch.cc)} drivers", arch.drivers.prov)
        seen: set[str] = set()
        for gpu in self.gpus:
            prov_ok(f"gpus.yaml gpu {gpu.name!r}", gpu.prov)
            if gpu.cc not in self.architectures:
                problems.append(
                    f"gpus.yaml gpu {gpu.name!r}: CC {cc_str(gpu.cc)} not in architectures"
                )
            if gpu.name in seen:
                problems.append(f"gpus.yaml gpu {gpu.name!r}: listed twice")
            seen.add(gpu.name)
        versions: set[str] = set()
        for rel in self.releases:
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
            for plat, pythons in rel.python.items():
                if plat not in PLATFORMS:
                    problems.append(f"{where}: unknown platform {plat!r} in python")
                bad = [p for p in pythons if not _PYTHON_RE.match(p)]
                if bad:
                    problems.append(f"{where}: not Python versions on {plat}: {', '.join(bad)}")
            names = [v.name for v in rel.variants]
            for twice in sorted({n for n in names if names.count(n) > 1}):
                problems.append(f"{where}: variant {twice} listed twice")
            for var in rel.variants:
                self._check_variant(f"{where} {var.name}", var, rel, prov_ok, problems)
        if self.conda_forge is not None:
            self._check_conda_forge(self.conda_forge, prov_ok, problems)
        return problems

    def _check_conda_forge(self, cf: CondaForge, prov_ok: Any, problems: list[str]) -> None:
        prov_ok("conda_forge.yaml builds", cf.prov)
        seen_arch: set[int] = set()
        versions: set[str] = set()
        for rel in cf.releases:
            where = f"conda_forge.yaml {rel.version}"
            if rel.version in versions:
                problems.append(f"{where}: listed twice")
            versions.add(rel.version)
            prov_ok(where, rel.prov)
            bad = [p for p in rel.python if not _PYTHON_RE.match(p)]
            if bad:
                problems.append(f"{where}: not Python versions: {', '.join(bad)}")
            for plat, builds in rel.builds.items():
                cudas = [b.cuda for b in builds]
                if len(set(cudas)) != len(cudas):
                    problems.append(f"{where} {plat}: a CUDA version listed twice")
                for b in builds:
                    if b.cuda is not None and b.cuda not in self.toolkits:
                        problems.append(f"{where} {plat}: CUDA {b.cuda} not in cuda.yaml toolkits")
                    if b.arch is None or id(b.arch) in seen_arch:
                        continue
                    seen_arch.add(id(b.arch))
                    prov_ok(f"{where} {plat} CUDA {b.cuda} arch list", b.arch.prov)
                    for cc in (*b.arch.sass, *b.arch.ptx):
                        if cc not in self.architectures:
                            problems.append(f"{where} {plat}: CC {cc_str(cc)} not in architectures")

    def _check_variant(
        self, where: str, var: Variant, rel: Release, prov_ok: Any, problems: list[str]
    ) -> None:
        prov_ok(where, var.prov)
        if var.kind == "cuda":
            if var.cuda is None or var.cuda not in self.toolkits:
                problems.append(f"{where}: CUDA {var.cuda} not in cuda.yaml toolkits")
            for label, pinned in (("cudnn", var.cudnn), ("nccl", var.nccl)):
                if pinned is not None and pinned.version is not None:
                    prov_ok(f"{where} {label}", pinned.prov)
            tag = re.fullmatch(r"cu(\d+)(\d)", var.name)
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
                if cc not in self.architectures:
                    problems.append(f"{where} {plat}: CC {cc_str(cc)} not in architectures")
        for plat in var.pypi:
            if plat not in var.platforms:
                problems.append(f"{where}: pypi names {plat} but the variant is not built for it")


# --- loading -------------------------------------------------------------------------------------


# Choosing the database and the cache live in resolver/db/; these names stay for callers.
shipped_data_dir = _location.shipped_data_dir
user_data_dir = _location.user_data_dir
data_dir = _location.data_dir
cache_dir = _location.cache_dir
CACHE_ENV = _location.CACHE_ENV
_warned: set[str] = set()  # user databases already warned about in this process


def _updated(directory: Path) -> str:
    """The database's version as text ("" when unreadable); kept for older callers."""
    try:
        return str(_location.read_version(directory))
    except DataError:
        return ""


def load(directory: Path | None = None) -> Catalog:
    """Read and validate the database in ``directory``, else the one in use.

    The one in use is ``$GPURESOLVE_DATA_DIR`` (errors are the user's: exit 2), else the newer
    of the user's and the shipped database; a user database that fails to load is passed
    over with one warning line on stderr, so that a damaged download never bricks the tool.
    """
    if directory is not None:
        return _load_dir(directory)
    choice = _location.choose()
    if choice.kind == "forced":
        try:
            return _load_dir(choice.directory)
        except DataError as exc:
            raise DataError(f"{DATA_ENV}={choice.directory}: {exc}") from None
    if choice.kind == "user":
        try:
            return _load_dir(choice.directory)
        except DataError as exc:
            choice = _location.Choice(shipped_data_dir(), "shipped", (choice.directory, str(exc)))
    if choice.ignored is not None:
        _warn_ignored(*choice.ignored)
    return _with_user_observations(_load_dir(choice.directory))


def _with_user_observations(catalog: Catalog) -> Catalog:
    """The shipped database with the user's own observations laid over it.

    `verify`, `--confirm` and `db import` record into the user data directory's
    observations.yaml; while no user database is in use (no `db update` yet), they still
    count. An entry for a build the database lacks is skipped; a damaged file is a warning.
    """
    path = user_data_dir() / "observations.yaml"
    try:
        if not path.is_file():
            return catalog
    except OSError:
        return catalog
    from resolver.db.observations import apply_observations

    try:
        return apply_observations(catalog, _read_yaml(path, bounded=True), lenient=True)
    except DataError as exc:
        _warn_ignored(path, str(exc))
        return catalog


def _warn_ignored(directory: Path, reason: str) -> None:
    if str(directory) in _warned:
        return
    _warned.add(str(directory))
    with contextlib.suppress(OSError, ValueError):  # stderr closed or full: still fall back
        print(_location.ignored_warning(directory, reason), file=sys.stderr, flush=True)


def _load_dir(directory: Path) -> Catalog:
    """One directory's catalog, through the pickled cache (a damaged cache is only a miss)."""
    cache = _cache_file(directory)
    if cache is not None:
        cached = _read_cache(cache)
        if cached is not None:
            return cached
    try:
        bounded = directory.resolve() != shipped_data_dir()
    except (OSError, RuntimeError):  # a symlink loop: certainly not the shipped database
        bounded = True
    raw: dict[str, Any] = {}
    for name in FILES:
        raw[name] = _read_yaml(directory / name, bounded=bounded)
    for name in OPTIONAL_FILES:
        if (directory / name).is_file():
            raw[name] = _read_yaml(directory / name, bounded=bounded)
    try:
        catalog = from_raw(raw, origin=str(directory), lenient=bounded)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        # from_raw names the record for what it checks; anything else is malformed all the same
        detail = " ".join(str(exc).split())[:200]
        raise DataError(
            f"{directory}: malformed database ({type(exc).__name__}: {detail})"
        ) from None
    if cache is not None:
        _write_cache(cache, catalog)
    return catalog


def _cache_file(directory: Path) -> Path | None:
    return _location.cache_file(directory, FILES, OPTIONAL_FILES, Path(__file__))


def _read_cache(path: Path) -> Catalog | None:
    return _cache.read(path, Catalog)


def _write_cache(path: Path, catalog: Catalog) -> None:
    _cache.write(path, catalog)


def _read_yaml(path: Path, *, bounded: bool = True) -> Any:
    from resolver.db import yamlfile  # imports PyYAML: only when the cache cannot answer

    return yamlfile.read_yaml(path, bounded=bounded)


class _Reader:
    """Typed access to one raw record, naming file and record in every error."""

    def __init__(self, file: str, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise DataError(f"{file} {where}: expected a mapping, got {type(data).__name__}")
        self.file, self.where, self.data = file, where, data

    def fail(self, msg: str) -> DataError:
        return DataError(f"{self.file} {self.where}: {msg}")

    def text(self, key: str, *, optional: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if optional:
                return None
            raise self.fail(f"missing {key!r}")
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a quoted string, got {value!r}")
        return value

    def req(self, key: str) -> str:
        value = self.text(key)
        assert value is not None
        return value

    def list(self, key: str, *, optional: bool = True) -> list[Any]:
        value = self.data.get(key)
        if value is None and optional:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{key!r} must be a list")
        return value

    kinds: Mapping[str, str] = {}  # source key -> kind, set by from_raw for one load

    def prov(self) -> Provenance:
        """The record's sources, stated grade (or old `confirmed: false`) and contradictions."""
        src = self._keys(self.data.get("source"), "'source'")
        confirmed = self.data.get("confirmed", True)
        if not isinstance(confirmed, bool):
            raise self.fail("'confirmed' must be true or false")
        declared = self.data.get("grade")
        if declared is not None and declared not in GRADES:
            raise self.fail(f"'grade' must be one of {', '.join(GRADES)}, got {declared!r}")
        if declared is None and not confirmed:  # the old flag: not documented for this fact
            best = make_provenance(src, None, self.kinds).supported
            declared = best if best in ("transcription", "inferred") else "inferred"
        contradicts: list[Contradiction] = []
        for i, item in enumerate(self.list("contradicts")):
            c = _Reader(self.file, f"{self.where} contradicts[{i}]", item)
            value = item.get("value")
            if value is None or isinstance(value, (dict, list)):
                raise c.fail("'value' must be the losing value as text")
            contradicts.append(
                Contradiction(
                    str(value),
                    self._keys(item.get("source"), "contradicts[].source"),
                    c.text("note", optional=True),
                )
            )
        return make_provenance(src, declared, self.kinds, tuple(contradicts))

    def _keys(self, src: Any, what: str) -> tuple[str, ...]:
        if isinstance(src, str):
            src = [src]
        if not isinstance(src, list) or not all(isinstance(s, str) for s in src):
            raise self.fail(f"{what} must be a source key or a list of them")
        return tuple(src)

    def drivers(self, key: str) -> dict[str, str | None]:
        value = self.data.get(key)
        if not isinstance(value, dict):
            raise self.fail(f"{key!r} must map linux/windows to a driver version or null")
        out: dict[str, str | None] = {}
        for os_name in ("linux", "windows"):
            v = value.get(os_name)
            if v is not None:
                if not isinstance(v, str):
                    raise self.fail(f"{key}.{os_name} must be a quoted version string")
                try:
                    driver_key(v)
                except UserError:
                    raise self.fail(f"{key}.{os_name}: not a driver version: {v!r}") from None
            out[os_name] = v
        return out

    def cc(self, text: Any) -> CC:
        if not isinstance(text, str):
            raise self.fail(f"compute capability must be a quoted string like '8.6', got {text!r}")
        try:
            return parse_cc(text)
        except UserError:
            raise self.fail(f"not a compute capability: {text!r}") from None


def from_raw(raw: Mapping[str, Any], origin: str = "<memory>", lenient: bool = False) -> Catalog:
    """Build a Catalog from the parsed YAML documents (keys are the file names)."""
    src_doc = _Reader("sources.yaml", "top level", raw["sources.yaml"])
    sources = src_doc.data.get("sources")
    if not isinstance(sources, dict):
        raise src_doc.fail("'sources' must map keys to {cite, primary}")
    for key, value in sources.items():
        _Reader("sources.yaml", f"source {key}", value)
    cf_doc = None
    if raw.get("conda_forge.yaml") is not None:
        cf_doc = _Reader("conda_forge.yaml", "top level", raw["conda_forge.yaml"])
        sources = _merge_sources(sources, cf_doc)
    _Reader.kinds = {k: source_kind(v) for k, v in sources.items()}
    try:
        catalog = _records(raw, sources, cf_doc, origin)
    finally:
        _Reader.kinds = {}
    if raw.get("observations.yaml") is not None:
        from resolver.db.observations import apply_observations

        # a user's database keeps what verify recorded even for builds it does not know
        catalog = apply_observations(catalog, raw["observations.yaml"], lenient=lenient)
    return catalog


def _records(
    raw: Mapping[str, Any], sources: dict[str, Any], cf_doc: _Reader | None, origin: str
) -> Catalog:
    """Every record of the database, graded against ``_Reader.kinds``."""
    cuda_doc = _Reader("cuda.yaml", "top level", raw["cuda.yaml"])
    toolkits: dict[str, Toolkit] = {}
    for i, item in enumerate(cuda_doc.list("toolkits", optional=False)):
        r = _Reader("cuda.yaml", f"toolkits[{i}]", item)
        version = r.req("version")
        r.where = f"toolkit {version}"
        toolkits[version] = Toolkit(version, r.drivers("min_driver"), r.prov())
    floors: dict[int, CompatFloor] = {}
    for i, item in enumerate(cuda_doc.list("minor_version_compat", optional=False)):
        r = _Reader("cuda.yaml", f"minor_version_compat[{i}]", item)
        major = item.get("major")
        if not isinstance(major, int):
            raise r.fail("'major' must be an integer")
        floors[major] = CompatFloor(major, r.drivers("min_driver"), r.prov())

    gpu_doc = _Reader("gpus.yaml", "top level", raw["gpus.yaml"])
    archs: dict[CC, Architecture] = {}
    for i, item in enumerate(gpu_doc.list("architectures", optional=False)):
        r = _Reader("gpus.yaml", f"architectures[{i}]", item)
        cc = r.cc(item.get("cc"))
        archs[cc] = Architecture(
            cc, r.req("name"), bool(item.get("tegra", False)), r.prov(), _window(r)
        )
    gpus: list[GpuModel] = []
    for i, item in enumerate(gpu_doc.list("gpus", optional=False)):
        r = _Reader("gpus.yaml", f"gpus[{i}]", item)
        name = r.req("name")
        r.where = f"gpu {name!r}"
        gpus.append(
            GpuModel(
                name=name,
                cc=r.cc(item.get("cc")),
                kind=r.text("kind", optional=True) or "other",
                pci_ids=tuple(str(p).lower() for p in r.list("pci_ids")),
                aliases=tuple(str(a) for a in r.list("aliases")),
                prov=r.prov(),
            )
        )

    torch_doc = _Reader("torch.yaml", "top level", raw["torch.yaml"])
    releases: list[Release] = []
    for i, item in enumerate(torch_doc.list("series", optional=False)):
        releases.extend(_series(_Reader("torch.yaml", f"series[{i}]", item)))
    releases.sort(key=lambda rel: rel.key, reverse=True)
    conda_forge = _conda_forge(cf_doc) if cf_doc is not None else None
    return Catalog(
        sources=sources,
        toolkits=toolkits,
        compat_floors=floors,
        architectures=archs,
        gpus=tuple(gpus),
        releases=tuple(releases),
        index_url_template=torch_doc.req("index_url"),
        origin=origin,
        updated=str(torch_doc.data["updated"]) if torch_doc.data.get("updated") else None,
        conda_forge=conda_forge,
    )


def _merge_sources(sources: dict[str, Any], doc: _Reader) -> dict[str, Any]:
    """A data file's own ``sources:`` joined to sources.yaml's (one key, one meaning)."""
    own = doc.data.get("sources")
    if own is None:
        return sources
    if not isinstance(own, dict):
        raise doc.fail("'sources' must map keys to {cite, primary}")
    merged = dict(sources)
    for key, value in own.items():
        _Reader(doc.file, f"source {key}", value)
        if key in merged and merged[key] != value:
            raise doc.fail(f"source {key} is defined differently in sources.yaml")
        merged[key] = value
    return merged


def _conda_forge(doc: _Reader) -> CondaForge:
    """conda_forge.yaml: the builds' naming, the named arch lists, and every release."""
    b = _Reader(doc.file, "builds", doc.data.get("builds"))
    cuda_string = b.req("cuda_string")
    if "{major}" not in cuda_string or "{minor}" not in cuda_string:
        raise b.fail("'cuda_string' must contain {major} and {minor}")
    arch_lists: dict[str, ArchList] = {}
    raw_lists = doc.data.get("arch_lists") or {}
    if not isinstance(raw_lists, dict):
        raise doc.fail("'arch_lists' must map names to {sass, ptx, source}")
    for name, value in raw_lists.items():
        a = _Reader(doc.file, f"arch list {name}", value)
        arch_lists[str(name)] = ArchList(
            sass=tuple(sorted(a.cc(c) for c in a.list("sass"))),
            ptx=tuple(sorted(a.cc(c) for c in a.list("ptx"))),
            prov=a.prov(),
        )
    releases: list[CondaRelease] = []
    for i, item in enumerate(doc.list("releases", optional=False)):
        r = _Reader(doc.file, f"releases[{i}]", item)
        version = r.req("version")
        r.where = f"release {version}"
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            raise r.fail(f"not a torch version: {version!r}")
        python = r.list("python", optional=False)
        if not all(isinstance(p, str) for p in python):
            raise r.fail("'python' must be a list of quoted versions")
        raw_builds = item.get("builds")
        if not isinstance(raw_builds, dict) or not raw_builds:
            raise r.fail("'builds' must map each platform to its builds")
        builds: dict[str, tuple[CondaBuild, ...]] = {}
        for plat, entries in raw_builds.items():
            if plat not in PLATFORMS:
                raise r.fail(f"unknown platform {plat!r}")
            if not isinstance(entries, list) or not entries:
                raise r.fail(f"builds.{plat} must be a list of builds")
            out: list[CondaBuild] = []
            for entry in entries:
                e = _Reader(doc.file, f"release {version} {plat}", entry)
                cuda = e.text("cuda", optional=True)
                if cuda is not None and not re.fullmatch(r"\d+\.\d+", cuda):
                    raise e.fail(f"not a CUDA version: {cuda!r}")
                arch_name = e.text("arch", optional=True)
                if (cuda is None) != (arch_name is None):
                    raise e.fail(
                        "a CUDA build names its 'arch' list; the CPU build (cuda: null) none"
                    )
                if arch_name is not None and arch_name not in arch_lists:
                    raise e.fail(f"arch list {arch_name!r} is not defined in arch_lists")
                out.append(
                    CondaBuild(
                        cuda=cuda,
                        arch=arch_lists[arch_name] if arch_name is not None else None,
                        glibc=e.text("glibc", optional=True),
                    )
                )
            builds[plat] = tuple(out)
        releases.append(CondaRelease(version, tuple(python), builds, r.prov()))
    releases.sort(key=lambda rel: tuple(int(p) for p in rel.version.split(".")), reverse=True)
    return CondaForge(
        channel=doc.req("channel"),
        package=doc.req("package"),
        cuda_string=cuda_string,
        cpu_string=b.req("cpu_string"),
        cuda_package=b.req("cuda_package"),
        releases=tuple(releases),
        prov=b.prov(),
    )


def _python_map(r: _Reader, value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise r.fail("'python' must map platforms to lists of versions")
    out: dict[str, tuple[str, ...]] = {}
    for plat, versions in value.items():
        if plat in ("source", "confirmed", "note", "grade", "contradicts"):
            continue
        if plat not in PLATFORMS:
            raise r.fail(f"python: unknown platform {plat!r}")
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            raise r.fail(f"python.{plat} must be a list of quoted versions")
        out[plat] = tuple(versions)
    return out


def _python_prov(r: _Reader, value: Any) -> Provenance | None:
    """The Python tags' own provenance, where the map names sources."""
    if isinstance(value, dict) and value.get("source") is not None:
        return _Reader(r.file, f"{r.where} python", value).prov()
    return None


def _window(r: _Reader) -> DriverWindow | None:
    """An architecture's `drivers: {first, last, source}`: the branches that drive it."""
    value = r.data.get("drivers")
    if value is None:
        return None
    w = _Reader(r.file, f"{r.where} drivers", value)
    edges: list[int | None] = []
    for key in ("first", "last"):
        edge = w.text(key, optional=True)
        if edge is not None and not re.fullmatch(r"\d{2,4}", edge):
            raise w.fail(f"{key!r} must be a driver branch (its major number), got {edge!r}")
        edges.append(int(edge) if edge is not None else None)
    return DriverWindow(edges[0], edges[1], w.prov())


def _pinned(r: _Reader, key: str) -> Pinned | None:
    value = r.data.get(key)
    if value is None:
        return None
    sub = _Reader(r.file, f"{r.where} {key}", value)
    version = sub.text("version", optional=True)
    return Pinned(version, sub.prov() if version is not None else Provenance((), "inferred"))


def _variant(r: _Reader) -> Variant:
    name = r.req("name")
    r.where = f"{r.where} variant {name}"
    platforms: dict[str, ArchList | None] = {}
    plat_map = r.data.get("platforms")
    if not isinstance(plat_map, dict) or not plat_map:
        raise r.fail("'platforms' must map each platform it is built for to its arch list")
    for plat, arch in plat_map.items():
        if plat not in PLATFORMS:
            raise r.fail(f"unknown platform {plat!r}")
        if arch is None or (name == "cpu" and arch == {}) or not name.startswith("cu"):
            platforms[plat] = None
            continue
        a = _Reader(r.file, f"{r.where} {plat}", arch)
        ptx_prov = None
        if isinstance(arch.get("ptx"), dict):  # PTX graded apart: {ccs, source, grade}
            p = _Reader(r.file, f"{r.where} {plat} ptx", arch["ptx"])
            ptx, ptx_prov = p.list("ccs"), p.prov()
        else:
            ptx = a.list("ptx")
        platforms[plat] = ArchList(
            sass=tuple(sorted(a.cc(c) for c in a.list("sass"))),
            ptx=tuple(sorted(a.cc(c) for c in ptx)),
            prov=a.prov(),
            ptx_prov=ptx_prov,
        )
    pypi = r.list("pypi")
    return Variant(
        name=name,
        cuda=r.text("cuda", optional=True),
        cudnn=_pinned(r, "cudnn"),
        nccl=_pinned(r, "nccl"),
        pypi=frozenset(str(p) for p in pypi),
        platforms=platforms,
        prov=r.prov(),
    )


def _series(r: _Reader) -> Iterable[Release]:
    minor = r.req("minor")
    r.where = f"series {minor}"
    python = _python_map(r, r.data.get("python"))
    python_prov = _python_prov(r, r.data.get("python"))
    variants = [
        _variant(_Reader(r.file, f"series {minor}", v)) for v in r.list("variants", optional=False)
    ]
    by_name = {v.name: v for v in variants}
    for item in r.list("releases", optional=False):
        rr = _Reader(r.file, f"series {minor} release", item)
        version = rr.req("version")
        rr.where = f"release {version}"
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):  # Release.key sorts it numerically
            raise rr.fail(f"not a torch version: {version!r} (expected X.Y.Z, e.g. 2.8.0)")
        if not version.startswith(minor + "."):
            raise rr.fail(f"version {version} does not belong to series {minor}")
        only = rr.list("variants")
        unknown = [n for n in only if n not in by_name]
        if unknown:
            raise rr.fail(f"variants {unknown} are not defined in series {minor}")
        chosen = tuple(by_name[n] for n in only) if only else tuple(variants)
        comp_prov: dict[str, Provenance] = {}
        tv = _companion(rr, "torchvision", comp_prov)
        ta = _companion(rr, "torchaudio", comp_prov)
        untagged = frozenset(
            k
            for k in ("torchvision", "torchaudio")
            if isinstance(item.get(k), dict) and item[k].get("local_tag") is False
        )
        yield Release(
            version=version,
            minor=minor,
            date=str(item["date"]) if item.get("date") is not None else None,
            python=_python_map(rr, item["python"]) if item.get("python") else python,
            python_prov=(_python_prov(rr, item["python"]) if item.get("python") else python_prov),
            torchvision=tv,
            torchaudio=ta,
            variants=chosen,
            prov=rr.prov(),
            companion_prov=comp_prov,
            companion_untagged=untagged,
        )


def _companion(r: _Reader, key: str, provs: dict[str, Provenance]) -> str | None:
    """A companion pairing: a version string, or {version, source, confirmed} of its own."""
    value = r.data.get(key)
    if isinstance(value, dict):
        sub = _Reader(r.file, f"{r.where} {key}", value)
        provs[key] = sub.prov()
        return sub.text("version", optional=True)
    return r.text(key, optional=True)


def _name_words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _WORD_RE.findall(name.lower()) if w not in _NOISE_WORDS)
