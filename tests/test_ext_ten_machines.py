"""Issue 38's ten machines on the shipped database, over the whole extension history: each
`--with` gets a set that runs, or the exact package and the gate that rules it out.

Every expected answer below was checked by hand against `data/extensions.yaml` (the graded,
sourced facts named in each case's comment) and the torch facts of `data/`; a change of data
or solver that moves one must say why here.

The drivers are real, common releases of the branch each kind of machine runs (seven of the
ten below R580, as the issue measured):
- RTX 3090 535.183.01: R535, Ubuntu 22.04's `nvidia-driver-535`, the usual GeForce box;
- RTX 4090 550.144.03: R550, Ubuntu 24.04's `nvidia-driver-550`;
- RTX 5090 570.133.07: R570, the first branch that drives Blackwell GeForce (570.86 the first);
- A100 535.230.02 and T4 535.247.01: R535, the data-center long-term branch cloud images keep;
- H100 570.172.08: R570 data-center, the CUDA 12.8 toolkit's branch;
- V100 525.147.05: R525 data-center, the oldest branch CUDA 12's minor-version compatibility
  takes (>= 525.60.13), common on Volta clusters never upgraded;
- L4 550.163.01: R550 data-center, what cloud L4 images shipped in 2025;
- GH200 580.82.07 (linux-aarch64) and RTX PRO 6000 580.95.05: R580, CUDA 13's branch, what
  those newer machines ship with.
Below R580 a torch build must be CUDA 12 (12.x minor-version compatibility, >= 525): that is
what holds vllm to a release whose libraries link libcudart.so.12.
"""

from __future__ import annotations

from typing import Any

import pytest
from cli_support import chosen, suggest_json

MACHINES = {
    "rtx3090": ["--gpu", "RTX 3090", "--driver", "535.183.01"],
    "rtx4090": ["--gpu", "RTX 4090", "--driver", "550.144.03"],
    "rtx5090": ["--gpu", "RTX 5090", "--driver", "570.133.07"],
    "a100": ["--gpu", "A100", "--driver", "535.230.02"],
    "h100": ["--gpu", "H100", "--driver", "570.172.08"],
    "v100": ["--gpu", "V100", "--driver", "525.147.05"],
    "t4": ["--gpu", "T4", "--driver", "535.247.01"],
    "l4": ["--gpu", "L4", "--driver", "550.163.01"],
    "gh200": ["--gpu", "GH200", "--driver", "580.82.07", "--platform", "linux-aarch64"],
    "rtxpro6000": ["--gpu", "RTX PRO 6000", "--driver", "580.95.05"],
}
BELOW_R580 = ("rtx3090", "rtx4090", "rtx5090", "a100", "h100", "v100", "t4", "l4")
# torch alone: the newest CUDA 12 build with SASS for the GPU (cu126 has sm_50..sm_90; a
# Blackwell GPU needs cu128, whose newest release is 2.11.0), or CUDA 13 on R580
TORCH_ALONE = {m: "2.14.1+cu126" for m in BELOW_R580} | {
    "rtx5090": "2.11.0+cu128",
    "gh200": "2.15.0+cu132",
    "rtxpro6000": "2.15.0+cu132",
}


