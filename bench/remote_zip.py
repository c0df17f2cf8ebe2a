"""Requests, bytes and wall time of reading a wheel over HTTP range requests (no network).

The standard library's ``zipfile`` over a counted range source (``resolver.io.zip``) should make
one request for the tail, one for a directory outside it and one per member, and read no byte
of the members it does not need. The wheel is synthetic but shaped like torch's: a 3,000-entry
directory, two 20 MB members it must skip, and an 8 MB ``libtorch_python.so`` holding the real
2.8.0 cu128 arch string recorded in tests/fixtures/wheels. Served from a local server that
answers ``Range`` (tests/wheel_support.py). Usage: python3 bench/remote_zip.py [--runs N]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from resolver.wheels.torchwheel import inspect_wheel
from tests.wheel_support import library, metadata, real_wheels, serve_wheels

NAME = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"


def wheel() -> bytes:
    rec = real_wheels()[NAME]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3000):  # a directory of a few hundred kB, as torch's is a few MB
            zf.writestr(f"torch/include/header_{i:05d}_with_a_long_name.h", b"x")
        zf.writestr("torch/lib/libtorch_cuda.so", random.Random(7).randbytes(20_000_000))
        region = bytes.fromhex(rec["arch_region_hex"])
        zf.writestr("torch/lib/libtorch_python.so", library(region, filler=8_000_000))
        zf.writestr("torch/lib/libtorch_cpu.so", random.Random(8).randbytes(20_000_000))
        zf.writestr("torch/version.py", rec["version_py"])
        zf.writestr("torch-2.8.0.dist-info/METADATA", metadata("2.8.0", rec["requires_dist"]))
    return buf.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    data = wheel()
    with serve_wheels({NAME: data}) as server:
        times = []
        for _ in range(max(1, args.runs)):
            server.log.clear()
            server.sent = 0
            t0 = time.perf_counter()
            report = inspect_wheel(server.url(NAME))
            times.append(time.perf_counter() - t0)
    print(f"wheel          {len(data) / 1e6:.1f} MB")
    print(f"requests       {len(server.log)} ({', '.join(str(r) for _p, r in server.log)})")
    print(f"bytes read     {report.bytes_read} ({report.bytes_read / len(data):.1%})")
    print(f"server sent    {server.sent}")
    print(f"wall           best {min(times) * 1000:.0f} ms of {len(times)}")
    print(f"carries        {report.version} {' '.join(report.sass + report.ptx)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
