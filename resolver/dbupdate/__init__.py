"""Refresh the compatibility database from the PyTorch wheel index (`gpuresolve db update`).

The pipeline is split so that each step is testable alone: ``fetch`` (HTTP with timeouts and
bounded retries) → ``wheels.simple`` (PEP 503/691 pages, wheel file names) and ``metadata`` (PEP 658
files or a range read of the wheel's ``METADATA``) → ``collect`` (what the index says, as
``facts``) → ``merge`` (pure: old raw database + facts → new raw database + summary) →
``write`` (YAML, validated in a temporary directory, then swapped in whole).
"""

from __future__ import annotations

from resolver.core.errors import UserError

__all__ = ["DEFAULT_PYTORCH_INDEX", "PYTORCH_INDEX_ENV", "UpdateError"]


DEFAULT_PYTORCH_INDEX = "https://download.pytorch.org/whl"
PYTORCH_INDEX_ENV = "GPURESOLVE_PYTORCH_INDEX"


class UpdateError(UserError):
    """The update could not finish: the database in use is left exactly as it was."""
