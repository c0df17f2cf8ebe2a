"""What `suggest` for a described machine imports (issue 29's start-up budget): click and what
the answer needs, nothing else. Modules are what start-up costs; timing lives in
bench/suggest_latency.py, this only holds the structure that keeps it fast."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_support import run_child

ROOT = Path(__file__).resolve().parent.parent
# Never needed to answer for torch alone: YAML (the cache answers), HTTP, packaging (only for a
# specifier or an extension), TOML (no settings here), child processes, logging, temp files.
UNNEEDED = {
    "yaml",
    "requests",
    "urllib3",
    "packaging",
    "packaging.specifiers",
    "tomllib",
    "tomlkit",
    "subprocess",
    "logging",
    "tempfile",
    "resolver.db.extensions",
    "resolver.db.yamlfile",
    "resolver.core.hostprofile",  # only a probed or recorded host is one
}
CHILD = """
import json, sys
sys.argv = ["gpuresolve", *json.loads(sys.argv[1])]
from resolver.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


@pytest.mark.parametrize("fmt", [["--json"], []], ids=["json", "text"])
def test_suggest_imports_only_what_the_answer_needs(tmp_path: Path, fmt: list[str]) -> None:
    args = ["suggest", *fmt, "--driver", "570.124.06", "--gpu", "RTX 3090", "--python", "3.12"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("GPURESOLVE_DATA_DIR", None)
    for _ in range(2):  # the second run is the warm one: the catalog cache answers
        proc = run_child([sys.executable, "-c", CHILD, json.dumps(args)], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stderr.rsplit("MODULES ", 1)[1]))
    assert "resolver.solve.solver" in modules  # it did answer
    assert modules & UNNEEDED == set()
