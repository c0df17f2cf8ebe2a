"""What a maintainer checks before accepting the package: a license file, metadata twine accepts.

`.ci/run package` builds the wheel and sdist with the lowest hatchling allowed and runs
`twine check --strict`; these tests keep the inputs of that step honest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, object]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data


def test_license_file_is_the_declared_license() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert "Neither the name of the copyright holder" in text  # the third clause
    # PEP 639: no license classifier beside a license expression
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]


def test_lowest_hatchling_writes_metadata_twine_accepts() -> None:
    """1.24-1.26 put License-Expression into Metadata-Version 2.3, which twine rejects; .ci/run's
    lowest leg builds the wheel and sdist with the lowest hatchling allowed, then twine checks."""
    requires = _pyproject()["build-system"]
    assert isinstance(requires, dict)
    (hatchling,) = [r for r in requires["requires"] if r.startswith("hatchling")]
    match = re.fullmatch(r"hatchling>=(\d+)\.(\d+)", hatchling)
    assert match is not None, hatchling
    assert (int(match[1]), int(match[2])) >= (1, 27)
    # CI's lowest leg builds with the test extra's lowest hatchling: the same bound
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert [r for r in project["optional-dependencies"]["test"] if r.startswith("hatchling")] == [
        hatchling
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "twine check --strict" in ci and "--resolution lowest-direct" in ci


def test_project_urls_and_typed_marker() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert (ROOT / "resolver" / "py.typed").is_file()  # the "Typing :: Typed" classifier's promise


def test_docs_tools_are_pinned_and_fetch_nothing() -> None:
    import yaml

    project = _pyproject()["project"]
    assert isinstance(project, dict)
    docs = project["optional-dependencies"]["docs"]
    assert {r.split("==")[0] for r in docs} >= {"mkdocs", "mkdocs-material", "mkdocs-click"}
    assert all("==" in r for r in docs), docs
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["plugins"] == ["search"]  # built in and local: no plugin reaches a network
    assert config["theme"]["font"] is False  # no web fonts either
    assert "mkdocs-click" in config["markdown_extensions"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in ci


def test_footer_names_the_version() -> None:
    import importlib.util

    from resolver import __version__

    spec = importlib.util.spec_from_file_location("hooks", ROOT / "tools" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert hooks.on_config({})["copyright"].startswith(f"gpuresolve {__version__} ")