def suggest(
    capsys: pytest.CaptureFixture[str], machine: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    return suggest_json(capsys, *MACHINES[machine], "--python", "3.12", *extra)


def refused(doc: dict[str, Any]) -> str:
    assert doc["selection"] is None
    return "\n".join(doc["hints"])


def cases() -> list[Any]:
    out: list[Any] = []

    def case(machine: str, args: str, want: dict[str, str] | str, gate: str) -> None:
        """``gate``: the gate that decides the answer, where one does (it names the case)."""
        name = f"{machine}-{args}" + (f"-{gate}" if gate else "")
        out.append(pytest.param(machine, args.split(), want, id=name))

    for m in BELOW_R580:
        # vllm: 0.33.0-0.26.0 pin CUDA 13 torch builds (0.26.0/0.30.0 link libcudart.so.13,
        # observed); 0.19.1 is the newest CUDA 12 one (torch ==2.10.0, libcudart.so.12, SASS
        # 5.2-12.0 with PTX 12.0, observed from its wheel read whole): R5xx runs cu128 by
        # minor-version compatibility.
        case(m, "--with vllm", {"torch": "2.10.0+cu128", "vllm": "0.19.1"}, "cudart")
        # vllm==0.16.0 requires torch ==2.9.1 (METADATA, observed)
        case(m, "--with vllm==0.16.0", {"torch": "2.9.1+cu128", "vllm": "0.16.0"}, "torch")
        # bitsandbytes 0.50.2: torch >=2.4,<3 (METADATA), a library per CUDA with the loader's
        # nearest rule (build-config/observed): the torch alone keeps its place
        case(m, "--with bitsandbytes", {"torch": TORCH_ALONE[m], "bitsandbytes": "0.50.2"}, "")
        # torchao 0.18.0: no torch pin, import gate >=2.11.0 (its __init__.py, observed); its
        # sm_90/sm_100 kernels are optional (device_code does not gate)
        case(m, "--with torchao", {"torch": TORCH_ALONE[m], "torchao": "0.18.0"}, "import")
        case(
            m,
            "--with vllm --with bitsandbytes",
            {"torch": "2.10.0+cu128", "vllm": "0.19.1", "bitsandbytes": "0.50.2"},
            "",
        )
    for m in ("rtx3090", "rtx4090", "a100", "h100", "t4", "l4"):
        # xformers 0.0.35: torch >=2.10 (METADATA), built with CUDA 12.8 (cpp_lib.json), SASS
        # 7.5/8.0/9.0 + PTX 8.0 (observed): any CUDA 12 torch from 2.10; sm_86/sm_89 by SASS 8.0
        case(m, "--with xformers", {"torch": "2.14.1+cu126", "xformers": "0.0.35"}, "")
        case(
            m,
            "--with xformers --with torchao",
            {"torch": "2.14.1+cu126", "xformers": "0.0.35", "torchao": "0.18.0"},
            "",
        )
    for m in ("rtx3090", "rtx4090", "rtx5090", "a100", "h100", "l4", "rtxpro6000"):
        # flash-attn 2.8.3.post2 is source-only; 2.8.3.post1's release downloads stop at torch
        # 2.8 (build-config: its release workflow's matrix, CUDA 12.9, SASS 8.0-12.0)
        case(m, "--with flash-attn", {"torch": "2.8.0+cu128", "flash-attn": "2.8.3.post1"}, "")
    # Volta and Turing: flash-attn 2 has no kernels below sm_80 in any release with wheels
    for m, sm in (("v100", "sm_70 (Tesla V100)"), ("t4", "sm_75 (Tesla T4)")):
        case(
            m,
            "--with flash-attn",
            f"flash-attn cannot run on this target: flash-attn 2.8.3.post1 has no kernels for {sm}",
            "kernels",
        )
    # V100: xformers 0.0.31-0.0.35 carry SASS from sm_75 (observed); 0.0.30 (torch ==2.7.0,
    # SASS 6.0/7.0/7.5/8.0/9.0) is the newest with Volta kernels. torchao beside torch 2.7.0:
    # 0.14.1+ gate on torch 2.9+ (observed), 0.14.0 loads its kernels with no released torch
    # and 0.13.0 only with 2.8.0 (build-config: __init__.py at the release commits), so
    # 0.12.0 (no torch pin, no import check) is taken.
    case("v100", "--with xformers", {"torch": "2.7.0+cu126", "xformers": "0.0.30"}, "kernels")
    case(
        "v100",
        "--with xformers --with torchao",
        {"torch": "2.7.0+cu126", "xformers": "0.0.30", "torchao": "0.12.0"},
        "kernels",
    )
    # RTX 5090 (sm_120): cu126 builds have no sm_120, so torch needs cu128 (2.11.0 the newest);
    # xformers 0.0.35's kernels refuse CC above 9.0, its recorded fallback (PyTorch's flash
    # kernels) runs there
    case("rtx5090", "--with xformers", {"torch": "2.11.0+cu128", "xformers": "0.0.35"}, "ceiling")
    case(
        "rtx5090",
        "--with xformers --with torchao",
        {"torch": "2.11.0+cu128", "xformers": "0.0.35", "torchao": "0.18.0"},
        "ceiling",
    )
    # R580 machines: CUDA 13 torch runs; vllm 0.33.0 pins torch ==2.14.0 (cu130 on the default
    # index), SASS to 12.0 on x86-64 and aarch64 (observed)
    for m in ("gh200", "rtxpro6000"):
        case(m, "--with vllm", {"torch": "2.14.0+cu130", "vllm": "0.33.0"}, "torch")
        case(m, "--with bitsandbytes", {"torch": "2.15.0+cu132", "bitsandbytes": "0.50.2"}, "")
        case(m, "--with torchao", {"torch": "2.15.0+cu132", "torchao": "0.18.0"}, "")
        case(
            m,
            "--with vllm --with bitsandbytes",
            {"torch": "2.14.0+cu130", "vllm": "0.33.0", "bitsandbytes": "0.50.2"},
            "",
        )
    case(
        "rtxpro6000",
        "--with vllm==0.16.0",
        {"torch": "2.9.1+cu128", "vllm": "0.16.0"},
        "torch",
    )
    case("rtxpro6000", "--with xformers", {"torch": "2.11.0+cu128", "xformers": "0.0.35"}, "")
    # GH200 (linux-aarch64): no release of xformers or flash-attn has an aarch64 wheel (the
    # files of each release, observed); vllm 0.16.0 has one (sm_90 from its sdist's release
    # pipeline, build-config), but its libraries need libcudart.so.12 and the torch 2.9.1 the
    # solver pairs it with here is cu130 (the default index's aarch64 torch 2.9.1 is CPU only)
    case(
        "gh200",
        "--with xformers",
        "xformers cannot run on this target: xformers 0.0.35 has no linux-aarch64 wheel (only "
        "linux-x86_64, windows-x86_64); the same gate (platform) holds back its 27 other "
        "releases with wheels",
        "platform",
    )
    case(
        "gh200",
        "--with flash-attn",
        "flash-attn cannot run on this target: flash-attn 2.8.3.post1 has no linux-aarch64 wheel",
        "platform",
    )
    case(
        "gh200",
        "--with vllm==0.16.0",
        "vllm cannot run on this target: vllm 0.16.0 links libcudart.so.12 (CUDA "
        "12), which a cu130 torch build does not bring",
        "cudart",
    )
    # a pinned torch gets the release built for it: torchao 0.16.0's import gate is ==2.10.0
    # (0.17/0.18: >=2.11.0); vllm 0.19.1 requires torch ==2.10.0
    for m in ("h100", "rtxpro6000"):
        case(
            m, "--torch ==2.10.0 --with torchao", {"torch": "2.10.0+cu128", "torchao": "0.16.0"}, ""
        )
        case(m, "--torch ==2.10.0 --with vllm", {"torch": "2.10.0+cu128", "vllm": "0.19.1"}, "")
    # torchao 0.13.0 is built against torch 2.8.0 (build-config); 0.14.0 never loads its kernels
    case(
        "h100", "--torch ==2.8.0 --with torchao", {"torch": "2.8.0+cu128", "torchao": "0.13.0"}, ""
    )
    case(
        "h100",
        "--with torchao==0.14.0",
        "torchao cannot run on this target: torchao 0.14.0 loads its kernels with no released "
        "torch",
        "import",
    )
    case("a100", "--torch ==2.9.1 --with vllm", {"torch": "2.9.1+cu128", "vllm": "0.16.0"}, "")
    case(
        "a100",
        "--torch ==2.8.0 --with xformers",
        {"torch": "2.8.0+cu128", "xformers": "0.0.32.post2"},
        "",
    )
    return out


@pytest.mark.parametrize(("machine", "args", "want"), cases())
def test_ten_machines(
    capsys: pytest.CaptureFixture[str], machine: str, args: list[str], want: dict[str, str] | str
) -> None:
    code, doc = suggest(capsys, machine, *args)
    if isinstance(want, str):
        assert code == 1
        assert want in refused(doc)
        return
    assert code == 0, doc["hints"]
    assert chosen(doc) == want


def test_hints_sum_up_the_history(capsys: pytest.CaptureFixture[str]) -> None:
    """A hint names the deciding gate and a few releases, never the whole history."""
    code, doc = suggest(capsys, "rtx3090", "--with", "flash-attn")
    assert code == 0
    (held,) = [h for h in doc["hints"] if "held back by flash-attn" in h]
    assert (
        "none of its 35 releases in the database (2.8.3.post2, 2.8.3.post1, 2.8.3, 31 more, "
        "down to 2.3.1.post1) is for torch 2.14.1 (gate: torch" in held
    )
    assert "2.7.4.post1" not in held
    code, doc = suggest(capsys, "a100", "--with", "vllm")
    (held,) = [h for h in doc["hints"] if "held back by vllm" in h]
    # 84 releases (70 placed by their sdists' build configuration): 80 pin another torch;
    # 0.2.2-0.2.4 (torch >=2.1.0, as 0.2.5) are built against the default-index torch build
    assert "its 83 other releases with wheels: gate torch (80), default-build (3)" in held
    gates = [g for r in doc["rejected"] for g in r.get("gates", [])]
    assert any(g["values"].get("by") == "torch (80), cudart (3)" for g in gates)
