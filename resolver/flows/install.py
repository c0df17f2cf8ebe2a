"""An install, on values: the plan for a lock (staged in a copy where the mirror or the file's
name asks for one) and gpuresolve's own uv where none is on PATH. The command prints and exits.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.core.errors import UserError
from resolver.io import subprocs
from resolver.io.bounded import LOCK_LIMIT, read_text

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.core.documents.decision import InstallFailedJson
    from resolver.core.platforms import PythonVersion
    from resolver.install.env import EnvInfo, Tools
    from resolver.install.plan import Plan
    from resolver.solve import Candidate

__all__ = [
    "Failed",
    "decision_plan",
    "environment",
    "execute",
    "hold_target",
    "lock_plan",
    "run_verify",
    "run_verify_json",
    "with_packaged_uv",
]


def lock_plan(
    lock_file: str,
    here: str,
    env: EnvInfo,
    tools: Tools,
    installer: str,
    pytorch_index: str | None,
    say: Callable[[str], None],
) -> tuple[Plan, str | None]:
    """The plan for a lock, and the temporary copy it installs from (a mirror), if any."""
    from resolver.install import plan as plan_mod
    from resolver.install.run import stage_lock
    from resolver.readers import lockfile
    from resolver.readers import pylock as pylock_reader
    from resolver.readers.pins import FORMAT_PYLOCK, FORMAT_REQUIREMENTS

    lock = lockfile.read(lock_file, platform=here)
    torch = lock.get("torch")
    say(
        f"lock: {lock_file} ({lock.format}, {len(lock.pins)} pins"
        + (f"; {torch.text}" if torch else "; no torch pin")
        + ")"
    )
    path = lock_file
    staged: str | None = None
    # uv and pip read a pylock file only under a PEP 751 name: one found by its content goes
    # in a copy.
    stage_as = lock_file
    if lock.format == FORMAT_PYLOCK and not pylock_reader.is_pylock_name(Path(lock_file).name):
        stage_as = "pylock.toml"
    if pytorch_index:
        from resolver import catalog as catalog_mod

        base = catalog_mod.load().index_url_template.split("{variant}")[0]
        text = read_text(lock_file, limit=LOCK_LIMIT, what="a lock file")
        moved = plan_mod.mirror_text(text, base, pytorch_index)
        if lock.format == FORMAT_REQUIREMENTS:
            moved = plan_mod.absolute_includes(moved, str(Path(lock_file).resolve().parent))
        if lock.format == FORMAT_PYLOCK and moved != text:
            plan_mod.check_mirrored_pylock(moved, lock_file, pytorch_index, here)
        if moved != text:
            staged = path = stage_lock(stage_as, moved)
            say(f"PyTorch index URLs moved to {pytorch_index} in a copy: {staged}")
        else:
            say(f"note: {lock_file} names no PyTorch index URL; --pytorch-index changes nothing")
    if stage_as != lock_file and staged is None:
        text = read_text(lock_file, limit=LOCK_LIMIT, what="a lock file")
        staged = path = stage_lock(stage_as, text)
        say(f"uv and pip read a pylock file only when it is named pylock.toml: a copy: {staged}")
    if lock.format == FORMAT_PYLOCK and tools.uv is None:
        tools = with_packaged_uv(tools)  # uv installs any pylock.toml: take gpuresolve's own
    chosen: plan_mod.Installer | None
    try:
        chosen = plan_mod.choose_installer(installer, tools, env)
    except UserError:
        if lock.format == FORMAT_REQUIREMENTS or installer != "auto":
            raise
        chosen = None  # a conda lock needs pip/uv only to remove a pip-installed torch
    try:
        return plan_mod.plan_lock(lock, path, env, chosen, tools), staged
    except BaseException:
        if staged:
            shutil.rmtree(Path(staged).parent, ignore_errors=True)
        raise


def with_packaged_uv(tools: Tools) -> Tools:
    """``tools`` with the uv of the `uv` Python package (a dependency) when none is on
    PATH: the one `lock --format pylock` used to write the file."""
    from dataclasses import replace

    from resolver.writers.closure.pip_resolve import find_uv

    try:
        return replace(tools, uv=find_uv())
    except UserError:
        return tools


def hold_target(
    lock_file: str, here: str, python: str, ignore: bool
) -> tuple[str | None, list[str]]:
    """The lock's recorded target against this environment (exit 2 for another platform or
    Python), and the warnings for another GPU or driver; with ``ignore`` (--ignore-target) a
    note saying what is not checked instead."""
    from resolver.install import held_target

    if ignore:
        try:
            target = held_target.recorded_target(lock_file)
        except UserError:  # a damaged record is what --ignore-target passes over
            target = None
        what = held_target.describe(target) if target else "none readable"
        return f"--ignore-target: the lock's recorded target ({what}) is not checked", []
    from resolver.host import detect

    try:
        host = detect()
    except Exception:  # detection never blocks an install: the GPU side is advice
        host = None
    return None, list(held_target.hold(lock_file, here, python, host).warnings)


def _verify_argv(python: str, lock_file: str | None, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "resolver", "verify", "--python", python, *extra]
    return argv + (["--lock", lock_file] if lock_file else [])


def run_verify(python: str, lock_file: str | None) -> int:
    """`gpuresolve verify` on an environment, as a child process whose output is the user's;
    its exit status."""
    try:
        done = subprocs.run(_verify_argv(python, lock_file), timeout=None, capture=False, grace=5.0)
    except OSError as exc:
        raise UserError(f"cannot run gpuresolve verify: {exc.strerror or exc}") from None
    return done.returncode


def run_verify_json(python: str, lock_file: str | None) -> tuple[int, dict[str, Any] | None, str]:
    """`gpuresolve verify --json` on an environment: its exit status, its report (None when it
    printed none, or something other than a JSON object) and what it said on stderr."""
    import json

    try:
        proc = subprocs.run(_verify_argv(python, lock_file, "--json"), timeout=None, grace=5.0)
    except OSError as exc:
        raise UserError(f"cannot run gpuresolve verify: {exc.strerror or exc}") from None
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = None
    return proc.returncode, report if isinstance(report, dict) else None, proc.stderr


def decision_plan(
    catalog: Catalog,
    sel: Candidate,
    env: EnvInfo,
    tools: Tools,
    installer: str,
    pytorch_index: str | None,
    python: PythonVersion,
) -> tuple[Plan, str | None]:
    """The plan that installs the selected build with the installer chosen for ``env``, and the
    constraints file pinning torch that its extension packages install against (None without
    extensions)."""
    from resolver.install import plan as plan_mod

    chosen = plan_mod.choose_installer(installer, tools, env)
    extensions, staged = _constraints(catalog, sel, python)
    index = catalog.index_url(sel.variant.name, pytorch_index)
    plan = plan_mod.plan_decision(
        sel.packages, sel.variant.name, index, env, chosen, extensions, staged
    )
    return plan, staged


def _constraints(
    catalog: Catalog, sel: Candidate, python: PythonVersion
) -> tuple[list[str], str | None]:
    """The extension packages' requirement lines, and a constraints file pinning torch (in a
    folder of its own, removed when the command ends unless --dry-run prints it)."""
    import tempfile

    from resolver.solve.extensions import requirement_line

    if not sel.extensions:
        return [], None
    reqs = [requirement_line(catalog, c, sel.release, python) for c in sel.extensions]
    folder = tempfile.mkdtemp(prefix="gpuresolve-install-")
    path = Path(folder) / "constraints.txt"
    torch = dict(sel.packages)["torch"]
    path.write_text(f"torch=={torch}\n", encoding="utf-8")
    return reqs, str(path)


@dataclass(frozen=True)
class Failed:
    """The step that failed: its purpose, exit status, the steps done before it and the
    installer's last lines."""

    purpose: str
    returncode: int
    done: tuple[str, ...]
    tail: tuple[str, ...]

    def to_json(self) -> InstallFailedJson:
        """`install --json`'s outcome."""
        return {
            "installed": False,
            "failed_step": self.purpose,
            "returncode": self.returncode,
            "done": list(self.done),
            "tail": list(self.tail),
        }


