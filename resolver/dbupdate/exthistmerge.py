"""Merge the history (``exthistory``) into extensions.yaml: pure (no I/O), like ``extmerge``.

A release the database holds is never touched. A gathered one is shaped by what its wheels say:
the torch pin and Requires-Python of every platform's wheel (METADATA), the CUDA runtime major
its libraries link (``DT_NEEDED libcudart.so.N``), and per package kind (the nearest curated
release's ``cuda_match``):

- ``major`` (xformers): the CUDA and arch list the wheel's own build record names
  (``cpp_lib.json``: graded ``build-config``, the build's configuration, not its SASS);
- ``exact`` (bitsandbytes): one build per CUDA its libraries are named after;
- ``default`` (vllm) and ``any`` (torchao, triton): one build.

Device code: where the wheel carries no build record, the arch list comes from the release's
build configuration at its tag (``ext_build_configs.yaml``, graded ``build-config`` and citing
the upstream repository, path and tag); a platform whose device code decides and has neither is
left out, and the summary says so. A release with no readable wheel is not added.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from resolver.core.platforms import PLATFORMS
from resolver.dbupdate.exthistory import ANY, History, HistRelease, WheelFacts
from resolver.dbupdate.extmerge import _prefix, _vkey
from resolver.dbupdate.merge import Summary, _insert_sorted, as_dict, as_list

_LIB_CUDA = re.compile(r"cuda([0-9]{3,4})(?![0-9])")


def parse_arch_list(text: str) -> tuple[list[str], list[str]]:
    """``TORCH_CUDA_ARCH_LIST`` ("7.5 8.0+PTX 9.0a", or ";"-separated) -> (SASS, PTX)."""
    sass: set[str] = set()
    ptx: set[str] = set()
    for item in re.split(r"[\s;,]+", text.strip()):
        m = re.fullmatch(r"([0-9]+)\.([0-9])[af]?(\+PTX)?", item)
        if not m:
            continue
        cc = f"{m.group(1)}.{m.group(2)}"
        sass.add(cc)
        if m.group(3):
            ptx.add(cc)
    key = lambda cc: tuple(int(p) for p in cc.split("."))  # noqa: E731
    return sorted(sass, key=key), sorted(ptx, key=key)


def _lib_cudas(wheel: WheelFacts) -> set[str]:
    """The CUDA versions a wheel's libraries are named after ("cuda121" -> "12.1")."""
    out = set()
    for name in wheel.libraries:
        m = _LIB_CUDA.search(name.rsplit("/", 1)[-1])
        if m:
            digits = m.group(1)
            out.add(f"{digits[:-1]}.{digits[-1]}")
    return out


def _cc_union(lists: Any) -> list[str]:
    return sorted(
        {cc for lst in lists for cc in lst}, key=lambda c: tuple(int(p) for p in c.split("."))
    )


def _names(library: str, cuda: str | None) -> bool:
    """Whether a library is named after ``cuda`` ("libbitsandbytes_cuda121.so", "12.1")."""
    m = _LIB_CUDA.search(library.rsplit("/", 1)[-1])
    return cuda is not None and m is not None and m.group(1) == cuda.replace(".", "")


