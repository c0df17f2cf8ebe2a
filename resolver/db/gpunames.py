"""GPU model names: how a ``--gpu`` value or an nvidia-smi name finds its database record.

Names are compared as lower-case words without the brand words ("NVIDIA GeForce RTX 3090" is
"rtx 3090"); the words nvidia-smi appends for the board (form factor, memory) may follow a
model's name, anything else is an unknown GPU rather than a wrong guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from resolver.core.errors import UserError
from resolver.core.versions import CC, cc_str, parse_cc


class _Gpu(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def cc(self) -> CC: ...


class GpuTable(Protocol):
    """What the lookups read of a Catalog (models.py imports this module, not the reverse)."""

    @property
    def gpus(self) -> Sequence[_Gpu]: ...
    @property
    def architectures(self) -> Mapping[CC, object]: ...
    def gpu_by_name(self, name: str) -> _Gpu | None: ...


_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce"})
_WORD_RE = re.compile(r"[a-z0-9]+")
# What a described --gpu name may hold, and the words nvidia-smi adds after a model's name
# (form factor, memory, variant of the board): "Tesla V100-SXM2-32GB", "H100 80GB HBM3".
_GPU_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()/+-]{0,99}$")
_NAME_SUFFIX_RE = re.compile(
    r"^([0-9]+gb|[0-9]+g|sxm[0-9]*|pcie|pci|e|nvl|hbm[0-9]*e?|laptop|mobile|notebook|gpu|max|q|oem|dgx|lhr|[0-9]+w"
    r"|ti|super|generation)$"
)


def name_words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _WORD_RE.findall(name.lower()) if w not in _NOISE_WORDS)


def close_names(catalog: GpuTable, name: str, n: int = 5) -> list[str]:
    """Up to ``n`` database names that look like ``name``, for a "did you mean" hint."""
    import difflib

    names = {g.name: " ".join(name_words(g.name)) for g in catalog.gpus}
    query = " ".join(name_words(name))
    hits = difflib.get_close_matches(query, list(names.values()), n=n, cutoff=0.5)
    by_norm = {v: k for k, v in names.items()}
    return [by_norm[h] for h in hits]


def resolve_gpu(catalog: GpuTable, spec: str) -> tuple[CC, str | None]:
    """A --gpu value: "8.6", "sm_86" or a model name -> (CC, model name or None)."""
    text = spec.strip()
    if re.fullmatch(r"(?i)(sm_|compute_)?[0-9]+(\.[0-9])?[af]?", text):
        cc = parse_cc(text)
        if cc not in catalog.architectures:
            known = ", ".join(cc_str(c) for c in sorted(catalog.architectures))
            raise UserError(f"unknown compute capability {cc_str(cc)} (known: {known})")
        return cc, None
    if not _GPU_NAME_RE.match(text):
        raise UserError(
            f"unknown GPU {text[:60]!r}: a model name has letters, digits, spaces and "
            "- . _ ( ) / + only (or give its compute capability, e.g. 8.6)"
        )
    gpu = catalog.gpu_by_name(text)
    if gpu is not None:
        extra = name_words(text)[len(name_words(gpu.name)) :]
        junk = [w for w in extra if not _NAME_SUFFIX_RE.match(w)]
        if junk:  # "RTX 4090 foo" is not an RTX 4090 with a form factor or memory size
            raise UserError(
                f"unknown GPU {text!r}: {' '.join(junk)!r} is not part of the model name "
                f"{gpu.name!r} (form factors and memory sizes such as SXM4, PCIe, 80GB are)"
            )
    if gpu is None:
        close = close_names(catalog, text)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        raise UserError(f"unknown GPU {text!r}{hint} (or give its compute capability, e.g. 8.6)")
    return gpu.cc, gpu.name
