"""Parse and validate the raw YAML documents of the database into a Catalog.

Every structural problem is one DataError naming the file and the record; each fact's sources
are graded here (resolver/db/evidence.py) as it is read. Cross-record rules are
resolver/db/check.py's; choosing the directory and the cache are resolver/catalog.py's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from resolver.core.errors import DataError, UserError
from resolver.core.platforms import PLATFORMS, PYTHON_RE, PythonVersion
from resolver.core.versions import CC, CudaVersion, Driver, parse_cc
from resolver.core.vocab import Grade
from resolver.db.evidence import GRADES, Contradiction, Provenance, make_provenance, source_kind
from resolver.db.models import (
    AbiBuilds,
    Architecture,
    ArchList,
    Catalog,
    CompatFloor,
    CondaBuild,
    CondaForge,
    CondaRelease,
    DriverWindow,
    ExtPackage,
    GpuModel,
    Pinned,
    Release,
    Toolkit,
    Variant,
    WindowsBranch,
)
from resolver.db.torchabi import abi_builds


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

    def cuda(self, key: str) -> CudaVersion | None:
        """An optional CUDA version ("12.8"), parsed here where the text enters."""
        text = self.text(key, optional=True)
        if text is None:
            return None
        try:
            return CudaVersion.parse(text)
        except UserError:
            raise self.fail(f"not a CUDA version: {text[:40]!r}") from None

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
    # (sources, stated grade) -> its Provenance, for one load: ~900 records cite ~100 such pairs
    memo: ClassVar[dict[tuple[tuple[str, ...], str | None], Provenance]] = {}

    def prov(self) -> Provenance:
        """The record's sources, stated grade (or old `confirmed: false`) and contradictions."""
        src = self._keys(self.data.get("source"), "'source'")
        data = self.data
        if "contradicts" not in data and "confirmed" not in data:
            declared = data.get("grade")
            if declared is None or declared in GRADES:
                key = (src, declared)
                found = self.memo.get(key)
                if found is None:
                    found = self.memo[key] = make_provenance(src, declared, self.kinds)
                return found
        confirmed = self.data.get("confirmed", True)
        if not isinstance(confirmed, bool):
            raise self.fail("'confirmed' must be true or false")
        declared = self.data.get("grade")
        if declared is not None and declared not in GRADES:
            raise self.fail(f"'grade' must be one of {', '.join(GRADES)}, got {declared!r}")
        if declared is None and not confirmed:  # the old flag: not documented for this fact
            best = make_provenance(src, None, self.kinds).supported
            weak = (Grade.TRANSCRIPTION, Grade.INFERRED)
            declared = best if best in weak else Grade.INFERRED.value
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

    def drivers(self, key: str) -> dict[str, Driver | None]:
        """A linux/windows map of driver floors, parsed here where the text enters."""
        value = self.data.get(key)
        if not isinstance(value, dict):
            raise self.fail(f"{key!r} must map linux/windows to a driver version or null")
        out: dict[str, Driver | None] = {}
        for os_name in ("linux", "windows"):
            v = value.get(os_name)
            out[os_name] = None
            if v is not None:
                if not isinstance(v, str):
                    raise self.fail(f"{key}.{os_name} must be a quoted version string")
                try:
                    out[os_name] = Driver.parse(v)
                except UserError:
                    raise self.fail(f"{key}.{os_name}: not a driver version: {v!r}") from None
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
    ext_doc = raw.get("extensions.yaml")
    if ext_doc is not None:  # its head's sources now, the rest when its packages load
        ext_head = _ext_head(ext_doc)
        sources = _merge_sources(sources, _Reader("extensions.yaml", "top level", ext_head))
    _Reader.kinds = {k: source_kind(v) for k, v in sources.items()}
    _Reader.memo = {}
    try:
        catalog = _records(raw, sources, cf_doc, origin, lenient)
    finally:
        _Reader.kinds, _Reader.memo = {}, {}
    if raw.get("observations.yaml") is not None:
        from resolver.db.observations import apply_observations

        # a user's database keeps what verify recorded even for builds it does not know
        catalog = apply_observations(catalog, raw["observations.yaml"], lenient=lenient)
    return catalog


