"""`--with xformers/flash-attn/vllm/...` on recorded facts (data/extensions.yaml): issue 32's
five machines, each a set that runs or a refusal naming the package and why."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_support import chosen, run_cli, suggest_json

MACHINES = {
    "rtx3090": ["--gpu", "RTX 3090", "--driver", "535.104.05"],
    "rtx5090": ["--gpu", "RTX 5090", "--driver", "570.86.16"],
    "h100": ["--gpu", "H100", "--driver", "580.65.06"],
    "v100": ["--gpu", "V100", "--driver", "535.104.05"],
    "gh200": ["--gpu", "GH200", "--driver", "580.65.06", "--platform", "linux-aarch64"],
}


def suggest(
    capsys: pytest.CaptureFixture[str], machine: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    return suggest_json(capsys, *MACHINES[machine], "--python", "3.12", *extra)


@pytest.mark.parametrize(
    ("machine", "want"),
    [
        ("rtx3090", {"torch": "2.14.1+cu126", "xformers": "0.0.35"}),
        ("rtx5090", {"torch": "2.11.0+cu128", "xformers": "0.0.35"}),
        ("h100", {"torch": "2.14.1+cu126", "xformers": "0.0.35"}),
    ],
)
def test_xformers_needs_a_cuda12_torch(
    capsys: pytest.CaptureFixture[str], machine: str, want: dict[str, str]
) -> None:
    code, doc = suggest(capsys, machine, "--with", "xformers")
    assert code == 0
    assert chosen(doc) == want
    if machine == "h100":  # 2.15.0 has only CUDA 13 builds: xformers (CUDA 12.8) holds it back
        assert any("torch 2.15.0 is held back by xformers" in h for h in doc["hints"])


@pytest.mark.parametrize("machine", ["rtx3090", "rtx5090", "h100"])
def test_flash_attn_from_release_downloads(
    capsys: pytest.CaptureFixture[str], machine: str
) -> None:
    code, doc = suggest(capsys, machine, "--with", "flash-attn")
    assert code == 0
    sel = doc["selection"]
    assert sel["torch"] == "2.8.0"
    (fa,) = sel["extensions"]
    assert fa["version"] == "2.8.3.post1" and fa["grade"] == "build-config"
    assert fa["requirement"].endswith("+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    assert any("2.8.3.post2 has only a source distribution" in w for w in sel["warnings"])


@pytest.mark.parametrize("machine", ["rtx3090", "rtx5090", "h100", "v100"])
def test_xformers_with_flash_attn_meet_on_an_older_torch(
    capsys: pytest.CaptureFixture[str], machine: str
) -> None:
    """With the history (issue 38) the two share torch 2.8: xformers 0.0.32.post2 is built for
    it, flash-attn's newest wheels stop there. A V100 has no flash-attn kernels at all."""
    code, doc = suggest(capsys, machine, "--with", "xformers", "--with", "flash-attn")
    if machine == "v100":
        assert code == 1 and doc["selection"] is None
        assert any(
            h.startswith("flash-attn cannot run on this target: flash-attn 2.8.3.post1 has no")
            for h in doc["hints"]
        )
        return
    assert code == 0
    got = chosen(doc)
    assert got["torch"].startswith("2.8.0+") and got["xformers"] == "0.0.32.post2"
    assert got["flash-attn"] == "2.8.3.post1"


