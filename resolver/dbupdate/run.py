"""`gpuresolve db update` end to end: read the old database, the indexes, merge, write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resolver import catalog
from resolver.core.errors import IndexFormatError, UserError
from resolver.db.check import check
from resolver.db.yamlfile import read_yaml
from resolver.dbupdate import UpdateError
from resolver.dbupdate.collect import Progress, collect, no_progress
from resolver.dbupdate.extcollect import collect_extensions, known_versions
from resolver.dbupdate.exthistmerge import merge_history, needs_scan
from resolver.dbupdate.exthistory import History, PageState, history, pages_for
from resolver.dbupdate.extmerge import merge_extensions
from resolver.dbupdate.merge import Summary, merge, stamp_torch
from resolver.io import ReadError
from resolver.io.http import Client


@dataclass(frozen=True)
class Outcome:
    summary: Summary
    base: Path  # the database the update started from
    target: Path  # where it was (or would have been) written
    written: bool
    pypi_read: bool
    requests: int  # HTTP requests made
    extensions_read: int = 0  # extension packages' index pages read (0: none listed)
    extension_wheels: int = 0  # extension wheels read
    history: History | None = None  # the extension packages' history gather (its figures)


EXTENSIONS = "extensions.yaml"


def read_raw(directory: Path) -> dict[str, Any]:
    """The four files as parsed YAML, keyed by file name (DataError when one is broken), and
    extensions.yaml where the database has one."""
    raw = {name: read_yaml(directory / name) for name in catalog.FILES}
    if (directory / EXTENSIONS).is_file():
        raw[EXTENSIONS] = read_yaml(directory / EXTENSIONS)
    return raw


def run_update(
    *,
    base: Path,
    target: Path,
    pytorch_index: str,
    pypi_index: str | None,
    fetcher: Client,
    progress: Progress = no_progress,
    dry_run: bool = False,
    read_at: str | None = None,
    ext_state: dict[str, PageState] | None = None,
) -> Outcome:
    """Update ``base`` from the indexes into ``target`` (atomically), or raise UpdateError
    (the write) or FetchError, IndexFormatError, MetadataError (the read).

    Nothing is written when the index has nothing new, on ``dry_run``, or on any error; a
    folder a killed update left beside ``target`` is removed either way (not on ``dry_run``).
    The extension packages' pages are read once each (``ext_state``: their ETags and serials
    from the last update, so an unchanged page costs one request and no body); every release
    since torch 2.1.0 the database lacks is read cheaply (``exthistory``), the newest whole.
    """
    if not dry_run:
        from resolver.dbupdate.write import clean_leftovers

        clean_leftovers(target)
    raw = read_raw(base)
    known_problems = check(catalog.load(base))
    try:
        facts = collect(
            fetcher,
            raw["torch.yaml"],
            pytorch_index,
            pypi_index,
            progress=progress,
            read_at=read_at,
        )
        ext_doc = raw.get(EXTENSIONS) or {}
        mirror = _is_mirror(raw["torch.yaml"], pytorch_index)
        pages, elsewhere = pages_for(
            ext_doc, pypi_index, None if mirror else pytorch_index, _all_variants(raw["torch.yaml"])
        )
        configs = _build_configs(base)
        hist = history(
            fetcher,
            lambda: Client(timeout=fetcher.timeout, tries=fetcher.tries),
            pages,
            known_versions(ext_doc),
            ext_state or {},
            elsewhere=elsewhere,
            whole=needs_scan(ext_doc, configs),
            progress=progress,
        )
        ext = collect_extensions(
            fetcher,
            ext_doc,
            pypi_index,
            pytorch_index,
            _torch_variants(raw["torch.yaml"]),
            progress=progress,
            mirror=mirror,
            pages=hist.links,
        )
    except (ReadError, IndexFormatError) as exc:
        raise UpdateError(str(exc)) from None
    new_raw, summary = merge(raw, facts)
    merge_extensions(new_raw, ext, facts.read_date, summary)
    merge_history(new_raw, hist, facts.read_date, summary, configs)
    _keep_extensions_sound(raw, new_raw, summary, known_problems)
    if new_raw.get(EXTENSIONS) != raw.get(EXTENSIONS):
        # the database's version is torch.yaml's stamp: without it a database whose only
        # news is an extension release would not be picked over the shipped one
        stamp_torch(new_raw["torch.yaml"], facts.read_at)
    written = False
    if summary.changed and not dry_run:
        from resolver.dbupdate.write import write_database

        write_database(
            target,
            new_raw,
            base=base,
            changed=[name for name in new_raw if new_raw[name] != raw.get(name)],
            stamp=facts.read_at,
            known_problems=known_problems,
        )
        written = True
    return Outcome(
        summary,
        base,
        target,
        written,
        facts.pypi_read,
        fetcher.requests,
        hist.pages,
        ext.wheels_read + hist.wheels_read,
        hist,
    )


def _keep_extensions_sound(
    raw: dict[str, Any], new_raw: dict[str, Any], summary: Summary, known: list[str]
) -> None:
    """Undo the extension packages' part of the merge when it would fail ``db check``: what
    a new release's wheels said must not stop torch's update (the summary says why)."""
    if new_raw.get(EXTENSIONS) == raw.get(EXTENSIONS):
        return
    try:
        problems = check(catalog.from_raw(new_raw, origin="<update>"))
    except UserError as exc:  # does not load: the extensions' part goes, torch's is checked on
        problems = [f"{EXTENSIONS}: {exc}"]
    new = [p for p in problems if p not in set(known) and EXTENSIONS in p]
    if new:
        new_raw[EXTENSIONS] = raw[EXTENSIONS]
        summary.extensions.clear()
        summary.notes.append(
            f"the extension packages' new releases were left out: {new[0]} (curate)"
        )


def _is_mirror(torch_doc: Any, pytorch_index: str) -> bool:
    """Whether the PyTorch index read is not the database's own (``index_url``)."""
    own = str(torch_doc.get("index_url") or "").split("{variant}")[0].rstrip("/")
    return pytorch_index.rstrip("/") != own


def _build_configs(base: Path) -> Any:
    """ext_build_configs.yaml (the arch lists of releases' build configurations at their tags),
    the database's own, else the shipped one's."""
    for directory in (base, catalog.shipped_data_dir()):
        if (directory / BUILD_CONFIGS).is_file():
            return read_yaml(directory / BUILD_CONFIGS)
    return {}


BUILD_CONFIGS = "ext_build_configs.yaml"


def _all_variants(torch_doc: Any) -> list[str]:
    """Every CUDA variant folder torch.yaml names (the history reaches back to torch 2.1)."""
    from resolver.dbupdate.merge import series_of, variant_names

    return sorted({n for s in series_of(torch_doc) for n in variant_names(s) if n.startswith("cu")})


def _torch_variants(torch_doc: Any) -> list[str]:
    """The CUDA variant folders of torch.yaml's newest two series (where a new extension
    release built for a current torch is served; older folders get no new releases)."""
    from resolver.dbupdate.merge import series_of, variant_names
    from resolver.wheels.simple import release_key

    newest = sorted(series_of(torch_doc), key=lambda s: release_key(str(s.get("minor"))))[-2:]
    return sorted({n for s in newest for n in variant_names(s) if n.startswith("cu")})
