"""Bytes read and wall time to inspect real torch wheels over HTTP range requests.

Budget (issue 13): the 2.8.0 cp312 manylinux x86_64 wheel (888 MB) in at most 16 MB. Prints,
per wheel, the bytes read, the file size, the share, the wall time and what it carries. The
index is pip's (PIP_INDEX_URL, `pip config`, else pip's built-in default) unless --index.
Needs the network. Usage: python3 bench/wheel_read.py [--index URL] [FILE-NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import time

from resolver.io.http import Client
from resolver.wheels.index import pip_default_index, project_wheels
from resolver.wheels.torchwheel import inspect_wheel

DEFAULT = [
    "torch-2.0.1-cp310-cp310-manylinux1_x86_64.whl",
    "torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl",
    "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl",
    "torch-2.11.0-cp310-cp310-manylinux_2_28_aarch64.whl",
    "torch-2.8.0-cp312-cp312-win_amd64.whl",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", help="a simple-repository index URL")
    parser.add_argument("files", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    index = args.index or pip_default_index()
    if not index:
        print("no index: pass --index", file=sys.stderr)
        return 2
    with Client() as fetcher:
        links = {w.link.filename: w.link for w in project_wheels(fetcher, index)}
    print(f"{'wheel':<55} {'read MB':>8} {'size MB':>8} {'share':>6} {'wall s':>7}  carries")
    for name in args.files:
        link = links.get(name)
        if link is None:
            print(f"{name:<55} not on the index")
            continue
        t0 = time.perf_counter()
        report = inspect_wheel(link.url, sha256=link.sha256)
        wall = time.perf_counter() - t0
        carries = f"{report.version} cuda={report.cuda} {' '.join(report.sass + report.ptx)}"
        print(
            f"{name:<55} {report.bytes_read / 1e6:8.2f} {report.size / 1e6:8.1f} "
            f"{report.bytes_read / report.size:6.1%} {wall:7.2f}  {carries}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
