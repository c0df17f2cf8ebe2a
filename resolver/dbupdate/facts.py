"""What the indexes said: the plain data ``collect`` produces and ``merge`` consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BuildFacts:
    """One torch release built for one variant, as the PyTorch index lists it."""

    variant: str  # "cu126"
    python: dict[str, set[str]] = field(default_factory=dict)  # platform -> {"3.12", "3.13t"}
    metadata_read: bool = False  # the pins below come from a wheel's metadata
    cuda_runtime: str | None = None  # "12.6.77" (nvidia-cuda-runtime pin)
    cudnn: str | None = None
    nccl: str | None = None


@dataclass
class ReleaseFacts:
    version: str  # "2.16.0"
    builds: dict[str, BuildFacts] = field(default_factory=dict)  # variant name -> facts
    date: str | None = None  # first upload, where the index says (PEP 700)
    torchvision: str | None = None
    torchaudio: str | None = None
    pypi: dict[str, str] = field(default_factory=dict)  # platform -> variant of the default wheel

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass
class IndexFacts:
    index_url: str  # the PyTorch index base URL read
    read_at: str  # ISO timestamp of the read (UTC)
    releases: dict[str, ReleaseFacts] = field(default_factory=dict)
    pypi_read: bool = False  # the default index configured in pip was read
    notes: list[str] = field(default_factory=list)  # what the reader skipped, and why

    @property
    def read_date(self) -> str:
        return self.read_at[:10]
