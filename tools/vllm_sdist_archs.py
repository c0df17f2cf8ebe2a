"""vllm releases' arch lists from their own source distributions (issue 38), for ext_build_configs.

A vllm wheel is ~300-500 MiB and carries no build record, so a fat-binary scan of every release
costs too much. Each release's sdist on the default index (a few MiB) carries its build
configuration: CMakeLists.txt's CUDA_SUPPORTED_ARCHS per CUDA version, and from 0.6.2 on the
release pipeline (.buildkite/release-pipeline.yaml) with the TORCH_CUDA_ARCH_LIST each wheel step
builds with (its own build arg, an env entry it names, else the Dockerfile's default), and which
CUDA the default wheel is (vllm/envs.py VLLM_MAIN_CUDA_VERSION, else upload-wheels.sh's "default
wheels"). The arch list is their intersection, SASS only (vllm's CMake strips a top-level +PTX).
Before the pipeline was shipped, the CMake list (or setup.py's) is taken whole.

Prints the YAML sources and entries to paste into data/ext_build_configs.yaml; a curator checks
them (the merge reads only that file). Each sdist is streamed, at most 64 MiB, its sha256 checked
against the index's listing; only the few build files are kept, in memory.
Usage: python3 tools/vllm_sdist_archs.py [--index URL] VERSION [VERSION...]
``--index``: the default index (else $GPURESOLVE_DEFAULT_INDEX or pip's configuration; never a
host written here).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver.host.pipconfig import default_index  # noqa: E402
from resolver.io.http import Client, iter_body  # noqa: E402

LIMIT = 64 * 2**20  # bytes of one sdist streamed at most
MEMBER_LIMIT = 4 * 2**20  # bytes of one kept file at most
WANTED = re.compile(
    r"^[^/]+/(CMakeLists\.txt|setup\.py|docker/Dockerfile|Dockerfile|vllm/envs\.py|"
    r"\.buildkite/release-pipeline\.yaml|\.buildkite/scripts/upload-wheels\.sh)$"
)
PIPELINE = ".buildkite/release-pipeline.yaml"


def _ccs(text: str) -> list[str]:
    """ "7.0;7.5 8.0+PTX 9.0a" -> ["7.0", "7.5", "8.0", "9.0"] (PTX and suffixes dropped)."""
    found = {
        m.group(1)
        for item in re.split(r"[\s;,]+", text.strip())
        if (m := re.fullmatch(r"([0-9]+\.[0-9])[af]?(\+PTX)?", item))
    }
    return sorted(found, key=lambda c: tuple(int(p) for p in c.split(".")))


def _cmake(text: str) -> list[tuple[str | None, list[str], int]]:
    """CUDA_SUPPORTED_ARCHS in file order: (the CUDA it needs at least, or None, list, line)."""
    out: list[tuple[str | None, list[str], int]] = []
    cond: str | None = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.search(r"VERSION_GREATER_EQUAL\s+([0-9.]+)\)", line)
        if m:
            cond = m.group(1)
        if re.match(r"\s*else\(\)", line):
            cond = None
        m = re.search(r'set\(CUDA_SUPPORTED_ARCHS "([^"]+)"\)', line)
        if m:
            out.append((cond, _ccs(m.group(1)), n))
            cond = None
    return out


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _supported(rules: list[tuple[str | None, list[str], int]], cuda: str) -> tuple[list[str], int]:
    for cond, ccs, n in rules:
        if cond is None or _vkey(cuda) >= _vkey(cond):
            return ccs, n
    raise ValueError(f"no CUDA_SUPPORTED_ARCHS for CUDA {cuda}")


def _dockerfile(files: Mapping[str, str]) -> tuple[str, str, int] | None:
    for path in ("docker/Dockerfile", "Dockerfile"):
        for n, line in enumerate(files.get(path, "").split("\n"), 1):
            m = re.match(r"ARG torch_cuda_arch_list='([^']*)'", line)
            if m:
                return m.group(1), path, n
    return None


def _steps(files: Mapping[str, str]) -> list[dict[str, Any]]:
    """The release pipeline's CUDA wheel steps: platform, CUDA, the arch list and its line."""
    lines = files[PIPELINE].split("\n")
    env = {}
    for n, line in enumerate(lines, 1):
        m = re.match(r'\s*(CUDA_ARCH_\w+):\s*"([^"]*)"', line)
        if m:
            env[m.group(1)] = (m.group(2), n)
    out: list[dict[str, Any]] = []
    label: str | None = None
    for n, line in enumerate(lines, 1):
        if re.search(r"(label|block|group):", line):
            m = re.search(r'label: "(Build (?:arm64 |aarch64 )?wheel[^"]*)"', line)
            label = m.group(1) if m and "CPU" not in m.group(1) else None
            continue
        if label is None or "docker build" not in line or "CUDA_VERSION=" not in line:
            continue
        cuda = ".".join(re.search(r"CUDA_VERSION=([0-9.]+)", line).group(1).split(".")[:2])  # type: ignore[union-attr]
        plat = "linux-aarch64" if re.search(r"arm64|aarch64", label) else "linux-x86_64"
        m = re.search(r"torch_cuda_arch_list=(?:'([^']*)'|\\?\"\$\{(\w+)\})", line)
        if m and m.group(1) is not None:
            arch = (m.group(1), PIPELINE, n)
        elif m:
            arch = (env[m.group(2)][0], PIPELINE, env[m.group(2)][1])
        else:
            found = _dockerfile(files)
            if found is None:
                continue
            arch = found
        out.append({"label": label, "line": n, "cuda": cuda, "platform": plat, "arch": arch})
        label = None
    return out


