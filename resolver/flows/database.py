"""The database's own checks, on values: `db check`'s rules over the records, images.yaml and
gpu_peaks.yaml. The command prints them."""

from __future__ import annotations

from resolver.catalog import Catalog

__all__ = ["problems_of"]


def problems_of(catalog: Catalog) -> list[str]:
    """Every problem `db check` finds: the records' own rules, then images.yaml's and
    gpu_peaks.yaml's (each read beside the database, else the shipped one)."""
    from resolver.core.errors import DataError
    from resolver.db import imagesdata
    from resolver.db.check import check
    from resolver.images import facts as image_facts
    from resolver.verify import speed

    problems = check(catalog)
    try:  # images.yaml
        facts = image_facts.from_raw(*imagesdata.read(catalog.origin))
        problems += image_facts.check(catalog, facts)
    except DataError as exc:
        problems.append(str(exc))
    try:
        speed.load(speed.data_file(catalog.origin))  # gpu_peaks.yaml
    except DataError as exc:
        problems.append(str(exc))
    return problems