def execute(plan: Plan, echo: Callable[[str], None], tail: int) -> Failed | None:
    """Run the plan's steps in order (each command and its output told to ``echo``); the first
    that fails stops the run and is returned with its last ``tail`` lines."""
    from resolver.install.run import run_step

    _reachable(plan)
    done: list[str] = []
    for step in plan.steps:
        echo(f"$ {step.command}")
        result = run_step(step.argv, echo=lambda line: echo(f"  {line}"))
        if not result.ok:
            return Failed(step.purpose, result.returncode, tuple(done), tuple(result.tail[-tail:]))
        done.append(step.purpose)
    return None


INDEX_OPTIONS = ("--index-url", "--extra-index-url", "--index", "--default-index")


def _reachable(plan: Plan) -> None:
    """Fail at once, before anything is removed, where an index the installer is told of on its
    command line cannot be reached (offline, no DNS, refused): uv and pip would retry it for
    seconds. A lock file's own index lines are the installer's to read."""
    from resolver.io.http import unreachable

    for step in plan.steps:
        pairs = zip(step.argv, step.argv[1:], strict=False)
        urls = [b for a, b in pairs if a in INDEX_OPTIONS]
        for url in dict.fromkeys(urls):
            why = unreachable(url)
            if why is not None:
                raise UserError(
                    f"cannot reach {why}: installing needs the index; --pytorch-index names "
                    "a mirror (file:///path for a local one)"
                )


def environment(python: str | None, system: bool, installer: str) -> tuple[EnvInfo, Tools]:
    """The environment to install into (``python``: its interpreter or folder; else the active
    one) and the installers found, with gpuresolve's own uv where the choice needs uv and none
    is on PATH (uv is a dependency)."""
    from resolver.host.interpreter import resolve_python
    from resolver.install import env as env_mod

    interpreter = resolve_python(python) if python else env_mod.default_target(system)
    env = env_mod.inspect(interpreter)
    env_mod.require_managed(env, system)
    tools = env_mod.find_tools()
    if tools.uv is None and (installer == "uv" or (installer == "auto" and not env.has_pip)):
        tools = with_packaged_uv(tools)
    return env, tools
