"""Loading the database: a malformed record is one DataError naming its file and record."""

from __future__ import annotations

from typing import Any

import pytest

from resolver import catalog as catalog_mod
from resolver.core.errors import DataError


@pytest.mark.parametrize("version", ["2.1.0rc1", "2.1.0.post1", "2.1.x", "2.1.0+cu121"])
def test_release_version_must_be_x_y_z(synth_raw: dict[str, Any], version: str) -> None:
    """Release.key sorts versions as numbers: anything else fails at load, not in the solver."""
    release = synth_raw["torch.yaml"]["series"][0]["releases"][0]
    assert release["version"] == "2.1.0"
    release["version"] = version
    with pytest.raises(DataError) as exc:
        catalog_mod.from_raw(synth_raw)
    assert str(exc.value) == (
        f"torch.yaml release {version}: not a torch version: {version!r}"
        " (expected X.Y.Z, e.g. 2.8.0)"
    )


def test_synthetic_database_loads(synth_raw: dict[str, Any]) -> None:
    keys = [r.key for r in catalog_mod.from_raw(synth_raw).releases]
    assert keys == [(2, 12, 0), (2, 8, 0), (2, 1, 0)]
