"""`gpuresolve image [TAG]`: what a container image holds and whether it runs on the target."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from resolver.commands.common import TargetOptions, target_options, warn_lost
from resolver.commands.config import source_of, standard_options
from resolver.commands.emit import emit_json
from resolver.commands.ui import echo, note
from resolver.core.vocab import DriverPolicy, words
from resolver.present import image as say

if TYPE_CHECKING:
    from resolver.core.documents.decision import ImageDoc
    from resolver.images.evaluate import Contents, Report


@click.command()
@click.argument("reference", required=False)
@target_options
@click.option(
    "--driver-policy",
    type=click.Choice(words(DriverPolicy)),
    default="compat",
    show_default=True,
    help="compat: CUDA minor-version compatibility; strict: the toolkit's own driver.",
)
@click.option("--devel", is_flag=True, help="Without a TAG: suggest the devel flavour (nvcc).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the answer as JSON (a stable contract)."
)
@standard_options
def image(
    reference: str | None,
    target: TargetOptions,
    driver_policy: str,
    devel: bool,
    as_json: bool,
) -> None:
    """Say what an image holds (torch, CUDA, cuDNN, NCCL, Python, kernels) and whether it runs.

    REFERENCE: an official pytorch/pytorch tag (2.9.0-cuda12.8-cudnn9-runtime, with or without
    the repository), or nvcr.io/nvidia/pytorch:YY.MM-py3. Without one: the best official image
    for the target and the `docker run` line to use it.

    Exit 0 it runs, 1 it does not (with the reasons and the upgrade that would help), 2 a
    malformed or unknown reference.
    """
    from resolver import catalog as catalog_mod
    from resolver.db import imagesdata
    from resolver.images import facts as facts_mod
    from resolver.images import reference as ref_mod
    from resolver.images.evaluate import Judge, report_for

    ref = ref_mod.parse(reference) if reference else None  # bad input fails before detection
    catalog = catalog_mod.load()
    facts = facts_mod.from_raw(*imagesdata.read(catalog.origin))
    if target.python and source_of(click.get_current_context(), "python") == "--python":
        note("--python is ignored: an image brings its own Python")
    # never run (an interpreter path, from the command line or a file) what is ignored
    machine, profile = target._replace(python=None).resolve(catalog)
    warn_lost(profile)
    judge = Judge(
        catalog,
        facts,
        machine,
        policy=DriverPolicy(driver_policy),
        devel=devel,
    )
    report = report_for(judge, ref)
    if as_json:
        emit_json(report_json(report))
    else:
        if profile is not None:
            for message in profile.messages:
                note(message)
        echo(report_text(report))
    sys.exit(0 if report.runs else 1)


def run_line(image: str) -> str:
    return f"docker run --gpus all -it --rm {image}"


def report_json(report: Report) -> ImageDoc:
    from resolver.present.render import target_json

    sug = report.suggestion
    return {
        "image": report.image,
        "contents": report.contents.to_json() if report.contents else None,
        "runs": bool(report.runs),  # None only until judged: every printed report is
        "forward_compat": report.forward_compat,
        "reasons": say.lines(report.reasons),
        "evidence": [say.evidence_json(e) for e in report.evidence],
        "suggestion": {"image": sug.image, "contents": sug.contents.to_json()} if sug else None,
        "target": target_json(report.target),
        "upgrades": say.lines(report.upgrades),
        "notes": say.lines(report.notes),
        "run": run_line(report.image) if report.image and report.runs else None,
    }


def _contents_line(c: Contents) -> str:
    def v(x: str | None) -> str:
        return x if x else "unknown"

    build = f"{c.variant} wheel" if c.wheel else f"{c.variant} build" if c.variant else ""
    torch = v(c.torch) + (f" ({build})" if build else "")
    libs = f"CUDA {v(c.cuda)}, cuDNN {v(c.cudnn)}, NCCL {v(c.nccl)}"
    return f"torch {torch}, {libs}, Python {v(c.python)}"


def _kernels_line(c: Contents) -> str:
    if c.sass is None:
        return "kernels: unknown"
    return f"kernels: SASS {' '.join(c.sass) or 'none'}; PTX {' '.join(c.ptx or ()) or 'none'}"


def report_text(report: Report) -> str:
    from resolver.present.render import target_line

    lines: list[str] = []
    if report.image is None:
        lines.append("no official image runs on this target")
    else:
        lines.append(f"image {report.image}")
    if report.contents:
        lines.append(f"  {_contents_line(report.contents)}")
        lines.append(f"  {_kernels_line(report.contents)}")
    if report.flavour_note:
        lines.append(f"  {report.flavour_note}")
    lines.append(f"target: {target_line(report.target)}")
    if report.runs:
        mode = " in CUDA forward-compatibility mode" if report.forward_compat else ""
        lines.append(f"RUNS on this target{mode}")
    elif report.runs is False:
        lines.append("DOES NOT RUN on this target:")
        lines.extend(f"  - {r}" for r in say.lines(report.reasons))
    lines.extend(f"  {n}" for n in say.lines(report.notes))
    for u in say.lines(report.upgrades):
        lines.append(f"fix: {u}")
    sug = report.suggestion
    if sug and sug.image != report.image:
        lines.append(f"{'instead' if report.runs is False else 'newest that runs'}: {sug.image}")
        lines.append(f"  {_contents_line(sug.contents)}")
        lines.append(f"  {say.newest_runs(sug.why)}")
    if report.evidence:
        lines.append("evidence:")
        for e in report.evidence:
            src = f": {', '.join(e.source)}" if e.source else ""
            value = say.evidence_value(e.value)
            lines.append(f"  {e.fact:<8} {value or 'unknown'}  [{e.grade}{src}]")
    if report.image and report.runs:
        lines.append(run_line(report.image))
    elif sug and report.runs is False:
        lines.append(run_line(sug.image))
    return "\n".join(lines)
