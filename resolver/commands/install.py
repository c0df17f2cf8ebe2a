"""`gpuresolve install`: install the resolved build (or a lock) into an environment, then verify."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from resolver.commands.common import (
    RequestOptions,
    TargetOptions,
    request_options,
    target_options,
    warn_lost,
)
from resolver.commands.config import standard_options
from resolver.commands.emit import emit_json
from resolver.commands.params import SafePath
from resolver.commands.ui import echo, note, warnings
from resolver.core.errors import UserError
from resolver.core.platforms import PYTHON_RE
from resolver.flows import install as flow
from resolver.present import findings as words

if TYPE_CHECKING:
    from resolver.core.documents.decision import InstalledJson, PlanJson
    from resolver.install.env import EnvInfo, Tools
    from resolver.install.plan import Plan

_FAIL_TAIL = 12


@click.command()
@target_options
@request_options
@click.option(
    "--lock",
    "lock_file",
    type=SafePath(dir_okay=False),
    help="Install this lock instead of resolving: requirements.txt, environment.yml, "
    "conda-lock.yml or pylock.toml (with uv).",
)
@click.option(
    "--ignore-target",
    is_flag=True,
    help="With --lock: install it even where the platform or Python it records differs.",
)
@click.option(
    "--system",
    is_flag=True,
    help="Allow installing into an interpreter that is in no virtualenv or conda env.",
)
@click.option(
    "--installer",
    type=click.Choice(["auto", "uv", "pip"]),
    default="auto",
    show_default=True,
    help="auto: uv when it is on PATH, else the environment's pip.",
)
@click.option("--dry-run", is_flag=True, help="Print the exact commands; change nothing.")
@click.option("--no-verify", is_flag=True, help="Do not run `gpuresolve verify` afterwards.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the plan and the outcome as JSON (installer output goes to stderr).",
)
@standard_options
def install(
    target: TargetOptions,
    request: RequestOptions,
    lock_file: str | None,
    ignore_target: bool,
    system: bool,
    installer: str,
    dry_run: bool,
    no_verify: bool,
    as_json: bool = False,
) -> None:
    """Install the build that runs here (or a lock) into an environment, then verify it.

    Replaces a wrong torch already there (a CPU build on a GPU host, another CUDA variant) and
    the CUDA libraries of the other CUDA major. Exit 0 when installed and verified, 1 when no
    build fits, the installer fails or verify fails, 2 on bad input.
    """
    from resolver.host import platform as host_platform

    python, pytorch_index = target.python, request.pytorch_index
    if python and PYTHON_RE.match(python.strip()):
        raise UserError(
            f"--python {python}: install takes the interpreter of the environment to install "
            "into (a path such as .venv/bin/python), not a version"
        )
    env, tools = flow.environment(python, system, installer)
    here = host_platform.probe().platform
    say = _sayer(dry_run, as_json)
    staged: str | None = None
    plan_json: PlanJson | None = None
    try:
        if lock_file:
            used = [f for f in (*target.given(), *request.given()) if f != "--python"]
            used += request.choices_given()
            if used:
                raise UserError(f"--lock installs the lock as written: drop {', '.join(used)}")
            note, warnings = flow.hold_target(lock_file, here, env.version, ignore_target)
            if note:
                say(note)
            for warning in warnings:
                echo(f"gpuresolve: warning: {warning}", err=True)
            plan, staged = flow.lock_plan(
                lock_file, here, env, tools, installer, pytorch_index, say
            )
        else:
            if ignore_target:
                raise UserError("--ignore-target goes with --lock (a lock's recorded target)")
            plan, staged = _decision_plan(
                env, tools, installer, here, say, target, request, as_json
            )
        say(f"into: {env.python} ({env.kind}, Python {env.version}) with {plan.installer}")
        for line in plan.lines():
            say(line)
        plan_json = plan.to_json(env.python, env.kind, env.version, lock_file)
        if dry_run and as_json:
            emit_json({"ok": True, "dry_run": True, "plan": plan_json, "outcome": None})
            staged = None  # the plan names it: keep it
            sys.exit(0)
        if dry_run:
            if staged and staged.endswith("constraints.txt"):
                say(f"(the constraints file {staged} is kept for the commands below)")
            elif staged:
                say(f"(the copy {staged} is kept for the command below)")
            for step in plan.steps:
                echo(step.command)
            staged = None  # the command names it: keep it
            sys.exit(0)
        _execute(plan, plan_json if as_json else None)
    finally:
        if staged:
            shutil.rmtree(Path(staged).parent, ignore_errors=True)
    if no_verify:
        if as_json:
            outcome: InstalledJson = {"installed": True, "verify": None}
            emit_json({"ok": True, "dry_run": False, "plan": plan_json, "outcome": outcome})
            sys.exit(0)
        echo("installed (not verified: --no-verify)")
        sys.exit(0)
    if as_json:
        code, report, said = flow.run_verify_json(env.python, lock_file)
        echo(said, err=True, nl=False)
        verified: InstalledJson = {
            "installed": True,
            "verify": {"exit_code": code, "report": report},
        }
        emit_json({"ok": code == 0, "dry_run": False, "plan": plan_json, "outcome": verified})
        sys.exit(code)
    echo(
        f"verifying: gpuresolve verify --python {env.python}"
        + (f" --lock {lock_file}" if lock_file else "")
    )
    sys.stdout.flush()
    sys.exit(flow.run_verify(env.python, lock_file))


def _sayer(dry_run: bool, as_json: bool = False) -> Callable[[str], None]:
    """Explanations: plain lines, or shell comments in a dry run (its output pastes whole);
    with --json on stderr, so stdout is the JSON document alone."""
    if as_json:
        return lambda text: echo(text, err=True)
    if not dry_run:
        return echo
    return lambda text: echo("\n".join(f"# {line}" for line in text.splitlines()))


def _decision_plan(
    env: EnvInfo,
    tools: Tools,
    installer: str,
    here: str,
    say: Callable[[str], None],
    target_opts: TargetOptions,
    request_opts: RequestOptions,
    as_json: bool = False,
) -> tuple[Plan, str | None]:
    from resolver import catalog as catalog_mod
    from resolver.flows.decide import decide
    from resolver.present import render

    catalog = catalog_mod.load().for_index(pytorch_index := request_opts.pytorch_index)
    request = request_opts.request(target_opts.without_cuda(), catalog.extensions)
    target, profile = target_opts.resolve(catalog, python=env.version)
    warn_lost(profile)
    if str(target.platform) != here:
        raise UserError(
            f"install puts packages on this machine ({here}); the target is {target.platform}"
        )
    decision = decide(catalog, target, request)
    for message in profile.messages if profile is not None else ():
        note(message)
    sel = decision.selection
    suggested = f"  {render.pip_command(catalog, sel, pytorch_index)}" if sel else None
    text = render.decision_text(catalog, decision, pytorch_index)
    say("\n".join(line for line in text.splitlines() if line != suggested))
    if sel is None and as_json:
        decision_json = render.decision_json(catalog, decision, pytorch_index)
        emit_json({"ok": False, "plan": None, "outcome": None, "decision": decision_json})
    warnings(words.warnings(sel.warnings) if sel else ())
    if sel is None:
        sys.exit(1)
    return flow.decision_plan(catalog, sel, env, tools, installer, pytorch_index, target.python)


def _execute(plan: Plan, plan_json: PlanJson | None = None) -> None:
    """Run the steps in order; the first failure ends the command with exit status 1.

    ``plan_json`` (--json): the installers' output goes to stderr and a failure is reported
    as JSON on stdout too.
    """
    as_json = plan_json is not None
    failed = flow.execute(plan, lambda line: echo(line, err=as_json), _FAIL_TAIL)
    if failed is None:
        return
    said = f"gpuresolve: {failed.purpose} step failed (exit status {failed.returncode})"
    if _same_place(sys.stderr if as_json else sys.stdout, sys.stderr):
        echo(f"{said}; the installer's output above says why", err=True)
    else:  # its lines went elsewhere (stdout to a file): the last ones here, where errors go
        echo(f"{said}; the installer's last lines:", err=True)
        for line in failed.tail:
            echo(f"  | {line}", err=True)
    before = " after the removal step succeeded" if failed.done else ""
    echo(
        f"gpuresolve: the environment is as the installer left it{before} (nothing was "
        "rolled back); fix the cause and run `gpuresolve install` again",
        err=True,
    )
    if plan_json is not None:
        emit_json({"ok": False, "dry_run": False, "plan": plan_json, "outcome": failed.to_json()})
    sys.exit(1)


def _same_place(one: IO[str], other: IO[str]) -> bool:
    """Whether two streams reach one place (a terminal, a pipe, a file: ``2>&1``), where the
    installer's streamed lines are already in front of whoever reads the error."""
    if one is other:
        return True
    try:
        a, b = os.fstat(one.fileno()), os.fstat(other.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor (captured): not known alike
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


for _param in install.params:
    if _param.name == "python" and isinstance(_param, click.Option):
        _param.help = (
            "The environment's interpreter (or its directory); default: the active virtualenv "
            "or conda env ($VIRTUAL_ENV, $CONDA_PREFIX)."
        )
        _param.metavar = "PATH"
