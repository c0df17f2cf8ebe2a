"""PEP 508 markers judged for a target platform and Python, never for this machine.

Lock writers (pip's report), `db update` (a wheel's pins) and the like read Requires-Dist for
another machine: they share core.platforms.marker_env and this one filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from packaging.requirements import InvalidRequirement, Requirement


def applicable(requires_dist: Iterable[str], env: Mapping[str, str]) -> Iterator[Requirement]:
    """The requirements whose markers hold in ``env``; unparsable lines are skipped."""
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(dict(env)):
            yield req
