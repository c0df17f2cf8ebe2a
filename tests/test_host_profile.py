"""A `gpuresolve detect --json` file read back: a malformed one is one error naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from resolver.core.errors import UserError
from resolver.core.hostprofile import GpuInfo, HostProfile
from resolver.host.records import load_profile

GOOD: dict[str, Any] = {
    "platform": "linux-x86_64",
    "python": "3.12",
    "driver": "580.159.04",
    "state": "ok",
    "gpus": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0"},
        {"index": 1, "name": "NVIDIA GeForce RTX 3060", "cc": "8.6"},
    ],
}


def edited(**changes: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps({**GOOD, **changes}))  # a deep copy
    return copy


def test_a_good_file_reads_back() -> None:
    profile = HostProfile.from_json(edited(python="3.13t", driver=None))
    assert (profile.platform, profile.python, profile.driver) == ("linux-x86_64", "3.13t", None)
    assert profile.gpus[1] == GpuInfo(1, "NVIDIA GeForce RTX 3060", "8.6")
    assert HostProfile.from_json(profile.to_json()) == profile


def _cc9() -> dict[str, Any]:
    data = edited()
    data["gpus"][1]["cc"] = 9
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "expected a JSON object, got a list"),
        ("linux", "expected a JSON object, got a string"),
        (edited(gpus="abc"), "gpus: expected a list, got a string"),
        (edited(gpus=["abc"]), "gpus[0]: expected an object, got a string"),
        (_cc9(), "gpus[1].cc: expected a string like '8.6', got 9"),
        (
            edited(platform="freebsd-x86_64"),
            "platform: expected one of linux-x86_64, linux-aarch64, windows-x86_64, macos-arm64,"
            " got 'freebsd-x86_64'",
        ),
        ({"python": "3.12"}, "platform: missing"),
        (edited(python=3.12), "python: expected a string like '3.12', got 3.12"),
        (edited(python="python3"), "python: expected a string like '3.12', got 'python3'"),
        (edited(driver=580), "driver: expected a string like '580.65.06', got 580"),
        (edited(wsl="no"), "wsl: expected true or false, got 'no'"),
        (edited(sources=["nvml"]), "sources: expected an object of strings"),
    ],
)
def test_malformed_profile_names_the_key(data: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        HostProfile.from_json(data)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[1, 2]", "expected a JSON object, got a list"),
        (json.dumps(edited(gpus="abc")), "gpus: expected a list"),
        (json.dumps(_cc9()), "gpus[1].cc: expected a string like '8.6'"),
    ],
)
def test_load_profile_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "host.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as exc:
        load_profile(str(path))
    assert fragment in str(exc.value) and str(path) in str(exc.value)
    assert "\n" not in str(exc.value)