def test_gh200_refuses_x86_only_packages(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = suggest(capsys, "gh200", "--with", "xformers", "--with", "flash-attn")
    assert code == 1
    assert (
        "xformers cannot run on this target: xformers 0.0.35 has no linux-aarch64 wheel"
        in "\n".join(doc["hints"])
    )
    assert (
        "flash-attn cannot run on this target: flash-attn 2.8.3.post1 has no linux-aarch64 wheel"
        in "\n".join(doc["hints"])
    )


@pytest.mark.parametrize("machine", ["h100", "gh200"])
def test_vllm_pins_torch(capsys: pytest.CaptureFixture[str], machine: str) -> None:
    code, doc = suggest(capsys, machine, "--with", "vllm")
    assert code == 0
    assert chosen(doc) == {"torch": "2.14.0+cu130", "vllm": "0.33.0"}
    assert any(h.startswith("torch 2.15.0 is held back by vllm") for h in doc["hints"])


def test_vllm_on_volta_takes_the_newest_release_with_its_kernels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vllm 0.33.0 has no sm_70 kernels; 0.19.1 (the history, read whole) has them."""
    code, doc = suggest(capsys, "v100", "--with", "vllm")
    assert code == 0
    assert chosen(doc) == {"torch": "2.10.0+cu128", "vllm": "0.19.1"}


def test_vllm_on_an_old_driver_takes_a_cuda12_release(capsys: pytest.CaptureFixture[str]) -> None:
    """R570 runs no CUDA 13 torch: vllm 0.19.1 (libcudart.so.12, torch 2.10.0) runs there."""
    code, doc = suggest(capsys, "rtx5090", "--with", "vllm")
    assert code == 0
    assert chosen(doc) == {"torch": "2.10.0+cu128", "vllm": "0.19.1"}
    assert any("needs driver >= 580" in h for h in doc["hints"])


@pytest.mark.parametrize(
    ("machine", "torch", "triton"),
    [
        ("h100", "2.15.0+cu132", "3.9.0"),
        ("gh200", "2.15.0+cu132", "3.9.0"),
        ("v100", "2.14.1+cu126", "3.8.0"),
        ("rtx3090", "2.14.1+cu126", "3.8.0"),
    ],
)
def test_pure_and_per_cuda_packages(
    capsys: pytest.CaptureFixture[str], machine: str, torch: str, triton: str
) -> None:
    code, doc = suggest(
        capsys, machine, "--with", "bitsandbytes", "--with", "torchao", "--with", "triton"
    )
    assert code == 0
    got = chosen(doc)
    assert (got["torch"], got["triton"], got["torchao"]) == (torch, triton, "0.18.0")
    bnb = next(e for e in doc["selection"]["extensions"] if e["package"] == "bitsandbytes")
    assert bnb["cuda"] == doc["selection"]["cuda"]  # the library of torch's own CUDA
    ao = next(e for e in doc["selection"]["extensions"] if e["package"] == "torchao")
    assert ao["device_code"] is False and ao["coverage"] == []


def test_with_specifier_and_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "suggest", *MACHINES["h100"], "--python", "3.12", "--with", "xformers==0.0.34"
    )
    assert code == 0
    assert "  then: pip install xformers==0.0.34" in out
    assert "install: torch 2.10.0" in out


def test_unknown_extension_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    from resolver import catalog as catalog_mod

    code, _out, err = run_cli(capsys, "suggest", "--with", "apex")
    listed = ", ".join(catalog_mod.load().extensions)  # extensions.yaml's, in its order
    assert code == 2 and "xformers" in listed and listed in err


def test_explain_and_db_show_name_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "suggest",
        *MACHINES["h100"],
        "--python",
        "3.12",
        "--with",
        "vllm",
        "--explain",
        "torch==2.15.0+cu132",
    )
    assert code == 1
    # the closest miss: vllm 0.2.5 admits torch 2.15 but links libcudart.so.12 (the history)
    assert "  FAIL packages: vllm 0.2.5 links libcudart.so.12" in out
    code, out, _ = run_cli(capsys, "db", "show", "--with", "flash-attn")
    assert code == 0 and "  flash-attn 2.8.3.post2: source distribution only" in out
    code, out, _ = run_cli(capsys, "db", "show", "--json")
    packages = json.loads(out)["packages"]
    assert set(packages) == {"xformers", "flash-attn", "bitsandbytes", "torchao", "vllm", "triton"}
    assert packages["vllm"][0]["builds"][0]["torch"] == "==2.14.0"
