r"""requirements.txt read with pip's requirement-file rules, as pins.

pip's order (its documented file format): a line ending in ``\`` is joined to the next one —
unless the line is a comment, which never continues —, then comments (``#`` at the start or
after whitespace) are dropped, then ``${NAME}`` (upper-case letters, digits, ``_``) is replaced
by that environment variable where it is set (only to read the line: what is shown is the line as
written). ``-r``/``-c`` include other files (relative to the
including one) as a graph: each file is read once, a file that includes itself (pip refuses it
too) is one error, an include outside the named lock's folder (absolute, ``..``, a link) is
refused unread, and the whole graph is bounded (``MAX_INCLUDES`` deep, ``MAX_INCLUDED_FILES``
files, ``LOCK_LIMIT`` bytes in all), so a few tiny files including each other cannot make
`install --lock` or `verify --lock` run forever. ``-i``/``--extra-index-url`` are kept; other
options pin nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from resolver.core.errors import UserError
from resolver.core.secrets import expand_outside_login
from resolver.io.bounded import LOCK_LIMIT, read_text
from resolver.readers.pins import Pin, canonical, variant_of_index, variant_of_local

MAX_INCLUDES = 16  # nesting depth of -r/-c includes
MAX_INCLUDED_FILES = 256  # files in one lock's include graph, the lock itself counted
_COMMENT = re.compile(r"(^|\s+)#.*$")
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")


_INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")


def logical_lines(
    text: str, environ: Mapping[str, str] | None = None
) -> Iterator[tuple[int, str, str]]:
    """(first line number, line, line as written) with continuations joined, comments dropped,
    ${VAR} expanded in the line read as pip reads it (but in an index URL's user information: a
    login there is used only for a request) and never in the line written: a variable holds a
    secret as often as not, and only the written line is shown (an error, a pin's origin)."""
    env = os.environ if environ is None else environ
    for number, line in _joined(text):
        line = _COMMENT.sub("", line).strip()
        if line.startswith(_INDEX_OPTIONS):
            yield number, expand_outside_login(line, env), line
        elif line:
            yield number, _ENV_VAR.sub(lambda m: env.get(m.group(1)) or m.group(0), line), line


def _joined(text: str) -> Iterator[tuple[int, str]]:
    parts: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.endswith("\\") and not _COMMENT.match(line):
            first = first if parts else number
            parts.append(line.strip("\\"))
            continue
        if _COMMENT.match(line):
            line = " " + line  # a comment ends a continuation and stays a comment
        if parts:
            yield first, "".join([*parts, line])
            parts = []
        else:
            yield number, line
    if parts:
        yield first, "".join(parts)


@dataclass
class _Graph:
    """What one lock's include graph has read so far: each file once, the total bounded."""

    read: set[Path] = field(default_factory=set)
    size: int = 0
    root: Path = Path("/")  # the folder of the lock named: no include is read outside it

    def enter(self, path: Path, text: str, where: str) -> None:
        self.read.add(path)
        self.size += len(text)
        if len(self.read) > MAX_INCLUDED_FILES:
            raise UserError(
                f"{where}: more than {MAX_INCLUDED_FILES} requirement files included: "
                "not a lock file"
            )
        if self.size > LOCK_LIMIT:
            raise UserError(
                f"{where}: the included requirement files hold more than "
                f"{LOCK_LIMIT // (1024 * 1024)} MiB in all: not a lock file"
            )


def read_requirements(
    text: str,
    path: Path,
    depth: int = 0,
    graph: _Graph | None = None,
    stack: tuple[Path, ...] = (),
) -> tuple[list[Pin], list[str]]:
    """The pins and index URLs of requirements ``text`` (read from ``path``)."""
    from packaging.requirements import InvalidRequirement

    if graph is None:
        graph = _Graph(root=path.resolve().parent)
        stack = (path.resolve(),)
        graph.enter(stack[0], text, path.name)
    pins: list[Pin] = []
    urls: list[str] = []
    for number, line, written in logical_lines(text):
        where = f"{path.name}:{number}"
        if line.startswith("-"):
            written_value = _option(written)[1]
            option, value = _option(line)
            if option in ("-i", "--index-url", "--extra-index-url") and value:
                urls.append(value)
            elif option in ("-r", "--requirement", "-c", "--constraint") and value:
                if depth >= MAX_INCLUDES:
                    raise UserError(f"{where}: requirement files nested too deep")
                inc = (path.parent / value).resolve()
                # A lock from a repository must not make gpuresolve read, and print in an
                # error or a pin, the user's other files (~/.git-credentials, ~/.netrc).
                if not inc.is_relative_to(graph.root):
                    raise UserError(
                        f"{where}: {option} {written_value}: outside the lock's folder: a lock "
                        "read back includes only files beside or below it; copy it there"
                    )
                if inc in stack:  # pip refuses this too
                    raise UserError(f"{where}: {written_value}: includes itself (a cycle of -r/-c)")
                if inc in graph.read:
                    continue  # read once: its pins and URLs are in already
                try:
                    inc_text = read_text(inc, limit=LOCK_LIMIT, what="a requirements file")
                except UserError as exc:
                    raise UserError(f"{where}: {written_value}: {exc}") from None
                graph.enter(inc, inc_text, where)
                more, more_urls = read_requirements(inc_text, inc, depth + 1, graph, (*stack, inc))
                pins.extend(more)
                urls.extend(more_urls)
            continue  # other options (--find-links, --hash alone, -e ...) pin nothing
        try:
            pins.append(pip_pin(line, where, written))
        except InvalidRequirement as exc:
            said = str(exc) if line == written else "pip's requirement syntax"
            raise UserError(f"{where}: not a requirement: {written!r} ({said})") from None
    # A pin without a local tag names the variant of the PyTorch index it is installed from.
    index_variant = next((v for v in map(variant_of_index, urls) if v), None)
    if index_variant:
        pins = [
            Pin(p.name, p.version, p.spec, index_variant, p.manager, p.marker, p.line, p.hashes)
            if p.variant is None and p.name in ("torch", "torchvision", "torchaudio")
            else p
            for p in pins
        ]
    return pins, urls


def _option(line: str) -> tuple[str, str]:
    """(option, value) of an option line: ``-r file``, ``--requirement=file``."""
    option, _, value = line.partition(" ")
    if "=" in option and option.startswith("--"):
        option, _, value = option.partition("=")
    return option, value.strip()


def pip_pin(text: str, where: str, written: str | None = None) -> Pin:
    """One requirement line (its ``--hash`` options split off first); ``written``: the line as
    the file has it (``${VAR}`` unexpanded), which the pin's origin shows."""
    from packaging.requirements import Requirement
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    hashes = tuple(re.findall(r"--hash[=\s]+(\S+)", text))
    req_text = re.sub(r"\s--hash[=\s]+\S+", "", " " + text).strip()
    req = Requirement(req_text)
    name = canonical(req.name)
    marker = str(req.marker) if req.marker else None
    version: str | None = None
    variant: str | None = None
    spec = str(req.specifier)
    if req.url:
        from urllib.parse import unquote

        filename = unquote(req.url.rsplit("/", 1)[-1].split("#", 1)[0])
        fragment = req.url.partition("#")[2]
        if fragment.startswith("sha256="):
            hashes = (*hashes, "sha256:" + fragment.split("=", 1)[1])
        try:
            _, ver, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, ValueError):  # digits past the limit too
            ver = None
        if ver is not None:
            version, variant = ver.public, variant_of_local(ver.local)
            spec = f"=={ver}"
    else:
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            public, _, local = specs[0].version.partition("+")
            version, variant = public, variant_of_local(local or None)
    shown = text if written is None else written
    return Pin(name, version, spec, variant, "pip", marker, f"{where}: {shown}", hashes)
