"""nvidia-smi probe: `--query-gpu` CSV, the fallback when NVML's Python bindings are absent.

Only the machine-readable query is parsed, never the human banner (its field names changed in
driver 610). The driver's highest CUDA version is not a --query-gpu field, so this probe leaves it
unset rather than scrape the banner.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from resolver.core.errors import escaped
from resolver.core.hostprofile import (
    MAX_LOST_ERROR,
    PCI_BUS_ID_RE,
    SOURCE_SMI,
    STATE_MISMATCH,
    STATE_NO_DRIVER,
    STATE_NO_GPU,
    STATE_OK,
    GpuInfo,
    LostGpu,
)
from resolver.host.probe import ProbeResult, gpu, pci_device_hex

QUERY_FIELDS = (
    "index",
    "name",
    "driver_version",
    "compute_cap",
    "pci.device_id",
    "memory.total",
    "mig.mode.current",
)
# R470 and older reject compute_cap (`Field "compute_cap" is not a valid field to query.`):
# query without it and let the caller look the CC up by name.
FALLBACK_FIELDS = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
TIMEOUT_S = 10.0
OUTPUT_MAX = 4 * 1024 * 1024  # bytes nvidia-smi may print (1,000 GPUs take 0.1 MiB); then stopped

_CC_RE = re.compile(r"^[0-9]+\.[0-9]+$")
_DRIVER_RE = re.compile(r"^[0-9]+(\.[0-9]+)+$")
_LIB_VERSION_RE = re.compile(r"NVML library version:\s*([0-9.]+)")
# A GPU that fell off the bus: nvidia-smi prints the rows it could read, then one line per lost
# GPU, and exits 15 ("GPU is lost"). Its wording: "Unable to determine the device handle for
# GPU0000:17:00.0: Unknown Error" (newer drivers), "... for GPU 0000:02:00.0: GPU is lost.
# Reboot the system to recover this GPU" (older).
_LOST_RE = re.compile(
    r"Unable to (?:determine|detect) the device handle for GPU ?(" + PCI_BUS_ID_RE.pattern + r")"
    r":\s*(.*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CommandResult:
    """What a command printed. ``returncode`` None: it was stopped at the timeout."""

    returncode: int | None
    stdout: str
    stderr: str = ""


# Runs argv with a timeout in seconds; returns None when the program does not exist.
Runner = Callable[[Sequence[str], float], CommandResult | None]


def subprocess_runner(argv: Sequence[str], timeout: float) -> CommandResult | None:
    """The real runner: a subprocess with a timeout, never raising for a missing program."""
    from resolver.io import subprocs

    try:  # a hang is killed with its whole process group, never left running
        done = subprocs.run(argv, timeout=timeout, limit=OUTPUT_MAX)
    except FileNotFoundError:
        return None
    except OSError as exc:  # not executable, say
        return CommandResult(126, "", str(exc))
    if done.overflow:  # a broken tool flooding its output: not an answer (parsing it took minutes)
        return CommandResult(1, "", f"{argv[0]} printed more than {OUTPUT_MAX} bytes: stopped")
    return CommandResult(None if done.timed_out else done.returncode, done.stdout, done.stderr)


def query_command(binary: str, fields: Sequence[str] = QUERY_FIELDS) -> list[str]:
    """The exact argv this probe runs (fixtures record these)."""
    return [binary, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def classify_error(text: str) -> str | None:
    """Map nvidia-smi's failure text to a detection state; None when it says nothing known.

    "couldn't communicate with the NVIDIA driver" means no usable driver *from here*: with no
    kernel module, or in a container without the GPU's device files. `detect` tells the two apart
    by whether any probe saw a driver version.
    """
    low = text.lower()
    if "driver/library version mismatch" in low:
        return STATE_MISMATCH
    if "no devices were found" in low:
        return STATE_NO_GPU
    if "couldn't communicate with the nvidia driver" in low:
        return STATE_NO_DRIVER
    return None


def field_rejected(text: str, field: str) -> bool:
    """nvidia-smi's answer to a field its driver does not know."""
    return f'field "{field}" is not a valid field to query' in text.lower()


def nvml_library_version(text: str) -> str | None:
    """The user-space library version newer drivers print under a mismatch error."""
    m = _LIB_VERSION_RE.search(text)
    return m.group(1).rstrip(".") if m else None


def _value(raw: str) -> str | None:
    """A CSV cell, or None for "[N/A]", "[Not Supported]", "[Unknown Error]", "N/A", ""."""
    v = raw.strip()
    if not v or v == "N/A" or (v.startswith("[") and v.endswith("]")):
        return None
    return v


