"""Refresh tests/fixtures/closure_index: a small PEP 503/691 index of a REAL closure's metadata.

The hermetic closure tests (tests/test_lock_closure.py) resolve `lock`'s whole closure with uv
against this folder, served on 127.0.0.1 (tests/closure_index.py). It holds, for each pinned
package, one wheel's entry exactly as the Python Package Index lists it (file name, sha256,
size, requires-python) and that wheel's own METADATA headers, served as its PEP 658
``.metadata`` file (the long description, and any header naming the registry's hosts, left out:
the repository never names a registry's host); never the wheel itself (uv resolves and hashes
from the index pages and the metadata alone).

Use, from the repository root, on a machine that reaches the Python Package Index:

    python tools/fetch_closure_index.py            # re-fetch every pin of the manifest
    python tools/fetch_closure_index.py --close    # and add what the closure lacks

``manifest.json`` beside the fixture names the target (platform, Python) and, per fixture index
folder ("whl/cpu" stands for the PyTorch index, "simple" for the default index), the pins.
``--close`` walks each pin's Requires-Dist with the target's markers and pins every missing
dependency to the newest version uploaded before the manifest's ``exclude_newer`` that has a
wheel for the target, in the "simple" folder. The registry's simple URL comes from ``--index``,
else pip's configuration (PIP_INDEX_URL, pip's files), else pip's built-in default.
METADATA is read from the wheel with HTTP range requests (a few KiB), through gpuresolve's own
remote-zip reader, because the registry may not serve PEP 658 files itself.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import sys
from datetime import datetime
from email.parser import BytesParser
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver.core.platforms import marker_env  # noqa: E402
from resolver.dbupdate.metadata import remote_metadata  # noqa: E402
from resolver.io.http import Client  # noqa: E402
from resolver.markers import applicable  # noqa: E402
from resolver.solve import Target  # noqa: E402
from resolver.writers.closure.wheel_tags import target_tags  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "closure_index"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def registry_url(given: str | None) -> str:
    """The registry's simple URL: the option, else pip's configured index, else pip's own."""
    if given:
        return given.rstrip("/")
    from resolver.host.pipconfig import pip_index_url

    found = pip_index_url()
    if found:
        return found.rstrip("/")
    from pip._internal.models.index import PyPI

    return str(PyPI.simple_url).rstrip("/")


def best_wheel(files: list[dict[str, Any]], version: str, tags: list[Any]) -> dict[str, Any]:
    """The project's wheel of ``version`` that fits the target best (its tags' rank)."""
    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[int, dict[str, Any]] | None = None
    for f in files:
        name = f["filename"]
        if not name.endswith(".whl") or f.get("yanked"):
            continue
        _, ver, _, wtags = parse_wheel_filename(name)
        fit = min((rank[t] for t in wtags if t in rank), default=None)
        if ver == Version(version) and fit is not None and (best is None or fit < best[0]):
            best = (fit, f)
    if best is None:
        raise SystemExit(f"no wheel of version {version} fits the target")
    return best[1]


def newest_fitting(
    files: list[dict[str, Any]], spec: SpecifierSet, tags: list[Any], python: str, cutoff: str
) -> str | None:
    """The newest version satisfying ``spec`` with a target wheel uploaded before ``cutoff``."""
    limit = datetime.fromisoformat(cutoff.replace("Z", "+00:00"))
    found: set[Version] = set()
    tagset = set(tags)
    for f in files:
        name = f["filename"]
        if not name.endswith(".whl") or f.get("yanked"):
            continue
        uploaded = f.get("upload-time")
        if not uploaded or datetime.fromisoformat(uploaded.replace("Z", "+00:00")) > limit:
            continue
        _, ver, _, wtags = parse_wheel_filename(name)
        requires = f.get("requires-python")
        if requires and not SpecifierSet(requires).contains(python):
            continue
        if wtags & tagset and spec.contains(ver, prereleases=False):
            found.add(ver)
    return str(max(found)) if found else None


def trimmed(metadata: bytes, hosts: set[str]) -> bytes:
    """The METADATA's header lines (continuations kept), without the body (the long
    description) and without any line naming one of ``hosts`` (the registry's domains)."""
    head = metadata.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    out: list[bytes] = []
    skipping = False
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t"):  # a folded header's continuation
            if not skipping:
                out.append(line)
            continue
        skipping = any(h.encode() in line.lower() for h in hosts) or line.startswith(
            b"Description:"
        )
        if not skipping:
            out.append(line)
    return b"\n".join(out) + b"\n"