def _default_cuda(files: Mapping[str, str]) -> tuple[str, str] | None:
    for n, line in enumerate(files.get("vllm/envs.py", "").split("\n"), 1):
        m = re.match(r'\s+VLLM_MAIN_CUDA_VERSION: str = "([0-9.]+)"', line)
        if m:
            return m.group(1), f'vllm/envs.py line {n} (VLLM_MAIN_CUDA_VERSION "{m.group(1)}")'
    upload = ".buildkite/scripts/upload-wheels.sh"
    for n, line in enumerate(files.get(upload, "").split("\n"), 1):
        m = re.search(r"for cu([0-9]+) wheels \(default wheels\)", line)
        if m:
            c = m.group(1)
            return f"{c[:-1]}.{c[-1]}", f"{upload} line {n} (cu{c} 'default wheels')"
    return None


def arch_lists(files: Mapping[str, str]) -> dict[str, tuple[list[str], str]]:
    """Per platform, the SASS a release's default wheel was built for and how it was read
    (files: sdist path below its top folder -> text). A platform whose CUDA builds differ and
    whose default CUDA is not said is left out."""
    if "CMakeLists.txt" not in files:
        for n, line in enumerate(files.get("setup.py", "").split("\n"), 1):
            m = re.match(r"(NVIDIA_)?SUPPORTED_ARCHS = \{([^}]*)\}", line)
            if m:
                ccs = _ccs(m.group(2).replace('"', ""))
                how = f"setup.py line {n}, taken whole (no TORCH_CUDA_ARCH_LIST, no GPU)"
                return {"linux-x86_64": (ccs, how)}
        return {}
    rules = _cmake(files["CMakeLists.txt"])
    if PIPELINE not in files:
        ccs, n = rules[0][1], rules[0][2]
        return {"linux-x86_64": (ccs, f"CMakeLists.txt line {n}, taken whole")}
    default = _default_cuda(files)
    by_plat: dict[str, dict[str, tuple[list[str], str]]] = {}
    for s in _steps(files):
        ccs, n = _supported(rules, s["cuda"])
        text, path, line = s["arch"]
        want = set(_ccs(text))
        how = (
            f"CMakeLists.txt line {n} (CUDA {s['cuda']}) x TORCH_CUDA_ARCH_LIST '{text}' "
            f"({path} line {line}) of step '{s['label']}' ({PIPELINE} line {s['line']})"
        )
        by_plat.setdefault(s["platform"], {})[s["cuda"]] = ([c for c in ccs if c in want], how)
    out: dict[str, tuple[list[str], str]] = {}
    for plat, cudas in by_plat.items():
        if len({tuple(v[0]) for v in cudas.values()}) == 1:
            pick = default[0] if default and default[0] in cudas else max(cudas, key=_vkey)
            out[plat] = cudas[pick]
        elif default and default[0] in cudas:
            ccs, how = cudas[default[0]]
            out[plat] = (ccs, f"{how}; the default wheel: {default[1]}")
    return out


