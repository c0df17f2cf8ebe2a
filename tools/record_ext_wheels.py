"""Record the byte ranges the history reader fetches from real wheels, for the tests to replay.

For each wheel URL given, ``exthistory.read_wheel`` runs against the real index while every
range the reader asks for is logged; the ranges are then saved (base64) with the file's size
and name into ``tests/fixtures/ext_history/<file>.ranges.json``. The test server serves exactly
those ranges and refuses any other, so a test reads what the real server answered, and a
reader that asks for more than it did fails.
Usage: python3 tools/record_ext_wheels.py PACKAGE PLATFORM URL [URL...]
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver.dbupdate.exthistory import read_wheel  # noqa: E402
from resolver.io.http import Client, iter_body  # noqa: E402
from resolver.io.ranges import HttpSource  # noqa: E402
from resolver.wheels.simple import Link  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "ext_history"


def record(package: str, plat: str, url: str) -> None:
    """Read one wheel as the history does, logging every range asked for; save them."""
    asked: list[tuple[int, int]] = []
    sizes: list[int] = []
    real_stream, real_open = HttpSource._stream, HttpSource._open

    def stream(self: HttpSource, offset: int, length: int) -> Iterator[bytes]:
        asked.append((offset, length))
        return real_stream(self, offset, length)

    def opened(self: HttpSource, first_tail: int) -> None:
        real_open(self, first_tail)
        sizes.append(self.size)
        asked.append((self.size - min(first_tail, self.size), min(first_tail, self.size)))

    HttpSource._stream, HttpSource._open = stream, opened  # type: ignore[method-assign]
    try:
        with Client(timeout=120) as client:
            name = url.rsplit("/", 1)[-1]
            facts = read_wheel(client, package, plat, Link(url=url, filename=name))
            assert facts.error is None, facts.error
            ranges = []
            for offset, length in sorted(set(asked)):
                spec = f"bytes={offset}-{offset + length - 1}"
                resp = client.open(url, {"Range": spec, "Accept-Encoding": "identity"})
                data = b"".join(iter_body(resp, url))
                assert resp.status_code == 206 and len(data) == length, spec
                ranges.append([offset, base64.b64encode(data).decode("ascii")])
    finally:
        HttpSource._stream, HttpSource._open = real_stream, real_open  # type: ignore[method-assign]
    doc = {"file": name, "size": sizes[0], "ranges": ranges}
    (OUT / f"{name}.ranges.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    print(name, sizes[0], sum(len(base64.b64decode(r[1])) for r in ranges), "bytes recorded")


def main() -> int:
    package, plat, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
    OUT.mkdir(parents=True, exist_ok=True)
    for url in urls:
        record(package, plat, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