def domain(url: str) -> str:
    """The registered domain of a URL's host (its last two labels)."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return ".".join(host.split(".")[-2:])


def project(client: Client, base: str, name: str) -> dict[str, Any]:
    page = client.get(f"{base}/{canonicalize_name(name)}/", accept=JSON_TYPE)
    return dict(json.loads(page.body))


def write_project(folder: Path, name: str, entry: dict[str, Any], metadata: bytes) -> None:
    """index.json (PEP 691) and index.html (PEP 503) listing the one wheel, and its metadata."""
    folder.mkdir(parents=True, exist_ok=True)
    filename = entry["filename"]
    meta_sha = hashlib.sha256(metadata).hexdigest()
    (folder / f"{filename}.metadata").write_bytes(metadata)
    listed: dict[str, Any] = {
        "filename": filename,
        "url": filename,  # relative to the project page: the fixture serves no wheel
        "hashes": {"sha256": entry["hashes"]["sha256"]},
        "core-metadata": {"sha256": meta_sha},
        "data-dist-info-metadata": {"sha256": meta_sha},
        "size": entry["size"],
    }
    if entry.get("requires-python"):
        listed["requires-python"] = entry["requires-python"]
    if entry.get("upload-time"):
        listed["upload-time"] = entry["upload-time"]
    doc = {
        "meta": {"api-version": "1.1"},
        "name": str(canonicalize_name(name)),
        "files": [listed],
        "versions": [str(parse_wheel_filename(filename)[1])],
    }
    (folder / "index.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    rp = entry.get("requires-python")
    attrs = f' data-requires-python="{html.escape(rp)}"' if rp else ""
    link = (
        f'<a href="{filename}#sha256={entry["hashes"]["sha256"]}"{attrs} '
        f'data-core-metadata="sha256={meta_sha}" data-dist-info-metadata="sha256={meta_sha}">'
        f"{filename}</a>"
    )
    page = (
        '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.1">'
        f"</head><body>\n{link}<br>\n</body></html>\n"
    )
    (folder / "index.html").write_text(page, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", help="the registry's simple URL (default: pip's)")
    parser.add_argument("--close", action="store_true", help="pin what the closure lacks")
    args = parser.parse_args(argv)
    manifest_path = FIXTURE / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    platform, python = manifest["platform"], manifest["python"]
    target = Target(platform, python, None, "linux", (), nvidia=False)
    tags, env = target_tags(target), marker_env(platform, python)
    base = registry_url(args.index)
    pins: dict[str, dict[str, str]] = manifest["indexes"]
    with Client() as client:
        metas: dict[tuple[str, str], bytes] = {}
        todo = [(folder, n, v) for folder, ps in pins.items() for n, v in ps.items()]
        while todo:
            folder, name, version = todo.pop(0)
            data = project(client, base, name)
            entry = best_wheel(data["files"], version, tags)
            url = entry["url"]
            hosts = {domain(base), domain(url)} - {""}
            meta = trimmed(remote_metadata(client, url, name), hosts)
            metas[(folder, name)] = meta
            write_project(FIXTURE / folder / str(canonicalize_name(name)), name, entry, meta)
            print(f"{folder}/{name} {version}: {entry['filename']}", file=sys.stderr)
            if not args.close:
                continue
            message = BytesParser().parsebytes(meta, headersonly=True)
            for req in applicable(message.get_all("Requires-Dist") or [], {**env, "extra": ""}):
                dep = str(canonicalize_name(req.name))
                if any(dep in ps for ps in pins.values()):
                    continue
                chosen = newest_fitting(
                    project(client, base, dep)["files"],
                    req.specifier,
                    tags,
                    python,
                    manifest["exclude_newer"],
                )
                if chosen is None:
                    raise SystemExit(f"{dep}: no version fits {req.specifier} for the target")
                pins.setdefault("simple", {})[dep] = chosen
                todo.append(("simple", dep, chosen))
    manifest["indexes"] = {f: dict(sorted(ps.items())) for f, ps in sorted(pins.items())}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
