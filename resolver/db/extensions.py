"""Parse ``extensions.yaml``: the extension packages installed beside torch, graded like torch's.

Each package lists releases newest first; each release its prebuilt builds (where the wheel
lives, the torch it requires, the CUDA it was compiled with and how a torch build must match
it, Python, and per platform the SASS/PTX its libraries carry). Structural problems are one
DataError naming the record; ``db check`` adds the cross-record rules (``check_extensions``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from resolver.core.platforms import PLATFORMS
from resolver.core.versions import CC, CudaVersion, canonical_name, cc_str
from resolver.db.evidence import Provenance
from resolver.db.models import (
    ArchList,
    Catalog,
    Ceiling,
    ExtBuild,
    ExtPackage,
    ExtRelease,
    ImportGate,
)

INDEXES = ("default", "pytorch", "release-downloads")
CUDA_MATCH = ("major", "exact", "nearest", "default", "any")
MAX_CUDART = 99  # a libcudart.so.N major read beyond this is not a CUDA runtime


class Reader(Protocol):
    """The parser's typed record reader (resolver/db/parse.py ``_Reader``)."""

    data: Any
    where: str

    def fail(self, msg: str) -> Exception: ...
    def text(self, key: str, *, optional: bool = False) -> str | None: ...
    def req(self, key: str) -> str: ...
    def cuda(self, key: str) -> CudaVersion | None: ...
    def list(self, key: str, *, optional: bool = True) -> list[Any]: ...
    def prov(self) -> Provenance: ...
    def cc(self, text: Any) -> CC: ...


def parse_extensions(
    doc: Reader, sub: Callable[[str, Any], Reader]
) -> tuple[dict[str, ExtPackage], str | None]:
    """The packages of extensions.yaml (``sub(where, data)`` reads a nested record) and the
    first torch minor built with the C++11 ABI."""
    abi = doc.data.get("torch_cxx11_abi")
    since = None
    if abi is not None:
        since = sub("torch_cxx11_abi", abi).req("since")
    packages: dict[str, ExtPackage] = {}
    for i, item in enumerate(doc.list("packages", optional=False)):
        r = sub(f"packages[{i}]", item)
        name = canonical_name(r.req("name"))
        if name in packages:
            raise r.fail(f"package {name} listed twice")
        releases = [
            _release(sub(f"{name} releases[{j}]", rel), sub, name)
            for j, rel in enumerate(r.list("releases", optional=False))
        ]
        releases.sort(key=lambda rel: rel.key, reverse=True)
        packages[name] = ExtPackage(
            name,
            r.text("module", optional=True) or name,
            tuple(releases),
            r.text("download", optional=True),
        )
    return packages, since


def _release(r: Reader, sub: Callable[[str, Any], Reader], name: str) -> ExtRelease:
    from packaging.version import Version

    version = r.req("version")
    try:
        Version(version)
    except ValueError:  # InvalidVersion, or digits past Python's limit
        raise r.fail(f"not a version: {version!r}") from None
    r.where = f"{name} {version}"
    sdist = r.data.get("sdist", False)
    if not isinstance(sdist, bool):
        raise r.fail("'sdist' must be true or false")
    builds = tuple(
        _build(sub(f"{name} {version} builds[{k}]", b), sub) for k, b in enumerate(r.list("builds"))
    )
    return ExtRelease(name, version, r.req("date"), sdist, builds, r.prov())


def _build(r: Reader, sub: Callable[[str, Any], Reader]) -> ExtBuild:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    index = r.req("index")
    if index not in INDEXES:
        raise r.fail(f"'index' must be one of {', '.join(INDEXES)}, got {index!r}")
    match = r.req("cuda_match")
    if match not in CUDA_MATCH:
        raise r.fail(f"'cuda_match' must be one of {', '.join(CUDA_MATCH)}, got {match!r}")
    torch, python = r.text("torch", optional=True), r.text("python", optional=True)
    for key, value in (("torch", torch), ("python", python)):
        if value is not None:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                raise r.fail(f"{key!r}: not a version specifier: {value!r}") from None
    flags = {k: r.data.get(k, d) for k, d in (("device_code", True), ("gate", True))}
    abi = r.data.get("cxx11_abi")
    if not all(isinstance(v, bool) for v in flags.values()) or not isinstance(
        abi, (bool, type(None))
    ):
        raise r.fail("'device_code', 'gate' and 'cxx11_abi' must be true or false")
    platforms = r.data.get("platforms")
    if not isinstance(platforms, dict) or not platforms:
        raise r.fail("'platforms' must map platform names to arch lists ({} for none)")
    archs: dict[str, ArchList | None] = {}
    for plat, value in platforms.items():
        if plat not in PLATFORMS:
            raise r.fail(f"unknown platform {plat!r}")
        if not isinstance(value, dict):
            raise r.fail(f"{plat}: expected a mapping ({{}} for no arch list)")
        if not value:
            archs[plat] = None
            continue
        p = sub(f"{r.where} {plat}", value)
        archs[plat] = ArchList(
            tuple(p.cc(c) for c in p.list("sass")), tuple(p.cc(c) for c in p.list("ptx")), p.prov()
        )
    cuda = r.cuda("cuda")
    if match in ("major", "exact", "nearest") and cuda is None:
        raise r.fail(f"cuda_match {match} needs the build's 'cuda'")
    return ExtBuild(
        index=index,
        torch=torch,
        cuda=cuda,
        cuda_match=match,
        python=python,
        device_code=flags["device_code"],
        gate=flags["gate"],
        cxx11_abi=abi,
        platforms=archs,
        prov=r.prov(),
        cudart=_cudart(r),
        import_gate=_import_gate(r, sub),
        ceiling=_ceiling(r, sub),
    )


