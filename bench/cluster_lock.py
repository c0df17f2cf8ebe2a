"""Time `gpuresolve lock` on a 50,000-node cluster (many nodes, few shapes), and its memory.

Budget (Kubernetes fleets issue): under 5 s on a 2-core machine; reading the nodes (issue 29):
under 2 s in either layout. The node list is written to a temporary directory in the shape of
`kubectl get nodes -o json` (``--layout indented``) or of one-line JSON as `kubectl get --raw`,
`jq -c` and API clients write it (``--layout compact``), from the nodes of
tests/fixtures/kubernetes/nodes.json (renamed; 6 shapes, two platforms), each with ``--images``
entries in ``status.images`` (the kubelet reports up to 50). The lock runs in a fresh process,
which prints its wall and CPU time, its peak memory (ru_maxrss) and a digest of the members read
(shapes, counts, nodes, notes: the same in both layouts, and before and after a change).
Usage: python3 bench/cluster_lock.py [--nodes N] [--images N] [--layout indented|compact|both]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "kubernetes" / "nodes.json"
# Real clusters are mostly a few kinds of node: weights per fixture node.
WEIGHTS = {
    "h100-01": 60,
    "a100-01": 25,
    "a100-mig-01": 4,
    "l4-shared-01": 6,
    "gh200-01": 3,
    "cp-01": 2,
}


def write_inventory(path: Path, nodes: int, images: int, compact: bool = False) -> None:
    """The node list, one node at a time: as kubectl writes it (4-space indents), or ``compact``
    as one line of JSON with no whitespace at all."""
    templates = {}
    for item in json.loads(FIXTURE.read_text())["items"]:
        node = copy.deepcopy(item)
        base = [i["names"][1] for i in node["status"]["images"]]
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = "@NAME@"
        node["status"]["images"] = "@IMAGES@"
        if compact:
            text = json.dumps(node, separators=(",", ":"))
        else:
            text = "        " + json.dumps(node, indent=4).replace("\n", "\n        ")
        templates[item["metadata"]["name"]] = (text, base)
    cycle = [name for name, w in WEIGHTS.items() for _ in range(w)]
    pad, nl, sp = ("", "", "") if compact else (" " * 20, "\n", " ")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            f'{{{nl}    "apiVersion":{sp}"v1",{nl}    "items":{sp}[{nl}'.replace("    ", sp * 4)
        )
        for n in range(nodes):
            text, base = templates[cycle[n % len(cycle)]]
            name = f"node-{n:05d}"
            entries = []
            for k in range(images):
                ref = f"{base[k % len(base)]}-{k}"
                digest = hashlib.sha256(f"{name}{k}".encode()).hexdigest()
                entries.append(
                    f'{pad}{{{nl}{pad}{sp * 4}"names":{sp}[{nl}'
                    f'{pad}{sp * 8}"{ref}@sha256:{digest}",{nl}'
                    f'{pad}{sp * 8}"{ref}"{nl}{pad}{sp * 4}],{nl}'
                    f'{pad}{sp * 4}"sizeBytes":{sp}{1_000_000 + 7919 * k}{nl}{pad}}}'
                )
            listed = f"[{nl}" + f",{nl}".join(entries) + f"{nl}{sp * 16}]" if entries else "[]"
            fh.write(text.replace('"@NAME@"', f'"{name}"').replace('"@IMAGES@"', listed))
            fh.write(f",{nl}" if n + 1 < nodes else nl)
        end = '    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n'
        end += "    }\n}\n"
        fh.write(end.replace("\n", nl).replace(" ", sp))


CHILD = """
import hashlib, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from pathlib import Path
from resolver import catalog as catalog_mod
from resolver.team.spec import load_spec
from resolver.flows.team import lock_team
from resolver.writers import lockfiles
catalog = catalog_mod.load()
t1 = time.perf_counter()
spec = load_spec(sys.argv[1], catalog)
t2 = time.perf_counter()
options = lockfiles.LockOptions(formats=frozenset({"requirements"}), top_level=True)  # no index
team = lock_team(catalog, spec, options)
lockfiles.write_files(Path(sys.argv[2]), team.files)
t3, c3 = time.perf_counter(), time.process_time()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
nodes = sum(m.count for m in spec.members)
print(f"catalog load:            {(t1 - t0) * 1000:8.0f} ms")
print(f"read {nodes} nodes:       {(t2 - t1) * 1000:8.0f} ms  ({len(spec.members)} shapes;"
      " budget 2000 ms)")
print(f"solve + render + write:  {(t3 - t2) * 1000:8.0f} ms")
print(f"lock, end to end:        {(t3 - t0) * 1000:8.0f} ms wall, {(c3 - c0) * 1000:.0f} ms CPU"
      "  (budget 5000 ms)")
print(f"peak memory (maxrss):    {rss:8.0f} MiB")
print("result: " + "; ".join(f"{l or 'all'}: torch {d.torch}" for l, d in team.groups))
# What was read (every shape, count, node and note): equal across layouts and code changes.
print("members read: sha256 " + hashlib.sha256(repr(spec.members).encode()).hexdigest()[:16])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--images", type=int, default=10, help="status.images entries per node")
    parser.add_argument("--layout", choices=["indented", "compact", "both"], default="both")
    args = parser.parse_args()
    layouts = ["indented", "compact"] if args.layout == "both" else [args.layout]
    for layout in layouts:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            t0 = time.perf_counter()
            write_inventory(work / "nodes.json", args.nodes, args.images, layout == "compact")
            size = (work / "nodes.json").stat().st_size
            print(
                f"inventory ({layout}): {args.nodes} nodes, {args.images} images each, "
                f"{size / 2**20:.0f} MiB (written in {time.perf_counter() - t0:.1f} s)"
            )
            spec = work / "cluster.yaml"
            spec.write_text(
                'name: cluster\npython: "3.12"\npackages:\n  torch: ">=2.4"\n'
                "targets:\n  - kubernetes: nodes.json\n",
                encoding="utf-8",
            )
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            subprocess.run(
                [sys.executable, "-c", CHILD, str(spec), str(work / "out")], check=True, env=env
            )


if __name__ == "__main__":
    main()
