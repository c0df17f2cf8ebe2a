"""Observations: the store, db update --read-wheels on a local index, verify, export/import,
suggest --confirm."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_cli, write_db
from wheel_support import WheelServer, real_wheels, serve_wheels, torch_wheel

from resolver import catalog as catalog_mod
from resolver.core.errors import UserError
from resolver.observe import compare, store
from resolver.observe.entries import runtime_entry
from resolver.observe.runtime import record_verified

W280 = "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"
PROBE = Path(__file__).parent / "fixtures" / "verify" / "h100_torch211_cu130" / "probe.json"
SASS_280 = ["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]


def _region(flags: str, lead: bytes = b"\x00\x00\x00") -> bytes:
    return lead + flags.encode() + b"\x00\x00"


def _flags(ccs: list[str]) -> str:
    return " ".join("sm_" + cc.replace(".", "") for cc in ccs)


def _pins(cudnn: str) -> list[str]:
    return [f'nvidia-cudnn-cu12=={cudnn}; platform_system == "Linux"']


def _index_page(server: WheelServer, names: list[str], files: dict[str, bytes]) -> bytes:
    links = "".join(
        f'<a href="{server.url(n)}#sha256={hashlib.sha256(files[n]).hexdigest()}">{n}</a>\n'
        for n in names
    )
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()


def _local_index(server: WheelServer, pad: int = 0) -> None:
    """A default index (/simple/torch/) and a PyTorch index (/whl/<variant>/torch/) for the
    synthetic database: 2.8.0 cu128 (PyPI, as curated), 2.8.0 cu126, 2.8.0 CPU (Windows PyPI,
    Linux), 2.1.0 cu118, and 2.12.0 cu130 whose wheel carries sm_70 the database lacks."""
    wheels = {
        # the default index: untagged names
        "torch-2.8.0-cp310-cp310-manylinux_2_28_x86_64.whl": torch_wheel(
            "2.8.0+cu128", "12.8", _region(_flags(SASS_280)), requires=_pins("9.10.2.21"),
            pad=pad,
        ),
        "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl": b"not read: a larger Python tag",
        "torch-2.8.0-cp310-cp310-win_amd64.whl": torch_wheel("2.8.0+cpu", None, None),
        "torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl": torch_wheel(
            "2.12.0+cu130", "13.0",
            _region(_flags(["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"])), pad=pad,
        ),
        # the PyTorch index: tagged names
        "torch-2.8.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl": torch_wheel(
            "2.8.0+cu126", "12.6", _region(_flags(["6.0", "7.0", "7.5", "8.0", "8.6", "9.0"])),
            pad=pad,
        ),
        "torch-2.8.0+cu126-cp310-cp310-win_amd64.whl": torch_wheel(
            "2.8.0+cu126", "12.6",
            _region(_flags(["6.1", "7.0", "7.5", "8.0", "8.6", "9.0"])),
            windows=True,
        ),
        "torch-2.8.0+cpu-cp310-cp310-manylinux_2_28_x86_64.whl": torch_wheel(
            "2.8.0+cpu", None, None
        ),
    }  # fmt: skip
    server.files.update(wheels)
    pypi = [n for n in wheels if "+" not in n]
    server.files["simple/torch/"] = _index_page(server, pypi, wheels)
    for variant in ("cu126", "cpu"):
        names = [n for n in wheels if f"+{variant}-" in n]
        server.files[f"whl/{variant}/torch/"] = _index_page(server, names, wheels)


def _db(tmp_path: Path, synth_raw: dict[str, Any]) -> Path:
    return write_db(tmp_path / "db", copy.deepcopy(synth_raw))


def _read_wheels(
    capsys: pytest.CaptureFixture[str], db: Path, server: WheelServer, *extra: str
) -> tuple[int, str, str]:
    return run_cli(
        capsys, "db", "update", "--read-wheels", "--write-data", str(db),
        "--pytorch-index", server.url("whl"), "--pypi-index", server.url("simple"),
        "--timeout", "5", *extra,
    )  # fmt: skip


# --- the store -----------------------------------------------------------------------------------


def test_store_round_trip_and_merge(tmp_path: Path) -> None:
    entry = {
        "wheel": W280,
        "sha256": "b" * 64,
        "read": "2026-11-24",
        "torch": "2.8.0",
        "variant": "cu128",
        "platform": "linux-x86_64",
        "sass": SASS_280,
        "ptx": [],
        "cudnn": "9.10.2.21",
    }
    path = tmp_path / "observations.yaml"
    assert store.record(path, entry, "observations")[0] == "added"
    assert store.record(path, entry, "observations")[0] == "same"
    other = {**entry, "sass": ["9.0"]}
    assert store.record(path, other, "observations")[0] == "differs"
    doc = store.load(path)
    assert len(doc.wheels) == 2 and doc.wheels[0]["sass"] == SASS_280
    assert store.written_by_us(path)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("observations:\n  - {wheel: x.whl}\n", "missing sha256"),
        ("observations: []\nhosts: [a]\n", "only"),
        ("a: &x [1]\nb: *x\n", "only"),  # aliases are bounded, not banned
        ("x: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
         + "".join(f"x{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 10)}]\n"
                   for i in range(7)), "expands to more than"),
        ("observations: []\nobservations: []\n", "given twice"),
        ("observations: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels"),
        ("runtime:\n  - {torch: '2.8.0', variant: cu128, platform: linux-x86_64, "
         "version: '2.8.0+cu128', seen: '2026-11-24', hostname: box}\n", "unknown key"),
        ("runtime:\n  - {torch: '2.8.0', variant: cu128, platform: linux-x86_64, "
         "version: '2.8.0+cu128', seen: '2026-11-24', sass: ['sm_90']}\n", "compute capab"),
    ],
)  # fmt: skip
def test_store_refuses_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "o.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        store.load(path)


# --- comparison ----------------------------------------------------------------------------------


def test_compare_reads_both_ptx_forms(synth_raw: dict[str, Any]) -> None:
    doc = copy.deepcopy(synth_raw["torch.yaml"])
    cu118 = doc["series"][0]["variants"][1]["platforms"]["linux-x86_64"]
    cu118["ptx"] = {"ccs": ["9.0"], "source": ["PRIM"], "grade": "official"}
    curated = compare.find(doc, "2.1.0", "cu118", "linux-x86_64")
    assert curated is not None and curated.ptx == ("9.0",)
    entry = {"torch": "2.1.0", "variant": "cu118", "platform": "linux-x86_64",
             "sass": ["6.0", "7.0", "8.0", "8.6", "9.0"], "ptx": []}  # fmt: skip
    found = compare.contradictions(entry, curated)
    assert [c["fact"] for c in found] == ["ptx"] and found[0]["value"] == "9.0"
    # the default index's build on a platform, when no variant is named
    assert compare.find(doc, "2.8.0", None, "linux-x86_64").variant == "cu128"  # type: ignore[union-attr]


# --- db update --read-wheels against a local index -----------------------------------------------


def test_read_wheels_records_observations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    before = (db / "torch.yaml").read_bytes()
    with serve_wheels({}) as server:
        _local_index(server)
        code, out, _err = _read_wheels(capsys, db, server)
        wheel_requests = [p for p, _r in server.log if p.endswith(".whl")]
    assert code == 0, out
    assert (db / "torch.yaml").read_bytes() == before  # curated facts are never edited
    doc = store.load(db / "observations.yaml")
    by_build = {(e["torch"], e["variant"], e["platform"]): e for e in doc.wheels}
    cu128 = by_build[("2.8.0", "cu128", "linux-x86_64")]
    assert cu128["wheel"] == "torch-2.8.0-cp310-cp310-manylinux_2_28_x86_64.whl"  # smallest tag
    assert cu128["sass"] == SASS_280 and cu128["ptx"] == [] and "contradicts" not in cu128
    assert cu128["cudnn"] == "9.10.2.21" and len(cu128["sha256"]) == 64
    assert by_build[("2.8.0", "cpu", "windows-x86_64")]["version"] == "2.8.0+cpu"
    assert "sass" not in by_build[("2.8.0", "cpu", "windows-x86_64")]
    # the contradiction: 2.12.0 cu130 carries sm_70, which the database lacks
    cu130 = by_build[("2.12.0", "cu130", "linux-x86_64")]
    assert cu130["contradicts"][0]["fact"] == "sass"
    assert cu130["contradicts"][0]["value"] == "7.5 8.0 8.6 9.0 10.0 12.0"
    assert "contradiction: torch 2.12.0 cu130 linux-x86_64: sass observed 7.0 7.5" in out
    # a Windows cu126 wheel with sm_61: the curated list (secondary) is contradicted
    assert by_build[("2.8.0", "cu126", "windows-x86_64")]["contradicts"][0]["fact"] == "sass"
    # builds with no wheel on the index are listed, not invented
    assert "not on the index: torch 2.1.0" in out or "index unreachable" in out
    assert "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl" not in wheel_requests
    # a second run reads nothing it has observed
    with serve_wheels({}) as server:
        _local_index(server)
        code, out, _err = _read_wheels(capsys, db, server)
        assert not [p for p, _r in server.log if p.endswith(".whl")]
    assert code == 0 and "(6 already observed)" in out


def test_read_wheels_budget_keeps_what_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    with serve_wheels({}) as server:
        _local_index(server)  # ~0.1 MiB per wheel: a 1 MiB budget stops after the first
        code, out, _err = _read_wheels(capsys, db, server, "--budget", "1")
    assert code == 0
    first = store.load(db / "observations.yaml")
    assert 0 < len(first.wheels) < 6
    assert "budget reached" in out
    with serve_wheels({}) as server:
        _local_index(server)
        code, out, _err = _read_wheels(capsys, db, server, "--budget", "100")
    assert code == 0
    assert len(store.load(db / "observations.yaml").wheels) == 6


@pytest.mark.slow
def test_read_wheels_offline_is_exit_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    with serve_wheels({}, mode="error") as server:
        code, _out, err = _read_wheels(capsys, db, server)
    assert code == 1 and "unreachable" in err
    assert not (db / "observations.yaml").exists()


def test_read_wheels_a_bad_wheel_fails_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    with serve_wheels({}) as server:
        _local_index(server)
        name = "torch-2.8.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl"
        data = server.files[name]
        server.files[name] = data[: len(data) // 2]  # truncated on the server
        code, out, _err = _read_wheels(capsys, db, server)
    assert code == 0
    assert "failed: torch 2.8.0 cu126 linux-x86_64" in out
    assert len(store.load(db / "observations.yaml").wheels) == 5  # the others are kept


def test_read_wheels_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    code, out, _err = run_cli(
        capsys, "db", "update", "--read-wheels", "--dry-run", "--write-data", str(db),
        "--pypi-index", "http://127.0.0.1:9/simple",
    )  # fmt: skip
    assert code == 0 and "torch 2.12.0 cu130 linux-x86_64 (default index)" in out
    assert not (db / "observations.yaml").exists()


# --- verify --------------------------------------------------------------------------------------


def _probe() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PROBE.read_text())
    return data


def test_runtime_entry_keeps_only_the_build() -> None:
    entry = runtime_entry(_probe(), seen="2026-11-24")
    assert entry is not None
    assert entry["version"] == "2.11.0+cu130" and entry["platform"] == "linux-x86_64"
    assert entry["python"] == "3.12" and entry["cuda"] == "13.0"
    assert entry["sass"] == ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"] and entry["ptx"] == []
    assert (entry["cudnn"], entry["nccl"]) == ("9.19.0", "2.28.9")
    text = yaml.safe_dump(entry)
    for machine_fact in ("/opt", "H100", "6.18", "580", "venv", "fc-v657"):
        assert machine_fact not in text


def test_verify_records_and_compares(tmp_path: Path, synth_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(synth_raw)
    series = raw["torch.yaml"]["series"]
    series.append(
        {
            "minor": "2.11",
            "python": {"linux-x86_64": ["3.12"]},
            "releases": [{"version": "2.11.0", "torchvision": None, "torchaudio": None,
                          "source": ["PRIM"]}],
            "variants": [{"name": "cu130", "cuda": "13.0", "source": ["PRIM"],
                          "cudnn": {"version": "9.17.1.4", "source": ["PRIM"]},
                          "platforms": {"linux-x86_64": {"sass": ["7.5", "8.0", "8.6", "9.0",
                                                                  "10.0", "12.0"],
                                                         "ptx": [], "source": ["PRIM"]}}}],
        }
    )  # fmt: skip
    db = write_db(tmp_path / "db", raw)
    target = tmp_path / "user" / "observations.yaml"
    rec = record_verified(_probe(), target, db)
    assert rec.status == "added"
    assert [c["fact"] for c in rec.entry["contradicts"]] == ["cudnn"]  # type: ignore[index]
    assert any("cudnn observed 9.19.0; the database says 9.17.1.4" in line for line in rec.lines)
    assert record_verified(_probe(), target, db).status == "same"
    assert len(store.load(target).runtime) == 1
    assert record_verified({"torch": {"imported": False}}, target, db).status == "none"


def test_verify_records_into_the_user_database() -> None:
    from resolver.flows import verify as verify_flow

    rec = verify_flow.record(_probe(), verify_flow.curated_builds())
    assert rec.status == "added"
    path = catalog_mod.user_data_dir() / store.FILE
    assert store.load(path).runtime[0]["version"] == "2.11.0+cu130"


# --- export / import -----------------------------------------------------------------------------


def test_export_import_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = catalog_mod.user_data_dir() / store.FILE
    rec = real_wheels()[W280]
    wheel = {
        "wheel": W280, "sha256": rec["sha256"], "read": "2026-11-24", "torch": "2.8.0",
        "variant": "cu128", "platform": "linux-x86_64", "sass": SASS_280, "ptx": [],
    }  # fmt: skip
    store.record(user, wheel, "observations")
    runtime = runtime_entry(_probe(), seen="2026-11-24")
    assert runtime is not None
    store.record(user, runtime, "runtime")
    out_file = tmp_path / "share.yaml"
    code, out, err = run_cli(capsys, "db", "export-observations", str(out_file))
    assert code == 0 and "1 wheel and 1 runtime" in out
    assert store.load(out_file).wheels == store.load(user).wheels
    # import into a fresh user database
    user.unlink()
    code, out, err = run_cli(capsys, "db", "import", str(out_file))
    assert code == 0, err
    assert "imported 2 new observation(s)" in out
    again = store.load(user)
    assert again.wheels[0]["sha256"] == rec["sha256"] and again.runtime[0]["python"] == "3.12"
    code, out, _err = run_cli(capsys, "db", "import", str(out_file))
    assert "imported 0 new observation(s)" in out and "2 known" in out


def test_export_refuses_a_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    foreign = tmp_path / "notes.yaml"
    foreign.write_text("my notes\n")
    code, _out, err = run_cli(capsys, "db", "export-observations", str(foreign))
    assert code == 2 and "not written by gpuresolve" in err
    assert foreign.read_text() == "my notes\n"


def test_import_refuses_invalid_and_unknown_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("observations:\n  - {wheel: 'torch-2.8.0-x.whl', sha256: nothex}\n")
    code, _out, err = run_cli(capsys, "db", "import", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1
    unknown = tmp_path / "unknown.yaml"
    entry = {"wheel": "torch-9.9.9-cp312-cp312-manylinux_2_28_x86_64.whl", "sha256": "a" * 64,
             "read": "2026-11-24", "torch": "9.9.9", "variant": "cu999",
             "platform": "linux-x86_64", "sass": ["9.0"]}  # fmt: skip
    unknown.write_text(yaml.safe_dump({"observations": [entry]}))
    code, out, _err = run_cli(capsys, "db", "import", str(unknown))
    assert code == 0 and "refused: torch 9.9.9 cu999 linux-x86_64: not in the database" in out
    assert not store.load(catalog_mod.user_data_dir() / store.FILE).wheels


# --- suggest --confirm ---------------------------------------------------------------------------


def test_suggest_confirm_reads_the_selection(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    synth_raw: dict[str, Any],
) -> None:
    db = _db(tmp_path, synth_raw)
    monkeypatch.setenv(catalog_mod.DATA_ENV, str(db))
    with serve_wheels({}) as server:
        _local_index(server)
        monkeypatch.setenv("PIP_INDEX_URL", server.url("simple"))
        args = ("suggest", "--platform", "linux-x86_64", "--driver", "580.65.06",
                "--gpu", "NVIDIA H100", "--pytorch-index", server.url("whl"), "--json",
                "--confirm")  # fmt: skip
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        data = json.loads(out)
        assert data["confirm"]["status"] == "contradicted"  # 2.12.0 cu130: sm_70 in the wheel
        assert "CONTRADICTION" in err
        code, out, err = run_cli(capsys, *args)
        assert json.loads(out)["confirm"]["status"] == "observed-before"
    user = store.load(catalog_mod.user_data_dir() / store.FILE)
    assert [(e["torch"], e["variant"]) for e in user.wheels] == [("2.12.0", "cu130")]


def test_suggest_confirm_offline_answers_as_before(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    synth_raw: dict[str, Any],
) -> None:
    db = _db(tmp_path, synth_raw)
    monkeypatch.setenv(catalog_mod.DATA_ENV, str(db))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    args = ("suggest", "--platform", "linux-x86_64", "--driver", "580.65.06", "--gpu",
            "NVIDIA H100", "--pytorch-index", "http://127.0.0.1:9/whl", "--json")  # fmt: skip
    code, plain, _err = run_cli(capsys, *args)
    code2, out, err = run_cli(capsys, *args, "--confirm")
    assert code == code2 == 0 and "could not be confirmed" in err
    confirmed = json.loads(out)
    assert confirmed.pop("confirm")["status"] == "unconfirmed"
    assert confirmed == json.loads(plain)


def test_read_wheels_names_releases_new_in_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth_raw: dict[str, Any]
) -> None:
    db = _db(tmp_path, synth_raw)
    with serve_wheels({}) as server:
        _local_index(server)
        newer = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
        older = "torch-1.13.1-cp310-cp310-manylinux1_x86_64.whl"
        server.files[newer] = server.files[older] = b"never read"
        names = [n for n in server.files if n.endswith(".whl") and "+" not in n]
        server.files["simple/torch/"] = _index_page(server, names, server.files)
        code, out, _err = _read_wheels(capsys, db, server)
        assert newer not in [p for p, _r in server.log]
    assert code == 0
    assert "new in the index: torch 2.13.0 (not in the database" in out
    assert "1.13.1" not in out


def _fake_probe_python(tmp_path: Path) -> Path:
    import stat

    compact = tmp_path / "probe.json"  # the probe prints its result as one JSON line
    compact.write_text(json.dumps(_probe()), encoding="utf-8")
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\ncat '{compact}'\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif(not Path("/bin/sh").exists(), reason="a #! script stands in for Python")
def test_verify_cli_records_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from resolver.flows import verify as verify_flow

    monkeypatch.setattr(verify_flow, "detect", lambda catalog: None)
    python = _fake_probe_python(tmp_path)
    user = catalog_mod.user_data_dir() / store.FILE
    _code, out, _err = run_cli(capsys, "verify", "--python", str(python), "--json", "--no-record")
    assert json.loads(out)["observation"] is None and not user.exists()
    _code, out, err = run_cli(capsys, "verify", "--python", str(python), "--json")
    observation = json.loads(out)["observation"]
    assert observation["status"] == "added"
    assert observation["build"]["version"] == "2.11.0+cu130"
    assert store.load(user).runtime[0]["sass"] == ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    _code, _out, err = run_cli(capsys, "verify", "--python", str(python))
    assert "note: observed: torch 2.11.0+cu130 linux-x86_64 recorded in" in err


def test_lock_confirm_offline_writes_as_before(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    synth_raw: dict[str, Any],
) -> None:
    db = _db(tmp_path, synth_raw)
    monkeypatch.setenv(catalog_mod.DATA_ENV, str(db))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    args = ("lock", "--platform", "linux-x86_64", "--driver", "580.65.06", "--gpu",
            "NVIDIA H100", "--python", "3.12", "--pytorch-index", "http://127.0.0.1:9/whl",
            "--format", "requirements")  # fmt: skip
    code, _out, _err = run_cli(capsys, *args, "-o", str(tmp_path / "plain"))
    code2, _out, err = run_cli(capsys, *args, "-o", str(tmp_path / "confirmed"), "--confirm")
    assert code == code2 == 0 and "could not be confirmed" in err
    plain = (tmp_path / "plain" / "requirements.txt").read_text()
    assert (tmp_path / "confirmed" / "requirements.txt").read_text() == plain
