"""The team lock flow: spec → fleet decision → the files of every platform (and group), and
the output folder's stale files (`gpuresolve lock SPEC` up to writing).

Layout under the output directory (default ``environments/<name>/``):
- one platform: ``requirements.txt`` (and the conda files) directly in it;
- several platforms: one folder per platform (``linux-x86_64/requirements.txt``, ...);
- a split lock (``split: true``, or ``auto`` when no common set exists): one folder per group,
  named after its first member, each laid out as above;
- ``--format uv``: one ``pyproject.toml`` per group whose sources carry platform markers;
- ``report.md`` at the top: target × build × why, alternatives, upgrade hints.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from resolver.catalog import Catalog
from resolver.core.collector import collector_paused
from resolver.core.errors import UserError
from resolver.core.vocab import CondaSource, EvidenceLevel, LockFormat
from resolver.fleet.files import fleet_files, set_name
from resolver.flows.lock import MAX_PROJECT_BYTES
from resolver.flows.output import OutputFolder, owned_names
from resolver.solve import Decision, Target, TargetGpu, solve
from resolver.solve.fleet import (
    FleetDecision,
    PlatformChoice,
    Progress,
    slots,
    solve_fleet,
    split_groups,
)
from resolver.solve.memo import FleetSolver, unnamed
from resolver.solve.whatif import unlocks
from resolver.team.spec import EnvSpec
from resolver.writers import lockfiles, lockformats, manifest, recorded
from resolver.writers.formats.report import render_report
from resolver.writers.formats.unit import TeamContext, TeamWrite
from resolver.writers.recorded import FileOptions, LockInputs, LockRequest


@dataclass(frozen=True)
class TeamLock:
    files: dict[str, str]  # relative path -> text
    groups: tuple[tuple[str, FleetDecision], ...]  # (label, decision)
    auto_split: bool = False  # split because no common set exists (the spec's split: auto)

    @property
    def ok(self) -> bool:
        return all(d.ok for _, d in self.groups)


def platform_target(spec: EnvSpec, choice: PlatformChoice, members: list[Target]) -> Target:
    """One target standing for every member of a platform's set: all their GPUs, the lowest
    driver."""
    slot_of = slots(members)
    mine = [t for i, t in enumerate(members) if slot_of[i] == (choice.platform, choice.cpu)]
    gpus: dict[TargetGpu, None] = {}
    for t in mine:
        for g in t.gpus:
            gpus.setdefault(g, None)
    drivers = [t.driver for t in mine if t.driver]
    lowest = min(drivers) if drivers else None  # numeric; the first of equal ones
    return Target(
        platform=mine[0].platform,  # the set's members share its platform
        python=spec.python,
        driver=lowest,
        driver_os=next((t.driver_os for t in mine if t.driver), mine[0].driver_os),
        gpus=tuple(gpus),
        nvidia=any(t.nvidia or t.gpus for t in mine),
        name=f"team {spec.name} ({', '.join(choice.members)}; lowest driver)",
    )


def platform_decision(
    catalog: Catalog, spec: EnvSpec, choice: PlatformChoice, members: list[Target]
) -> Decision:
    """The platform's build as a Decision the lock writers take (evaluated on the union target)."""
    target = platform_target(spec, choice, members)
    cand = choice.candidate
    pinned = replace(
        spec.request,
        torch=SpecifierSet(f"=={cand.release.version}"),
        variant=cand.variant.name,
        allow_unconfirmed=True,
        cuda_on_gpu_less=True,
    )
    decision = solve(catalog, target, pinned)
    if decision.selection is None:  # each member runs it, the union may not (PTX on one only)
        decision = Decision(target, pinned, cand, (), (), ())
    return decision


def team_inputs(spec: EnvSpec, options: lockfiles.LockOptions, split: str) -> LockInputs:
    """What a team lock's files record: the spec re-resolves them (`lock SPEC --check`)."""
    return LockInputs(
        LockRequest(
            torch_spec=spec.torch_spec,
            with_=spec.companions,
            pip=spec.pip,
            evidence=spec.request.evidence.value,
            pytorch_index=options.pytorch_index,
        ),
        FileOptions(
            formats=("all",) if options.every else tuple(sorted(options.formats)),
            hashes=options.with_hashes,
            top_level=options.top_level,
            conda_source=options.conda_source,
            channel=options.channel,
            default_index=options.default_index,
        ),
        spec=spec.path.name,
        split=split,
    )


MAX_TARGETS_RECORD = 256 * 1024  # bytes of JSON; past it each target is recorded by digest
# Past this (~10,000 targets) one digest stands for them all: the record must stay well inside
# the 1 MiB line `--check` reads back (writers/recorded.py), for the 50,000-machine fleets the
# README speaks of, instead of failing after the whole fleet was solved.
MAX_DIGESTS_RECORD = 512 * 1024


