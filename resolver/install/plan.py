"""What to remove from an environment and the exact commands to run: pure, no I/O.

Input: the wanted pins (a decision's packages, or a lock's) and the environment's inventory.
Output: a Plan whose steps are argv tuples, run as they are and printed shell-quoted.

Why remove anything first: pip and uv replace a distribution whose version differs, but they
neither remove the CUDA libraries only the old build needed (a cu130 torch's ``nvidia-*`` next to a
cu126 torch's ``nvidia-*-cu12``: two CUDA majors in one environment, whichever loads first wins),
nor replace a CPU build that already satisfies an untagged pin (``torch==2.8.0`` is met by
``2.8.0+cpu``), nor a companion built against another torch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from resolver.core.errors import UserError
from resolver.install.env import EnvInfo, Installed, Tools
from resolver.readers.pins import (
    FORMAT_CONDA_LOCK,
    FORMAT_ENVIRONMENT,
    FORMAT_PYLOCK,
    LockPins,
    canonical,
    variant_of_local,
)

if TYPE_CHECKING:
    from resolver.core.documents.decision import PlanJson

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
_CU_VARIANT = re.compile(r"^cu([0-9]+)([0-9])$")  # cu126 -> 12, cu130 -> 13, cu118 -> 11
_CU_SUFFIX = re.compile(r"-cu([0-9]+)$")  # nvidia-cublas-cu12 -> 12
_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu[0-9]+)?$")
_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Want:
    """A wanted torch-family pin."""

    name: str  # canonical: torch | torchvision | torchaudio
    version: str | None  # public version ("2.8.0"); None: any
    variant: str | None  # cpu | cu126 | "cuda" (some CUDA build) | None (unknown)
    text: str  # the pin as written ("torch==2.8.0+cu126")

    @property
    def full(self) -> str | None:
        """The version with its local tag where the variant is a concrete one."""
        if self.version and self.variant and _concrete(self.variant):
            return f"{self.version}+{self.variant}"
        return self.version


@dataclass(frozen=True)
class Removal:
    name: str  # as installed
    version: str
    why: str
    installer: str | None = None  # who installed it (conda's are left to conda)


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    purpose: Literal["remove", "install", "check"]

    @property
    def command(self) -> str:
        """The command as a POSIX shell reads it: paste it and it runs."""
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Plan:
    installer: str  # uv | pip | conda-lock | micromamba | mamba | conda
    removals: tuple[Removal, ...]
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()  # what was kept and why, what the user must do by hand

    def lines(self) -> list[str]:
        """What will change and why, one line each (the commands are the steps)."""
        out = [f"remove {r.name} {r.version}: {r.why}" for r in self.removals]
        return out + [f"note: {n}" for n in self.notes]

    def to_json(self, python: str, env_kind: str, version: str, lock: str | None) -> PlanJson:
        """The plan as `install --json` shows it: where, with what, what is removed and why,
        the exact commands."""
        return {
            "python": python,
            "env_kind": env_kind,
            "python_version": version,
            "installer": self.installer,
            "lock": lock,
            "removals": [
                {"name": r.name, "version": r.version, "why": r.why, "installer": r.installer}
                for r in self.removals
            ],
            "notes": list(self.notes),
            "steps": [
                {"purpose": st.purpose, "command": st.command, "argv": list(st.argv)}
                for st in self.steps
            ],
        }


@dataclass(frozen=True)
class Installer:
    """A pip-compatible installer: uv (``exe`` is uv) or pip (run by the target interpreter)."""

    kind: str  # "uv" | "pip"
    exe: str

    def install(self, python: str, args: Sequence[str]) -> tuple[str, ...]:
        if self.kind == "uv":
            return (self.exe, "pip", "install", "--python", python, *args)
        return (python, "-m", "pip", "install", *args)

    def uninstall(self, python: str, names: Sequence[str]) -> tuple[str, ...]:
        if self.kind == "uv":
            return (self.exe, "pip", "uninstall", "--python", python, *names)
        return (python, "-m", "pip", "uninstall", "-y", *names)


def choose_installer(forced: str | None, tools: Tools, env: EnvInfo) -> Installer:
    """uv when it is on PATH, else the target's pip; ``forced`` ("uv"/"pip") insists on one."""
    if forced == "uv" or (forced in (None, "auto") and tools.uv):
        if not tools.uv:
            raise UserError("--installer uv: uv is neither in gpuresolve's environment nor on PATH")
        return Installer("uv", tools.uv)
    if env.has_pip:
        return Installer("pip", env.python)
    if forced == "pip":
        raise UserError(
            f"--installer pip: {env.python} has no pip (add it with `{env.python} -m ensurepip`)"
        )
    raise UserError(
        f"no installer: uv is not on PATH and {env.python} has no pip "
        f"(install uv, or run `{env.python} -m ensurepip`)"
    )