def _memory_mib(raw: str | None) -> int | None:
    """ "143771" (nounits) or "143771 MiB" -> 143771."""
    if raw is None:
        return None
    number = raw.split()[0]
    return int(number) if number.isascii() and number.isdigit() else None


def parse_query(
    text: str, fields: Sequence[str] = QUERY_FIELDS
) -> tuple[str | None, list[GpuInfo]]:
    """Parse `--query-gpu` CSV rows (noheader; units or not) into (driver, GPUs).

    Lines that are not rows (warnings some drivers print first) are skipped. A name with a comma
    would add cells; they are given back to the name, the one free-text field.
    """
    driver: str | None = None
    gpus: list[GpuInfo] = []
    n = len(fields)
    name_at = fields.index("name") if "name" in fields else None
    for line in text.splitlines():
        cells = line.split(",")
        if len(cells) < n:
            continue
        if len(cells) > n:
            if name_at is None:
                continue
            extra = len(cells) - n
            name = ",".join(cells[name_at : name_at + extra + 1])
            cells = [*cells[:name_at], name, *cells[name_at + extra + 1 :]]
        row = {f: _value(c) for f, c in zip(fields, cells, strict=True)}
        index = row.get("index")
        if index is None or not (index.isascii() and index.isdigit()):
            continue
        drv = row.get("driver_version")
        if driver is None and drv and _DRIVER_RE.match(drv):
            driver = drv
        cc = row.get("compute_cap")
        mig = (row.get("mig.mode.current") or "").lower()
        gpus.append(
            gpu(
                int(index),
                SOURCE_SMI,
                name=row.get("name"),
                cc=cc if cc and _CC_RE.match(cc) else None,
                memory_mib=_memory_mib(row.get("memory.total")),
                pci_device_id=pci_device_hex(row.get("pci.device_id")),
                mig=mig if mig in ("enabled", "disabled") else None,
            )
        )
    return driver, gpus


def parse_lost(text: str) -> list[LostGpu]:
    """The GPUs nvidia-smi lists but cannot open, each once, by PCI bus id."""
    lost: dict[str, LostGpu] = {}
    for line in text.splitlines():
        m = _LOST_RE.search(line)
        if m and m.group(1) not in lost:
            reason = " ".join(m.group(2).split())[:MAX_LOST_ERROR] or "no reason given"
            lost[m.group(1)] = LostGpu(m.group(1), escaped(reason), SOURCE_SMI)
    return list(lost.values())


def interpret(result: CommandResult, fields: Sequence[str] = QUERY_FIELDS) -> ProbeResult:
    """Facts and state from one finished nvidia-smi query.

    A failed exit with "Unable to determine the device handle" lines is a host with GPUs lost,
    not one without a driver: the rows it printed are the GPUs that answer."""
    probe = ProbeResult(source=SOURCE_SMI)
    text = "\n".join(t for t in (result.stdout, result.stderr) if t.strip())
    if result.returncode is None:
        probe.status = "timed out"
        probe.detail = "nvidia-smi did not answer in time (a hung GPU or driver?)"
        return probe
    probe.lost = parse_lost(text)
    readable = result.returncode == 0 or bool(probe.lost)
    driver, gpus = parse_query(result.stdout, fields) if readable else (None, [])
    if gpus:
        probe.driver = driver
        if driver:
            probe.sources["driver"] = SOURCE_SMI
        probe.gpus = gpus
        probe.state = STATE_OK
        probe.status = "ok" if "compute_cap" in fields else "ok (no compute_cap field: old driver)"
        if probe.lost:
            probe.status = f"{len(gpus)} GPU(s) answered, {len(probe.lost)} lost"
        return probe
    probe.state = STATE_NO_GPU if probe.lost else classify_error(text)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    probe.status = escaped(first) or f"exit status {result.returncode}"  # shown on the terminal
    probe.detail = "\n".join(map(escaped, text.strip().splitlines())) or None
    if probe.state == STATE_NO_GPU:
        probe.gpus = []
    return probe


def run(
    runner: Runner | None = None,
    binaries: Sequence[str] = ("nvidia-smi",),
    timeout: float = TIMEOUT_S,
) -> ProbeResult:
    """Run the query with the first of ``binaries`` that exists; retry without compute_cap."""
    run_cmd = runner or subprocess_runner
    for binary in binaries:
        done = run_cmd(query_command(binary), timeout)
        if done is None:
            continue
        if done.returncode and field_rejected(done.stdout + done.stderr, "compute_cap"):
            retry = run_cmd(query_command(binary, FALLBACK_FIELDS), timeout)
            if retry is not None:
                return interpret(retry, FALLBACK_FIELDS)
        return interpret(done)
    return ProbeResult(source=SOURCE_SMI, status="not installed")