def _records(
    raw: Mapping[str, Any],
    sources: dict[str, Any],
    cf_doc: _Reader | None,
    origin: str,
    lenient: bool = False,
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
    extensions, cxx11_since, cxx11_builds = _extensions(
        raw.get("extensions.yaml"), origin, sources, lenient
    )
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
        windows_branches=_windows_branches(cuda_doc),
        extensions=extensions,
        cxx11_since=cxx11_since,
        cxx11_builds=cxx11_builds,
    )


def _ext_head(doc: Any) -> Any:
    """extensions.yaml's head (``db/extdefer``): as stored, or cut from the whole document."""
    from resolver.db.extdefer import DEFERRED, head

    return doc if not isinstance(doc, dict) or DEFERRED in doc else head(doc, "")


def _extensions(
    doc: Any, origin: str, sources: dict[str, Any], lenient: bool
) -> tuple[Mapping[str, ExtPackage], str | None, tuple[AbiBuilds, ...]]:
    """extensions.yaml's packages (parsed when first looked at: from ``doc``, or from the
    database's folder ``origin`` where the cache or snapshot held only its head), where the
    database has the file, the first torch minor built with the C++11 ABI and the earlier
    builds that use it all the same (read when the file has them: a few records)."""
    if doc is None:
        return {}, None, ()
    from resolver.db.extdefer import LazyExtensions

    top = _Reader("extensions.yaml", "top level", doc)
    hooks = (_parse_whole, _merge_doc_sources)
    lazy = LazyExtensions(doc, origin, sources, lenient, hooks)
    abi = top.data.get("torch_cxx11_abi")
    if abi is None:
        return lazy, None, ()
    r = _Reader("extensions.yaml", "torch_cxx11_abi", abi)
    builds = abi_builds(r, _Reader) if r.data.get("builds") is not None else ()
    return lazy, r.req("since"), builds


def _parse_whole(doc: Any, kinds: Mapping[str, str]) -> dict[str, ExtPackage]:
    """extensions.yaml's packages, graded with ``kinds`` (``extdefer.LazyExtensions`` calls it
    when one is first looked up)."""
    from resolver.db.extensions import parse_extensions

    saved = _Reader.kinds, _Reader.memo
    _Reader.kinds, _Reader.memo = kinds, {}  # the grades of this load
    try:
        top = _Reader("extensions.yaml", "top level", doc)
        sub = lambda where, data: _Reader("extensions.yaml", where, data)  # noqa: E731
        return parse_extensions(top, sub)[0]
    finally:
        _Reader.kinds, _Reader.memo = saved


def _merge_doc_sources(sources: dict[str, Any], doc: Any) -> dict[str, Any]:
    return _merge_sources(sources, _Reader("extensions.yaml", "top level", doc))


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
        if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
            raise r.fail(f"not a torch version: {version!r}")
        python = r.list("python", optional=False)
        if not all(isinstance(p, str) for p in python):
            raise r.fail("'python' must be a list of quoted versions")
        pythons = tuple(_python(r, p) for p in python)
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
                cuda = e.cuda("cuda")
                if cuda is not None and "." not in cuda:
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
        releases.append(CondaRelease(version, pythons, builds, r.prov()))
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


def _python(r: _Reader, text: str) -> PythonVersion:
    """A release's CPython version ("3.12", "3.13t"), parsed here where the text enters; only
    the spelling that ``str()`` gives back, so every output says it as the file does."""
    if PYTHON_RE.match(text):
        version = PythonVersion.parse(text)
        if str(version) == text:
            return version
    raise r.fail(f"not a Python version: {text[:40]!r} (expected e.g. 3.12 or 3.13t)")


def _python_map(r: _Reader, value: Any) -> dict[str, tuple[PythonVersion, ...]]:
    if not isinstance(value, dict):
        raise r.fail("'python' must map platforms to lists of versions")
    out: dict[str, tuple[PythonVersion, ...]] = {}
    for plat, versions in value.items():
        if plat in ("source", "confirmed", "note", "grade", "contradicts"):
            continue
        if plat not in PLATFORMS:
            raise r.fail(f"python: unknown platform {plat!r}")
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            raise r.fail(f"python.{plat} must be a list of quoted versions")
        out[plat] = tuple(_python(r, v) for v in versions)
    return out


