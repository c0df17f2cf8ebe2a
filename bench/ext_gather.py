"""The extension packages' history gather (issue 38): wheels read, bytes fetched, seconds, memory.

Reads every release of the packages in a database's extensions.yaml that the database lacks
since torch 2.1.0 (``resolver/dbupdate/exthistory.py``: range reads of each wheel's directory,
METADATA, build record and the heads of its ELF libraries), merges them
(``exthistmerge``) and prints the figures and the releases added per package. A second run
against its own ``--state`` file shows the incremental cost (one request per page).

Usage: python3 bench/ext_gather.py [--data DIR] [--index URL] [--state FILE] [--write]
``--index``: the default index (else $GPURESOLVE_DEFAULT_INDEX or pip's configuration; never a
host written here). ``--write`` writes the merged extensions.yaml back into ``--data``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver.db.yamlfile import dump_yaml, read_yaml  # noqa: E402
from resolver.dbupdate.exthistmerge import merge_history, needs_scan  # noqa: E402
from resolver.dbupdate.exthistory import (  # noqa: E402
    history,
    load_state,
    pages_for,
    state_as_json,
)
from resolver.dbupdate.merge import Summary  # noqa: E402
from resolver.dbupdate.write import leading_comments  # noqa: E402
from resolver.host.pipconfig import default_index  # noqa: E402
from resolver.io.atomic import atomic_write  # noqa: E402
from resolver.io.http import Client  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--index", default=None)
    ap.add_argument("--state", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--date", default=time.strftime("%Y-%m-%d", time.gmtime()))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--whole-budget", type=int, default=1024, help="MiB of whole-wheel reads")
    args = ap.parse_args()
    index = default_index(args.index).url
    if not index:
        print("no default index: give --index or configure pip's index-url", file=sys.stderr)
        return 2
    raw = {n: read_yaml(args.data / n) for n in ("extensions.yaml", "gpus.yaml", "cuda.yaml")}
    torch_doc = read_yaml(args.data / "torch.yaml")
    pytorch = str(torch_doc.get("index_url") or "").split("{variant}")[0] or None
    variants = sorted(
        {
            str(v.get("name"))
            for r in torch_doc.get("releases") or []
            for v in r.get("variants") or []
        }
        if isinstance(torch_doc.get("releases"), list)
        else set()
    )
    variants = [v for v in variants if v.startswith("cu")]
    configs_path = args.data / "ext_build_configs.yaml"
    configs = read_yaml(configs_path) if configs_path.is_file() else {}
    state = (
        load_state(json.loads(args.state.read_text()))
        if args.state and args.state.is_file()
        else {}
    )
    known = {
        str(p["name"]): {str(r["version"]) for r in p.get("releases") or []}
        for p in raw["extensions.yaml"].get("packages") or []
    }
    pages, elsewhere = pages_for(raw["extensions.yaml"], index, pytorch, variants)
    with Client(timeout=120) as client:
        hist = history(
            client,
            lambda: Client(timeout=120),
            pages,
            known,
            state,
            elsewhere=elsewhere,
            whole=needs_scan(raw["extensions.yaml"], configs),
            whole_budget=args.whole_budget * 2**20,
            workers=args.workers,
        )
        requests = client.requests
    summary = Summary()
    added = merge_history(raw, hist, args.date, summary, configs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pages: {hist.pages} requests ({hist.unchanged} unchanged); page client: {requests}")
    print(f"wheels read: {hist.wheels_read}")
    print(f"bytes fetched: {hist.bytes_read} ({hist.bytes_read / 2**20:.1f} MiB)")
    print(f"seconds: {hist.seconds:.1f}")
    print(f"peak memory: {peak:.0f} MiB")
    for name in sorted(known):
        total = sum(
            1
            for p in raw["extensions.yaml"]["packages"]
            if p["name"] == name
            for _r in p["releases"]
        )
        print(f"  {name}: {added.get(name, 0)} releases added, {total} in all")
    for line in summary.notes:
        print(f"  note: {line}")
    if args.state:
        atomic_write(args.state, state_as_json(hist.state))
    if args.write and added:
        path = args.data / "extensions.yaml"
        atomic_write(path, leading_comments(path) + dump_yaml(raw["extensions.yaml"]))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