class _HistMerger:
    def __init__(
        self,
        doc: dict[str, Any],
        date: str,
        summary: Summary,
        known_ccs: set[str],
        toolkits: set[str],
        configs: Mapping[str, Any],
    ) -> None:
        self.doc, self.date, self.summary = doc, date, summary
        self.known_ccs, self.toolkits = known_ccs, toolkits
        self.sources: dict[str, Any] = doc.setdefault("sources", {})
        self.configs = as_dict(configs.get("packages"))
        self.config_sources = as_dict(configs.get("sources"))
        self.added: dict[str, int] = {}

    def package(self, name: str) -> dict[str, Any] | None:
        for pkg in as_list(self.doc.get("packages")):
            if isinstance(pkg, dict) and canonicalize_name(str(pkg.get("name"))) == name:
                return pkg
        return None

    def key(self, key: str, cite: str, kind: str) -> str:
        if key in self.sources and self.sources[key].get("cite") != cite:
            key = f"{key}_{self.date}"
        self.sources[key] = {"cite": cite, "kind": kind}
        return key

    def ccs(self, where: str, ccs: list[str]) -> list[str]:
        unknown = [cc for cc in ccs if cc not in self.known_ccs]
        if unknown:
            self.summary.notes.append(f"{where}: CC {', '.join(unknown)} not known: left out")
        return [cc for cc in ccs if cc in self.known_ccs]

    def run(self, releases: list[HistRelease]) -> None:
        for rel in sorted(releases, key=lambda r: (r.package, Version(r.version))):
            pkg = self.package(rel.package)
            if pkg is None:
                continue
            have = {
                str(r.get("version")) for r in as_list(pkg.get("releases")) if isinstance(r, dict)
            }
            if rel.version in have:
                continue
            record = self.release(pkg, rel)
            if record is not None:
                _insert_sorted(pkg.setdefault("releases", []), record, _vkey)
                self.added[rel.package] = self.added.get(rel.package, 0) + 1
        for name, count in sorted(self.added.items()):
            self.summary.extensions.append(f"{name}: {count} releases of its history added")
        if self.added:
            self.doc["updated"] = self.date

    def template(self, pkg: dict[str, Any], version: str) -> dict[str, Any]:
        """The curated release nearest above ``version`` (else the newest): its build shape."""
        curated = sorted(
            (r for r in as_list(pkg.get("releases")) if isinstance(r, dict) and r.get("builds")),
            key=_vkey,
        )
        above = [r for r in curated if _vkey(r) > Version(version)]
        return above[0] if above else (curated[-1] if curated else {})

    def release(self, pkg: dict[str, Any], rel: HistRelease) -> dict[str, Any] | None:
        name = rel.package
        files = self.key(
            f"{_prefix(name)}_FILES_{self.date}",
            f"the default package index configured in pip, project {name}: PEP 691 file list "
            f"(file names, upload times, yanked flags), read {self.date}",
            "observed",
        )
        wheels = [w for w in rel.wheels if w.error is None]
        for w in wheels:  # a pure-tagged wheel carrying x86-64 ELF CUDA libraries runs there only
            if w.platform == ANY and w.cudart:
                w.platform = "linux-x86_64"
        base: dict[str, Any] = {"version": rel.version, "date": rel.date or self.date}
        base.update({"sdist": rel.sdist, "source": [files]})
        if not rel.wheels:
            base["builds"] = []
            base["note"] = (
                "the default index has only its source distribution; prebuilt wheels published "
                "elsewhere (the project's release downloads) cannot be read from where this was "
                "gathered: not recorded (curate)"
            )
            return base if rel.sdist else None
        if not wheels:
            self.summary.notes.append(f"{name} {rel.version}: no wheel could be read: not added")
            return None
        shape = self.template(pkg, rel.version)
        old = [b for b in as_list(shape.get("builds")) if isinstance(b, dict)]
        match = str(old[0].get("cuda_match") or "any") if old else "any"
        if match == "nearest":  # a loader rule seen in newer releases is not carried back
            match = "exact"
        gate = next((b.get("gate") for b in old if "gate" in b), True) is not False
        coded = any(b.get("device_code") for b in old)  # its libraries are GPU code
        keys = {w.platform: self.wheel_key(rel, w) for w in wheels}
        if match == "exact":
            cudas = sorted({c for w in wheels for c in _lib_cudas(w)}, key=Version)
            builds = [self.build(rel, wheels, keys, "exact", gate, c, coded) for c in cudas]
        elif match == "major":
            cudas = sorted({w.build.get("cuda") or "" for w in wheels})
            builds = [self.build(rel, wheels, keys, "major", gate, c or None, coded) for c in cudas]
        else:  # as the curated ones: the platform wheels' build, the pure wheel's elsewhere
            own = [w for w in wheels if w.platform != ANY]
            pure = [w for w in wheels if w.platform == ANY]
            groups = [g for g in (own, pure) if g]
            builds = [self.build(rel, g, keys, match, gate, None, coded) for g in groups]
            if own and pure:  # pip takes the platform wheel where there is one
                taken = {w.platform for w in own}
                for b in builds[1:]:
                    if b is not None:
                        b["platforms"] = {p: a for p, a in b["platforms"].items() if p not in taken}
        base["builds"] = [b for b in builds if b is not None]
        if not base["builds"]:
            self.summary.notes.append(f"{name} {rel.version}: no build with a known arch list")
            return None
        return base

    def wheel_key(self, rel: HistRelease, w: WheelFacts) -> str:
        libs = len(w.libraries)
        cudart = ", ".join(f"libcudart.so.{m}" for m in w.cudart) or "no libcudart"
        abi = {True: "C++11 ABI", False: "pre-C++11 ABI", None: "no std::string in its symbols"}
        body = (
            f"the heads of its {libs} ELF libraries' .dynstr (DT_NEEDED {cudart}; "
            f"{abi[w.cxx11_abi]})"
            if libs
            else "no ELF library"
        )
        if w.unread_libraries:
            body += f"; {len(w.unread_libraries)} PE/extra libraries not read"
        torch = f"Requires-Dist torch{w.torch}" if w.torch else "no torch requirement"
        return self.key(
            f"{_prefix(rel.package)}_{rel.version}_{w.platform}",
            f"{w.filename} sha256 {w.sha256 or 'not listed'}: METADATA ({torch}), {body}; "
            f"read by HTTP range requests ({w.bytes_read} bytes) with gpuresolve's history "
            f"reader (resolver/dbupdate/exthistory.py) on {self.date}",
            "observed",
        )

    def build(
        self,
        rel: HistRelease,
        wheels: list[WheelFacts],
        keys: dict[str, str],
        match: str,
        gate: bool,
        cuda: str | None,
        coded: bool,
    ) -> dict[str, Any] | None:
        """One build; ``coded``: the package's libraries are GPU code (the curated release
        says so), so a platform with libraries and no arch list cannot be judged."""
        where = f"{rel.package} {rel.version}"
        if match == "exact":
            here = [w for w in wheels if cuda in _lib_cudas(w) or w.platform == ANY]
        elif match == "major":
            here = [w for w in wheels if (w.build.get("cuda") or None) == cuda]
        else:
            here = wheels
        if cuda is not None and cuda not in self.toolkits:
            self.summary.notes.append(f"{where}: CUDA {cuda} is no known toolkit: left out")
            return None
        if match == "major" and cuda is None:
            self.summary.notes.append(f"{where}: no build record names its CUDA: left out")
            return None
        code = any(w.cudart for w in here)
        platforms: dict[str, Any] = {}
        left_out: list[str] = []
        for w in here:
            if w.platform == ANY:
                for plat in PLATFORMS:
                    platforms.setdefault(plat, {})
                continue
            arch = self.arch(rel, w, cuda)
            if arch:
                platforms[w.platform] = arch
            elif not (gate and (w.cudart or w.unread_libraries or (coded and w.libraries))):
                platforms[w.platform] = {}
            else:
                left_out.append(w.platform)
        if left_out:
            self.summary.notes.append(
                f"{where}{' CUDA ' + cuda if cuda else ''}: {', '.join(left_out)} left out "
                "(device code, no arch list from the wheel or its build configuration: curate)"
            )
        if not platforms:
            return None
        torch = _agreed(where, "torch", here, self.summary)
        build: dict[str, Any] = {
            "index": "default" if rel.folder == "default" else "pytorch",
            "torch": None if torch in (None, "*") else torch,
            "cuda": cuda,
            "cuda_match": match,
            "python": _agreed(where, "python", here, self.summary),
            # code that never decides (gate false: torchao's optional kernels) keeps the
            # curated judgement
            "device_code": bool(code or coded or any(a for a in platforms.values()))
            if gate
            else coded,
        }
        if not gate:
            build["gate"] = False
        build["source"] = sorted({keys[w.platform] for w in here})
        majors = sorted(
            {
                lib.cudart
                for w in here
                for n, lib in w.libraries.items()
                if lib.cudart is not None and lib.runtime and (match != "exact" or _names(n, cuda))
            }
        )
        build["note"] = f"history read from the wheels on {self.date}: " + (
            f"its libraries link libcudart.so.{'/'.join(str(m) for m in majors)}"
            if majors
            else "its libraries link no CUDA runtime"
        )
        if len(majors) == 1:
            build["cudart"] = majors[0]  # the libcudart.so.N its libraries need (DT_NEEDED)
        gate_of = self.import_gate(rel, here)
        if gate_of is not None:
            build["import_gate"] = gate_of
            build["source"] = sorted({*build["source"], *gate_of["source"]})
        build["platforms"] = platforms
        return build

    def import_gate(self, rel: HistRelease, wheels: list[WheelFacts]) -> dict[str, Any] | None:
        """The torch a wheel's own ``__init__`` table loads its kernels with, where the table
        names this release with exactly one released torch (its dev builds aside)."""
        for w in wheels:
            torches = sorted(
                {
                    t
                    for v, t in w.import_table
                    if v == rel.version and "dev" not in t and "+" not in t
                }
            )
            if len(torches) != 1 or not w.libraries:
                continue
            pairs = ", ".join(f"{t}" for v, t in w.import_table if v == rel.version)
            key = self.key(
                f"{_prefix(rel.package)}_{rel.version}_INIT",
                f"{rel.package.replace('-', '_')}/__init__.py of {w.filename} sha256 "
                f"{w.sha256 or 'not listed'}: its table of (package, torch) versions built "
                f"together names {rel.version} with torch {pairs}: with any other torch its "
                f"kernels are not loaded (read {self.date})",
                "observed",
            )
            return {"torch": f"=={torches[0]}", "source": [key]}
        return None

    def arch(self, rel: HistRelease, w: WheelFacts, cuda: str | None) -> dict[str, Any] | None:
        """The wheel's arch list: its fat binaries where it was read whole, else its build
        record's, else its release's build configuration."""
        where = f"{rel.package} {rel.version} {w.platform}"
        text = w.build.get("arch_list")
        if w.fatbins is not None:
            libs = w.fatbins
            if cuda and any(_LIB_CUDA.search(n.rsplit("/", 1)[-1]) for n in libs):
                libs = {n: v for n, v in libs.items() if _names(n, cuda)}
            key = self.key(
                f"{_prefix(rel.package)}_{rel.version}_{w.platform}_FATBIN",
                f"{w.filename} sha256 {w.sha256 or 'not listed'}: read whole ({w.bytes_read} "
                f"bytes), the fat-binary entry headers of the image its {len(libs)} libraries "
                f"load (.nv_fatbin), by gpuresolve's extension reader on {self.date}",
                "observed",
            )
            sass = _cc_union(v.get("sass", []) for v in libs.values())
            ptx = _cc_union(v.get("ptx", []) for v in libs.values())
            sass, ptx = self.ccs(where, sass), self.ccs(where, ptx)
            return {"sass": sass, "ptx": ptx, "source": [key]} if sass or ptx else None
        if text:
            key = self.key(
                f"{_prefix(rel.package)}_{rel.version}_{w.platform}_BUILD",
                f"{w.filename}: its build record {rel.package}/cpp_lib.json says it was built "
                f"with torch {w.build.get('torch', '?')}, CUDA {w.build.get('cuda', '?')}, "
                f"TORCH_CUDA_ARCH_LIST '{text}' (read {self.date})",
                "build-config",
            )
        else:
            found = self.config(rel, w.platform, cuda)
            if found is None:
                return None
            text, key = found
        sass, ptx = parse_arch_list(text)
        sass, ptx = self.ccs(where, sass), self.ccs(where, ptx)
        return {"sass": sass, "ptx": ptx, "source": [key]} if sass or ptx else None

    def config(self, rel: HistRelease, plat: str, cuda: str | None) -> tuple[str, str] | None:
        """The arch list ext_build_configs.yaml gives this release (its build configuration at
        its tag), with its source key, copied in."""
        for entry in as_list(self.configs.get(rel.package)):
            if not isinstance(entry, dict) or not isinstance(entry.get("arch_list"), str):
                continue
            try:
                if Version(rel.version) not in SpecifierSet(str(entry.get("versions"))):
                    continue
            except InvalidSpecifier:
                continue
            if plat not in as_list(entry.get("platforms") or list(PLATFORMS)):
                continue
            prefixes = [str(c) for c in as_list(entry.get("cuda"))]
            if prefixes and not (
                cuda
                and any(cuda == c or (c.endswith(".") and cuda.startswith(c)) for c in prefixes)
            ):
                continue
            keys = [str(k) for k in as_list(entry.get("source"))]
            for k in keys:
                src = self.config_sources.get(k)
                if isinstance(src, dict):
                    self.sources[k] = {"cite": str(src.get("cite")), "kind": "build-config"}
            if keys and all(k in self.sources for k in keys):
                return str(entry["arch_list"]), keys[0]
        return None


