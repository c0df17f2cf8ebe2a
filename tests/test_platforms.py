"""core.platforms: every spelling of a platform and of a Python version, from one table."""

from __future__ import annotations

import pytest
from packaging.markers import Marker

from resolver.core.platforms import (
    BY_NAME,
    PLATFORMS,
    PythonVersion,
    by_kubernetes,
    covered,
    marker_env,
    of_wheel_tag,
    platform_name,
)


@pytest.mark.parametrize(
    ("system", "machine", "name"),
    [
        ("Linux", "x86_64", "linux-x86_64"),
        ("Linux", "aarch64", "linux-aarch64"),
        ("Linux", "arm64", "linux-aarch64"),
        ("Windows", "AMD64", "windows-x86_64"),
        ("Windows", "ARM64", "windows-arm64"),
        ("Darwin", "arm64", "macos-arm64"),
        ("Darwin", "x86_64", "macos-x86_64"),
    ],
)
def test_platform_name(system: str, machine: str, name: str) -> None:
    assert platform_name(system, machine) == name
    assert covered(system, machine) == (name if name in PLATFORMS else None)


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("manylinux_2_28_x86_64", "linux-x86_64"),
        ("manylinux2014_aarch64", "linux-aarch64"),
        ("linux_x86_64", "linux-x86_64"),
        ("musllinux_1_2_x86_64", None),  # no glibc: does not run where the database says
        ("win_amd64", "windows-x86_64"),
        ("win_arm64", None),
        ("macosx_11_0_arm64", "macos-arm64"),
        ("macosx_10_9_universal2", "macos-arm64"),  # carries arm64 code
        ("macosx_10_9_x86_64", None),
        ("any", None),
    ],
)
def test_one_wheel_tag_mapping(tag: str, name: str | None) -> None:
    assert of_wheel_tag(tag) == name


def test_every_platform_yields_consistent_names() -> None:
    for name, plat in BY_NAME.items():
        env = marker_env(name, "3.13t")
        assert Marker(plat.marker).evaluate(env)
        assert env["python_version"] == "3.13"
        assert platform_name(plat.platform_system, plat.platform_machine) == name
        if plat.kubernetes is not None:
            assert by_kubernetes(*plat.kubernetes) == plat
        if plat.docker is not None:
            assert plat.docker.startswith("linux/") and name.startswith("linux-")
    others = [n for n in PLATFORMS if n != "linux-x86_64"]
    assert not any(
        Marker(BY_NAME["linux-x86_64"].marker).evaluate(marker_env(n, "3.12")) for n in others
    )
    assert [BY_NAME[n].conda_subdir for n in PLATFORMS] == [
        "linux-64", "linux-aarch64", "win-64", "osx-arm64",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "plain", "abi", "free"),
    [
        ("3.12", "3.12", "cp312", False),
        ("3.13t", "3.13", "cp313t", True),
        ("3.9.7", "3.9", "cp39", False),
    ],
)
def test_python_version(text: str, plain: str, abi: str, free: bool) -> None:
    v = PythonVersion.parse(text)
    assert (v.plain, v.abi, v.free_threaded) == (plain, abi, free)
    assert str(v) == plain + ("t" if free else "")


def test_python_versions_sort_numerically_free_threaded_after() -> None:
    got = sorted(["3.13t", "3.10", "3.9", "3.13"], key=PythonVersion.parse)
    assert got == ["3.9", "3.10", "3.13", "3.13t"]


@pytest.mark.parametrize("text", ["", "3", "three.12", "3.x", "t", "3.١٢"])
def test_python_version_refuses_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        PythonVersion.parse(text)
