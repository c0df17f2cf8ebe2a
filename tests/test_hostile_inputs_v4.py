"""Issue 36's classes tried again as an attacker and a new user would: node lists, `fleet
report`'s inputs, project and user configuration, the environment, locks read back. Each case
ends in a documented exit code and one line, bounded in time and size, nothing raw printed."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import statistics
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_cli

from resolver import catalog as catalog_mod

FIX = Path(__file__).parent / "fixtures"
HEALTHY = FIX / "verify" / "h100_diag" / "healthy.json"


def _result(node: str, tflops: float) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(HEALTHY.read_text(encoding="utf-8"))
    doc["host"]["node"] = node
    doc["benchmark"]["matmul_bf16"]["tflops"] = tflops
    return doc


def test_fleet_report_compares_each_node_with_figures_worked_out_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet of thousands of nodes is read in seconds: each GPU's medians are worked out
    once, not once per node (3,000 results took minutes: quadratic). Counted, not timed."""
    calls = 0
    median = statistics.median

    def counted(values: Any) -> Any:
        nonlocal calls
        calls += 1
        return median(values)

    monkeypatch.setattr(statistics, "median", counted)  # as fleet_report calls it
    results = tmp_path / "results"
    results.mkdir()
    nodes = 300
    for i in range(nodes):
        doc = _result(f"gpu-n{i}", 10.0 if i == 7 else 100.0)
        (results / f"gpu-n{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = run_cli(capsys, "fleet", "report", "--json", str(results))
    assert code == 1, err  # gpu-n7 is slow: named, the others not
    doc = json.loads(out)
    assert [o["node"] for g in doc["groups"] for o in g["outliers"]] == ["gpu-n7"]
    assert 1 <= calls < 10, calls  # per GPU and case, not per node (300 here)


def _one_line_error(code: int, out: str, err: str) -> str:
    """The one error line of a refused input (exit 2), nothing on stdout, no traceback."""
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuresolve: error: "), err
    return lines[0]


def _cluster_spec(tmp_path: Path, key: str, name: str) -> Path:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        f'name: c\npython: "3.12"\nlock: top-level\ntargets:\n  - name: k\n    {key}: {name}\n',
        encoding="utf-8",
    )
    return spec


