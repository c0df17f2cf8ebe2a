"""`gpuresolve lock SPEC`: what a team lock says: the groups' builds, what it kept and removed,
each file written or checked, and the `--json` document; exit codes. The lock itself is
``flows.team.run_team`` and the folder ``flows.output``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from resolver import catalog as catalog_mod
from resolver.commands import lock_inputs
from resolver.commands.emit import emit_json
from resolver.commands.lock_output import say_written, write_or_check
from resolver.commands.ui import echo, progress_bars
from resolver.core.errors import UserError
from resolver.flows.lock import closure_choice
from resolver.flows.output import FileStatus, owned_names
from resolver.flows.team import run_team
from resolver.host.pipconfig import PipIndex
from resolver.present import findings as words
from resolver.present import render
from resolver.writers import lockfiles, outputs, recorded

if TYPE_CHECKING:
    from resolver.core.documents.decision import LockCheckTeamDoc, LockTeamDoc, TeamGroupJson

__all__ = ["lock_team"]


_IMAGE_KEY = "gpuresolve.image"


def _keep_image(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta[_IMAGE_KEY] = value


# `lock --image REF`: kept in the context (lock.py is at its size limit), read by lock_team
IMAGE_OPTION = click.option(
    "--image",
    metavar="REF",
    expose_value=False,
    callback=_keep_image,
    help="With a cluster spec: the image its verification Jobs run and its Dockerfile builds "
    "(overrides the spec's image:).",
)


def refuse_team_flags(split: bool | None) -> None:
    """`lock` without a spec: --split and --image belong to a team's (a cluster's) lock."""
    if split is not None:
        raise UserError("--split needs a team environment spec (gpuresolve lock SPEC --split)")
    if click.get_current_context().meta.get(_IMAGE_KEY) is not None:
        raise UserError("--image needs a cluster spec (gpuresolve lock SPEC --image REF)")


def lock_team(
    catalog: catalog_mod.Catalog,
    spec_path: str,
    options: lockfiles.LockOptions,
    output: str | None,
    split: bool | None,
    check: bool,
    evidence: str,
    as_json: bool = False,
    index: tuple[PipIndex, bool] | None = None,
) -> None:
    """`gpuresolve lock SPEC`: every platform's files and report.md; exits. ``index``: the
    index outside the PyTorch index and whether to say more about it (-v)."""

    def spec_read(spec: Any, options: lockfiles.LockOptions) -> lockfiles.LockOptions:
        """The index note, and the spec's `lock: top-level` unless --top-level was given."""
        ctx = click.get_current_context()
        if spec.lock == "top-level" and not lock_inputs.given(ctx, "top_level"):
            top, hashed = closure_choice(True, options.hashes)
            options = replace(options, top_level=top, hashes=hashed)
        if index is not None:
            lock_inputs.say_index(index[0], verbose=index[1], used=bool(spec.pip))
        return options

    with progress_bars() as progress:  # a large node list's reading, the solving, grouping
        run = run_team(
            catalog,
            spec_path,
            options,
            output=output,
            split=split,
            check=check,
            evidence=evidence,
            progress=progress,
            on_spec=spec_read,
            recorded=recorded_team_formats,
            image=click.get_current_context().meta.get(_IMAGE_KEY),
        )
    spec, team, options, folder = run.spec, run.team, run.options, run.folder
    directory = folder.directory
    if split is not None and split != (spec.split == "true") and spec.split != "auto":
        echo(
            f"gpuresolve: {'--split' if split else '--no-split'} overrides the spec's "
            f"split: {spec.split}",
            err=True,
        )
    if team.auto_split:
        echo(
            f"{spec.name}: no set runs on every target, so the lock is split into "
            f"{len(team.groups)} groups (split: auto; `split: false` in the spec refuses instead)",
            err=True,
        )
    for label, decision in team.groups:
        if as_json:
            break
        where = f" ({label})" if label else ""
        if decision.ok:
            picks = "; ".join(
                f"{c.folder}: {render.describe_build(c.candidate)}" for c in decision.choices
            )
            echo(f"{spec.name}{where}: {picks}")
        else:
            echo(f"{spec.name}{where}: no set runs on every target")
            for conflict in words.conflicts(decision.conflicts):
                echo(f"  {conflict}")
    groups_json: list[TeamGroupJson] = [
        {
            "label": label or None,
            "ok": decision.ok,
            "torch": decision.torch,
            "platforms": {  # a platform's GPU-less members' set: "<platform>-cpu"
                c.folder: render.candidate_json(catalog, c.candidate, options.pytorch_index)
                for c in decision.choices
            },
            "conflicts": words.conflicts(decision.conflicts),
        }
        for label, decision in team.groups
    ]
    if not team.ok:
        if as_json:
            refused: LockTeamDoc = {
                "ok": False,
                "spec": spec.name,
                "files": [],
                "groups": groups_json,
            }
            emit_json(refused)
            sys.exit(1)
        hint = "" if split else "; --split writes one set per group of targets"
        echo(f"nothing written{hint} (see the reasons above)", err=True)
        sys.exit(1)
    gone = run.gone
    for item in run.stale:
        if not item.removable:
            echo(
                f"gpuresolve: kept {directory / item.name}: no longer generated, but "
                f"{item.why_kept}; remove it yourself if it is not needed",
                err=True,
            )
    if gone and check:
        removed = [FileStatus(directory / n, n, "removed").check_json() for n in gone]
        echo(f"gpuresolve: {spec.name}: no longer generated: {', '.join(gone)}", err=True)
        if as_json:
            drift: LockCheckTeamDoc = {
                "ok": False,
                "check": "drift",
                "changes": [],
                "messages": [f"{spec.name}: no longer generated: {', '.join(gone)}"],
                "exit": 1,
                "spec": spec.name,
                "files": removed,
                "groups": groups_json,
            }
            emit_json(drift)
        sys.exit(1)
    split = len(team.groups) > 1 or bool(team.groups and team.groups[0][0])
    if check:
        checked_run = write_or_check(
            folder, team.files, check, f" of {spec.name}", catalog.updated, as_json
        )
        if as_json and checked_run.checked is not None:
            checked: LockCheckTeamDoc = {
                "ok": checked_run.ok,
                "check": checked_run.checked.outcome,
                **checked_run.checked.found,
                "spec": spec.name,
                "split": split,
                "files": checked_run.checked.files,
                "groups": groups_json,
            }
            emit_json(checked)
        sys.exit(0 if checked_run.ok else 1)
    # the files, then what is no longer generated and provably ours, then the manifest
    replaced = folder.replace(team.files, spec.path.name, owned_names())
    say_written([f for f in replaced.files if f.status != "removed"], as_json)
    for path in replaced.removed if not as_json else ():
        echo(f"removed {path}")
    if as_json:
        written: LockTeamDoc = {
            "ok": True,
            "check": None,
            "spec": spec.name,
            "split": split,
            "files": [f.to_json() for f in replaced.files],
            "groups": groups_json,
        }
        emit_json(written)
    sys.exit(0)


