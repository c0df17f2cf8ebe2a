"""`gpuresolve-lock-check FILE...`: the pre-commit hook of `.pre-commit-hooks.yaml`.

pre-commit hands it the changed files its ``files`` pattern picked; each one's lock is checked
with `gpuresolve lock --check`, once per lock: a team spec (`environments/NAME.yaml`) and every
file under its folder (`environments/NAME/`) check the spec; a lock file gpuresolve wrote
elsewhere checks its folder (`lock --check -o DIR`). A file that is neither (a project's own
requirements.txt, a YAML file that is no team spec) is passed over. Each check prints what
`lock --check` prints (the diff that would restore a file); the hook fails with the first
failing check's exit code, after running them all.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["checks", "entry", "run"]

HEAD = 64 * 1024  # the inputs line sits in a lock file's header; a spec names its keys early
SPEC_SUFFIXES = (".yaml", ".yml")
# YAML files gpuresolve writes itself: never a spec
WRITTEN_YAML = ("environment.yml", "virtual-packages.yml", "conda-lock.yml", "fleet.yaml")


def _head(path: Path) -> str:
    """The first bytes of a regular file as text ("" when it is not one or cannot be read)."""
    try:
        if not path.is_file():
            return ""
        with path.open("rb") as stream:
            return stream.read(HEAD).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _is_spec(path: Path) -> bool:
    """A team spec: a YAML file (not one gpuresolve writes) with top-level `name:` and
    `targets:` keys, as every spec has (the spec reader says the rest when it is checked)."""
    if path.suffix not in SPEC_SUFFIXES or path.name in WRITTEN_YAML:
        return False
    if path.name.startswith("verify-"):  # a cluster lock's Job manifests
        return False
    lines = _head(path).splitlines()
    return any(ln.startswith("name:") for ln in lines) and any(
        ln.startswith("targets:") for ln in lines
    )


def _spec_of(path: Path) -> Path | None:
    """The team spec whose output folder holds ``path``: NAME.yaml beside the folder NAME."""
    for folder in path.parents:
        if folder.name in ("", "."):
            break
        for suffix in SPEC_SUFFIXES:
            spec = folder.with_name(folder.name + suffix)
            if _is_spec(spec):
                return spec
    return None


def _written_by_us(path: Path) -> bool:
    """A lock file gpuresolve wrote: its header records the inputs (a uv project: its
    ``[tool.gpuresolve]`` table)."""
    head = _head(path)
    return "gpuresolve-inputs:" in head or "[tool.gpuresolve]" in head


def checks(paths: list[str]) -> list[list[str]]:
    """The `gpuresolve` command lines that check the locks of ``paths``, each once, in order."""
    found: dict[tuple[str, ...], None] = {}
    for given in paths:
        path = Path(given)
        spec = path if _is_spec(path) else _spec_of(path)
        if spec is not None:
            found.setdefault(("lock", str(spec), "--check"))
        elif _written_by_us(path):
            found.setdefault(("lock", "--check", "-o", str(path.parent)))
    return [list(argv) for argv in found]


def run(paths: list[str]) -> int:
    """Run every check (each prints its own answer); the first failing one's exit code."""
    from resolver.cli import main
    from resolver.commands.ui import echo
    from resolver.core.errors import escaped

    failed = 0
    for argv in checks(paths):
        echo(f"$ gpuresolve {escaped(shlex.join(argv))}")  # file names escaped by the one rule
        try:
            main(argv)
            code: object = 0
        except SystemExit as exc:
            code = exc.code
        status = code if isinstance(code, int) else 1
        if status and not failed:
            failed = status
    return failed


def entry() -> None:
    """The console script `gpuresolve-lock-check` (pre-commit appends the changed files)."""
    sys.exit(run(sys.argv[1:]))
