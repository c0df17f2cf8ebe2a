"""Lock a team environment: spec → fleet decision → the files of every platform (and group).

Layout under the output directory (default ``environments/<name>/``):
- one platform: ``requirements.txt`` (and the conda files) directly in it;
- several platforms: one folder per platform (``linux-x86_64/requirements.txt``, ...);
- ``--split``: one folder per group, named after its first member, each laid out as above;
- ``report.md`` at the top: target × build × why, alternatives, upgrade hints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from packaging.specifiers import SpecifierSet

from resolver.catalog import Catalog
from resolver.envspec import EnvSpec
from resolver.fleet import FleetDecision, PlatformChoice, solve_fleet, split_groups
from resolver.solve import Decision, Target, TargetGpu, solve
from resolver.versions import driver_key
from resolver.writers import lockfiles
from resolver.writers.report import render_report


@dataclass(frozen=True)
class TeamLock:
    files: dict[str, str]  # relative path -> text
    groups: tuple[tuple[str, FleetDecision], ...]  # (label, decision)

    @property
    def ok(self) -> bool:
        return all(d.ok for _, d in self.groups)


def platform_target(spec: EnvSpec, choice: PlatformChoice, members: list[Target]) -> Target:
    """One target standing for every member of a platform: all their GPUs, the lowest driver."""
    mine = [t for t in members if t.platform == choice.platform]
    gpus: dict[TargetGpu, None] = {}
    for t in mine:
        for g in t.gpus:
            gpus.setdefault(g, None)
    drivers = [t.driver for t in mine if t.driver]
    lowest = min(drivers, key=driver_key) if drivers else None
    return Target(
        platform=choice.platform,
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


def lock_team(
    catalog: Catalog,
    spec: EnvSpec,
    options: lockfiles.LockOptions,
    split: bool = False,
) -> TeamLock:
    """Every file of the team environment, keyed by path relative to the output directory."""
    options = replace(options, extra_requirements=spec.pip, name=options.name or spec.name)
    targets = spec.targets
    if split:
        groups = [
            (members[0].name or f"group-{i + 1}", members, decision)
            for i, (members, decision) in enumerate(split_groups(catalog, targets, spec.request))
        ]
    else:
        groups = [("", targets, solve_fleet(catalog, targets, spec.request))]
    counts = {m.target.name or "": m.count for m in spec.members}
    files: dict[str, str] = {}
    report: list[str] = []
    for label, members, decision in groups:
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
                [m.group for m in spec.members if m.group is not None],
            )
        )
        if not decision.ok:
            continue
        several = len(decision.choices) > 1
        for choice in decision.choices:
            plat_decision = platform_decision(catalog, spec, choice, members)
            lock_input = lockfiles.LockInput(plat_decision)
            if options.needs_conda and options.conda_source == "conda-forge":
                from resolver.conda import solve_conda_forge

                conda = solve_conda_forge(catalog, plat_decision.target, spec.request)
                lock_input = lockfiles.LockInput(plat_decision, conda)
            if lock_input.unmet(options) is not None:
                continue
            rendered = lockfiles.render_files(catalog, lock_input, options)
            sub = f"{prefix}{choice.platform}/" if several else prefix
            for name, text in rendered.items():
                files[f"{sub}{name}"] = text
    files["report.md"] = "\n".join(report)
    return TeamLock(files, tuple((label, d) for label, _, d in groups))


def default_output(spec: EnvSpec) -> Path:
    """``environments/<name>/`` beside the spec file."""
    return spec.path.parent / spec.name