def choose_conda_tool(fmt: str, tools: Tools) -> tuple[str, str]:
    """The tool that installs a conda lock: (kind, path); says what is missing when none is."""
    if fmt == FORMAT_CONDA_LOCK:
        order = [("conda-lock", tools.conda_lock), ("micromamba", tools.micromamba)]
        missing = (
            "installing a conda-lock.yml needs conda-lock (pip install 'gpuresolve[conda]') or "
            "micromamba on PATH; neither was found"
        )
        if tools.conda or tools.mamba:
            missing += " (conda and mamba cannot read conda-lock.yml themselves)"
    else:
        order = [("micromamba", tools.micromamba), ("mamba", tools.mamba), ("conda", tools.conda)]
        missing = (
            "installing an environment.yml needs micromamba, mamba or conda on PATH; none was found"
        )
    for kind, exe in order:
        if exe:
            return kind, exe
    raise UserError(missing)


def conda_argv(kind: str, exe: str, prefix: str, path: str, tools: Tools) -> tuple[str, ...]:
    """The command that applies a conda lock or environment.yml to the env at ``prefix``."""
    if kind == "conda-lock":
        conda = tools.micromamba or tools.mamba or tools.conda
        return (exe, "install", *(["--conda", conda] if conda else []), "--prefix", prefix, path)
    if kind == "micromamba":
        return (exe, "install", "--yes", "--prefix", prefix, "--file", path)
    return (exe, "env", "update", "--prefix", prefix, "--file", path)


# --- what is wanted ------------------------------------------------------------------------------


def wants_from_packages(packages: Iterable[tuple[str, str]]) -> tuple[Want, ...]:
    """A decision's packages (("torch", "2.8.0+cu126"), ...) as wants."""
    out = []
    for name, version in packages:
        public, _, local = version.partition("+")
        out.append(
            Want(canonical(name), public, variant_of_local(local or None), f"{name}=={version}")
        )
    return tuple(out)


def wants_from_lock(lock: LockPins, marker_env: Mapping[str, str]) -> tuple[Want, ...]:
    """The lock's torch-family pins that apply to this environment (markers evaluated)."""
    from packaging.markers import InvalidMarker, Marker

    out: dict[str, Want] = {}
    for pin in lock.pins:
        if pin.name not in TORCH_FAMILY or pin.name in out:
            continue
        if pin.marker:
            try:
                if not Marker(pin.marker).evaluate(dict(marker_env)):
                    continue
            except InvalidMarker:
                raise UserError(f"{pin.line}: invalid environment marker") from None
        out[pin.name] = Want(pin.name, pin.version, pin.variant, pin.text)
    return tuple(out.values())


def lock_cuda_major(lock: LockPins, torch: Want | None) -> int | None:
    """The CUDA major a lock installs: its torch's build, else its nvidia-*-cuNN pins."""
    if torch is not None and torch.variant:
        major = cuda_major(torch.variant)
        if major is not None or torch.variant == "cpu":
            return major
    for pin in lock.pins:
        m = _CU_SUFFIX.search(pin.name)
        if pin.name.startswith("nvidia-") and m:
            return int(m.group(1))
    for pin in lock.pins:
        if _CUDA_RUNTIME.match(pin.name) and pin.version:
            return int(pin.version.split(".")[0])
    return None


def cuda_major(variant: str | None) -> int | None:
    """cu126 -> 12, cu130 -> 13; None for cpu, "cuda" or unknown."""
    m = _CU_VARIANT.match(variant or "")
    return int(m.group(1)) if m else None


# --- what is installed ---------------------------------------------------------------------------


def _concrete(variant: str) -> bool:
    return variant == "cpu" or cuda_major(variant) is not None


def _req_names(dist: Installed) -> list[str]:
    """Names a distribution requires (markers and extras ignored: a keep errs on the safe side)."""
    return [canonical(m.group(1)) for r in dist.requires if (m := _REQ_NAME.match(r))]


def _local(version: str) -> str | None:
    try:
        return Version(version).local
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return None


