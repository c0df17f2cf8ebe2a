"""Fleet resolution and environment specs."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from target_support import written

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.core.vocab import DriverPolicy
from resolver.present import findings as words
from resolver.solve import Request, Target, TargetGpu
from resolver.solve.fleet import solve_fleet, split_groups
from resolver.team.spec import load_spec


def member(
    catalog: Catalog, name: str, gpu: str | None, driver: str | None, platform: str = "linux-x86_64"
) -> Target:
    gpus = (TargetGpu(*catalog.resolve_gpu(gpu)),) if gpu else ()
    os_name = "windows" if platform.startswith("windows") else "linux"
    return written(platform, "3.12", driver, os_name, gpus, nvidia=bool(gpus), name=name)


def lab(catalog: Catalog) -> list[Target]:
    return [
        member(catalog, "a100-servers", "NVIDIA A100-SXM4-80GB", "535.104.05"),
        member(catalog, "rtx4090-workstations", "NVIDIA GeForce RTX 4090", "560.35.03"),
        member(catalog, "b200-node", "NVIDIA B200", "580.95.05"),
        member(catalog, "pascal-laptop", "NVIDIA GeForce GTX 1080 Ti", "560.35.03"),
    ]


def test_common_set_covers_every_member(shipped: Catalog) -> None:
    fleet = lab(shipped)[:3]  # without the Pascal laptop
    dec = solve_fleet(shipped, fleet, Request())
    assert dec.ok and len(dec.choices) == 1
    choice = dec.choices[0]
    # A100 on R535 caps CUDA at 12.x; the B200 needs sm_100: a cu128/cu129 build.
    assert choice.candidate.variant.name in ("cu128", "cu129")
    assert set(choice.members) == {"a100-servers", "rtx4090-workstations", "b200-node"}


def test_no_common_set_names_who_forces_what(shipped: Catalog) -> None:
    dec = solve_fleet(shipped, lab(shipped), Request())
    assert not dec.ok
    text = " ".join(words.conflicts(dec.conflicts))
    assert "pascal-laptop needs" in text and "b200-node needs" in text
    assert "no torch build has both" in text


def test_split_groups_every_member_once(shipped: Catalog) -> None:
    groups = split_groups(shipped, lab(shipped), Request())
    assert len(groups) == 2
    names = sorted(t.name or "" for members, _ in groups for t in members)
    assert names == sorted(t.name or "" for t in lab(shipped))
    assert all(dec.ok for _, dec in groups)


def test_gpu_less_members_get_the_cpu_build_in_a_set_of_their_own(shipped: Catalog) -> None:
    fleet = [
        member(shipped, "gpu", "NVIDIA H100", "580.95.05"),
        member(shipped, "ci-runner", None, None),
        member(shipped, "mac", None, None, platform="macos-arm64"),
    ]
    dec = solve_fleet(shipped, fleet, Request())
    assert dec.ok
    sets = {c.folder: (c.candidate.variant.name, c.members) for c in dec.choices}
    assert sets["macos-arm64"] == ("cpu", ("mac",))
    assert sets["linux-x86_64"][0].startswith("cu") and sets["linux-x86_64"][1] == ("gpu",)
    assert sets["linux-x86_64-cpu"] == ("cpu", ("ci-runner",))  # not the 2.5 GB CUDA build
    assert {c.candidate.release.version for c in dec.choices} == {dec.torch}


def test_duplicates_are_solved_once(shipped: Catalog) -> None:
    fleet = [member(shipped, f"node-{i}", "NVIDIA H100", "580.95.05") for i in range(200)]
    dec = solve_fleet(shipped, fleet, Request())
    assert dec.ok and len(dec.members) == 200
    assert len({id(d) for _, d in dec.members}) == 1


SPEC = """\
name: lab
python: "3.12"
packages:
  torch: ">=2.4"
  with: [torchvision]
  pip: ["numpy>=2"]
targets:
  - name: a100
    driver: "535.104.05"
    gpus: ["NVIDIA A100-SXM4-80GB"]
  - name: laptop
    detect: hosts/laptop.json
