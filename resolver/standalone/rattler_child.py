"""The py-rattler solve, run as a script by conda_solve.py (never imported; imports no gpuresolve).

Reads the request (JSON) on stdin, prints one JSON line: ``{"records": [...]}`` or ``{"error":
..., "kind": ...}``; then ``os._exit``, which skips interpreter finalisation, where py-rattler
0.27/0.28 crash now and then.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _solve(request: dict[str, Any]) -> list[dict[str, Any]]:
    import asyncio

    from rattler import (
        BuildString,
        Channel,
        Gateway,
        GenericVirtualPackage,
        MatchSpec,
        PackageName,
        Version,
        solve,
    )

    virtual = [
        GenericVirtualPackage(PackageName(n), Version(v), BuildString(b))
        for n, v, b in request["virtual_packages"]
    ]
    gateway = Gateway(cache_dir=request["cache_dir"])
    records = asyncio.run(
        solve(
            sources=[Channel(c) for c in request["channels"]],
            specs=[MatchSpec(s, strict=False) for s in request["specs"]],
            gateway=gateway,
            platforms=[request["subdir"], "noarch"],
            virtual_packages=virtual,
        )
    )
    return [
        {
            "name": r.name.normalized,
            "version": str(r.version),
            "build": str(r.build),
            "subdir": str(r.subdir),
            "url": str(r.url),
            "md5": r.md5.hex() if r.md5 else "",
            "sha256": r.sha256.hex() if r.sha256 else "",
            "depends": [str(d) for d in r.depends],
        }
        for r in records
    ]


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
        answer: dict[str, Any] = {"records": _solve(request)}
        rc = 0
    except Exception as exc:  # every failure goes back to the parent as one message
        answer = {"error": str(exc), "kind": type(exc).__name__}
        rc = 1
    sys.stdout.write(json.dumps(answer) + "\n")
    return rc


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