def _agreed(where: str, attr: str, wheels: list[WheelFacts], summary: Summary) -> str | None:
    """The value the wheels agree on; where they differ, Linux x86-64's, and a note."""
    values = {getattr(w, attr) for w in wheels}
    if len(values) <= 1:
        return values.pop() if values else None
    ranked = sorted(wheels, key=lambda w: (w.platform != "linux-x86_64", w.platform))
    chosen: str | None = getattr(ranked[0], attr)
    summary.notes.append(f"{where}: its wheels differ in {attr}; {ranked[0].platform}'s recorded")
    return chosen


def needs_scan(doc: Any, configs: Mapping[str, Any]) -> Callable[[HistRelease], bool]:
    """Which gathered releases no cheap part gives an arch list: their package's device code
    decides (the curated releases say so), no wheel carries a build record and no build
    configuration covers the release."""
    gated = set()
    for pkg in as_list(as_dict(doc).get("packages")):
        builds = [
            b
            for r in as_list(as_dict(pkg).get("releases"))
            for b in as_list(as_dict(r).get("builds"))
            if isinstance(b, dict)
        ]
        if any(b.get("device_code") and b.get("gate", True) is not False for b in builds):
            gated.add(canonicalize_name(str(as_dict(pkg).get("name"))))
    entries = as_dict(configs.get("packages"))

    def wanted(rel: HistRelease) -> bool:
        if rel.package not in gated or any(w.build.get("arch_list") for w in rel.wheels):
            return False
        for e in as_list(entries.get(rel.package)):
            try:
                if Version(rel.version) in SpecifierSet(str(as_dict(e).get("versions"))):
                    return False
            except InvalidSpecifier:
                continue
        return True

    return wanted


def merge_history(
    raw: dict[str, Any], hist: History, read_date: str, summary: Summary, configs: Mapping[str, Any]
) -> dict[str, int]:
    """Add ``hist``'s releases to ``raw["extensions.yaml"]`` (in place); releases added per
    package."""
    doc = raw.get("extensions.yaml")
    if not isinstance(doc, dict):
        return {}
    summary.notes.extend(hist.notes)
    archs = as_list(as_dict(raw.get("gpus.yaml")).get("architectures"))
    known = {str(a.get("cc")) for a in archs if isinstance(a, dict)}
    kits = as_list(as_dict(raw.get("cuda.yaml")).get("toolkits"))
    toolkits = {str(t.get("version")) for t in kits if isinstance(t, dict)}
    merger = _HistMerger(doc, read_date, summary, known, toolkits, configs)
    merger.run(hist.releases)
    return merger.added
