"""Which wheel to read for a build: list a project's wheels on an index, pick one per build.

Index pages are parsed by ``resolver.wheels.simple`` (PEP 503 HTML and PEP 691 JSON) and
fetched with its ``Client`` (resolver.io.http); this module only chooses among them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from resolver.core.platforms import PythonVersion
from resolver.host.pipconfig import pip_index_url
from resolver.io import credentials, subprocs
from resolver.io.http import Client
from resolver.wheels.simple import ACCEPT, Wheel, parse_page, parse_wheel


def pip_default_index() -> str | None:
    """The index pip would use: its configured index-url, else pip's own built-in default.

    Asked of pip itself (``pip._internal.models.index``), so that no registry's host name is
    written here; None when pip is not installed.
    """
    configured = pip_index_url()
    if configured:  # its login kept for the requests, never shown
        return credentials.keep(configured)
    try:
        out = subprocs.run(
            [
                sys.executable,
                "-c",
                "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
            ],
            timeout=30,
        ).stdout.strip()
    except OSError:
        return None
    return out if out.startswith(("http://", "https://")) else None


def project_url(index: str, project: str) -> str:
    return f"{index.rstrip('/')}/{project}/"


def project_wheels(fetcher: Client, index: str, project: str = "torch") -> list[Wheel]:
    """Every (non-yanked) wheel of ``project`` the index lists."""
    url = project_url(index, project)
    page = fetcher.get(url, accept=ACCEPT)
    links = parse_page(page.body, page.content_type, page.url)
    return [w for link in links if (w := parse_wheel(link)) is not None]


def pick_wheel(
    wheels: Iterable[Wheel], version: str, platform: str, local: str | None = None
) -> Wheel | None:
    """The wheel of ``version`` (public part) for ``platform`` with the smallest Python tag.

    ``local``: the variant tag the file name must carry ("cu128"); None also accepts untagged
    names (the default index's). Free-threaded builds come after the regular ones. Among
    files of one Python tag the highest build tag wins, as pip installs it (the default
    index re-uploaded 2.10.0's x86_64 wheels as ``torch-2.10.0-3-...``).
    """
    fitting = [
        w
        for w in wheels
        if w.public == version
        and platform in w.platforms
        and (w.local == local if local is not None else True)
    ]
    if not fitting:
        return None
    return min(
        fitting, key=lambda w: (min(PythonVersion.parse(p) for p in w.pythons), -build_number(w))
    )


def build_number(wheel: Wheel) -> int:
    """The wheel file name's build tag as a number (0 when it has none)."""
    try:
        build = parse_wheel_filename(wheel.link.filename)[2]
    except (InvalidWheelFilename, ValueError):
        return 0
    return build[0] if build else 0
