"""`nvidia-smi topo -m` and `nvidia-smi nvlink -s`: the topology when NVML does not answer.

NVML is asked first (`host.topology`); on some hosts it leaves the P2P status unanswered or a
link's generation unknown, and these two human-readable reports still say how each pair is
connected (``NV18``: 18 bonded NVLinks; ``SYS``/``NODE``/``PHB``/``PXB``/``PIX``: PCIe paths) and
which links are up at which signalling rate. The parsers take the text only (recorded real
output replays them); everything read is bounded and cleaned before anyone prints it.
"""

from __future__ import annotations

import re
from typing import Any

from resolver.host.gpustate import clean
from resolver.host.smi import Runner, subprocess_runner

TIMEOUT_S = 10.0
MAX_TEXT = 256 * 1024
MAX_GPUS = 64
MAX_LINKS = 64
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# PCIe paths in `topo -m`'s legend, nearest last; NV# is NVLink.
PCIE_PATHS = ("SYS", "NODE", "PHB", "PXB", "PIX")
_CELL = re.compile(r"^(X|NV[0-9]{1,3}|SYS|NODE|PHB|PXB|PIX|SOC|N/A)$")
_GPU_LINE = re.compile(r"^GPU ([0-9]{1,3}): (.{1,100}?)(?: \(UUID: [^)]{0,80}\))?\s*$")
_LINK_LINE = re.compile(r"^\s*Link ([0-9]{1,3}): (.{0,60}?)\s*$")
_RATE = re.compile(r"^([0-9]{1,4}(?:\.[0-9]{1,4})?) GB/s$")


def parse_topo_matrix(text: str) -> dict[str, Any]:
    """`nvidia-smi topo -m` -> ``{"pairs": {"0-1": "NV18", ...}}`` between GPUs only.

    The header names the columns (GPU0, GPU1, NIC0, CPU Affinity...); each row starts with its
    own name and has one cell per column, tab-separated. Cells that are not a known connection
    word are dropped (a driver's new word reads as unknown, never as a guess).
    """
    lines = [_ANSI.sub("", ln) for ln in text[:MAX_TEXT].splitlines()]
    header: list[str] | None = None
    pairs: dict[str, str] = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        if header is None:
            if line.startswith("\t") and any(re.fullmatch(r"GPU[0-9]+", c) for c in cells):
                header = cells[1:]
            continue
        if not cells or not re.fullmatch(r"GPU[0-9]{1,3}", cells[0]):
            if cells and cells[0].startswith("Legend"):
                break
            continue
        row = int(cells[0][3:])
        for name, cell in zip(header, cells[1:], strict=False):
            if not re.fullmatch(r"GPU[0-9]{1,3}", name) or not _CELL.match(cell):
                continue
            col = int(name[3:])
            if col != row and row < MAX_GPUS and col < MAX_GPUS:
                key = f"{min(row, col)}-{max(row, col)}"
                pairs.setdefault(key, cell)
    return {"pairs": pairs}


def parse_nvlink_status(text: str) -> dict[str, Any]:
    """`nvidia-smi nvlink -s` -> ``{"gpus": [{"index", "name", "links": [{link, active,
    gbps}]}]}``; ``gbps`` is the signalling rate the tool prints (26.562 on NVLink 4), not a
    payload rate, and is shown, never used for a peak."""
    gpus: list[dict[str, Any]] = []
    for raw in _ANSI.sub("", text[:MAX_TEXT]).splitlines():
        m = _GPU_LINE.match(raw)
        if m and len(gpus) < MAX_GPUS:
            gpus.append({"index": int(m.group(1)), "name": clean(m.group(2)), "links": []})
            continue
        m = _LINK_LINE.match(raw)
        if m and gpus and len(gpus[-1]["links"]) < MAX_LINKS:
            value = m.group(2)
            rate = _RATE.match(value)
            gpus[-1]["links"].append(
                {
                    "link": int(m.group(1)),
                    "active": rate is not None,
                    "gbps": float(rate.group(1)) if rate else None,
                }
            )
    return {"gpus": gpus}


def collect(runner: Runner = subprocess_runner, binary: str = "nvidia-smi") -> dict[str, Any]:
    """Both reports, parsed; ``error`` says why one could not be read (never raises)."""
    out: dict[str, Any] = {"error": None, "topo": None, "nvlink": None}
    for key, argv, parse in (
        ("topo", [binary, "topo", "-m"], parse_topo_matrix),
        ("nvlink", [binary, "nvlink", "-s"], parse_nvlink_status),
    ):
        done = runner(argv, TIMEOUT_S)
        if done is None:
            out["error"] = f"{binary} not found"
            return out
        if done.returncode != 0:
            lines = (done.stderr or done.stdout or "").strip().splitlines() or [""]
            why = clean(lines[0]) or ""
            out["error"] = f"{binary} {argv[1]} {argv[2]}: exit {done.returncode} {why}".strip()
            continue
        out[key] = parse(done.stdout)
    return out


def nv_links(cell: str | None) -> int:
    """``NV18`` -> 18; any PCIe path -> 0."""
    m = re.fullmatch(r"NV([0-9]{1,3})", cell or "")
    return int(m.group(1)) if m else 0
