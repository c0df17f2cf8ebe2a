"""The pickled catalog's cache key covers the code the pickle depends on.

A pickle names its classes by module path; a cache written by another layout of those modules
(or another parser) must be a miss, never an object of the wrong shape.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from resolver import catalog as catalog_mod


class _Recorder(pickle.Pickler):
    """Pickles as the cache does, noting the module of every gpuresolve object it meets."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
        self.modules: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        module = type(obj).__module__
        if module.startswith("resolver"):
            self.modules.add(module)
        return NotImplemented


def test_every_module_the_pickle_names_is_in_the_key() -> None:
    recorder = _Recorder()
    recorder.dump(catalog_mod.load(catalog_mod.shipped_data_dir()))
    assert "resolver.db.models" in recorder.modules
    stamped = {p.resolve() for p in catalog_mod._CODE}
    for module in recorder.modules:
        assert Path(str(sys.modules[module].__file__)).resolve() in stamped, module


def test_the_parser_is_in_the_key() -> None:
    names = {p.name for p in catalog_mod._CODE}
    assert {"catalog.py", "models.py", "parse.py", "observations.py"} <= names
    assert all(p.is_file() for p in catalog_mod._CODE)


def test_a_change_to_any_code_file_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = []
    for path in catalog_mod._CODE:
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        code.append(copy)
    monkeypatch.setattr(catalog_mod, "_CODE", tuple(code))
    data = catalog_mod.shipped_data_dir()
    seen = {catalog_mod._cache_file(data)}
    for i, path in enumerate(code):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000 * (i + 1)))
        seen.add(catalog_mod._cache_file(data))
    assert None not in seen and len(seen) == len(code) + 1