def _python_prov(r: _Reader, value: Any) -> Provenance | None:
    """The Python tags' own provenance, where the map names sources."""
    if isinstance(value, dict) and value.get("source") is not None:
        return _Reader(r.file, f"{r.where} python", value).prov()
    return None


def _window(r: _Reader) -> DriverWindow | None:
    """An architecture's `drivers: {first, dropped, last, source}`: the branches that drive it
    (first in R570; dropped in R590, R580 the last)."""
    value = r.data.get("drivers")
    if value is None:
        return None
    w = _Reader(r.file, f"{r.where} drivers", value)
    edges: list[int | None] = []
    for key in ("first", "last", "dropped"):
        edge = w.text(key, optional=True)
        if edge is not None and not re.fullmatch(r"[0-9]{2,4}", edge):
            raise w.fail(f"{key!r} must be a driver branch (its major number), got {edge!r}")
        edges.append(int(edge) if edge is not None else None)
    first, last, dropped = edges
    if dropped is not None and last is not None and last >= dropped:
        raise w.fail(f"'last' ({last}) must be below 'dropped' ({dropped})")
    return DriverWindow(first, last, w.prov(), dropped)


def _windows_branches(doc: _Reader) -> tuple[WindowsBranch, ...]:
    """cuda.yaml `windows_driver_branches`: the Windows numbers seen per branch, sourced."""
    out: list[WindowsBranch] = []
    for i, item in enumerate(doc.list("windows_driver_branches")):
        r = _Reader("cuda.yaml", f"windows_driver_branches[{i}]", item)
        branch = r.req("branch")
        if not re.fullmatch(r"[0-9]{2,4}", branch):
            raise r.fail(f"'branch' must be a branch's major number, got {branch!r}")
        nums = r.data.get("windows")
        if not isinstance(nums, dict):
            raise r.fail("'windows' must map first/last to the Windows numbers seen")
        edges: list[Driver] = []
        for v in (nums.get("first"), nums.get("last")):
            if not isinstance(v, str):
                raise r.fail("'windows' must give first and last as quoted driver versions")
            try:
                edges.append(Driver.parse(v))
            except UserError:
                raise r.fail(f"not a driver version: {v!r}") from None
        first, last = edges
        if first > last:
            raise r.fail(f"windows.first {first} is above windows.last {last}")
        out.append(WindowsBranch(int(branch), first, last, r.prov()))
    return tuple(sorted(out, key=lambda w: w.branch))


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
        cuda=r.cuda("cuda"),
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
        if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):  # Release.key sorts it numerically
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
            yanked=_yanked(rr),
            mirror=_index(rr),
        )


def _index(r: _Reader) -> str | None:
    """A release's ``index:``, the mirror `db update --pytorch-index` read it from (none: the
    database's own index, or curated)."""
    value = r.text("index", optional=True)
    if value is None:
        return None
    from resolver.io.urls import index_url

    try:
        return index_url(value, "index").rstrip("/")
    except UserError as exc:
        raise r.fail(str(exc)) from None


def _yanked(r: _Reader) -> dict[str, tuple[str, ...]]:
    """A release's `yanked: {torchvision: ["0.15.0"], ...}`: companions pulled from the index."""
    value = r.data.get("yanked")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise r.fail("'yanked' must map torchvision/torchaudio to a list of versions")
    out: dict[str, tuple[str, ...]] = {}
    for name, versions in value.items():
        if name not in ("torchvision", "torchaudio"):
            raise r.fail(f"yanked: {name!r} is not torchvision or torchaudio")
        if not isinstance(versions, list) or not all(
            isinstance(v, str) and re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", v) for v in versions
        ):
            raise r.fail(f"yanked.{name} must be a list of quoted versions like '0.15.0'")
        out[name] = tuple(versions)
    return out


def _companion(r: _Reader, key: str, provs: dict[str, Provenance]) -> str | None:
    """A companion pairing: a version string, or {version, source, confirmed} of its own."""
    value = r.data.get(key)
    if isinstance(value, dict):
        sub = _Reader(r.file, f"{r.where} {key}", value)
        provs[key] = sub.prov()
        return sub.text("version", optional=True)
    return r.text(key, optional=True)