def installed_variant(dist: Installed, dists: Mapping[str, Installed]) -> str | None:
    """The build of an installed torch: its local tag, else what its CUDA libraries say.

    An untagged torch (from the Python Package Index) that requires ``nvidia-*`` is a CUDA build
    (its minor read from the installed CUDA runtime when possible); one that requires none is a
    CPU build. A conda-installed torch is not judged (conda ships CUDA as its own packages).
    """
    tagged = variant_of_local(_local(dist.version))
    if tagged or dist.installer == "conda":
        return tagged
    nvidia = [n for n in _req_names(dist) if n.startswith("nvidia-")]
    if not nvidia:
        return "cpu"
    for name in nvidia:
        runtime = dists.get(name)
        if _CUDA_RUNTIME.match(name) and runtime is not None:
            parts = runtime.version.split(".")
            if (
                len(parts) >= 2
                and parts[0].isascii()
                and parts[0].isdigit()
                and parts[1].isascii()
                and parts[1].isdigit()
            ):
                return f"cu{parts[0]}{parts[1]}"
    return "cuda"


def installed_cuda_major(dist: Installed, dists: Mapping[str, Installed]) -> int | None:
    """The CUDA major of an installed torch: its build, else its nvidia-*-cuNN requirements."""
    major = cuda_major(installed_variant(dist, dists))
    if major is not None:
        return major
    for name in _req_names(dist):
        m = _CU_SUFFIX.search(name)
        if name.startswith("nvidia-") and m:
            return int(m.group(1))
    return None


def _mismatch(want: Want, dist: Installed, variant: str | None) -> str | None:
    """Why an installed torch-family distribution is not the wanted one, or None."""
    try:
        public = Version(dist.version).public
        if want.version and Version(public) != Version(want.version):
            return f"{want.text} is wanted"
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return f"its version is unreadable; {want.text} is wanted"
    wv = want.variant
    if not wv or variant is None or variant == wv:
        return None
    if wv == "cuda":
        return "a CUDA build is wanted" if variant == "cpu" else None
    if variant == "cuda" and wv != "cpu":
        return None  # some CUDA build of unknown minor: the installer settles it
    what = "a CPU build" if variant == "cpu" else f"the {variant} build"
    return f"{what}; the {wv} build is wanted"


