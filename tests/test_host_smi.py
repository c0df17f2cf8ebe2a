"""nvidia-smi probe: recorded `--query-gpu` outputs and error texts."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from resolver.core.hostprofile import STATE_MISMATCH, STATE_NO_DRIVER, STATE_NO_GPU, STATE_OK
from resolver.host import smi
from resolver.host.smi import CommandResult

FIX = Path(__file__).parent / "fixtures" / "host"
H100 = FIX / "h100_driver580"


def text(rel: str) -> str:
    return (FIX / rel).read_text()


def recorded(rel: str) -> CommandResult:
    """A recorded capture: NAME.out and NAME.rc."""
    rc = (FIX / f"{rel}.rc").read_text().strip()
    return CommandResult(int(rc), text(f"{rel}.out"))


# --- parse_query ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", ["h100_driver580/smi_query.out", "h100_driver580/smi_query_units.out"]
)
def test_h100_query_with_and_without_units(rel: str) -> None:
    driver, gpus = smi.parse_query(text(rel))
    assert driver == "580.159.04"
    assert len(gpus) == 1
    g = gpus[0]
    assert (g.index, g.name, g.cc, g.memory_mib, g.pci_device_id, g.mig) == (
        0,
        "NVIDIA H100 80GB HBM3",
        "9.0",
        81559,
        "0x2330",
        "disabled",
    )
    assert set(g.sources.values()) == {"nvidia-smi"}


def test_header_line_is_skipped() -> None:
    _, gpus = smi.parse_query(text("h100_driver580/smi_query_header.out"))
    assert [g.name for g in gpus] == ["NVIDIA H100 80GB HBM3"]


def test_query_without_compute_cap() -> None:
    driver, gpus = smi.parse_query(text("h100_driver580/smi_query_nocc.out"), smi.FALLBACK_FIELDS)
    assert driver == "580.159.04"
    assert gpus[0].cc is None and "cc" not in gpus[0].sources
    assert gpus[0].pci_device_id == "0x2330"


def test_h200_reference_capture_with_its_own_fields() -> None:
    """The reference H200 capture queried pci.sub_device_id too, with units."""
    lines = text("h200_driver580_probe.txt").split("== query\n", 1)[1].splitlines()
    fields = (
        "index",
        "name",
        "driver_version",
        "compute_cap",
        "pci.device_id",
        "pci.sub_device_id",
        "memory.total",
    )
    driver, gpus = smi.parse_query(lines[0], fields)
    assert driver == "580.159.04"
    g = gpus[0]
    assert (g.name, g.cc, g.memory_mib, g.pci_device_id) == ("NVIDIA H200", "9.0", 143771, "0x2335")


def test_multi_gpu_with_mig_and_placeholders() -> None:
    _, gpus = smi.parse_query(text("transcribed/smi_multi_gpu.out"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert [g.mig for g in gpus] == ["enabled", "disabled", None, None]
    assert [g.cc for g in gpus] == ["8.0", "8.0", "8.9", "7.5"]
    assert gpus[3].name == "Tesla T4" and "mig" not in gpus[3].sources


def test_placeholders_comma_names_and_noise() -> None:
    out = (
        "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n"
        "0, NVIDIA Weird, Name, 550.54.15, [N/A], 0x1EB810DE, [Not Supported], [N/A]\n"
        "1, Tesla T4, 550.54.15, 7.5, [Unknown Error], 15360 MiB, N/A\n"
        "\n"
    )
    driver, gpus = smi.parse_query(out)
    assert driver == "550.54.15"
    assert [g.name for g in gpus] == ["NVIDIA Weird, Name", "Tesla T4"]
    assert (gpus[0].cc, gpus[0].memory_mib, gpus[0].mig) == (None, None, None)
    assert (gpus[1].pci_device_id, gpus[1].memory_mib) == (None, 15360)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "state"),
    [
        ("h100_driver580/smi_bad_index.out", STATE_NO_GPU),  # recorded: "No devices were found"
        ("h100_driver580_nodev/smi_query.out", STATE_NO_DRIVER),  # recorded: no /dev/nvidia*
        ("transcribed/smi_mismatch.out", STATE_MISMATCH),
        ("h100_driver580_nolib/smi_query.out", None),  # recorded: libnvidia-ml missing
        ("h100_driver580/smi_bad_field.out", None),
    ],
)
def test_classify_error(rel: str, state: str | None) -> None:
    assert smi.classify_error(text(rel)) == state


def test_field_rejection_text() -> None:
    assert smi.field_rejected(text("h100_driver580/smi_bad_field.out"), "not_a_field")
    assert smi.field_rejected(text("transcribed/smi_r470_compute_cap.out"), "compute_cap")
    assert not smi.field_rejected(text("h100_driver580/smi_query.out"), "compute_cap")


def test_mismatch_library_version() -> None:
    assert smi.nvml_library_version(text("transcribed/smi_mismatch.out")) == "580.95"
    assert smi.nvml_library_version("Failed to initialize NVML: Unknown Error") is None


def test_interpret_recorded_no_devices() -> None:
    r = smi.interpret(recorded("h100_driver580/smi_bad_index"))
    assert (r.state, r.gpus, r.status) == (STATE_NO_GPU, [], "No devices were found")


# --- run: the fake runner ------------------------------------------------------------------------


class FakeRunner:
    """Answers by the --query-gpu fields asked; records every call."""

    def __init__(self, answers: dict[tuple[str, ...], CommandResult | None]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult | None:
        self.calls.append(list(argv))
        assert timeout == smi.TIMEOUT_S
        if Path(argv[0]).name != "nvidia-smi" or argv[0] == "missing/nvidia-smi":
            return None
        fields = tuple(argv[1].removeprefix("--query-gpu=").split(","))
        return self.answers[fields]


def test_run_recorded_h100() -> None:
    fake = FakeRunner({smi.QUERY_FIELDS: recorded("h100_driver580/smi_query")})
    r = smi.run(fake)
    assert fake.calls == [smi.query_command("nvidia-smi")]
    assert fake.calls[0] == [
        "nvidia-smi",
        "--query-gpu=index,name,driver_version,compute_cap,pci.device_id,memory.total,mig.mode.current",
        "--format=csv,noheader,nounits",
    ]
    assert (r.state, r.driver, r.driver_cuda, r.status) == (STATE_OK, "580.159.04", None, "ok")


def test_run_retries_without_compute_cap_on_old_drivers() -> None:
    fake = FakeRunner(
        {
            smi.QUERY_FIELDS: CommandResult(2, text("transcribed/smi_r470_compute_cap.out")),
            smi.FALLBACK_FIELDS: CommandResult(0, text("transcribed/smi_r470_nocc.out")),
        }
    )
    r = smi.run(fake)
    assert len(fake.calls) == 2
    assert r.state == STATE_OK and r.driver == "470.182.03"
    assert r.gpus is not None and r.gpus[0].cc is None
    assert r.gpus[0].name == "NVIDIA GeForce RTX 3090"
    assert "old driver" in r.status


def test_run_tries_binaries_in_order() -> None:
    fake = FakeRunner({smi.QUERY_FIELDS: recorded("h100_driver580/smi_query")})
    r = smi.run(fake, ("missing/nvidia-smi", "/usr/lib/wsl/lib/nvidia-smi"))
    assert [c[0] for c in fake.calls] == ["missing/nvidia-smi", "/usr/lib/wsl/lib/nvidia-smi"]
    assert r.state == STATE_OK


def test_run_not_installed_and_timeout() -> None:
    assert smi.run(lambda argv, t: None).status == "not installed"
    r = smi.run(lambda argv, t: CommandResult(None, ""))
    assert (r.state, r.status) == (None, "timed out")


def test_subprocess_runner_real_process() -> None:
    ok = smi.subprocess_runner([sys.executable, "-c", "print('0, x')"], 10)
    assert ok == CommandResult(0, "0, x\n", "")
    assert smi.subprocess_runner(["gpuresolve-no-such-program"], 10) is None
    slow = smi.subprocess_runner([sys.executable, "-c", "import time; time.sleep(5)"], 0.2)
    assert slow is not None and slow.returncode is None


def test_a_compute_capability_outside_the_grammar_is_unknown_not_exit_2() -> None:
    """A broken nvidia-smi printed "99999999999999999999999.9": the row's regex took it, the
    one grammar (`parse_cc`) refused it later and `detect` ended in exit 2. Every probe's GPU is
    built by `probe.gpu`, which now holds a CC to that grammar (unknown: looked up by name)."""
    cc = "99999999999999999999999.9"
    row = f"0, NVIDIA H100 80GB HBM3, 580.159.04, {cc}, 0x233010DE, 81559, Disabled"
    probe = smi.interpret(smi.CommandResult(0, row + "\n"))
    assert probe.gpus is not None and probe.gpus[0].cc is None
    assert probe.gpus[0].name == "NVIDIA H100 80GB HBM3"
    good = smi.interpret(smi.CommandResult(0, row.replace(cc, "9.0")))
    assert good.gpus is not None and good.gpus[0].cc == "9.0"