@pytest.mark.parametrize("where", ["label", "capacity"])
def test_a_node_list_number_past_pythons_limit_is_named_not_advised(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl get nodes -o json` with a 5,000-digit number (a forged node's label or
    capacity) is one line saying so, never Python's `sys.set_int_max_str_digits()` advice."""
    doc = json.loads((FIX / "kubernetes" / "nodes.json").read_text(encoding="utf-8"))
    text = json.dumps(doc)
    big = "9" * 5000
    if where == "label":
        text = text.replace('"nvidia.com/gpu.count": "8"', f'"nvidia.com/gpu.count": {big}', 1)
    else:
        text = text.replace('"nvidia.com/gpu": "8"', f'"nvidia.com/gpu": {big}', 1)
    assert big in text
    (tmp_path / "nodes.json").write_text(text, encoding="utf-8")
    spec = _cluster_spec(tmp_path, "kubernetes", "nodes.json")
    line = _one_line_error(*run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out")))
    assert "nodes.json" in line and "too long" in line, line
    assert "set_int_max_str_digits" not in line and "4300" not in line
    assert not (tmp_path / "out").exists()


LOCK = "--index-url https://download.pytorch.org/whl/cu126\ntorch==2.8.0+cu126\n"


@pytest.mark.parametrize("outside", ["/abs", "../up", "link"])
def test_a_lock_includes_no_file_outside_its_folder(
    outside: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lock from a repository cannot make `verify --lock` read the user's other files and
    print them (`-r ~/.git-credentials` printed its first line, token and all, in the error):
    an include resolving outside the named lock's folder (absolute, `..`, a link) is refused
    before it is read."""
    secret = tmp_path / "home" / ".git-credentials"
    secret.parent.mkdir()
    secret.write_text("https://me:s3cr3t-token@git.example\n", encoding="utf-8")
    repo = tmp_path / "repo"
    repo.mkdir()
    target = {"/abs": str(secret), "../up": "../home/.git-credentials", "link": "creds.txt"}
    if outside == "link":
        (repo / "creds.txt").symlink_to(secret)
    lock = repo / "requirements.txt"
    lock.write_text(f"{LOCK}-r {target[outside]}\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "verify", "--lock", str(lock))
    line = _one_line_error(code, out, err)
    assert "outside the lock's folder" in line and "s3cr3t" not in line, line


def test_an_include_beside_or_below_the_lock_is_read(tmp_path: Path) -> None:
    from resolver.readers import lockfile

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "extra.txt").write_text("-r ../base.txt\nnumpy==2.1.0\n", "utf-8")
    (tmp_path / "base.txt").write_text("filelock==3.16.1\n", encoding="utf-8")
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"{LOCK}-r sub/extra.txt\n", encoding="utf-8")
    names = sorted(p.name for p in lockfile.read(lock).pins)
    assert names == ["filelock", "numpy", "torch"]


def test_a_variable_in_a_lock_is_shown_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${VAR}` is expanded where pip expands it (to read the pin), never into what is shown:
    an error quoting the line shows `${TOKEN}`, not the token, and a pin's origin likewise."""
    from resolver.readers import lockfile

    monkeypatch.setenv("TOKEN", "s3cr3t")
    monkeypatch.setenv("TORCH_VERSION", "2.8.0+cu126")
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"{LOCK}numpy==${{TOKEN}}!\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "verify", "--lock", str(lock))
    line = _one_line_error(code, out, err)
    assert "${TOKEN}" in line and "s3cr3t" not in line, line
    lock.write_text(
        "--index-url https://download.pytorch.org/whl/cu126\ntorch==${TORCH_VERSION}\n", "utf-8"
    )
    (pin,) = lockfile.read(lock).pins
    assert (pin.version, pin.variant) == ("2.8.0", "cu126")  # read as pip reads it
    assert pin.line.endswith("torch==${TORCH_VERSION}")  # shown as written


def _torch_wheel(version_py: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/version.py", version_py)
        zf.writestr("torch-2.8.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\n")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("version_py", "said"),
    [
        ("x = " + "-" * 60_000 + "1\n", "nested too deeply"),  # MemoryError in the parser
        ("x = " + "a." * 30_000 + "b\n", "nested too deeply"),  # RecursionError
        ("x = 1" + "+1" * 30_000 + "\n", "nested too deeply"),
        ("__version__ = " + "9" * 5_000 + "\n", "a number far too long"),
    ],
    ids=["unary", "attributes", "sum", "digits"],
)
def test_a_hostile_wheels_version_py_is_the_wheels_error(
    version_py: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch/version.py is read with Python's parser (never run): a chain of operators under
    its 64 KiB cap made the parser raise MemoryError or RecursionError (exit 70)."""
    wheel = tmp_path / "torch-2.8.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(_torch_wheel(version_py))
    line = _one_line_error(*run_cli(capsys, "db", "inspect-wheel", str(wheel)))
    assert "torch/version.py does not parse" in line and said in line, line
    assert "set_int_max_str_digits" not in line


PACKAGE = Path(__file__).parent.parent / "resolver"
NARROW_CATCH = re.compile(r"except \(?[^)\n]*\b(InvalidVersion|InvalidWheelFilename)\b[^)\n]*\)?:")


def test_no_version_parse_of_foreign_text_catches_too_little() -> None:
    """packaging raises ValueError, not InvalidVersion or InvalidWheelFilename, for a version
    with a number past Python's digit limit (`0.0.` and 5,000 nines in a server's METADATA was
    exit 70). Every parse catches ValueError, which both are, so a new one cannot miss it."""
    narrow = [
        f"{path.relative_to(PACKAGE.parent)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if (m := NARROW_CATCH.search(line)) and "ValueError" not in m.group(0)
    ]
    assert narrow == []


@pytest.mark.slow
@pytest.mark.usefixtures("dbupdate_hermetic")
def test_a_servers_metadata_version_past_the_digit_limit_is_a_failed_update(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index's METADATA saying `Version: 0.0.999...` (5,000 digits) for a wheel is that
    index's garbage: `db update` fails (exit 1, one line, the value cut short), never exit 70,
    and the database is left as it was."""
    import ext_index as ext
    from pytorch_index import fixture_routes, serve

    routes = {**fixture_routes(), **ext.extension_routes()}
    name = "xformers-0.0.36-py39-none-manylinux_2_28_x86_64.whl"
    meta = ext.XFORMERS_META.replace(b"Version: 0.0.36", b"Version: 0.0." + b"9" * 5000)
    routes[f"/files/xformers/{name}.metadata"] = (meta, "application/octet-stream")
    page = json.loads(routes["/simple/xformers/"][0])
    for entry in page["files"]:
        if entry["filename"] == name:
            entry["core-metadata"] = {"sha256": hashlib.sha256(meta).hexdigest()}
    routes["/simple/xformers/"] = (json.dumps(page).encode(), routes["/simple/xformers/"][1])
    data = tmp_path / "data"
    shutil.copytree(catalog_mod.shipped_data_dir(), data)
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    with serve(routes) as srv:
        code, _, err = run_cli(
            capsys, "db", "update", "--pytorch-index", srv.url + "/whl",
            "--pypi-index", srv.url + "/simple", "--write-data", str(data),
        )  # fmt: skip
    assert code == 1, err
    failed = [line for line in err.splitlines() if "db update failed" in line]
    assert len(failed) == 1 and "metadata says version" in failed[0], err
    assert len(failed[0]) < 400 and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before


@pytest.mark.parametrize("glibc", ["2.39; evil", "2.39\n--index-url x", "2." + "9" * 5000])
def test_a_host_files_glibc_is_a_glibc_version(
    glibc: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `detect --json` file's glibc went unread into the lock's record (`"glibc": "2.39;
    evil"`), which `lock --check` then called damaged: it is read with the grammar the option
    and the record use, and a file breaking it is one line naming the file."""
    doc = json.loads((FIX / "host" / "h100_driver580" / "detect.json").read_text("utf-8"))
    doc["glibc"] = glibc
    host = tmp_path / "h.json"
    host.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "lock", "--host", str(host), "-o", str(out))
    line = _one_line_error(code, stdout, err)
    assert "h.json" in line and "glibc" in line, line
    assert not out.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_parent_pyproject_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyproject.toml left in a shared folder above the working one (/tmp) by another user
    would choose everyone's PyTorch index: refused as git refuses another user's repository.
    Ours, root's, and the working folder's own (a CI checkout) are read."""
    from resolver.core.errors import UserError
    from resolver.flows import defaults

    shared = tmp_path / "shared"
    work = shared / "me" / "project"
    work.mkdir(parents=True)
    planted = shared / "pyproject.toml"
    planted.write_text(
        '[tool.gpuresolve.defaults]\npytorch-index = "https://mirror.example/whl"\n', "utf-8"
    )
    me, stranger = 1000, 4242
    monkeypatch.setattr(os, "geteuid", lambda: me)
    os.chown(planted, stranger, -1)
    with pytest.raises(UserError, match=r"owned by another user \(uid 4242\)"):
        defaults.read_defaults(work)
    for owner in (me, 0):  # mine or root's: read
        os.chown(planted, owner, -1)
        assert defaults.read_defaults(work)[0] == {"pytorch-index": "https://mirror.example/whl"}
    os.chown(planted, stranger, -1)  # the working folder's own file, whoever owns it: read
    assert defaults.read_defaults(shared)[0] == {"pytorch-index": "https://mirror.example/whl"}


def test_a_spec_pointing_slurm_at_a_users_file_prints_none_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repository's spec may name any file as its `slurm:` node list: one holding a bare
    token (~/.cache/huggingface/token) was quoted in the error ("got 'hf_...'"). The reader
    names a key it expected or found, never the text."""
    secret = tmp_path / "home" / "token"
    secret.parent.mkdir()
    secret.write_text("hf_s3cr3tT0ken\n", encoding="utf-8")
    repo = tmp_path / "repo"
    repo.mkdir()
    spec = _cluster_spec(repo, "slurm", "../home/token")
    line = _one_line_error(*run_cli(capsys, "lock", str(spec), "-o", str(repo / "out")))
    assert "expected NodeName=" in line and "s3cr3t" not in line, line


def test_a_yaml_that_is_no_node_list_is_refused_before_its_items_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spec's `kubernetes:` naming a YAML file of another kind (a kubeconfig) is refused by
    its kind before any item is read: an item's value was quoted in the error."""
    other = tmp_path / "kubeconfig"
    other.write_text(
        "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: s3cr3t-token}\n"
        "items:\n- metadata: {name: s3cr3t-token}\n",
        encoding="utf-8",
    )
    spec = _cluster_spec(tmp_path, "kubernetes", "kubeconfig")
    line = _one_line_error(*run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "out")))
    assert "not a node list (kind 'Config')" in line and "s3cr3t" not in line, line
