"""The environment to install into, as its own interpreter reports it, and the installers here.

The inventory comes from a tiny standard-library script run in the target interpreter (never from
gpuresolve's own ``sys.path``): what is installed there, who installed it, what each distribution
requires, and whether the interpreter lives in a virtualenv or conda env at all.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from resolver.core.errors import UserError
from resolver.io import subprocs

_MARK = "@@gpuresolve-env "
# Runs in the target interpreter (Python 3.8+ syntax, standard library only, -I: no user site).
INVENTORY_SCRIPT = r"""
import json, os, re, sys, sysconfig, platform, importlib.util
from importlib import metadata
base = getattr(sys, "real_prefix", None) or getattr(sys, "base_prefix", sys.prefix)
out = {
    "executable": sys.executable, "prefix": sys.prefix, "base_prefix": base,
    "version": "%d.%d" % sys.version_info[:2], "full_version": platform.python_version(),
    "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
    "pip": importlib.util.find_spec("pip") is not None, "dists": {},
}
for d in metadata.distributions():
    try:
        name = d.metadata["Name"]
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in out["dists"]:
            continue  # the first on sys.path is the one imported
        inst = (d.read_text("INSTALLER") or "").strip() or None
        out["dists"][key] = {"name": name, "version": d.version,
                             "requires": list(d.requires or []), "installer": inst}
    except Exception:
        continue
sys.stdout.write("@@gpuresolve-env " + json.dumps(out) + "\n")
"""


@dataclass(frozen=True)
class Installed:
    """One installed distribution."""

    name: str  # as its metadata spells it
    version: str
    requires: tuple[str, ...] = ()  # Requires-Dist lines, markers included
    installer: str | None = None  # the INSTALLER file: "pip", "uv", "conda", ...


@dataclass(frozen=True)
class EnvInfo:
    """The target interpreter and what is installed for it."""

    python: str  # the interpreter path commands are given
    executable: str
    prefix: str
    base_prefix: str
    version: str  # "3.12" or "3.13t" (free-threaded)
    full_version: str = ""
    conda: bool = False  # sys.prefix holds conda-meta: a conda env (base included)
    has_pip: bool = False
    dists: Mapping[str, Installed] = field(default_factory=dict)  # canonical name -> dist

    @property
    def is_venv(self) -> bool:
        return os.path.normcase(self.prefix) != os.path.normcase(self.base_prefix)

    @property
    def kind(self) -> str:
        if self.is_venv:
            return "virtualenv"
        return "conda env" if self.conda else "system interpreter"

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 markers of the target: this host's, with the target interpreter's Python."""
        from packaging.markers import default_environment

        env = dict(default_environment())
        env["python_version"] = self.version.rstrip("t")
        if self.full_version:
            env["python_full_version"] = self.full_version
        return {k: str(v) for k, v in env.items()}

    @classmethod
    def from_json(cls, python: str, data: Mapping[str, object]) -> EnvInfo:
        raw = data.get("dists")
        dists: dict[str, Installed] = {}
        if isinstance(raw, dict):
            for key, d in raw.items():
                if isinstance(d, dict):
                    dists[str(key)] = Installed(
                        name=str(d.get("name") or key),
                        version=str(d.get("version") or ""),
                        requires=tuple(str(r) for r in d.get("requires") or ()),
                        installer=str(d["installer"]) if d.get("installer") else None,
                    )
        version = str(data.get("version") or "")
        return cls(
            python=python,
            executable=str(data.get("executable") or python),
            prefix=str(data.get("prefix") or ""),
            base_prefix=str(data.get("base_prefix") or data.get("prefix") or ""),
            version=version + ("t" if data.get("gil_disabled") else ""),
            full_version=str(data.get("full_version") or ""),
            conda=bool(data.get("conda")),
            has_pip=bool(data.get("pip")),
            dists=dists,
        )


def inspect(python: str, timeout_s: float = 120.0) -> EnvInfo:
    """Run the inventory script in ``python``; a UserError (one line) when that fails."""
    try:
        proc = subprocs.run([python, "-I", "-c", INVENTORY_SCRIPT], timeout=timeout_s)
    except OSError as exc:
        raise UserError(f"cannot run {python}: {exc.strerror or exc}") from None
    if proc.timed_out:
        raise UserError(f"{python} did not list its packages within {timeout_s:g} s")
    line = next((s for s in proc.stdout.splitlines() if s.startswith(_MARK)), None)
    if proc.returncode != 0 or line is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"{python} could not list its packages (exit {proc.returncode}): {last}")
    try:
        data = json.loads(line[len(_MARK) :])
    except (ValueError, RecursionError):  # the interpreter's words: nested past the stack
        raise UserError(f"{python} printed an unreadable package list") from None
    return EnvInfo.from_json(python, data)


def default_target(system: bool, environ: Mapping[str, str] | None = None) -> str:
    """The interpreter to install into when --python is not given.

    The active virtualenv's or conda env's; with none active, never gpuresolve's own (after
    `pipx install gpuresolve` that is pipx's private venv): an error naming --python, or with
    --system the first ``python3`` on PATH.
    """
    from resolver.host.interpreter import default_python

    env = os.environ if environ is None else environ
    if env.get("VIRTUAL_ENV") or env.get("CONDA_PREFIX"):
        return default_python(env)
    if system:
        found = shutil.which("python3", path=env.get("PATH")) or shutil.which(
            "python", path=env.get("PATH")
        )
        if found is None:
            raise UserError("--system: no python3 on PATH; name the interpreter with --python")
        return found
    raise UserError(
        "no virtualenv or conda env is active: name the environment to install into with "
        "--python PATH (e.g. .venv/bin/python), or add --system to install into the "
        "python3 on PATH"
    )


def require_managed(env: EnvInfo, system: bool) -> None:
    """Refuse a system interpreter outside any virtualenv or conda env unless --system."""
    if env.is_venv or env.conda or system:
        return
    raise UserError(
        f"{env.python} is a system interpreter (no virtualenv: sys.prefix == sys.base_prefix; "
        "no conda-meta): activate a virtualenv or conda env, name one with --python, "
        "or pass --system to install into it anyway"
    )


@dataclass(frozen=True)
class Tools:
    """Installers found on this host: an absolute path each, or None."""

    uv: str | None = None
    conda_lock: str | None = None
    micromamba: str | None = None
    mamba: str | None = None
    conda: str | None = None


def find_tools(environ: Mapping[str, str] | None = None) -> Tools:
    """uv, conda-lock, micromamba, mamba, conda: on PATH, or named by conda's own variables.

    ``MAMBA_EXE`` / ``CONDA_EXE`` are set by the shell hooks of micromamba and conda, whose
    commands are often shell functions rather than files on PATH.
    """
    env = os.environ if environ is None else environ
    path = env.get("PATH")

    def which(name: str, var: str | None = None) -> str | None:
        found = shutil.which(name, path=path)
        if found:
            return found
        named = env.get(var) if var else None
        if named and os.path.basename(named).split(".")[0] == name and os.path.isfile(named):
            return named
        return None

    return Tools(
        uv=which("uv"),
        conda_lock=which("conda-lock"),
        micromamba=which("micromamba", "MAMBA_EXE"),
        mamba=which("mamba", "MAMBA_EXE"),
        conda=which("conda", "CONDA_EXE"),
    )
