"""pylock.toml (PEP 751): the standard lock file uv installs and pip is adopting.

The whole closure for one target, each package with its version, the index it comes from, and
the one wheel for the target's platform and Python with its sha256. The document is validated
with ``packaging.pylock`` (our own dependency) before it is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from resolver.core.errors import UserError
from resolver.core.platforms import Platform, PythonVersion
from resolver.core.vocab import LockFormat
from resolver.writers.closure.pip_resolve import ResolvedDist
from resolver.writers.formats.header import header_lines
from resolver.writers.formats.requirements import index_lines, pins
from resolver.writers.formats.unit import LockFormatUnit, TeamWrite

if TYPE_CHECKING:
    from resolver.catalog import Catalog
    from resolver.solve import Decision
    from resolver.writers.formats.unit import Options, RenderContext, TeamContext

NAME = "pylock.toml"


def environment_marker(platform: Platform, python: PythonVersion) -> str:
    """The marker of one target: its platform and its Python minor version."""
    return f"{platform.marker} and python_version == '{python.plain}'"


def document(
    platform: Platform,
    python: PythonVersion,
    closure: Sequence[ResolvedDist],
    created_by: str = "gpuresolve",
) -> dict[str, Any]:
    """The PEP 751 document (plain data) for one target's resolved closure."""
    packages = [_package(dist) for dist in closure]
    return {
        "lock-version": "1.0",
        "environments": [environment_marker(platform, python)],
        "requires-python": f"=={python.plain}.*",
        "created-by": created_by,
        "packages": packages,
    }


def fleet_document(
    closures: Sequence[tuple[Platform, PythonVersion, Sequence[ResolvedDist]]],
    created_by: str = "gpuresolve",
) -> dict[str, Any]:
    """One PEP 751 document for several platforms: each package carries the marker of the
    platforms whose closure holds it (a wheel shared by all, such as a pure-Python one, once)."""
    markers: dict[tuple[str, str, str], list[str]] = {}
    dists: dict[tuple[str, str, str], ResolvedDist] = {}
    for platform, _python, closure in closures:
        for dist in closure:
            key = (dist.name, dist.version, dist.url)
            dists.setdefault(key, dist)
            markers.setdefault(key, []).append(platform.marker)
    everywhere = len(closures)
    packages: list[dict[str, Any]] = []
    for key in sorted(dists):
        dist, found = dists[key], markers[key]
        package = _package(dist)
        if len(found) < everywhere:
            package["marker"] = " or ".join(f"({m})" for m in found) if len(found) > 1 else found[0]
        packages.append(package)
    pythons = sorted({python.plain for _, python, _ in closures})
    return {
        "lock-version": "1.0",
        "environments": [environment_marker(p, py) for p, py, _ in closures],
        "requires-python": f"=={pythons[0]}.*" if len(pythons) == 1 else f">={pythons[0]}",
        "created-by": created_by,
        "packages": packages,
    }


def _package(dist: ResolvedDist) -> dict[str, Any]:
    filename = unquote(dist.url.rsplit("/", 1)[-1].split("#", 1)[0])
    package: dict[str, Any] = {"name": dist.name, "version": dist.version}
    if dist.index:
        package["index"] = dist.index
    package["wheels"] = [{"name": filename, "url": dist.url, "hashes": {"sha256": dist.sha256}}]
    return package


def validate(doc: dict[str, Any]) -> None:
    """Load the document with ``packaging.pylock`` (raises ValueError when it is not valid)."""
    try:
        from packaging.pylock import Pylock, PylockValidationError
    except ImportError:  # packaging < 26.0
        raise UserError(
            "pylock.toml needs packaging >= 26.0 (packaging.pylock): pip install -U packaging"
        ) from None
    try:
        Pylock.from_dict(doc)
    except PylockValidationError as exc:
        raise ValueError(f"pylock.toml does not validate: {exc}") from exc


def render_pylock(header: Sequence[str], doc: dict[str, Any]) -> str:
    """The file's text: the header comments, then the TOML document (wheels one per line)."""
    import tomlkit

    validate(doc)
    out = tomlkit.document()
    for line in header:
        out.add(tomlkit.comment(line.removeprefix("#").strip()))
    for key, value in doc.items():
        if key == "packages":
            continue
        if isinstance(value, list):
            arr = tomlkit.array()
            arr.extend(value)
            out.add(key, arr)
        else:
            out.add(key, value)
    aot = tomlkit.aot()
    for package in doc["packages"]:
        table = tomlkit.table()
        for key, value in package.items():
            if key == "wheels":
                wheels = tomlkit.array()
                for wheel in value:
                    inline = tomlkit.inline_table()
                    inline.update(wheel)
                    wheels.append(inline)
                wheels.multiline(True)
                table.add(key, wheels)
            else:
                table.add(key, value)
        aot.append(table)
    out.add(tomlkit.nl())
    out.add("packages", aot)
    return tomlkit.dumps(out)


def closure_of(
    catalog: Catalog, decision: Decision, options: Options, ctx: RenderContext | None = None
) -> list[ResolvedDist]:
    """The decision's whole closure for its target (the torch set and the extra packages)."""
    cand = decision.selection
    if cand is None:
        raise ValueError("no build selected: nothing to lock")
    extra = options.extra_requirements
    index = index_lines(catalog, cand, options.pytorch_index, bool(extra), options.default_index)
    if ctx is None:
        from resolver.writers.closure.pip_resolve import resolve

        return resolve([*pins(cand), *extra], index, decision.target, None)
    return ctx.closure([*pins(cand), *extra], index, decision.target)


def render(ctx: RenderContext) -> Mapping[str, str]:
    """pylock.toml for the decision's target: the resolved closure (needs the index)."""
    decision = ctx.decision
    with ctx.reaching(NAME):
        dists = closure_of(ctx.catalog, decision, ctx.options, ctx)
    target = decision.target
    header = header_lines(
        ctx.catalog,
        decision,
        [
            f"for {target.platform} and Python {target.python} only: other machines need their own",
            "install: uv pip install -r pylock.toml (PEP 751; every wheel checked by its sha256)",
        ],
    )
    return {NAME: render_pylock(header, document(target.platform, target.python, dists))}


def render_team(team: TeamContext) -> str:
    """One pylock.toml for a group's platforms: packages carry their platforms' markers."""
    catalog = team.catalog
    header = [
        f"# Generated by gpuresolve for team {team.team}"
        + (f" ({team.label})" if team.label else "")
        + f" (database {catalog.updated or 'undated'}); `gpuresolve lock` rewrites this "
        "file, `gpuresolve lock --check` compares it.",
        "# platforms: "
        + "; ".join(
            f"{d.target.platform}: {b}" for d, b in zip(team.decisions, team.builds, strict=True)
        ),
        "# install: uv pip install -r pylock.toml (each machine takes its platform's "
        "packages by their markers)",
    ]
    with team.making(NAME, team.options):
        closures = [
            (d.target.platform, d.target.python, closure_of(catalog, d, team.options))
            for d in team.decisions
        ]
    return render_pylock(header, fleet_document(closures))


FORMAT = LockFormatUnit(
    LockFormat.PYLOCK,
    (NAME,),
    render,
    needs_wheels=True,
    needs_closure=True,
    team=TeamWrite.MERGED,
    render_team=render_team,
    summary="pylock.toml (PEP 751)",
)
