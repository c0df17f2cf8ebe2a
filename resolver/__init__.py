"""gpuresolve: the PyTorch + CUDA + cuDNN wheels that really run on a machine's driver and GPUs.

The first gpuresolve code any start runs (the console script and `python -m resolver` import
this package before click and the CLI): Ctrl-C while they load, before `cli.main` can catch it,
ends as the CLI's own Ctrl-C does, one line and exit 130, instead of a traceback.
"""

import os
import sys
from types import TracebackType

__all__ = ["__version__"]


__version__ = "0.1.0"


def _interrupted_at_start(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        try:
            sys.stderr.write("gpuresolve: aborted\n")
            sys.stderr.flush()
        finally:
            os._exit(130)  # nothing started yet: no child to kill, nothing half-written
    sys.__excepthook__(kind, value, tb)


if sys.excepthook is sys.__excepthook__:  # an embedding program's own hook is left alone
    sys.excepthook = _interrupted_at_start