"""


def write(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "lab.yaml"
    spec.write_text(text, encoding="utf-8")
    (tmp_path / "hosts").mkdir(exist_ok=True)
    (tmp_path / "hosts" / "laptop.json").write_text(
        '{"platform": "linux-x86_64", "python": "3.11", "driver": "560.35.03", "state": "ok",'
        ' "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3060 Laptop GPU", "cc": "8.6"}]}',
        encoding="utf-8",
    )
    return spec


def test_spec_loads(shipped: Catalog, tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC), shipped)
    assert [m.target.name for m in spec.members] == ["a100", "laptop"]
    laptop = spec.members[1].target
    assert str(laptop.python) == "3.12"  # the environment's Python, not the host's
    assert str(laptop.driver) == "560.35.03" and laptop.gpus[0].cc == (8, 6)
    assert spec.pip == ("numpy>=2",)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (("targets:", "colour: red\ntargets:"), "lab.yaml: colour: unknown key"),
        (('python: "3.12"', "python: 3.12"), "python: write the version as a quoted string"),
        (('["NVIDIA A100-SXM4-80GB"]', '["NVIDIA A1OO"]'), "targets[0].gpus[0]: unknown GPU"),
        (
            (
                'torch: ">=2.4"\n  with: [torchvision]',
                'torch: "==2.4.1+cu121"\n  with: ["torchvision==0.19.1+cu124"]',
            ),
            "mixes CUDA variants",
        ),
        (("hosts/laptop.json", "hosts/missing.json"), "targets[1].detect: no such file"),
        (('pip: ["numpy>=2"]', 'pip: ["torch==2.4.0"]'), "packages.pip[0]: torch is resolved"),
        (("  - name: a100", "  - name: ../a100"), "targets[0].name: '../a100': letters"),
        (("    driver:", "    drver:"), "targets[0].drver: unknown key"),
        (("name: lab\n", "name: lab\n  bad: [\n"), "lab.yaml: line 2: invalid YAML"),
        (("name: lab\n", 'name: "../../../tmp/x"\n'), "lab.yaml: name: '../../../tmp/x': use"),
        (("name: lab\n", "name: ..\n"), "lab.yaml: name: '..': use letters, digits"),
        (("name: lab\n", "name: a/b\n"), "lab.yaml: name: 'a/b': use letters"),
        (("name: lab\n", "name: 5\n"), "lab.yaml: name: expected a string, got 5"),
        (("name: lab\n", "name: [lab]\n"), "lab.yaml: name: expected a string, got ['lab']"),
        (('torch: ">=2.4"', "torch: 2.4"), "lab.yaml: packages.torch: expected a string, got 2.4"),
        (
            ('    driver: "535.104.05"', "    driver: 535.104"),
            "lab.yaml: targets[0].driver: write the version as a quoted string: '535.104'",
        ),
        (
            ("    driver:", "    no_gpu: true\n    driver:"),
            "lab.yaml: targets[0].no_gpu: cannot be combined with gpus or driver",
        ),
        (
            ('    driver: "535.104.05"\n', "    no_gpu: true\n"),
            "lab.yaml: targets[0].no_gpu: cannot be combined with gpus or driver",
        ),
        (
            ("    driver:", "    no_gpu: yes please\n    driver:"),
            "lab.yaml: targets[0].no_gpu: expected true or false",
        ),
    ],
)
def test_bad_specs_name_file_and_key(
    shipped: Catalog, tmp_path: Path, edit: tuple[str, str], fragment: str
) -> None:
    old, new = edit
    assert old in SPEC
    spec = write(tmp_path, SPEC.replace(old, new, 1))
    with pytest.raises(UserError) as exc:
        load_spec(spec, shipped)
    assert fragment in str(exc.value)
    assert str(exc.value).count("\n") == 0


# --- kinds of machine: solved once, restated for each driver build ---------------------------

VARIED_GPUS = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA H100",
    "NVIDIA B200",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce GTX 1080 Ti",
    "Tesla K80",
    "Tesla V100",
    "NVIDIA L4",
]
VARIED_DRIVERS = [
    "418.40.04",
    "450.80.02",
    "470.256.02",
    "525.60.13",
    "525.60.14",
    "535.104.05",
    "535.216.01",
    "550.54.15",
    "570.124.06",
    "575.57.08",
    "580.65.06",
    "580.95.05",
]


def varied(catalog: Catalog) -> list[Target]:
    """A few dozen shapes: several GPU models across driver floors and branch windows, two
    GPUs at once, Windows drivers, a GPU-less member, no driver given."""
    out = []
    for i, gpu in enumerate(VARIED_GPUS):
        for j, driver in enumerate(VARIED_DRIVERS[i % 3 :: 3]):
            platform = "windows-x86_64" if (i + j) % 5 == 0 else "linux-x86_64"
            out.append(member(catalog, f"m{i}-{j}", gpu, driver, platform))
        for driver in ("550.163.01", "570.195.03", "580.105.08"):  # the same kinds as above
            out.append(member(catalog, f"m{i}-{driver}", gpu, driver))
    two = (TargetGpu(*catalog.resolve_gpu("NVIDIA A100")), TargetGpu(*catalog.resolve_gpu("8.6")))
    out.append(written("linux-x86_64", "3.12", "560.35.03", "linux", two, nvidia=True, name="two"))
    out.append(member(catalog, "no-driver", "NVIDIA H100", None))
    out.append(member(catalog, "cpu", None, None))
    # Other names of the compute capabilities above (a kind is keyed by CC, not by name): each
    # restated from its CC's first solve, its texts naming its own GPUs, its hints its own.
    for gpu, driver in SAME_CC:
        out.append(member(catalog, f"alias-{gpu}-{driver}", gpu, driver))
    pair = (TargetGpu(*catalog.resolve_gpu("8.0")), TargetGpu(*catalog.resolve_gpu("8.6")))
    out.append(written("linux-x86_64", "3.12", "560.35.03", "linux", pair, nvidia=True))
    out.append(member(catalog, "alias-no-driver", "NVIDIA H100 80GB HBM3", None))
    return out


SAME_CC = [
    ("NVIDIA A100-SXM4-40GB", "535.104.05"),  # 8.0, as the A100-SXM4-80GB
    ("NVIDIA A100-PCIE-40GB", "418.40.04"),  # 8.0 on a driver too old for it
    ("NVIDIA GeForce RTX 3090", "570.124.06"),  # 8.6
    ("NVIDIA RTX A6000", "525.60.13"),  # 8.6
    ("NVIDIA H100 80GB HBM3", "580.95.05"),  # 9.0, as the H100
    ("NVIDIA GeForce GTX 1080", "580.65.06"),  # 6.1, as the GTX 1080 Ti (R580: its last branch)
    ("Tesla P40", "590.44.01"),  # 6.1 on a branch that no longer drives it
    ("Jetson AGX Orin", "540.4.0"),  # 8.7, Tegra: named in the hint
    ("Jetson Orin Nano", "540.4.0"),
]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["compat", "strict"])
def test_one_solve_per_kind_gives_what_solving_each_alone_gives(
    shipped: Catalog, policy: str
) -> None:
    from dataclasses import replace

    from resolver.solve import solve
    from resolver.solve.memo import FleetSolver

    request = Request(policy=DriverPolicy(policy))
    targets = varied(shipped)
    assert len(targets) >= 30
    solver = FleetSolver(shipped, request)
    for t in targets:
        alone = solve(shipped, replace(t, name=None), request)
        assert solver(t) == alone, t.name
    assert solver.runs < len(targets)  # kinds were shared, and each shared one restated exactly
    renamed = [t for t in targets if (t.name or "").startswith("alias")]
    assert renamed and all(solver(t).target.gpus == t.gpus for t in renamed)


@pytest.mark.parametrize("driver", ["570.124.06", "418.40.04", None])
def test_gpus_of_one_compute_capability_share_one_solve(
    shipped: Catalog, driver: str | None
) -> None:
    """Machines whose GPUs differ only by name are one kind: solved once, each restated with
    its own GPU names in every text, exactly as solving it alone."""
    from resolver.solve import solve
    from resolver.solve.memo import FleetSolver

    names = ["NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000", "NVIDIA A40", "Jetson AGX Orin"]
    targets = [member(shipped, f"m{i}", gpu, driver) for i, gpu in enumerate(names)]
    solver = FleetSolver(shipped, Request())
    for t in targets:
        alone = solve(shipped, replace(t, name=None), Request())
        assert solver(t) == alone, t.name
    assert solver.runs == 2  # sm_86 once (three names), sm_87 (a Tegra GPU) once


@pytest.mark.slow
def test_split_groups_decide_as_grouping_by_hand_does(shipped: Catalog) -> None:
    """The linear grouping (set intersections over memoised kinds) decides as the fleet solver
    does when handed each group: every group has a common set, and no member could have joined
    an earlier group."""
    targets = varied(shipped)
    groups = split_groups(shipped, targets, Request())
    assert sorted(t.name or "" for m, _ in groups for t in m) == sorted(
        t.name or "" for t in targets
    )
    for i, (members, decision) in enumerate(groups):
        again = solve_fleet(shipped, members, Request())
        assert decision.ok == again.ok and decision.torch == again.torch
        assert decision.choices == again.choices
        first = members[0]
        for earlier, _ in groups[:i]:
            if solve_fleet(shipped, [*earlier, first], Request()).ok:
                pytest.fail(f"{first.name} could have joined an earlier group")


def test_split_group_is_named_after_its_first_target_in_the_spec(shipped: Catalog) -> None:
    """README: a split group is named after its first target. An arm64 member sorted first by
    platform once named the A100s' folder."""
    a100 = member(shipped, "a100-nodes", "NVIDIA A100-SXM4-80GB", "535.104.05")
    pascal = member(shipped, "pascal", "NVIDIA GeForce GTX 1080 Ti", "560.35.03")
    gh200 = member(shipped, "gh200-node", "NVIDIA GH200", "580.95.05", platform="linux-aarch64")
    groups = split_groups(shipped, [a100, pascal, gh200], Request())
    firsts = [members[0].name for members, _ in groups]
    assert firsts[0] == "a100-nodes"
    together = next(m for m, _ in groups if m[0].name == "a100-nodes")
    # in the spec's order, whatever the platforms sort as (it used to be "gh200-node")
    assert [t.name for t in together] == ["a100-nodes", "pascal", "gh200-node"][: len(together)]


