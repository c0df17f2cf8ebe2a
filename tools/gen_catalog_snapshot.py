"""Write data/catalog.json (the shipped database's YAML files, parsed, for a fresh HOME's start;
extensions.yaml as its head) and data/extensions.json (extensions.yaml parsed whole, read when
an extension package is asked for).

Run from the repository root after editing any file of data/ that the catalog reads
(tests/test_catalog.py fails until the snapshot is current; a stale one is only unused):

    python tools/gen_catalog_snapshot.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from resolver import catalog as catalog_mod  # noqa: E402
from resolver.db import extdefer, snapshot  # noqa: E402


def main() -> None:
    directory = catalog_mod.shipped_data_dir()
    text = snapshot.render(directory, catalog_mod.SNAPSHOT_FILES, catalog_mod.parse_shipped)
    (directory / snapshot.FILE).write_text(text, encoding="utf-8")
    print(f"{directory / snapshot.FILE}: {len(text)} bytes")
    # the extension packages, read only when asked for (resolver/db/extdefer.py)
    ext = snapshot.render(directory, [extdefer.FILE], catalog_mod.parse_yaml)
    (directory / extdefer.SNAPSHOT).write_text(ext, encoding="utf-8")
    print(f"{directory / extdefer.SNAPSHOT}: {len(ext)} bytes")


if __name__ == "__main__":
    main()