def recorded_team_formats(directory: Path, options: lockfiles.LockOptions) -> lockfiles.LockOptions:
    """``options`` with the formats, --hashes, --top-level and indexes that report.md records
    (when not given)."""
    ctx = click.get_current_context()
    text = outputs.read_current(directory, "report.md")  # the output folder's rules: no link
    raw = recorded.read("report.md", text) if text is not None else None
    if raw is None or not isinstance(raw.get("files"), dict):
        return options
    record = recorded.LockInputs.from_json(raw, str(directory / "report.md"))
    files, request = record.files, record.request
    assert files is not None

    def kept(part: str, name: str) -> bool:  # recorded, and not given
        return record.knows(part, name) and not lock_inputs.given(ctx, name)

    if kept("request", "pytorch_index") and request and request.pytorch_index:
        options = replace(options, pytorch_index=request.pytorch_index)
    if kept("files", "default_index"):
        options = replace(options, default_index=files.default_index)
    if kept("files", "formats"):
        options = replace(options, formats=frozenset(files.formats))
    if kept("files", "top_level") and files.top_level and not options.top_level:
        options = replace(options, top_level=True, hashes=closure_choice(True, None)[1])
    if kept("files", "hashes") and files.hashes is not None and not options.top_level:
        options = replace(options, hashes=files.hashes)
    return options