def _cudart(r: Reader) -> int | None:
    """``cudart: 12``: the N of the ``libcudart.so.N`` its libraries need (DT_NEEDED)."""
    value = r.data.get("cudart")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CUDART:
        raise r.fail(
            f"'cudart' must be the major of libcudart.so.N (1..{MAX_CUDART}), got {value!r}"
        )
    return value


def _import_gate(r: Reader, sub: Callable[[str, Any], Reader]) -> ImportGate | None:
    """``import_gate: {torch: "==2.10.0", source: [...]}``: the torch the package's own import
    loads its compiled kernels with (read from its ``__init__``)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    value = r.data.get("import_gate")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise r.fail("'import_gate' must be a mapping {torch, source}")
    g = sub(f"{r.where} import_gate", value)
    torch = g.req("torch")
    try:
        SpecifierSet(torch)
    except InvalidSpecifier:
        raise g.fail(f"'torch': not a version specifier: {torch!r}") from None
    return ImportGate(torch, g.prov())


def _ceiling(r: Reader, sub: Callable[[str, Any], Reader]) -> Ceiling | None:
    """``ceiling: {cc: "9.0", fallback: "...", source: [...]}``: the highest compute capability
    the package's own kernels accept, and what runs above it (null: nothing of the package)."""
    value = r.data.get("ceiling")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise r.fail("'ceiling' must be a mapping {cc, fallback, source}")
    c = sub(f"{r.where} ceiling", value)
    return Ceiling(c.cc(value.get("cc")), c.text("fallback", optional=True), c.prov())


def check_extensions(catalog: Catalog, prov_ok: Callable[[str, Provenance], None]) -> list[str]:
    """``db check``'s rules for extensions.yaml: sources known and graded, CCs known, releases
    with a build or a source distribution, three releases or more per package, no duplicates."""
    problems: list[str] = []
    for pkg in catalog.extensions.values():
        if len(pkg.releases) < 3:
            problems.append(f"extensions.yaml {pkg.name}: fewer than three releases")
        seen: set[str] = set()
        for rel in pkg.releases:
            where = f"extensions.yaml {pkg.name} {rel.version}"
            prov_ok(where, rel.prov)
            if rel.version in seen:
                problems.append(f"{where}: listed twice")
            seen.add(rel.version)
            if not rel.builds and not rel.sdist:
                problems.append(f"{where}: neither a prebuilt build nor a source distribution")
            for k, b in enumerate(rel.builds):
                _check_build(catalog, f"{where} builds[{k}]", b, prov_ok, problems)
    return problems


def _check_build(
    catalog: Catalog,
    where: str,
    b: ExtBuild,
    prov_ok: Callable[[str, Provenance], None],
    problems: list[str],
) -> None:
    prov_ok(where, b.prov)
    if b.cuda is not None and b.cuda not in catalog.toolkits:
        problems.append(f"{where}: CUDA {b.cuda} is not a known toolkit")
    if b.cudart is not None and b.cuda is not None and b.cudart != b.cuda.major:
        problems.append(f"{where}: links libcudart.so.{b.cudart}, but is built with CUDA {b.cuda}")
    if b.import_gate is not None:
        prov_ok(f"{where} import_gate", b.import_gate.prov)
    if b.ceiling is not None:
        prov_ok(f"{where} ceiling", b.ceiling.prov)
        if b.ceiling.cc not in catalog.architectures:
            problems.append(f"{where} ceiling: CC {cc_str(b.ceiling.cc)} not in architectures")
    for plat, arch in b.platforms.items():
        if arch is None:
            if b.device_code and b.gate:
                problems.append(f"{where} {plat}: device code that decides, but no arch list")
            continue
        prov_ok(f"{where} {plat}", arch.prov)
        unknown = [cc_str(c) for c in (*arch.sass, *arch.ptx) if c not in catalog.architectures]
        if unknown:
            problems.append(f"{where} {plat}: CC {', '.join(unknown)} not in architectures")


def describe(catalog: Catalog) -> Mapping[str, Any]:
    """Every package and release in plain data (``db show --json`` ``packages``)."""
    return {
        pkg.name: [
            {
                "version": rel.version,
                "date": rel.date,
                "sdist": rel.sdist,
                "grade": rel.prov.grade,
                "builds": [
                    {
                        "index": b.index,
                        "torch": b.torch,
                        "cuda": b.cuda,
                        "cuda_match": b.cuda_match,
                        "python": b.python,
                        "device_code": b.device_code,
                        "cxx11_abi": b.cxx11_abi,
                        "cudart": b.cudart,
                        "import_gate": None
                        if b.import_gate is None
                        else {"torch": b.import_gate.torch, "grade": b.import_gate.prov.grade},
                        "ceiling": None
                        if b.ceiling is None
                        else {
                            "cc": cc_str(b.ceiling.cc),
                            "fallback": b.ceiling.fallback,
                            "grade": b.ceiling.prov.grade,
                        },
                        "platforms": {
                            p: None
                            if a is None
                            else {
                                "sass": [cc_str(c) for c in a.sass],
                                "ptx": [cc_str(c) for c in a.ptx],
                                "grade": a.prov.grade,
                            }
                            for p, a in b.platforms.items()
                        },
                        "grade": b.prov.grade,
                    }
                    for b in rel.builds
                ],
            }
            for rel in pkg.releases
        ]
        for pkg in catalog.extensions.values()
    }
