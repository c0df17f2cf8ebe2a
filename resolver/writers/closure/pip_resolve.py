"""Resolve a pinned set's whole closure for the target with uv's resolver.

`uv pip compile --python-platform ... --python-version ... --generate-hashes` judges environment
markers with the target's values and picks wheels by its tags (not this machine's), giving every
distribution with its URL, sha256 and index: what ``--hashes`` pins, what pylock.toml and
conda-lock.yml's pip entries hold. It needs the index (the network, or a mirror).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from resolver.core import secrets
from resolver.core.errors import UserError
from resolver.core.platforms import DEFAULT_MACOS, uv_platform
from resolver.io import subprocs
from resolver.io.childenv import uv_environment
from resolver.io.credentials import child_netrc, child_url
from resolver.solve import Target
from resolver.writers.closure.wheel_tags import target_tags

PIP_TIMEOUT_S = 900


@dataclass(frozen=True)
class ResolvedDist:
    """One distribution of the resolved closure."""

    name: str  # canonical: "nvidia-cudnn-cu12"
    version: str  # as the index has it: "2.8.0+cu126"
    url: str
    sha256: str
    requires: Mapping[str, str] = field(default_factory=dict)  # name -> specifier ("" any)
    index: str | None = None  # the index it came from (uv's annotation)


def find_uv() -> str:
    """The uv executable: $GPURESOLVE_UV, else the `uv` package's (a dependency of gpuresolve,
    so the one in gpuresolve's own environment comes first), else the one on PATH."""
    import shutil

    given = os.environ.get("GPURESOLVE_UV")
    if given:
        return given
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found is None:
        raise UserError(
            "resolving the closure (--hashes, pylock, conda-lock) needs uv, a dependency of "
            "gpuresolve that is missing from its environment: reinstall gpuresolve "
            "(python3 -m pip install --force-reinstall gpuresolve) or put uv on PATH"
        )
    return found


def uv_command(
    uv: str,
    requirements: Path,
    index_lines: Sequence[str],
    target: Target,
    glibc: str | None,
    output_format: str,
) -> list[str]:
    """`uv pip compile` for the target's marker environment and tags (never this machine's)."""
    cmd = [uv, "pip", "compile", str(requirements), "--quiet", "--no-progress", "--no-config"]
    cmd += ["--python-platform", uv_platform(target.platform, glibc)]
    cmd += ["--python-version", target.python.plain, "--no-python-downloads"]
    cmd += ["--generate-hashes", "--only-binary", ":all:", "--no-header", "--format", output_format]
    # Each package from the first index that has it (uv lists --extra-index-url, the PyTorch
    # index, before --index-url): a package on both is never taken from the other one because
    # it has a higher version there (dependency confusion). The files pin each version with its
    # sha256, so an installer that looks at every index still gets exactly these bytes.
    cmd += ["--index-strategy", "first-index"]
    if output_format == "requirements.txt":
        cmd += ["--emit-index-annotation", "--annotation-style", "split"]
    # Only the indexes the lock names: "--index-url" the default (none: uv's own, by omission).
    for line in index_lines:  # a login goes in the child's netrc, never on its command line
        option, _, url = line.partition(" ")
        cmd += [option, child_url(url.strip())]
    return cmd


def resolve(
    requirements: Sequence[str],
    index_lines: Sequence[str],
    target: Target,
    glibc: str | None = None,
) -> list[ResolvedDist]:
    """The closure of ``requirements`` on the target, sorted by name, each with its sha256.

    uv evaluates environment markers for the target (pip's --platform chooses tags but judges
    markers on the running interpreter), so a macOS lock made on Linux has no Linux-only deps.
    """
    uv = find_uv()
    _reachable(index_lines)
    with tempfile.TemporaryDirectory(prefix="gpuresolve-uv-") as tmp:
        req = Path(tmp) / "requirements.in"
        req.write_text("".join(f"{r}\n" for r in requirements), encoding="utf-8")
        outputs = {}
        netrc = child_netrc(tmp, [line.partition(" ")[2].strip() for line in index_lines])
        for fmt in ("pylock.toml", "requirements.txt"):
            cmd = uv_command(uv, req, index_lines, target, glibc, fmt)
            outputs[fmt] = _run(cmd, target, index_lines, netrc)
    return parse_uv(outputs["pylock.toml"], outputs["requirements.txt"], target, glibc)


def _reachable(index_lines: Sequence[str]) -> None:
    """Fail at once where an index's host cannot be reached (offline, no DNS, refused): uv
    would retry it for seconds before saying the same."""
    from resolver.io.http import unreachable

    for line in index_lines:
        why = unreachable(child_url(line.partition(" ")[2].strip()))  # the host uv will ask
        if why is not None:
            raise UserError(f"cannot compute the whole closure: cannot reach {why}")