def _stale_companion(dist: Installed, torch: Want) -> str | None:
    """Why a companion nobody asked for no longer fits the wanted torch, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    local = variant_of_local(_local(dist.version))
    if local and torch.variant and _concrete(torch.variant) and local != torch.variant:
        return f"a {local} build next to a {torch.variant} torch"
    if torch.full:
        for line in dist.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name, spec = canonical(req.name), req.specifier
            if name == "torch" and spec and not spec.contains(torch.full, prereleases=True):
                return f"it requires torch{req.specifier}; torch {torch.full} is wanted"
    return None


def _nvidia_closure(roots: Iterable[Installed], dists: Mapping[str, Installed]) -> set[str]:
    """The installed nvidia-* distributions the roots pull in, directly or through each other."""
    seen: set[str] = set()
    stack = [n for d in roots for n in _req_names(d) if n.startswith("nvidia-")]
    while stack:
        name = stack.pop()
        if name in seen or name not in dists:
            continue
        seen.add(name)
        stack.extend(n for n in _req_names(dists[name]) if n.startswith("nvidia-"))
    return seen


def removals(
    dists: Mapping[str, Installed], wants: Sequence[Want], major: int | None, cpu: bool
) -> tuple[list[Removal], list[str]]:
    """What to uninstall before installing ``wants`` (a CUDA ``major`` build, or ``cpu``).

    Returns the removals and notes: a torch-family distribution that is not the wanted build; a
    companion nobody asked for that was built for another torch; the nvidia-* libraries of the
    other CUDA major (by their -cuNN name, or because only the replaced torch required them);
    on a CPU install, the libraries only the replaced torch needed. An nvidia-* distribution
    that something else installed still requires (jax, cupy, ...) is kept, and said so.
    """
    by_name = {w.name: w for w in wants}
    torch_want = by_name.get("torch")
    out: list[Removal] = []
    notes: list[str] = []
    for name in TORCH_FAMILY:
        dist = dists.get(name)
        if dist is None:
            continue
        want = by_name.get(name)
        if want is not None:
            if name == "torch":
                variant = installed_variant(dist, dists)
            else:
                variant = variant_of_local(_local(dist.version))
            why = _mismatch(want, dist, variant)
        elif torch_want is not None:
            why = _stale_companion(dist, torch_want)
            if why:
                why += f" (add --with {name} to install the matching one)"
        else:
            why = None
        if why:
            out.append(Removal(dist.name, dist.version, why, dist.installer))
    removed = {canonical(r.name) for r in out}
    old_torch = dists.get("torch") if "torch" in removed else None
    orphans = _nvidia_closure([dists[n] for n in removed], dists)
    old_major = installed_cuda_major(old_torch, dists) if old_torch is not None else None
    old = f"{old_torch.name} {old_torch.version}" if old_torch is not None else "the old torch"
    candidates: dict[str, str] = {}
    for name in sorted(dists):
        if not name.startswith("nvidia-") or name in removed:
            continue
        m = _CU_SUFFIX.search(name)
        lib_major = int(m.group(1)) if m else (old_major if name in orphans else None)
        if cpu and name in orphans:
            candidates[name] = f"only {old} (replaced) needed it; a CPU build needs none"
        elif not cpu and major is not None and lib_major is not None and lib_major != major:
            whose = f", {old}'s" if name in orphans else ""
            candidates[name] = f"a CUDA {lib_major} library{whose}; this install is CUDA {major}"
    staying = [d for n, d in dists.items() if n not in removed and n not in candidates]
    for name, why in candidates.items():
        needed_by = sorted(d.name for d in staying if name in _req_names(d))
        dist = dists[name]
        if needed_by:
            notes.append(
                f"kept {dist.name} {dist.version} ({why}): {', '.join(needed_by)} needs it"
            )
        else:
            out.append(Removal(dist.name, dist.version, why, dist.installer))
    return out, notes


# --- the plan ------------------------------------------------------------------------------------


def _removal_steps(
    env: EnvInfo, installer: Installer | None, found: list[Removal], notes: list[str]
) -> list[Step]:
    """One uninstall command for what pip or uv may remove; conda's own are left to conda."""
    names = [r.name for r in found if r.installer != "conda"]
    for r in found:
        if r.installer == "conda":
            notes.append(f"{r.name} {r.version} was installed by conda: remove it with conda")
    if not names:
        return []
    if installer is None:
        raise UserError(
            f"{', '.join(names)} must be removed first, but there is no uv on PATH and no pip in "
            f"{env.python}"
        )
    return [Step(installer.uninstall(env.python, names), "remove")]


def plan_decision(
    packages: Sequence[tuple[str, str]],
    variant: str,
    index_url: str,
    env: EnvInfo,
    installer: Installer,
    extensions: Sequence[str] = (),
    constraints: str | None = None,
) -> Plan:
    """Install a decision's exact pins from its variant's index (PyTorch's, or a mirror).

    ``extensions`` (xformers, flash-attn @ URL...): installed next from the default index with
    ``constraints`` (a file pinning torch: ``-c`` for pip, ``--constraint`` for uv), so no
    extension's requirement can swap torch; a last step fails if torch changed all the same."""
    wants = wants_from_packages(packages)
    found, notes = removals(env.dists, wants, cuda_major(variant), variant == "cpu")
    steps = _removal_steps(env, installer, found, notes)
    pins = [w.text for w in wants]
    steps.append(Step(installer.install(env.python, [*pins, "--index-url", index_url]), "install"))
    if extensions and constraints:
        flag = "--constraint" if installer.kind == "uv" else "-c"
        args = [*extensions, flag, constraints]
        steps.append(Step(installer.install(env.python, args), "install"))
        torch = dict(packages)["torch"]
        steps.append(Step((env.python, "-I", "-c", HELD_CHECK, torch), "check"))
    return Plan(installer.kind, tuple(found), tuple(steps), tuple(notes))


# The last step of an install with extensions: torch is still the build the set was chosen for.
HELD_CHECK = (
    "import sys; from importlib import metadata\n"
    "try: got = metadata.version('torch')\n"
    "except metadata.PackageNotFoundError: got = 'nothing'\n"
    "sys.exit(0 if got == sys.argv[1] else "
    "f'torch changed: {got} is installed, the set was chosen for {sys.argv[1]}')"
)


