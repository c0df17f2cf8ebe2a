"""Merge new extension releases into extensions.yaml: pure (no I/O), like ``merge``.

Rules, as torch's: nothing is deleted and no release the database holds is touched (its facts
are curated or were read before: a file listing is never evidence against them). A new release
is shaped as the curated ones are: one build per CUDA build the newest curated release has on
that index (bitsandbytes' per-CUDA libraries are told apart by their names), its torch
requirement and Requires-Python from the wheels' METADATA, per platform the SASS/PTX its
libraries carry; every fact cites the wheel it was read from (``observed``). What a wheel does
not say (the CUDA it was compiled with, how a torch build must match it) is carried over from
that curated release, and the build's note says so. The summary names, per package, the new
release and where its torch requirement or arch lists differ from the release before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from resolver.core.platforms import PLATFORMS
from resolver.dbupdate.extcollect import ANY, ExtFacts, ExtReleaseFacts, ExtWheel
from resolver.dbupdate.merge import Summary, _insert_sorted, as_dict, as_list

_PLACE = {"default": "the default package index configured in pip"}


def _cc_key(cc: str) -> tuple[int, ...]:
    return tuple(int(p) for p in cc.split("."))


def _union(lists: Iterable[list[str]]) -> list[str]:
    return sorted({cc for lst in lists for cc in lst}, key=_cc_key)


def _vkey(record: dict[str, Any]) -> Version:
    try:
        return Version(str(record.get("version")))
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return Version("0")


def _prefix(package: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", package.upper())


def _archs(arch: Any) -> str:
    arch = as_dict(arch)
    if not arch.get("sass") and not arch.get("ptx"):
        return "no arch list"
    sass, ptx = (" ".join(arch.get(k) or []) or "-" for k in ("sass", "ptx"))
    return f"SASS {sass}, PTX {ptx}"


class _ExtMerger:
    def __init__(
        self,
        doc: dict[str, Any],
        facts: ExtFacts,
        date: str,
        summary: Summary,
        known_ccs: set[str],
    ) -> None:
        self.doc = doc
        self.facts = facts
        self.date = date
        self.summary = summary
        self.sources: dict[str, Any] = doc.setdefault("sources", {})
        self.changed = False
        self.known_ccs = known_ccs

    def ccs(self, where: str, ccs: list[str]) -> list[str]:
        """The compute capabilities gpus.yaml knows (another is named, and left out)."""
        unknown = [cc for cc in ccs if cc not in self.known_ccs]
        if unknown:
            self.summary.notes.append(
                f"{where}: CC {', '.join(unknown)} not in gpus.yaml's architectures: left out "
                "(curate)"
            )
        return [cc for cc in ccs if cc in self.known_ccs]

    def package(self, name: str) -> dict[str, Any] | None:
        for pkg in as_list(self.doc.get("packages")):
            if isinstance(pkg, dict) and canonicalize_name(str(pkg.get("name"))) == name:
                return pkg
        return None

    def run(self) -> None:
        grouped: dict[tuple[str, str], list[ExtReleaseFacts]] = {}
        for rf in self.facts.releases:
            grouped.setdefault((rf.package, rf.version), []).append(rf)
        for (name, version), parts in sorted(grouped.items(), key=lambda kv: Version(kv[0][1])):
            pkg = self.package(name)
            if pkg is not None:
                self.release(pkg, name, version, parts)
        if self.changed:
            self.doc["updated"] = self.date

    def _key(self, key: str, cite: str) -> str:
        if key in self.sources and self.sources[key].get("cite") != cite:
            key = f"{key}_{self.date}"
        self.sources[key] = {"cite": cite, "kind": "observed"}
        return key

    def release(
        self, pkg: dict[str, Any], name: str, version: str, parts: list[ExtReleaseFacts]
    ) -> None:
        curated = [r for r in as_list(pkg.get("releases")) if isinstance(r, dict)]
        template = max(curated, key=_vkey) if curated else {}
        before = str(template.get("version") or "-")
        builds: list[dict[str, Any]] = []
        files: list[str] = []
        said, cited = len(self.summary.extensions), set(self.sources)
        for rf in sorted(parts, key=lambda r: (r.folder != "default", r.folder)):
            place = _PLACE.get(rf.folder, f"the PyTorch index's {rf.folder} folder")
            files.append(
                self._key(
                    f"{_prefix(name)}_{'' if rf.folder == 'default' else rf.folder.upper() + '_'}"
                    f"FILES_{self.date}",
                    f"{place}, project {name}: simple-index file list (file names, upload "
                    f"times, yanked flags), read {self.date}",
                )
            )
            builds += self.builds(name, rf, template)
        sdist = any(rf.sdist for rf in parts)
        unread = [w.platform for rf in parts for w in rf.wheels if not w.scanned]
        if not builds and (unread or not sdist):
            why = (
                f"its {', '.join(unread)} wheels were not read"
                if unread
                else "no usable wheel nor source distribution on the indexes"
            )
            self.summary.notes.append(f"{name} {version}: {why}: not added")
            del self.summary.extensions[said:]
            for key in set(self.sources) - cited:  # nothing cites them
                del self.sources[key]
            return
        record: dict[str, Any] = {
            "version": version,
            "date": next((rf.date for rf in parts if rf.date), None) or self.date,
            "sdist": sdist,
            "source": files,
            "builds": builds,
        }
        if not builds:  # as the curated source-only releases say it
            record["note"] = (
                "the indexes read have only its source distribution (building it needs nvcc); "
                "prebuilt wheels published elsewhere (a project's release downloads) are not "
                "read by `gpuresolve db update`: curate"
            )
        pkg.setdefault("releases", [])
        _insert_sorted(pkg["releases"], record, _vkey)
        self.changed = True
        where = "; ".join(
            f"{rf.folder}: {', '.join(w.platform for w in rf.wheels) or 'sdist'}" for rf in parts
        )
        self.summary.extensions.append(f"{name} {version}: new release ({where})")
        self.compare(name, version, builds, template, before)

    def compare(
        self,
        name: str,
        version: str,
        builds: list[dict[str, Any]],
        template: dict[str, Any],
        before: str,
    ) -> None:
        old = [b for b in as_list(template.get("builds")) if isinstance(b, dict)]
        said: set[str] = set()
        for build in builds:
            same = [
                b
                for b in old
                if b.get("index") == build["index"] and b.get("cuda") == build["cuda"]
            ] or old[:1]
            if not same:
                continue
            match = same[0]
            tag = f"{build['index']}" + (f" CUDA {build['cuda']}" if build["cuda"] else "")
            if build["torch"] != match.get("torch") and "torch" not in said:
                said.add("torch")
                self.summary.extensions.append(
                    f"{name} {version}: torch requirement {build['torch'] or 'none'} "
                    f"(was {match.get('torch') or 'none'} in {before})"
                )
            for plat, arch in build["platforms"].items():
                was = next(
                    (
                        as_dict(b.get("platforms"))[plat]
                        for b in same
                        if plat in as_dict(b.get("platforms"))
                    ),
                    None,
                )
                now, then = _archs(arch), _archs(was)
                if was is None:
                    self.summary.extensions.append(
                        f"{name} {version} {tag} {plat}: a new platform ({now})"
                    )
                elif now != then:
                    self.summary.extensions.append(
                        f"{name} {version} {tag} {plat}: arch list {now} (was {then} in {before})"
                    )

    def builds(
        self, name: str, rf: ExtReleaseFacts, template: dict[str, Any]
    ) -> list[dict[str, Any]]:
        old = [b for b in as_list(template.get("builds")) if isinstance(b, dict)]
        if rf.folder == "default":
            # one shape per CUDA: a release curated into builds per platform (torchao's, by
            # its import gate) is still one build per CUDA in the wheels read
            by_cuda = {b.get("cuda"): b for b in reversed(old) if b.get("index") == "default"}
            shapes = list(reversed(by_cuda.values()))
        else:
            match = next(
                (
                    b.get("cuda_match")
                    for b in old
                    if b.get("cuda_match") in ("major", "exact", "nearest")
                ),
                "exact",
            )
            gate = next((b.get("gate") for b in old if "gate" in b), True)
            shapes = [{"cuda": rf.cuda, "cuda_match": match, "gate": gate}]
        if not shapes:
            code = any(w.libraries for w in rf.wheels) or not all(w.scanned for w in rf.wheels)
            if code or not rf.wheels:
                if rf.wheels:
                    self.summary.notes.append(
                        f"{name} {rf.version} ({rf.folder}): wheels with device code, but "
                        f"{template.get('version', 'no release')} has no build there to say "
                        "which CUDA it is compiled with: not added (curate)"
                    )
                return []
            shapes = [{"cuda": None, "cuda_match": "any"}]
        keys = {w.platform: self.wheel_key(name, rf, w) for w in rf.wheels}
        out, missing = [], []
        for shape in shapes:
            build = self.build(name, rf, shape, keys, str(template.get("version") or "-"))
            if build is not None:
                out.append(build)
            elif shape.get("cuda"):
                missing.append(str(shape["cuda"]))
        if missing:
            self.summary.extensions.append(
                f"{name} {rf.version} ({rf.folder}): no build for CUDA {', '.join(missing)}, "
                f"which {template.get('version')} has"
            )
        return out

    def wheel_key(self, name: str, rf: ExtReleaseFacts, wheel: ExtWheel) -> str:
        place = _PLACE.get(rf.folder, f"the PyTorch index's {rf.folder} folder")
        torch = f"Requires-Dist torch{wheel.torch}" if wheel.torch else "no torch requirement"
        if wheel.platform == ANY:
            body = "no library: pure Python"
        elif not wheel.scanned:
            body = "libraries not read"
        elif wheel.libraries:
            libs = sorted(wheel.libraries)
            more = f" and {len(libs) - 3} more" if len(libs) > 3 else ""
            body = f"fat-binary entry headers of {', '.join(libs[:3])}{more}"
        else:
            body = "no fat binary in its libraries"
        folder = "" if rf.folder == "default" else rf.folder + "_"
        return self._key(
            f"{_prefix(name)}_{rf.version}_{folder}{wheel.platform}",
            f"{wheel.filename} sha256 {wheel.sha256 or 'not listed'}: METADATA ({torch}; "
            f"read from {wheel.metadata_from}), {body}; {place}'s wheel, read by HTTP range "
            f"requests with gpuresolve's extension reader (resolver/wheels/extwheel.py) on "
            f"{self.date}",
        )

    def build(
        self,
        name: str,
        rf: ExtReleaseFacts,
        shape: dict[str, Any],
        keys: dict[str, str],
        before: str,
    ) -> dict[str, Any] | None:
        cuda = shape.get("cuda")
        exact = shape.get("cuda_match") in ("exact", "nearest")  # a library per CUDA
        gate = shape.get("gate", True) is not False
        platforms: dict[str, Any] = {}
        left_out: list[str] = []
        by_plat = {w.platform: w for w in rf.wheels}
        for plat in PLATFORMS:
            wheel = by_plat.get(plat)
            if wheel is None:
                continue
            if not wheel.scanned:
                left_out.append(plat)
                continue
            libs = wheel.libraries
            if exact and cuda and any(_names_cuda(n, None) for n in libs):
                libs = {n: v for n, v in libs.items() if _names_cuda(n, cuda)}
                if not libs:  # per-CUDA libraries, none for this CUDA: no such build here
                    continue
            where = f"{name} {rf.version} {plat}"
            sass = self.ccs(where, _union(v.get("sass", []) for v in libs.values()))
            ptx = self.ccs(where, _union(v.get("ptx", []) for v in libs.values()))
            platforms[plat] = (
                {"sass": sass, "ptx": ptx, "source": [keys[plat]]} if sass or ptx else {}
            )
        if ANY in by_plat:
            for plat in PLATFORMS:
                platforms.setdefault(plat, {})
        # Code that never decides (torchao's optional kernels) keeps the curated judgement.
        device_code = any(platforms.values()) if gate else bool(shape.get("device_code"))
        if device_code and gate:
            bare = [p for p, a in platforms.items() if not a]
            for plat in bare:  # an arch list decides there: a platform without one cannot
                del platforms[plat]
            left_out += bare
        if left_out:
            self.summary.notes.append(
                f"{name} {rf.version} ({rf.folder}{', CUDA ' + cuda if cuda else ''}): "
                f"{', '.join(left_out)} left out (no arch list read: curate)"
            )
        if not platforms:
            return None
        wheels = [w for w in rf.wheels if w.platform in platforms or w.platform == ANY]
        torch = _agreed(name, rf, "torch", wheels, self.summary)
        python = _agreed(name, rf, "python", wheels, self.summary)
        carried = (
            "" if rf.folder != "default" else f"; cuda and cuda_match carried over from {before}"
        )
        build: dict[str, Any] = {
            "index": "default" if rf.folder == "default" else "pytorch",
            "torch": torch,
            "cuda": cuda,
            "cuda_match": shape.get("cuda_match"),
            "python": python,
            "device_code": device_code,
        }
        for flag in ("gate", "cxx11_abi"):
            if flag in shape:
                build[flag] = shape[flag]
        build["source"] = sorted({keys[w.platform] for w in wheels})
        build["note"] = (
            f"read from the wheels by `gpuresolve db update` on {self.date}{carried} "
            "(the wheels do not say which CUDA they were compiled with): curate"
        )
        build["platforms"] = platforms
        return build


def _names_cuda(library: str, cuda: str | None) -> bool:
    """Whether a library's name says its CUDA ("libbitsandbytes_cuda128.so"); with ``cuda``,
    that one."""
    m = re.search(r"cuda([0-9]{3,4})(?![0-9])", library.rsplit("/", 1)[-1])
    if m is None:
        return False
    return cuda is None or m.group(1) == cuda.replace(".", "")


def _agreed(
    name: str, rf: ExtReleaseFacts, attr: str, wheels: list[ExtWheel], summary: Summary
) -> str | None:
    """The value the wheels agree on; where they differ, Linux x86-64's, and a note."""
    values = {getattr(w, attr) for w in wheels}
    if len(values) <= 1:
        return values.pop() if values else None
    ranked = sorted(wheels, key=lambda w: (w.platform != "linux-x86_64", w.platform))
    chosen: str | None = getattr(ranked[0], attr)
    summary.notes.append(
        f"{name} {rf.version} ({rf.folder}): its wheels differ in {attr} "
        f"({', '.join(sorted(str(v) for v in values))}); {ranked[0].platform}'s recorded (curate)"
    )
    return chosen


def merge_extensions(
    raw: dict[str, Any], facts: ExtFacts, read_date: str, summary: Summary
) -> None:
    """Add ``facts``' new releases to ``raw["extensions.yaml"]`` (in place; the caller passes
    its own copy) and name them in ``summary``."""
    doc = raw.get("extensions.yaml")
    if not isinstance(doc, dict):
        return
    summary.notes.extend(facts.notes)
    archs = as_list(as_dict(raw.get("gpus.yaml")).get("architectures"))
    known = {str(a.get("cc")) for a in archs if isinstance(a, dict)}
    _ExtMerger(doc, facts, read_date, summary, known).run()