def _indexes(index_lines: Sequence[str]) -> str:
    """The indexes a closure is resolved from, in words (the installer's default by omission)."""
    urls = [line.partition(" ")[2].strip() for line in index_lines]
    if not any(line.startswith("--index-url ") for line in index_lines):
        urls.append("the installer's default index")
    return " and ".join(urls)


def _run(
    cmd: list[str], target: Target, index_lines: Sequence[str] = (), netrc: str | None = None
) -> str:
    env = uv_environment(os.environ)  # built, never inherited: no UV_* setting steers the lock
    if netrc is not None:  # the indexes' logins, and the user's own netrc after them
        env["NETRC"] = netrc
    if target.platform.os == "macos":  # the macOS the wheel tags are judged for
        env["MACOSX_DEPLOYMENT_TARGET"] = DEFAULT_MACOS
    try:
        proc = subprocs.run(cmd, timeout=PIP_TIMEOUT_S, env=env)
    except OSError as exc:
        raise UserError(f"cannot run uv ({exc})") from None
    where = f"from {_indexes(index_lines)}"  # what to do instead: the caller knows the format
    if proc.timed_out:
        raise UserError(
            f"cannot compute the whole closure {where}: uv did not resolve the set within "
            f"{PIP_TIMEOUT_S} s"
        )
    if proc.returncode != 0:
        raise UserError(
            f"cannot compute the whole closure {where}: uv could not resolve the set for the "
            f"target: {_uv_error(proc)}"
        )
    return proc.stdout


def _uv_error(proc: subprocs.Result) -> str:
    lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
    picked = [ln for ln in lines if not ln.startswith(("warning:", "hint:"))]
    text = " ".join((picked or lines or [f"exit code {proc.returncode}"])[:3])
    text = secrets.redact(text.removeprefix("error:").strip())
    return text if len(text) < 600 else text[:597] + "..."


def _annotations(text: str) -> tuple[dict[str, set[str]], dict[str, str]]:
    """From uv's annotated requirements: {package: the packages it is required by}, {package:
    the index it came from}."""
    import re

    from packaging.utils import canonicalize_name

    parents: dict[str, set[str]] = {}
    index: dict[str, str] = {}
    current: str | None = None
    in_via = False
    for line in text.splitlines():
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if pin:
            current = str(canonicalize_name(pin.group(1)))
            parents.setdefault(current, set())
            in_via = False
            continue
        body = line.strip()
        if current is None or not body.startswith("#"):
            continue
        body = body.lstrip("#").strip()
        if body.startswith("from "):
            index[current] = body.removeprefix("from ").strip()
            in_via = False
        elif body.startswith("via"):
            rest = body.removeprefix("via").strip()
            in_via = not rest
            if rest and not rest.startswith("-r"):
                parents[current].add(str(canonicalize_name(rest)))
        elif in_via and body and not body.startswith("-r"):
            parents[current].add(str(canonicalize_name(body)))
    return parents, index


def parse_uv(
    pylock_text: str, requirements_text: str, target: Target, glibc: str | None = None
) -> list[ResolvedDist]:
    """uv's pylock.toml and annotated requirements -> the closure, one wheel per package (the
    one whose tags fit the target best), with the index each came from."""
    import tomlkit
    from packaging.utils import canonicalize_name, parse_wheel_filename

    try:
        doc = tomlkit.parse(pylock_text).unwrap()
    except Exception as exc:  # tomlkit raises its own ParseError family
        raise UserError(f"uv wrote an unreadable pylock.toml ({exc})") from None
    parents, index = _annotations(requirements_text)
    tags = target_tags(target, glibc)
    rank = {t: i for i, t in enumerate(tags)}
    requires: dict[str, dict[str, str]] = {}
    for child, ps in parents.items():
        for parent in ps:
            requires.setdefault(parent, {})[child] = ""
    out: list[ResolvedDist] = []
    for pkg in doc.get("packages") or []:
        name = str(canonicalize_name(str(pkg.get("name"))))
        best: tuple[int, str, str] | None = None
        for wheel in pkg.get("wheels") or []:
            url = str(wheel.get("url") or "")
            sha = str((wheel.get("hashes") or {}).get("sha256") or "")
            filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
            from urllib.parse import unquote

            try:
                _, _, _, wtags = parse_wheel_filename(unquote(filename))
            except ValueError:
                continue
            fit = min((rank[t] for t in wtags if t in rank), default=None)
            if fit is not None and sha and (best is None or fit < best[0]):
                best = (fit, url, sha)
        if best is None:
            raise UserError(f"uv found no wheel of {name} with a sha256 for the target")
        out.append(
            ResolvedDist(
                name=name,
                version=str(pkg.get("version")),
                url=secrets.public(best[1]),  # what uv echoes of a login is never written
                sha256=best[2],
                requires=dict(sorted(requires.get(name, {}).items())),
                index=secrets.public(index[name]) if name in index else None,
            )
        )
    return sorted(out, key=lambda d: d.name)