def read_sdist(client: Client, url: str, sha256: str) -> dict[str, str]:
    """The build files of one sdist, streamed (LIMIT bytes at most), its sha256 checked."""
    digest = hashlib.sha256()
    seen = 0

    def chunks() -> Iterator[bytes]:
        nonlocal seen
        resp = client.open(url, {})
        for chunk in iter_body(resp, url):
            seen += len(chunk)
            if seen > LIMIT:
                raise ValueError(f"{url}: over {LIMIT} bytes")
            digest.update(chunk)
            yield chunk

    class Stream:
        def __init__(self) -> None:
            self.it, self.buf = chunks(), b""

        def read(self, size: int = -1) -> bytes:
            while size < 0 or len(self.buf) < size:
                nxt = next(self.it, None)
                if nxt is None:
                    break
                self.buf += nxt
            out, self.buf = (self.buf, b"") if size < 0 else (self.buf[:size], self.buf[size:])
            return out

    stream = Stream()
    files: dict[str, str] = {}
    fileobj: IO[bytes] = stream  # type: ignore[assignment]
    with tarfile.open(fileobj=fileobj, mode="r|gz") as tar:
        for member in tar:
            if member.isfile() and WANTED.match(member.name) and member.size <= MEMBER_LIMIT:
                handle = tar.extractfile(member)
                if handle is not None:
                    files[member.name.split("/", 1)[1]] = handle.read().decode("utf-8", "replace")
    stream.read()  # the rest, for the digest
    if digest.hexdigest() != sha256:
        raise ValueError(f"{url}: sha256 differs from the index's listing")
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default=None)
    ap.add_argument("versions", nargs="+")
    args = ap.parse_args()
    index = default_index(args.index).url
    if not index:
        print("no default index: give --index or configure pip's index-url", file=sys.stderr)
        return 2
    date = time.strftime("%Y-%m-%d", time.gmtime())
    with Client(timeout=300) as client:
        page = client.get(index.rstrip("/") + "/vllm/", "application/vnd.pypi.simple.v1+json")
        listing = {
            str(f["filename"]): f for f in json.loads(page.body)["files"] if isinstance(f, dict)
        }
        sources, entries = [], []
        for version in args.versions:
            name = f"vllm-{version}.tar.gz"
            if name not in listing:
                print(f"# {version}: no source distribution on the index: left out")
                continue
            sha = str(listing[name]["hashes"]["sha256"])
            found = arch_lists(read_sdist(client, str(listing[name]["url"]), sha))
            if not found:
                print(f"# {version}: its sdist does not say: left out")
                continue
            said = "; ".join(f"{p}: {' '.join(c)}, from {h}" for p, (c, h) in found.items())
            cite = (
                f"{name} sha256 {sha}, vllm's source distribution of {version} on the default "
                f"package index (read {date}): {said}; SASS only"
            )
            key = f"VLLM_SDIST_{version}"
            sources.append(f"  {key}:\n    cite: {json.dumps(cite)}\n    kind: build-config\n")
            for plat, (ccs, _how) in found.items():
                entries.append(
                    f"  - versions: '=={version}'\n    platforms:\n    - {plat}\n"
                    f"    arch_list: {' '.join(ccs)}\n    source:\n    - {key}\n"
                )
    print("sources:\n" + "".join(sources) + "packages:\n  vllm:\n" + "".join(entries), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
