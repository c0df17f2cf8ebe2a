"""The wheel reader: zip directory over byte ranges, torch facts, misbehaving servers."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from io import BytesIO
from pathlib import Path

import pytest
import yaml
from cli_support import assert_schema, run_cli
from wheel_support import (
    real_wheels,
    serve_wheels,
    torch_wheel,
    version_py,
    zip64_wheel,
)

from resolver.io import ReadError
from resolver.io.ranges import FileSource, open_source
from resolver.io.zip import RemoteZip
from resolver.wheels import WheelError
from resolver.wheels.torchwheel import (
    inspect_wheel,
    metadata_pins,
    parse_version_py,
    scan_arch_strings,
    token_cc,
)

DATA = Path(__file__).resolve().parents[1] / "data"
W280 = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
SASS_280 = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
CU128_PINS = [
    'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-nccl-cu12==2.27.3; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton==3.4.0; platform_system == "Linux" and platform_machine == "x86_64"',
]
# What the recorded real wheels carry: (version, cuda, sass, ptx).
EXPECTED: dict[str, tuple[str, str | None, list[str], list[str]]] = {
    "torch-2.0.1-cp310-cp310-manylinux1_x86_64.whl": (
        "2.0.1+cu117",
        "11.7",
        ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"],
        [],
    ),
    "torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl": (
        "2.4.1+cu121",
        "12.1",
        ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        [],
    ),
    W280: ("2.8.0+cu128", "12.8", SASS_280, []),
    "torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl": (
        "2.11.0+cu130",
        "13.0",
        ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        [],
    ),
    "torch-2.11.0-cp310-cp310-manylinux_2_28_aarch64.whl": (
        "2.11.0+cu130",
        "13.0",
        ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"],
        [],
    ),
    "torch-2.8.0-cp312-cp312-manylinux_2_28_aarch64.whl": ("2.8.0+cpu", None, [], []),
    "torch-2.8.0-cp312-cp312-win_amd64.whl": ("2.8.0+cpu", None, [], []),
}


def _real_wheel(name: str) -> bytes:
    """A wheel holding the recorded bytes of the real ``name``: its version.py, its pins and
    (for CUDA builds) its arch-string region inside a library-shaped member."""
    rec = real_wheels()[name]
    region = bytes.fromhex(rec["arch_region_hex"]) if "arch_region_hex" in rec else None
    return torch_wheel(
        "x",
        None,
        region,
        windows=name.endswith("win_amd64.whl"),
        requires=rec["requires_dist"],
        version_text=rec["version_py"],
    )


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- the recorded real wheels ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_real_wheels_read_as_their_builds(tmp_path: Path, name: str) -> None:
    version, cuda, sass, ptx = EXPECTED[name]
    report = inspect_wheel(str(_write(tmp_path, name, _real_wheel(name))))
    assert (report.version, report.cuda, report.sass, report.ptx) == (version, cuda, sass, ptx)
    assert report.git_version and len(report.git_version) == 40


def test_recorded_regions_are_cut_as_documented() -> None:
    for name, rec in real_wheels().items():
        assert rec["sha256"] and len(rec["sha256"]) == 64, name
        if "arch_region_hex" in rec:
            region = bytes.fromhex(rec["arch_region_hex"])
            assert len(region) < 256 and rec["arch_strings_found"] == 1, name
            assert rec["arch_region_offset"] + len(region) <= rec["arch_member_size"]


def _db_arch(minor: str, variant: str, platform: str) -> tuple[list[str], list[str]]:
    doc = yaml.safe_load((DATA / "torch.yaml").read_text(encoding="utf-8"))
    series = next(s for s in doc["series"] if s["minor"] == minor)
    build = next(v for v in series["variants"] if v["name"] == variant)
    arch = build["platforms"][platform]
    return list(arch.get("sass", [])), list(arch.get("ptx", []))


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e[1]))
def test_recorded_real_wheels_agree_with_the_database(name: str) -> None:
    version, _cuda, sass, ptx = EXPECTED[name]
    public, variant = version.split("+")
    minor = ".".join(public.split(".")[:2])
    platform = "linux-aarch64" if "aarch64" in name else "linux-x86_64"
    assert _db_arch(minor, variant, platform) == (
        [token_cc(t) for t in sass],
        [token_cc(t) for t in ptx],
    )


def test_pins_follow_the_wheel_platform() -> None:
    rec = real_wheels()[W280]
    text = "Name: torch\n" + "".join(f"Requires-Dist: {r}\n" for r in rec["requires_dist"])
    assert metadata_pins(text, "linux-x86_64", "3.12") == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}
    assert metadata_pins(text, "windows-x86_64", "3.12") == {}


# --- parsing pieces ----------------------------------------------------------------------------


def test_version_py_is_parsed_not_run() -> None:
    text = version_py("2.8.0+cu128", "12.8") + "import os\nos._exit(3)\n"
    values = parse_version_py(text)
    assert values["__version__"] == "2.8.0+cu128" and values["cuda"] == "12.8"
    with pytest.raises(WheelError):
        parse_version_py("def (:\n")


def test_token_cc() -> None:
    assert [token_cc(t) for t in ("sm_37", "sm_120", "compute_90a", "sm_100f")] == [
        "3.7",
        "12.0",
        "9.0a",
        "10.0f",
    ]


def test_arch_string_found_across_chunk_borders() -> None:
    blob = b"\x00" * 5000 + b"ipc_hsm_70 sm_75 compute_120\x00" + b"\x01" * 5000
    for size in (1, 7, 100, 5003, 10_000):
        chunks = [blob[i : i + size] for i in range(0, len(blob), size)]
        found = scan_arch_strings(chunks)
        assert [text for _o, text in found] == ["sm_70 sm_75 compute_120"], size


def test_ptx_is_reported_apart_from_sass(tmp_path: Path) -> None:
    region = b"\x00\x00sm_80 sm_90 sm_120 compute_120\x00\x00"
    path = _write(tmp_path, "t.whl", torch_wheel("2.7.1+cu128", "12.8", region))
    report = inspect_wheel(str(path))
    assert report.sass == ["sm_80", "sm_90", "sm_120"] and report.ptx == ["compute_120"]


# --- local files -------------------------------------------------------------------------------


def test_windows_wheel_reads_torch_python_dll(tmp_path: Path) -> None:
    region = b"\x00\x00\x00\x00sm_75 sm_80 sm_86 sm_90 sm_100 sm_120\x00\x00\x00"
    data = torch_wheel("2.8.0+cu128", "12.8", region, windows=True)
    path = _write(tmp_path, "torch-2.8.0+cu128-cp312-cp312-win_amd64.whl", data)
    report = inspect_wheel(str(path))
    assert report.arch_member == "torch/lib/torch_python.dll"
    assert report.sass == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert report.platform == "windows-x86_64" and report.variant == "cu128"
    assert report.sha256 is None  # a local file is not hashed unless read whole


def test_cpu_wheel_reports_no_cuda_and_skips_the_library(tmp_path: Path) -> None:
    data = torch_wheel("2.8.0+cpu", None, b"\x00sm_90\x00", pad=400_000)
    path = _write(tmp_path, "torch-2.8.0-cp312-cp312-win_amd64.whl", data)
    report = inspect_wheel(str(path))
    assert report.cuda is None and report.sass == [] and report.ptx == []
    assert report.bytes_read < 100_000  # neither the library nor the payload was read


def test_zip64_wheel(tmp_path: Path) -> None:
    from wheel_support import library

    arch = b"\x00" + " ".join(SASS_280).encode() + b"\x00"
    members = {
        "torch/version.py": version_py("2.8.0+cu128", "12.8").encode(),
        "torch/lib/libtorch_python.so": library(arch),
        "torch-2.8.0.dist-info/METADATA": b"Name: torch\nVersion: 2.8.0\n\n",
    }
    data = zip64_wheel(members)
    with zipfile.ZipFile(BytesIO(data)) as zf:  # an independent reader agrees it is a zip
        assert zf.read("torch/version.py") == members["torch/version.py"]
    path = _write(tmp_path, W280, data)
    assert b"PK\x06\x06" in data[-200:]  # really a zip64 end record
    with FileSource(path) as src:
        lib = RemoteZip(src).read("torch/lib/libtorch_python.so", 1 << 24)
        assert lib == members["torch/lib/libtorch_python.so"]
    assert inspect_wheel(str(path)).sass == SASS_280


def test_member_cap_and_crc(tmp_path: Path) -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", b"\x00sm_90\x00")
    path = _write(tmp_path, "t.whl", data)
    with FileSource(path) as src, pytest.raises(ReadError, match="cap"):
        list(RemoteZip(src).chunks("torch/lib/libtorch_python.so", 1000))
    # flip one byte inside the compressed library: inflate error or CRC mismatch
    with zipfile.ZipFile(BytesIO(data)) as zf:
        info = zf.getinfo("torch/lib/libtorch_python.so")
    damaged = bytearray(data)
    damaged[info.header_offset + 30 + len(info.filename) + 5000] ^= 0xFF
    with pytest.raises(ReadError, match="damaged"):
        inspect_wheel(str(_write(tmp_path, "d.whl", bytes(damaged))))


def test_budget_is_enforced(tmp_path: Path) -> None:
    path = _write(tmp_path, W280, _real_wheel(W280))
    with pytest.raises(ReadError, match="budget"):
        inspect_wheel(str(path), budget=50_000)


# --- HTTP ----------------------------------------------------------------------------------------


def test_range_reads_only_what_is_needed() -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280), requires=CU128_PINS, pad=3_000_000)
    with serve_wheels({W280: data}) as server:
        report = inspect_wheel(server.url(W280))
    assert report.sass == SASS_280 and report.ptx == [] and report.cuda == "12.8"
    assert (report.cudnn, report.nccl) == ("9.10.2.21", "2.27.3")
    assert report.bytes_read < 600_000 < len(data)  # the 3 MB payload was never fetched
    assert server.sent == report.bytes_read
    assert all(rng for _p, rng in server.log)  # every request was a range request
    assert report.notes == []


def test_sha256_from_the_url_fragment() -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280))
    digest = hashlib.sha256(data).hexdigest()
    with serve_wheels({W280: data}) as server:
        report = inspect_wheel(f"{server.url(W280)}#sha256={digest}")
    assert report.sha256 == digest


def test_server_ignoring_ranges_is_streamed_once_and_said() -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280), pad=200_000)
    with serve_wheels({W280: data}, mode="norange") as server:
        report = inspect_wheel(server.url(W280))
    assert report.sass == SASS_280
    assert report.sha256 == hashlib.sha256(data).hexdigest()  # the whole file was read
    assert report.bytes_read == len(data) and len(server.log) == 1
    assert any("ignores range requests" in n for n in report.notes)


def test_server_ignoring_ranges_with_a_wrong_sha_fails() -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280))
    with (
        serve_wheels({W280: data}, mode="norange") as server,
        pytest.raises(WheelError, match="sha256"),
    ):
        inspect_wheel(server.url(W280), sha256="0" * 64)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lie", "error"])
def test_lying_or_failing_server_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280))
    with serve_wheels({W280: data}, mode=mode) as server:
        code, out, err = run_cli(capsys, "db", "inspect-wheel", server.url(W280))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert ("HTTP 500" if mode == "error" else "truncated") in err or "broke off" in err


def test_missing_url_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with serve_wheels({}) as server:
        code, _out, err = run_cli(capsys, "db", "inspect-wheel", server.url(W280))
    assert code == 2 and "HTTP 404" in err


# --- the command ---------------------------------------------------------------------------------


def test_cli_json_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, W280, _real_wheel(W280))
    code, out, err = run_cli(capsys, "db", "inspect-wheel", str(path), "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    for key in ("file", "sha256", "version", "git_version", "cuda", "sass", "ptx",
                "bytes_read", "source"):  # fmt: skip
        assert key in doc
    assert doc["file"] == W280 and doc["sass"] == SASS_280 and doc["ptx"] == []
    assert doc["cudnn"] == "9.10.2.21"
    assert doc["contradicts"] == []  # the shipped database agrees with the real wheel
    assert_schema("db-inspect-wheel", doc)


def test_cli_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, W280, _real_wheel(W280))
    code, out, err = run_cli(capsys, "db", "inspect-wheel", str(path))
    assert code == 0 and err == ""  # no progress: stderr is not a terminal
    assert "SASS     sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" in out
    assert "PTX      none" in out
    assert "database: agrees" in out


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("truncated", "truncated"),
        ("not-zip", "not a zip"),
        ("bad-name", "damaged"),  # a member name flagged UTF-8 that is not: exit 2, not 70
        ("not-torch", "not a torch wheel"),
        ("missing", "cannot read"),
        ("cuda-without-lib", "cannot read its architectures"),
    ],
)
def test_bad_files_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, message: str
) -> None:
    good = _real_wheel(W280)
    if what == "truncated":
        data = good[: len(good) * 2 // 3]
    elif what == "not-zip":
        data = b"#!/bin/sh\necho hi\n" * 100
    elif what == "bad-name":
        buf = BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("torch/\u00fc.py", "x = 1\n")  # stored with the UTF-8 flag
        data = buf.getvalue().replace("\u00fc".encode(), b"\xff\xfe")
    elif what == "not-torch":
        buf = BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("numpy/version.py", "version = '2.0'\n")
        data = buf.getvalue()
    else:
        data = torch_wheel("2.8.0+cu128", "12.8", None)
    path = tmp_path / W280
    if what != "missing":
        path.write_bytes(data)
    code, out, err = run_cli(capsys, "db", "inspect-wheel", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err


def test_a_truncated_file_that_still_has_its_directory(tmp_path: Path) -> None:
    """The end cut off but the directory re-appended: members past the end are caught."""
    good = _real_wheel(W280)
    with zipfile.ZipFile(BytesIO(good)) as zf:
        start = zf.start_dir  # where the central directory begins
        cut = zf.getinfo("torch/lib/libtorch_python.so").header_offset + 100
    # keep the directory, drop the library's data: offsets now point past the cut
    shifted = good[:cut] + good[start:]
    with pytest.raises(ReadError):
        inspect_wheel(str(_write(tmp_path, "t.whl", shifted)))


def test_other_url_schemes_are_refused() -> None:
    with pytest.raises(ReadError, match="only http"):
        open_source("ftp://example.invalid/x.whl")


def _region(name: str) -> bytes:
    return bytes.fromhex(real_wheels()[name]["arch_region_hex"])


# --- the real wheel (network) --------------------------------------------------------------------


@pytest.mark.network
@pytest.mark.skipif(
    os.environ.get("GPURESOLVE_NETWORK_TESTS") != "1", reason="GPURESOLVE_NETWORK_TESTS=1 not set"
)
def test_real_pypi_wheel_280() -> None:
    from resolver.io.http import Client
    from resolver.wheels.index import pip_default_index, project_wheels

    index = pip_default_index()
    assert index, "pip has no index"
    with Client() as fetcher:
        link = next(w.link for w in project_wheels(fetcher, index) if w.link.filename == W280)
    report = inspect_wheel(link.url, sha256=link.sha256)
    assert report.sass == SASS_280 and report.ptx == [] and report.cuda == "12.8"
    assert report.version == "2.8.0+cu128"
    assert report.bytes_read <= 16 * 1024 * 1024
    assert report.sha256 == real_wheels()[W280]["sha256"]


def test_cli_reports_a_contradiction_with_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    region = b"\x00sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120\x00"  # no sm_70, with PTX
    path = _write(tmp_path, W280, torch_wheel("2.8.0+cu128", "12.8", region))
    code, out, _err = run_cli(capsys, "db", "inspect-wheel", str(path))
    assert code == 0
    assert "database: CONTRADICTION: sass observed 7.5 8.0 8.6 9.0 10.0 12.0" in out
    assert "database: CONTRADICTION: ptx observed 12.0; the database says none" in out
    code, out, _err = run_cli(capsys, "db", "inspect-wheel", str(path), "--json")
    assert [c["fact"] for c in json.loads(out)["contradicts"]] == ["sass", "ptx"]


def test_a_whole_read_is_checked_against_the_url_fragment() -> None:
    data = torch_wheel("2.8.0+cu128", "12.8", _region(W280))
    with (
        serve_wheels({W280: data}, mode="norange") as server,
        pytest.raises(WheelError, match="not the expected"),
    ):
        inspect_wheel(f"{server.url(W280)}#sha256={'0' * 64}")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / W280
    os.mkfifo(fifo)  # nobody writes to it: reading would block forever
    code, out, err = run_cli(capsys, "db", "inspect-wheel", str(fifo))
    assert code == 2 and out == "" and "not a regular file" in err
    assert len(err.strip().splitlines()) == 1