def targets_record(spec: EnvSpec) -> dict[str, Any]:
    """Each spec target as the lock saw it, by name (report.md records it): `--check` then names
    the target and the field a spec edit changed. A fleet too large for one line records a
    digest per target instead (the target is still named, its field not)."""
    out: dict[str, Any] = {}
    for i, member in enumerate(spec.members):
        name = member.target.name or f"target-{i + 1}"
        if name in out:
            name = f"{name}#{i + 1}"
        full = recorded.target_record(member.target, None)
        entry = {
            k: v
            for k, v in full.items()
            if v not in (None, [], False) and k not in ("glibc", "python")  # python: the spec's
        }
        if not entry.get("driver"):
            entry.pop("driver_os", None)  # no driver: its OS says nothing
        if member.count != 1:
            entry["count"] = member.count
        out[name] = entry
    text = json.dumps(out, sort_keys=True, separators=(",", ":"))
    if len(text) <= MAX_TARGETS_RECORD:
        return out
    digests = {
        name: "sha256:"
        + hashlib.sha256(json.dumps(v, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        for name, v in out.items()
    }
    if len(json.dumps(digests, separators=(",", ":"))) <= MAX_DIGESTS_RECORD:
        return digests
    whole = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return {f"(all {len(out)} targets)": f"sha256:{whole}"}


@collector_paused()  # millions of acyclic objects: resolver/core/collector.py
def lock_team(
    catalog: Catalog,
    spec: EnvSpec,
    options: lockfiles.LockOptions,
    split: bool | None = None,
    existing: Callable[[str], str | None] | None = None,
    progress: Callable[[str, int], Progress] | None = None,
    folder: Path | None = None,
) -> TeamLock:
    """Every file of the team environment, keyed by path relative to the output directory.

    ``split`` (None: the spec's ``split:``) writes one set per group of targets; ``auto`` splits
    only when no common set exists. ``existing`` reads a file edited in place (pyproject.toml).
    ``progress(label, total)`` (the CLI's progress bar on a terminal) returns what to tell of
    each target or machine shape done; a total of 0 is a step of unknown length. ``folder`` is
    where the files go (default: beside the spec), named by a cluster's sbatch scripts.
    """
    mode = spec.split if split is None else ("true" if split else "false")
    options = replace(options, extra_requirements=spec.pip, name=options.name or spec.name)
    targets = spec.targets
    auto_split = False
    solver = FleetSolver(catalog, spec.request)  # shared: a split solves no machine twice
    common = None
    if mode != "true":
        tick = progress(f"solving {len(targets)} targets", len(targets)) if progress else None
        common = solve_fleet(catalog, targets, spec.request, solver, tick)
    if common is None or (mode == "auto" and not common.ok):
        auto_split = common is not None
        shapes = len({unnamed(t) for t in targets})
        tick = progress(f"grouping {shapes} machine shapes", shapes) if progress else None
        found = split_groups(catalog, targets, spec.request, solver, tick)
        groups = [
            (members[0].name or f"group-{i + 1}", members, decision)
            for i, (members, decision) in enumerate(found)
        ]
    else:
        groups = [("", targets, common)]
    # The index outside the PyTorch index is an input only where a file locks a package from it.
    # Each set's build, solved once on its union target: read here and by the writers below.
    built = {
        id(c): platform_decision(catalog, spec, c, ms)
        for _, ms, decision in groups
        if decision.ok
        for c in decision.choices
    }
    used = any(lockfiles.uses_default_index(catalog, d, options) for d in built.values())
    if not used:
        options = replace(options, default_index=None)
    inputs = team_inputs(spec, options, mode)
    chosen = lockformats.expand(options.formats)
    by_group = {f.name for f in chosen if f.team is TeamWrite.PER_GROUP}  # not a CPU set's
    merged = {f.name for f in chosen if f.team is TeamWrite.MERGED}  # by group with several
    if progress:  # total 0: no count, a line that says it is still working (closures, solves)
        progress("writing the lock files", 0)
    counts = {m.target.name or "": m.count for m in spec.members}
    files: dict[str, str] = {}
    report: list[str] = []
    member_groups = [m.group for m in spec.members if m.group is not None]  # once, not per group
    for label, _members, decision in groups:
        prefix = f"{label}/" if label else ""
        report.append(
            render_report(
                catalog,
                spec.name,
                spec.description,
                decision,
                counts,
                label or None,
                options.pytorch_index,
                member_groups,
                unlocks(decision, counts),  # "What would change"
            )
        )
        if not decision.ok:
            continue
        several = len(decision.choices) > 1
        # A group's one file of each per-group format (and of each merged one when it has
        # several platforms), selecting by platform marker.
        once = by_group | (merged if several else set())
        per_platform = replace(options, formats=options.formats - once)
        decisions: list[Decision] = []
        for choice in decision.choices:
            plat_decision = built[id(choice)]
            lock_input = lockfiles.LockInput(plat_decision)
            if options.needs_conda and options.conda_source == CondaSource.CONDA_FORGE:
                from resolver.solve.conda import solve_conda_forge

                conda = solve_conda_forge(catalog, plat_decision.target, spec.request)
                lock_input = lockfiles.LockInput(plat_decision, conda)
            # A GPU-less set cannot share marker-selected files with its platform's GPU set:
            # its own folder, with its own pylock.toml (and requirements.txt for a uv project).
            mine = per_platform
            if choice.cpu:
                mine = replace(
                    options,
                    formats=options.formats - by_group
                    or frozenset({LockFormat.REQUIREMENTS.value}),
                )
            if not choice.cpu:
                decisions.append(plat_decision)
            if lock_input.unmet(mine) is not None:
                continue
            mine = lockfiles.with_extensions(catalog, lock_input, mine)  # xformers... beside torch
            sub = f"{prefix}{choice.folder}/" if several else prefix
            group = set_name(spec.name, label, choice.folder, several)
            rendered = lockfiles.render_files(
                catalog, lock_input, mine, inputs=replace(inputs, group=group)
            )
            for name, text in rendered.items():
                files[f"{sub}{name}"] = text
        # the group's files: each per-group format's, then each merged one's
        for fmt in sorted(chosen, key=lambda f: f.team is TeamWrite.MERGED) if decisions else ():
            if fmt.name not in once or fmt.render_team is None:
                continue
            rel = f"{prefix}{fmt.files[0]}"
            team = TeamContext(
                catalog,
                options,
                lockfiles.making,
                tuple(decisions),
                tuple(_build(d) for d in decisions),
                spec.name,
                label,
                existing(rel) if existing else None,
            )
            record = replace(inputs, database=catalog.updated).to_json()
            files[rel] = recorded.stamp(fmt.files[0], fmt.render_team(team), record)
    report_inputs = replace(
        inputs, database=catalog.updated, python=str(spec.python), targets=targets_record(spec)
    )
    files["report.md"] = recorded.stamp("report.md", "\n".join(report), report_inputs.to_json())
    # absolute, not resolved: the path as this shell sees it is the one the nodes mount
    root = os.path.abspath(folder or default_output(spec))
    groups_done = [(lb, d) for lb, _, d in groups]
    files.update(fleet_files(catalog, spec, groups_done, files, report_inputs, root))
    return TeamLock(files, tuple((label, d) for label, _, d in groups), auto_split)


def _build(decision: Decision) -> str:
    from resolver.present.render import describe_build

    return describe_build(decision.selection) if decision.selection else "none"


def default_output(spec: EnvSpec) -> Path:
    """``environments/<name>/`` beside the spec file."""
    return spec.path.parent / spec.name


@dataclass(frozen=True)
class TeamRun:
    """A team lock resolved: its spec, options, folder, files and groups, and the files an
    earlier run wrote that it no longer writes (each removable or kept, and why)."""

    spec: EnvSpec
    options: lockfiles.LockOptions
    folder: OutputFolder
    team: TeamLock
    stale: tuple[manifest.Stale, ...]

    @property
    def gone(self) -> list[str]:
        """What is no longer generated and provably ours."""
        return [item.name for item in self.stale if item.removable]


def run_team(
    catalog: Catalog,
    spec_path: str,
    options: lockfiles.LockOptions,
    *,
    output: str | None,
    split: bool | None,
    check: bool,
    evidence: str,
    progress: Callable[[str, int], Progress] | None = None,
    on_spec: Callable[[EnvSpec, lockfiles.LockOptions], lockfiles.LockOptions] | None = None,
    recorded: Callable[[Path, lockfiles.LockOptions], lockfiles.LockOptions] | None = None,
    image: str | None = None,
) -> TeamRun:
    """`gpuresolve lock SPEC` up to writing: the spec read, the fleet locked, the folder's stale
    files found. ``evidence`` other than "documented" overrides the spec's; ``on_spec`` gets the
    spec once read and returns the options it asks for (its `lock: top-level`); ``recorded``
    gives the options the folder's report.md records (--check re-resolves with them)."""
    from resolver.team.spec import load_spec, with_image

    spec = with_image(load_spec(spec_path, catalog, progress), image)  # lock --image REF
    if evidence != EvidenceLevel.DOCUMENTED:  # given on the command line: overrides the spec's
        spec = replace(spec, request=replace(spec.request, evidence=EvidenceLevel(evidence)))
    options = replace(options, conda_source=spec.conda_source)
    if on_spec is not None:
        options = on_spec(spec, options)
    sources = [spec.path.parent / m.source for m in spec.members if m.source != "described"]
    folder = OutputFolder(Path(output) if output else default_output(spec), [spec.path, *sources])
    directory = folder.directory
    if check and not (directory / "report.md").is_file():
        raise UserError(
            f"no gpuresolve lock files in {directory} (no report.md): nothing to check (lock "
            f"{spec.name} first, or point -o at the folder its files are in)"
        )
    if check and recorded is not None:  # the formats the team's files record, unless given
        options = recorded(directory, options)
    team = lock_team(
        catalog,
        spec,
        options,
        split,
        existing=lambda rel: folder.read(rel, MAX_PROJECT_BYTES, "a file gpuresolve edits"),
        progress=progress,
        folder=directory,
    )
    stale = tuple(folder.stale(team.files, spec.path.name, owned_names()) if team.ok else ())
    return TeamRun(spec, options, folder, team, stale)