def plan_lock(
    lock: LockPins,
    path: str,
    env: EnvInfo,
    installer: Installer | None,
    tools: Tools,
) -> Plan:
    """Install a lock file as it is written (hashes, markers and indexes included).

    ``path`` is the file handed to the installer: the lock itself, or a copy whose PyTorch index
    URLs point at a mirror. requirements.txt goes to pip/uv, pylock.toml to uv or to pip 26.1
    and newer (`pip install -r pylock.toml`, experimental in pip); environment.yml and
    conda-lock.yml to conda-lock, micromamba, mamba or conda, into a conda env only.
    """
    if lock.format == FORMAT_PYLOCK:
        _check_pylock_installer(lock.path, env, installer)
    wants = wants_from_lock(lock, env.marker_environment())
    torch = next((w for w in wants if w.name == "torch"), None)
    major = lock_cuda_major(lock, torch)
    cpu = torch is not None and torch.variant == "cpu"
    found, notes = removals(env.dists, wants, major, cpu)
    steps = _removal_steps(env, installer, found, notes)
    if lock.format in (FORMAT_CONDA_LOCK, FORMAT_ENVIRONMENT):
        if not env.conda:
            raise UserError(
                f"{lock.path} is a conda {lock.format} file, but {env.python} is a {env.kind}, "
                "not a conda env (no conda-meta): name a conda env's interpreter with --python"
            )
        kind, exe = choose_conda_tool(lock.format, tools)
        steps.append(Step(conda_argv(kind, exe, env.prefix, path, tools), "install"))
        return Plan(kind, tuple(found), tuple(steps), tuple(notes))
    if installer is None:
        raise UserError(f"no installer for {lock.path}: no uv on PATH and no pip in {env.python}")
    steps.append(Step(installer.install(env.python, ["-r", path]), "install"))
    return Plan(installer.kind, tuple(found), tuple(steps), tuple(notes))


PIP_READS_PYLOCK = (26, 1)  # pip 26.1 first installs `-r pylock.toml` (PEP 751, experimental)


def pip_reads_pylock(env: EnvInfo) -> bool:
    """Whether the target's pip installs a pylock.toml (``-r pylock.toml``): 26.1 or newer."""
    pip = env.dists.get("pip")
    if pip is None:
        return False
    try:
        release = Version(pip.version).release
    except ValueError:  # InvalidVersion, or digits past Python's limit
        return False
    return release[:2] >= PIP_READS_PYLOCK


def _check_pylock_installer(path: str, env: EnvInfo, installer: Installer | None) -> None:
    """Refuse, in one line, an installer that cannot read a pylock.toml."""
    if installer is not None and (installer.kind == "uv" or pip_reads_pylock(env)):
        return
    least = ".".join(map(str, PIP_READS_PYLOCK))
    pip = env.dists.get("pip")
    has = f"pip {pip.version}" if pip is not None else "no pip"
    raise UserError(
        f"installing {path} needs uv or pip {least} or newer ({env.python} has {has}; uv is a "
        f"dependency of gpuresolve: reinstall it, put uv on PATH, run `{env.python} -m pip "
        "install -U pip`, or lock with --format requirements)"
    )


def mirror_text(text: str, pytorch_base: str, mirror: str) -> str:
    """A lock's text with every PyTorch index URL moved onto a mirror of that index.

    ``pytorch_base`` is the index's root as the database names it ("https://.../whl/");
    ``.../whl/cu126`` becomes ``MIRROR/cu126``, and file URLs under it move the same way (a
    requirements.txt's direct URLs, a pylock.toml's ``index`` and wheel ``url`` fields: the
    mirror must then serve the files at the paths PyTorch's index does).
    """
    base = pytorch_base.rstrip("/") + "/"
    return text.replace(base, mirror.rstrip("/") + "/")


def check_mirrored_pylock(text: str, path: str, mirror: str, platform: str | None) -> None:
    """Refuse a mirror whose URL does not leave a valid pylock.toml behind (one line)."""
    from resolver.readers import pylock

    try:
        pylock.read_pins(text, path, platform)
    except UserError as exc:
        raise UserError(f"--pytorch-index {mirror} cannot be written into {path}: {exc}") from None


_INCLUDE_RE = re.compile(r"^(\s*(?:-r|-c|--requirement|--constraint)(?:\s+|=))(\S+)", re.MULTILINE)


def absolute_includes(text: str, base_dir: str) -> str:
    """A requirements file's relative ``-r``/``-c`` paths made absolute, for a copy elsewhere."""
    import os.path

    def fix(m: re.Match[str]) -> str:
        value = m.group(2)
        if "://" in value or os.path.isabs(value):
            return m.group(0)
        return m.group(1) + os.path.join(base_dir, value)

    return _INCLUDE_RE.sub(fix, text)
