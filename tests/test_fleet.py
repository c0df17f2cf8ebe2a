"""Fleet resolution and environment specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.catalog import Catalog
from resolver.core.errors import UserError
from resolver.solve import Request, Target, TargetGpu
from resolver.solve.fleet import solve_fleet, split_groups
from resolver.team.spec import load_spec


def member(
    catalog: Catalog, name: str, gpu: str | None, driver: str | None, platform: str = "linux-x86_64"
) -> Target:
    gpus = (TargetGpu(*catalog.resolve_gpu(gpu)),) if gpu else ()
    os_name = "windows" if platform.startswith("windows") else "linux"
    return Target(platform, "3.12", driver, os_name, gpus, nvidia=bool(gpus), name=name)


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
    text = " ".join(dec.conflicts)
    assert "pascal-laptop needs" in text and "b200-node needs" in text
    assert "no torch build has both" in text


def test_split_groups_every_member_once(shipped: Catalog) -> None:
    groups = split_groups(shipped, lab(shipped), Request())
    assert len(groups) == 2
    names = sorted(t.name or "" for members, _ in groups for t in members)
    assert names == sorted(t.name or "" for t in lab(shipped))
    assert all(dec.ok for _, dec in groups)


def test_gpu_less_member_runs_the_cuda_build(shipped: Catalog) -> None:
    fleet = [
        member(shipped, "gpu", "NVIDIA H100", "580.95.05"),
        member(shipped, "ci-runner", None, None),
        member(shipped, "mac", None, None, platform="macos-arm64"),
    ]
    dec = solve_fleet(shipped, fleet, Request())
    assert dec.ok
    by_platform = {c.platform: c.candidate.variant.name for c in dec.choices}
    assert by_platform["macos-arm64"] == "cpu"
    assert by_platform["linux-x86_64"].startswith("cu")


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
    assert laptop.python == "3.12"  # the environment's Python, not the host's
    assert laptop.driver == "560.35.03" and laptop.gpus[0].cc == (8, 6)
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