def test_team_lock_tells_progress_of_each_target_and_shape(shipped: Catalog) -> None:
    from resolver.flows.team import lock_team
    from resolver.writers import lockfiles

    spec_dir = Path(__file__).resolve().parent.parent / "environments"
    spec = load_spec(spec_dir / "research-lab.yaml", shipped)  # split: true
    told: dict[str, int] = {}

    def progress(label: str, total: int) -> Callable[[int], None]:
        told[label] = 0
        return lambda n: told.__setitem__(label, told[label] + n)

    lock_team(shipped, spec, lockfiles.LockOptions(top_level=True), progress=progress)
    writing = {"writing the lock files": 0}  # a step of unknown length: a line, not a bar
    assert told == {"grouping 4 machine shapes": 4, **writing}
    told.clear()
    lock_team(shipped, spec, lockfiles.LockOptions(top_level=True), split=False, progress=progress)
    assert told == {"solving 4 targets": 4, **writing}


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_progress_bar_only_on_a_terminal(tty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from resolver.commands.ui import PROGRESS_FROM, progress_bars

    err = _Terminal(tty)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("CI", raising=False)  # a CI log gets no bar even on a terminal
    with progress_bars() as start:
        tick = start("solving many targets", PROGRESS_FROM)
        for _ in range(PROGRESS_FROM):
            tick(1)
        start("short", 3)(3)  # a short step: no bar
    shown = err.getvalue()
    assert ("solving many targets" in shown) is tty
    assert "short" not in shown


CI_SPEC = """\
name: ci
python: "3.12"
packages: {torch: ">=2.4"}
targets:
  - {name: a100-nodes, count: 12, driver: "535.104.05", gpus: ["NVIDIA A100-SXM4-80GB"]}
  - {name: ci-runners, count: 30, no_gpu: true}
"""


def test_cpu_members_get_the_cpu_build_in_their_own_file_and_the_report_names_the_upgrade(
    shipped: Catalog, tmp_path: Path
) -> None:
    from resolver.flows.team import lock_team
    from resolver.writers import lockfiles

    path = tmp_path / "ci.yaml"
    path.write_text(CI_SPEC)
    team = lock_team(shipped, load_spec(path, shipped), lockfiles.LockOptions(top_level=True))
    gpu = team.files["linux-x86_64/requirements.txt"]
    cpu = team.files["linux-x86_64-cpu/requirements.txt"]
    torch_gpu = next(line for line in gpu.splitlines() if line.startswith("torch=="))
    torch_cpu = next(line for line in cpu.splitlines() if line.startswith("torch=="))
    assert "+cu" in torch_gpu and torch_cpu == torch_gpu.split("+")[0] + "+cpu"
    report = team.files["report.md"]
    assert "| linux-x86_64 (no GPU) |" in report and "| ci-runners |" in report
    # the one upgrade that moves the whole fleet: the A100 nodes (535) to the CUDA 13 floor
    what = report.split("## What would change", 1)[1]
    assert "the 12 machines of a100-nodes (12, from 535.104.05) to driver ≥ 580" in what
    assert "ci-runners" not in what.split("\n\n")[1]  # CPU runners need no driver


def test_team_lock_json_keys_the_cpu_set_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from cli_support import run_cli

    path = tmp_path / "ci.yaml"
    path.write_text(CI_SPEC)
    code, out, err = run_cli(capsys, "lock", str(path), "--json", "-o", str(tmp_path / "out"))
    assert code == 0, err
    (group,) = json.loads(out)["groups"]
    platforms = group["platforms"]
    assert set(platforms) == {"linux-x86_64", "linux-x86_64-cpu"}
    assert platforms["linux-x86_64-cpu"]["variant"] == "cpu"
    assert platforms["linux-x86_64"]["variant"].startswith("cu")


def test_a_large_node_list_tells_its_bytes_read(
    shipped: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from resolver.fleet import kubernetes

    fixture = Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(json.loads(fixture.read_text()), indent=4))
    size = path.stat().st_size
    told: dict[str, int] = {}

    def progress(label: str, total: int) -> Callable[[int], None]:
        told["total"], told["done"] = total, 0
        return lambda n: told.__setitem__("done", told["done"] + n)

    kubernetes.read_node_list(path, shipped, progress=progress)
    assert told == {}  # small: no bar
    monkeypatch.setattr(kubernetes, "PROGRESS_BYTES", 1)
    kubernetes.read_node_list(path, shipped, progress=progress)
    assert told["total"] == size and 0 < told["done"] <= size


def test_conflicts_compare_kinds_not_every_pair_of_machines(shipped: Catalog) -> None:
    """300 driver builds of one kind and two machines no build covers together: the conflict
    lines name the kinds that clash, once each, not 300 × 300 pairs."""
    fleet = [
        member(shipped, f"a100-{i}", "NVIDIA A100-SXM4-80GB", f"570.{100 + i}.01")
        for i in range(300)
    ]
    fleet += [
        member(shipped, "pascal", "NVIDIA GeForce GTX 1080 Ti", "570.86.10"),
        member(shipped, "b200", "NVIDIA B200", "580.95.05"),
    ]
    dec = solve_fleet(shipped, fleet, Request())
    assert not dec.ok
    pairs = [c for c in words.conflicts(dec.conflicts) if "no torch build has both" in c]
    assert any("pascal needs" in c and "b200 needs" in c for c in pairs)
    assert 1 <= len(pairs) <= 3
