"""Team environment specs (`environments/<name>.yaml`): load, validate, turn into solver inputs.

Schema (every key but `name`, `python` and `targets` optional; unknown keys are errors):

    name: research-lab               # also the output folder: letters, digits, ".", "_", "-"
    description: Lab fleet, one reviewed set of files for every machine
    python: "3.12"
    packages:
      torch: ">=2.4"                 # PEP 440 specifier
      with: [torchvision, xformers]  # companions (same build variant as torch) and extension
                                     # packages (xformers, flash-attn, bitsandbytes, torchao,
                                     # vllm, triton), pinned beside torch
      pip: ["numpy>=2"]              # other pip packages, written as given
    cuda: "12.8"                     # only builds for this CUDA version
    driver_policy: compat            # or strict
    conda_source: pip                # or conda-forge
    allow_unconfirmed: false
    evidence: documented             # documented | observed | any (allow_unconfirmed: true = any)
    split: auto                      # true: one set per group; false: a common set or nothing;
                                     # auto: split only when no common set exists
    lock: full                       # full: every package pinned (the closure, with hashes);
                                     # top-level: only what is asked for (not a full lock)
    image: registry.example/ml:2.11  # a cluster's image: its Dockerfile and verification Jobs
                                     # ({group} in it: one image per group of a split lock)
    targets:
      - name: a100-servers
        count: 12                    # how many such machines (for the report)
        platform: linux-x86_64       # default linux-x86_64
        driver: "535.104.05"
        gpus: ["NVIDIA A100-SXM4-80GB"]   # model names or compute capabilities
      - name: laptop
        detect: hosts/laptop.json    # `gpuresolve detect --json` output, relative to this file
      - name: ci-runners
        no_gpu: true                 # no NVIDIA GPU (not with driver or gpus): the CPU build,
                                     # in a set of its own beside the GPU members (README)
      - name: prod                   # a prefix here: one target per machine shape
        kubernetes: nodes.json       # `kubectl get nodes -o json`, read through GFD's labels
        selector: {nvidia.com/gpu.present: "true"}   # optional: label: value, all must match
        include_unavailable: false   # true: cordoned and NotReady nodes get the verify Job too
      - detect: fleet/               # a folder of `detect --json` files: one target per shape
      - name: hpc                    # a Slurm cluster: `scontrol show node --oneliner` output;
        slurm: nodes.txt             # groups: partition x GPU type x features
        driver: "550.54.15"          # optional: else each node's driver-NNN feature
        gpu_model: a100              # optional: the model of Gres=gpu:N (no type), or rules
                                     # [{partition: P | nodes: PATTERN, model: M}, ...]
        include_unavailable: false   # true: drained, down... nodes get the verify job too

Every error names the file and the key (and, for YAML syntax, the line); nothing is written then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.catalog import Catalog
from resolver.core import secrets
from resolver.core.collector import collector_paused
from resolver.core.errors import UserError, shown, unsafe_char
from resolver.core.platforms import (
    BY_NAME,
    DEFAULT_PLATFORM,
    MACOS,
    PLATFORMS,
    PythonVersion,
    python_option,
)
from resolver.core.versions import Driver
from resolver.core.vocab import CondaSource, DriverPolicy, EvidenceLevel, words
from resolver.io.bounded import SPEC_LIMIT, SPEC_MAX_NODES, load_yaml, read_text
from resolver.solve import Request, Target, TargetGpu
from resolver.solve.shapes import FleetMember

if TYPE_CHECKING:
    from resolver.team.expand import ProgressBars

TOP_KEYS = {
    "name",
    "description",
    "python",
    "packages",
    "cuda",
    "driver_policy",
    "conda_source",
    "allow_unconfirmed",
    "evidence",
    "split",
    "lock",
    "targets",
    "image",  # the image a cluster's verification Jobs run (resolver/fleet/files.py)
}
SPLIT_VALUES = ("auto", "true", "false")
LOCK_VALUES = ("full", "top-level")
PACKAGE_KEYS = {"torch", "with", "pip"}
TARGET_KEYS = {"name", "count", "platform", "driver", "gpus", "no_gpu", "detect"}
TARGET_KEYS |= {"kubernetes", "selector", "slurm", "gpu_model", "include_unavailable"}  # expand.py
RESERVED_PIP = {"torch", "torchvision", "torchaudio"}
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the output folder's name: no "/", ".."


@dataclass(frozen=True)
class EnvSpec:
    path: Path
    name: str
    description: str
    python: PythonVersion
    request: Request
    torch_spec: str | None
    companions: tuple[str, ...]
    pip: tuple[str, ...]
    conda_source: str
    members: tuple[FleetMember, ...] = field(default_factory=tuple)
    split: str = "auto"  # true | false | auto: one set per group of targets, or only a common one
    lock: str = "full"  # full: the whole closure pinned; top-level: only what is asked for
    image: str | None = None  # a cluster's image: the Dockerfile builds it, the Jobs run it

    @property
    def targets(self) -> list[Target]:
        return [m.target for m in self.members]


class _Spec:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, msg: str) -> UserError:
        from resolver.schemas import cite

        return UserError(f"{self.path}: {key}: {msg} (the spec's schema: {cite('team-spec')})")

    def mapping(self, value: Any, key: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.fail(
                f"{key}.{unknown[0]}" if key != "(top)" else unknown[0],
                f"unknown key (allowed: {', '.join(sorted(allowed))})",
            )
        return value

    def string(self, value: Any, key: str, *, version: bool = False) -> str:
        """A string; ``version`` keys get a hint, since YAML reads 3.10 as the number 3.1."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if version and number:
            raise self.fail(key, f"write the version as a quoted string: '{value}'")
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {value!r}")
        if not value.strip():
            raise self.fail(key, "expected a non-empty string")
        # written into report.md and the locks: no control or bidi characters (a description
        # may span lines)
        text = value.strip()
        ch = unsafe_char(text.replace("\n", " ") if key == "description" else text)
        if ch is not None:
            raise self.fail(key, f"holds the control or bidi character U+{ord(ch):04X}: refused")
        return value.strip()

    def strings(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(key, "expected a list")
        return [self.string(v, f"{key}[{i}]") for i, v in enumerate(value)]


@collector_paused()  # millions of acyclic objects: resolver/core/collector.py
def load_spec(path: str | Path, catalog: Catalog, progress: ProgressBars | None = None) -> EnvSpec:
    """Read and validate a spec; every problem is one UserError naming file and key.

    ``progress`` (the CLI's bars on a terminal) is told of a large node list's reading."""
    from resolver.db.gpunames import resolve_gpu  # the GPU table's own lookup
    from resolver.host.records import load_profile
    from resolver.solve.inputs import build_request
    from resolver.solve.target import target_from_profile
    from resolver.team.expand import expand_entry, is_many

    spec_path = Path(path)
    s = _Spec(spec_path)
    text = read_text(spec_path, limit=SPEC_LIMIT, what="an environment spec")
    data = load_yaml(text, spec_path, max_nodes=SPEC_MAX_NODES)
    top = s.mapping(data, "(top)", TOP_KEYS)
    for required in ("name", "python", "targets"):
        if required not in top:
            raise s.fail(required, "missing")
    name = s.string(top["name"], "name")
    if not SAFE_NAME.match(name):  # `lock` writes environments/<name>/: never outside it
        raise s.fail("name", f"{name!r}: use letters, digits, '.', '_' and '-' (a folder name)")
    # a spec is committed with a repository: it names a version, never an interpreter to run
    version = python_option(s.string(top["python"], "python", version=True))
    if version is None:
        raise s.fail(
            "python",
            f"{shown(top['python'])}: a Python version ('3.12', '3.13t'), never an interpreter",
        )
    python = PythonVersion.parse(version)
    packages = s.mapping(top.get("packages") or {}, "packages", PACKAGE_KEYS)
    torch_spec = s.string(packages["torch"], "packages.torch") if "torch" in packages else None
    companions = tuple(s.strings(packages.get("with") or [], "packages.with"))
    pip = tuple(s.strings(packages.get("pip") or [], "packages.pip"))
    kept = []
    for i, item in enumerate(pip):
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            req = Requirement(item)
        except InvalidRequirement:
            raise s.fail(f"packages.pip[{i}]", f"not a requirement: {item!r}") from None
        req_name = req.name.lower()
        if req.url:  # `name @ URL`: a login in it is used for the request, never written
            from resolver.io.credentials import keep

            item = item.replace(req.url, keep(req.url))
        kept.append(item)
        if req_name in RESERVED_PIP:
            raise s.fail(
                f"packages.pip[{i}]",
                f"{req_name} is resolved by gpuresolve: use packages.torch / packages.with",
            )
    pip = tuple(kept)
    policy = top.get("driver_policy", "compat")
    if policy not in words(DriverPolicy):
        raise s.fail("driver_policy", f"{policy!r}: expected compat or strict")
    raw_split = top.get("split", "auto")
    split = {True: "true", False: "false"}.get(raw_split, raw_split)  # YAML reads true as a bool
    if split not in SPLIT_VALUES:
        raise s.fail("split", f"{raw_split!r}: expected true, false or auto")
    lock_kind = top.get("lock", "full")
    if lock_kind not in LOCK_VALUES:
        raise s.fail("lock", f"{lock_kind!r}: expected full or top-level")
    conda_source = top.get("conda_source", "pip")
    if conda_source not in words(CondaSource):
        raise s.fail("conda_source", f"{conda_source!r}: expected pip or conda-forge")
    allow = top.get("allow_unconfirmed", False)
    if not isinstance(allow, bool):
        raise s.fail("allow_unconfirmed", "expected true or false")
    evidence = top.get("evidence", "documented")
    if evidence not in words(EvidenceLevel):
        raise s.fail("evidence", f"{evidence!r}: expected documented, observed or any")
    cuda = s.string(top["cuda"], "cuda", version=True) if "cuda" in top else None
    try:
        request = build_request(
            torch=torch_spec,
            with_=companions,
            cuda=cuda,
            policy=DriverPolicy(policy),
            allow_unconfirmed=allow,
            evidence=str(evidence),
            extensions=catalog.extensions,
        )
    except UserError as exc:
        raise s.fail("packages", str(exc)) from None

    raw_targets = top["targets"]
    if not isinstance(raw_targets, list) or not raw_targets:
        raise s.fail("targets", "expected a non-empty list")
    members: list[FleetMember] = []
    names: set[str] = set()
    known_gpus: dict[str, TargetGpu] = {}  # a fleet names a few models thousands of times
    for i, raw in enumerate(raw_targets):
        key = f"targets[{i}]"
        t = s.mapping(raw, key, TARGET_KEYS)
        if is_many(t, spec_path.parent):  # a cluster or a folder: one member per machine shape
            for member in expand_entry(spec_path, t, key, catalog, python, progress):
                gname = member.target.name or ""
                if not SAFE_NAME.match(gname) or gname in names:
                    why = "is used twice" if gname in names else "is not a folder name"
                    raise s.fail(f"{key}.name", f"the group name {gname!r} {why}")
                names.add(gname)
                members.append(member)
            continue
        if "selector" in t:
            raise s.fail(f"{key}.selector", "only with `kubernetes:` (a node list)")
        tname = s.string(t.get("name"), f"{key}.name") if "name" in t else f"target-{i + 1}"
        if not SAFE_NAME.match(tname):  # `lock --split` names a group's folder after a target
            raise s.fail(f"{key}.name", f"{tname!r}: letters, digits, '.', '_' and '-' only")
        if tname in names:
            raise s.fail(f"{key}.name", f"{tname!r} is used twice")
        names.add(tname)
        count = t.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise s.fail(f"{key}.count", "expected a positive integer")
        if "detect" in t:
            extra = sorted(set(t) & {"platform", "driver", "gpus", "no_gpu"})
            if extra:
                raise s.fail(f"{key}.{extra[0]}", "a detect file already describes the machine")
            rel = s.string(t["detect"], f"{key}.detect")
            file = spec_path.parent / rel
            if not file.exists():  # a FIFO or a device: the reader says what it is
                raise s.fail(f"{key}.detect", f"no such file: {rel}")
            try:
                profile = load_profile(str(file))
            except UserError as exc:
                raise s.fail(f"{key}.detect", str(exc)) from None
            target = replace(target_from_profile(catalog, profile, tname), python=python)
            members.append(FleetMember(target, count, rel))
            continue
        platform = s.string(t.get("platform", DEFAULT_PLATFORM), f"{key}.platform")
        if platform not in PLATFORMS:
            raise s.fail(f"{key}.platform", f"{platform!r}: one of {', '.join(PLATFORMS)}")
        driver = s.string(t["driver"], f"{key}.driver", version=True) if "driver" in t else None
        gpus = s.strings(t.get("gpus") or [], f"{key}.gpus")
        no_gpu = t.get("no_gpu", False)
        if not isinstance(no_gpu, bool):
            raise s.fail(f"{key}.no_gpu", "expected true or false")
        if no_gpu and (gpus or driver):
            raise s.fail(f"{key}.no_gpu", "cannot be combined with gpus or driver")
        resolved = []
        for j, g in enumerate(gpus):
            gpu = known_gpus.get(g)
            if gpu is None:  # each name is looked up once
                try:
                    gpu = known_gpus[g] = TargetGpu(*resolve_gpu(catalog, g))
                except UserError as exc:
                    raise s.fail(f"{key}.gpus[{j}]", str(exc)) from None
            resolved.append(gpu)
        try:  # the entry made a Target, here at its edge
            drv = None if driver is None else Driver.parse(driver)
        except UserError as exc:
            raise s.fail(key, str(exc)) from None
        plat = BY_NAME[platform]
        if plat.name == MACOS and (resolved or drv):
            why = "macOS has no NVIDIA CUDA builds: drop --gpu/--driver for macos-arm64"
            raise s.fail(key, why)
        target = Target(
            platform=plat,
            python=python,
            driver=drv,
            driver_os="windows" if plat.os == "windows" else "linux",
            gpus=tuple(resolved),
            nvidia=bool(resolved) or driver is not None,
            name=tname,
        )
        members.append(FleetMember(target, count))
    return EnvSpec(
        path=spec_path,
        name=name,
        description=s.string(top["description"], "description") if top.get("description") else "",
        python=python,
        request=request,
        torch_spec=torch_spec,
        companions=companions,
        pip=pip,
        conda_source=str(conda_source),
        members=tuple(members),
        split=split,
        lock=str(lock_kind),
        image=_image(s, top["image"]) if "image" in top else None,
    )


def with_image(spec: EnvSpec, image: str | None) -> EnvSpec:
    """The spec with ``--image REF`` in place of its ``image:`` (checked alike); None: as is."""
    if image is None:
        return spec
    try:
        ref = _image(_Spec(spec.path), image)
    except UserError as exc:
        raise UserError(f"--image: {str(exc).split(': image: ', 1)[-1]}") from None
    return replace(spec, image=ref)


_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@{}-]{0,254}$", re.IGNORECASE)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _image(s: _Spec, value: Any) -> str:
    """An image reference (``registry/name:tag``; ``{group}`` stands for a split lock's group)."""
    ref = s.string(value, "image")
    name, at, digest = ref.partition("@")  # "@" only before a digest: never a login
    if (
        not _IMAGE.fullmatch(ref)
        or ("{" in ref and "{group}" not in ref)
        or (at and (not _DIGEST.fullmatch(digest) or "@" in digest or not name))
    ):
        raise s.fail(
            "image",
            f"{secrets.redact_refused(ref)!r} is not an image reference (registry/name:tag)",
        )
    return ref
