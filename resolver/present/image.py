"""The sentences of the image report's records (``images/findings.py``), and its evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from resolver.core.versions import cc_sm
from resolver.images import findings as im
from resolver.present import findings as words
from resolver.solve import findings as fd

if TYPE_CHECKING:
    from resolver.core.documents.decision import ImageEvidenceJson
    from resolver.images.evaluate import Evidence

_PLAIN = {
    im.Plain.WSL: "a Windows host runs Linux containers through WSL2: the Windows driver's "
    "floors apply",
    im.Plain.MACOS: "a macOS host gives containers no NVIDIA GPU",
    im.Plain.JIT: "a GPU runs this build only through PTX JIT: slow first use",
    im.Plain.CPU_ONLY: "no NVIDIA GPU on the target: torch in this image runs on the CPU only",
    im.Plain.NO_MODEL: "no GPU model given: kernels not checked (--gpu)",
    im.Plain.DIGEST: "the digest was not checked: the answer is for the tag",
    im.Plain.ARCH_FIX: "build an image from this platform's wheels: gpuresolve lock --format "
    "dockerfile (with this host's --platform, --driver and --gpu)",
    im.Plain.NONE_RUNS: "no official image's torch build runs here",
}


def lines(items: list[im.Said]) -> list[str]:
    """Each record's sentence (a hint may say several), in order."""
    out: list[str] = []
    for item in items:
        if isinstance(item, fd.Hint):
            out += words.hint_lines(item)
        else:
            out.append(said(item))
    return out


def said(x: im.Said) -> str:
    if isinstance(x, str):
        return x  # the database's own text (a release's note)
    if isinstance(x, im.Plain):
        return _PLAIN[x]
    if isinstance(x, im.DriverMet):
        return f"driver {x.have} >= {x.need} ({words.driver_why(x.why)})"
    if isinstance(x, im.DriverNotGiven):
        return f"no driver given: needs driver >= {x.need} ({words.driver_why(x.why)})"
    if isinstance(x, im.Upgrade):
        return f"upgrade the driver to >= {x.need} ({words.driver_why(x.why)})"
    if isinstance(x, im.Doubt):
        return f"{words.about(x.doubt) if x.doubt else 'a fact'} rests on a secondary source"
    if isinstance(x, im.LatestMoves):
        return (
            f"'latest' moves with every release and names no CUDA version: as of the database "
            f"({x.updated}) it is a torch {x.torch} image; pin a tag instead"
        )
    if isinstance(x, im.KernelsUnchecked):
        return f"kernels for {', '.join(x.gpus)} not checked: unknown for NVIDIA's build"
    if isinstance(x, im.PlatformOnly):
        what = "the official CUDA image" if x.ref is None else f"the database's record of {x.ref}"
        return f"{what} is {x.image_platform} only; this host is {x.host}"
    if isinstance(x, im.CudaFails):
        return f"CUDA {x.cuda}: {words.reasons(x.reasons)}"
    if isinstance(x, im.ForwardCompat):
        return _forward_compat(x)
    if isinstance(x, fd.Covered | fd.LoaderPick | fd.CeilingFallback):
        return words.coverage([x])[0]
    if isinstance(x, fd.Reason):
        return words.reason(x)
    return "; ".join(words.hint_lines(x))


def _forward_compat(x: im.ForwardCompat) -> str:
    mode = f"CUDA forward compatibility (R{x.branch} for CUDA {x.major}.x)"
    if x.why is im.NoForwardCompat.NO_GPU:
        return f"{mode} needs a data-center GPU: name it with --gpu"
    if x.why is im.NoForwardCompat.NOT_DATA_CENTER:
        what = x.gpu or f"{cc_sm(x.cc or (0, 0))} (name the model with --gpu)"
        return f"{mode} applies only to data-center GPUs, not to {what}"
    if x.why is im.NoForwardCompat.NOT_DRIVEN:
        return f"{mode}: R{x.branch} does not drive {x.gpu} (R{x.first}+)"
    return (
        f"runs in CUDA forward-compatibility mode: driver {x.driver} (R{x.branch}) is below "
        f"{x.need} ({words.driver_why(x.need_why)}), but {', '.join(x.gpus)} is a data-center "
        f"GPU and NVIDIA's forward-compatibility package in the container supports R{x.branch} "
        f"for CUDA {x.major}.x [{x.grade}: {', '.join(x.source)}]"
    )


def newest_runs(x: im.NewestRuns) -> str:
    how = "; ".join(words.coverage(x.coverage)) or "GPU not checked"
    why = f"the newest torch whose CUDA build runs here ({how})"
    return why + (f"; {said(x.driver)}" if x.driver else "")


def evidence_value(value: str | im.InstalledBuild | None) -> str | None:
    if not isinstance(value, im.InstalledBuild):
        return value
    if value.by is None:
        return f"torch {value.torch} {value.variant} from the PyTorch index"
    return f"torch {value.torch} CUDA {value.cuda} (installed by {value.by})"


def evidence_json(e: Evidence) -> ImageEvidenceJson:
    return {
        "fact": e.fact,
        "value": evidence_value(e.value),
        "grade": e.grade,
        "source": list(e.source),
        "note": e.note,
    }
