"""A URL's login is used for the request and never written or shown (issue 36).

Every route a login can come by (options, variables, pip's and gpuresolve's configuration) and
every place it could leave by (each lock file, the cluster files, suggest's text and JSON, -v,
`install --dry-run`, `lock --check`'s diff, the errors of the HTTP client, `db update` and
`db inspect-wheel`) is run with one distinctive secret, and every file written and every byte
printed is searched for it. The requests themselves get the login: a local index that answers
401 without it serves the lock (our HTTP client, and uv's closure through a private netrc).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import assert_schema, run_cli, write_db
from closure_index import ClosureIndex, serve_closure_index
from lock_support import lock_raw
from pytorch_index import closed_port

from resolver.cli import main
from resolver.core import secrets
from resolver.io import credentials
from resolver.io.http import Client, FetchError

SECRET = "Zq9-sEcReT-41xv"  # searched for in every file and output below
USER = "robot"
GPU = ("--gpu", "8.6", "--driver", "570.124.06", "--python", "3.12", "--platform", "linux-x86_64")
MAC = ("--platform", "macos-arm64", "--python", "3.12", "--no-gpu")
MIRROR = f"https://{USER}:{SECRET}@mirror.example/whl"
DEFAULT = f"https://{SECRET}@idx.example/simple"  # a token alone as the user information
CHANNEL = f"https://conda.example/t/{SECRET}/main"
FORMATS = ("--format", "requirements", "--format", "conda", "--format", "uv")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for var in ("GPURESOLVE_PYTORCH_INDEX", "GPURESOLVE_DEFAULT_INDEX", "GPURESOLVE_CONDA_CHANNEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # the user's own netrc: none
    credentials.forget()
    yield
    credentials.forget()


def leaks(*texts: str, folder: Path | None = None) -> list[str]:
    """Where the secret appears: in any of ``texts``, or any file under ``folder``."""
    found = [f"output {i}" for i, text in enumerate(texts) if SECRET in text]
    for path in sorted(folder.rglob("*")) if folder is not None else ():
        if path.is_file() and SECRET.encode() in path.read_bytes():
            found.append(str(path))
    return found


# --- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "redacted", "public"),
    [
        (
            "https://u:p4ss@h.example/simple",
            "https://u:****@h.example/simple",
            "https://h.example/simple",
        ),
        (
            "https://tok@h.example:8443/s",
            "https://****@h.example:8443/s",
            "https://h.example:8443/s",
        ),
        (
            "https://h.example/t/tk-1/main",
            "https://h.example/t/****/main",
            "https://h.example/main",
        ),
        ("https://h.example/simple", "https://h.example/simple", "https://h.example/simple"),
        (
            "https://${U}:${T}@h.example/s",
            "https://${U}:${T}@h.example/s",
            "https://${U}:${T}@h.example/s",
        ),
        ("https://${U}:raw@h.example/s", "https://${U}:****@h.example/s", "https://h.example/s"),
        ("https://u:p@ss@h.example/s", "https://u:****@h.example/s", "https://h.example/s"),
        (
            "https://robot:${T}@h.example/s",
            "https://robot:${T}@h.example/s",
            "https://robot:${T}@h.example/s",
        ),
    ],
)
def test_one_rule_masks_as_pip_and_records_without_the_login(
    url: str, redacted: str, public: str
) -> None:
    assert secrets.redact(url) == redacted
    assert secrets.redact(f"cannot read {url}: HTTP 401") == f"cannot read {redacted}: HTTP 401"
    assert secrets.public(url) == public
    assert secrets.expand("https://${U}:${T}@h/s", {"U": "me", "T": "x"}) == "https://me:x@h/s"
    assert secrets.expand("https://${U}@h/s", {}) == "https://${U}@h/s"  # unset: as pip, kept


# --- files and printers --------------------------------------------------------------------------


def _lock(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[str, str]:
    code, stdout, err = run_cli(capsys, "lock", *args, *FORMATS, "-o", str(out), "-v")
    assert code == 0, stdout + err
    return stdout, err


SOURCES = ["option", "variable", "pyproject", "user-file"]


@pytest.mark.parametrize("source", SOURCES)
def test_pytorch_mirror_and_channel_logins_never_reach_a_file_or_output(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    source: str,
) -> None:
    args: list[str] = [*GPU, "--format", "dockerfile"]
    given = ["--pytorch-index", MIRROR] if source == "option" else []
    if source == "option":
        args += [*given, "--channel", CHANNEL]
    elif source == "variable":
        monkeypatch.setenv("GPURESOLVE_PYTORCH_INDEX", MIRROR)
        monkeypatch.setenv("GPURESOLVE_CONDA_CHANNEL", CHANNEL)
    else:
        table = "[tool.gpuresolve.defaults]\n" if source == "pyproject" else ""
        text = f'{table}pytorch-index = "{MIRROR}"\nchannel = "{CHANNEL}"\n'
        project = tmp_path / "project"
        project.mkdir()
        if source == "pyproject":
            (project / "pyproject.toml").write_text(text, encoding="utf-8")
        else:
            (tmp_path / "user.toml").write_text(text, encoding="utf-8")
            monkeypatch.setenv("GPURESOLVE_CONFIG", str(tmp_path / "user.toml"))
        monkeypatch.chdir(project)
    out = tmp_path / "out"
    stdout, err = _lock(capsys, out, *args)
    assert not leaks(stdout, err, folder=out)
    requirements = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "--index-url https://mirror.example/whl/cu126\n" in requirements
    assert "# login: https://mirror.example/whl is written without its login" in requirements
    environment = (out / "environment.yml").read_text(encoding="utf-8")
    assert "  - https://conda.example/main\n" in environment
    assert "# login: the channel https://conda.example/main is written without its token" in (
        environment
    )
    pyproject = (out / "pyproject.toml").read_text(encoding="utf-8")
    assert 'url = "https://mirror.example/whl/cu126"' in pyproject
    assert "UV_INDEX_PYTORCH_CU126_USERNAME and _PASSWORD" in pyproject
    # suggest, text and JSON: the login masked as pip masks it
    code, text, err = run_cli(capsys, "suggest", *GPU, *given, "-vv")  # -vv: where from
    assert code == 0 and not leaks(text, err)
    assert f"--index-url https://{USER}:****@mirror.example/whl/cu126" in text
    code, doc, err = run_cli(capsys, "suggest", *GPU, *given, "--json")
    assert code == 0 and not leaks(doc, err)
    data = json.loads(doc)
    assert data["selection"]["index_url"] == f"https://{USER}:****@mirror.example/whl/cu126"
    assert_schema("suggest", data)


@pytest.mark.parametrize("source", ["option", "variable", "PIP_INDEX_URL", "pip-config"])
def test_default_index_login_never_reaches_a_file_or_output(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    source: str,
) -> None:
    args: list[str] = list(MAC)
    if source == "option":
        args += ["--default-index", DEFAULT]
    elif source == "variable":
        monkeypatch.setenv("GPURESOLVE_DEFAULT_INDEX", DEFAULT)
    elif source == "PIP_INDEX_URL":
        monkeypatch.setenv("PIP_INDEX_URL", DEFAULT)
    else:
        (tmp_path / "pip.conf").write_text(f"[global]\nindex-url = {DEFAULT}\n", encoding="utf-8")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    out = tmp_path / "out"
    stdout, err = _lock(capsys, out, *args)
    assert not leaks(stdout, err, folder=out)
    assert "packages outside the PyTorch index: https://****@idx.example/simple" in err  # -v
    requirements = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "--index-url https://idx.example/simple\n" in requirements
    assert "# login: https://idx.example/simple is written without its login" in requirements
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(out))  # no login given: current
    assert code == 0 and not leaks(err)


def test_variables_are_kept_as_written_and_never_expanded_into_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GR_USER", USER)
    monkeypatch.setenv("GR_TOKEN", SECRET)
    written = "https://${GR_USER}:${GR_TOKEN}@mirror.example/whl"
    out = tmp_path / "out"
    stdout, err = _lock(capsys, out, *GPU, "--pytorch-index", written)
    assert not leaks(stdout, err, folder=out)
    requirements = (out / "requirements.txt").read_text(encoding="utf-8")
    assert f"--index-url {written}/cu126\n" in requirements  # pip expands them when it installs
    pyproject = (out / "pyproject.toml").read_text(encoding="utf-8")
    assert 'url = "https://mirror.example/whl/cu126"' in pyproject  # uv: its own variables
    code, text, err = run_cli(capsys, "suggest", *GPU, "--pytorch-index", written, "--json")
    assert code == 0 and not leaks(text, err) and written in text
    code, _, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 0 and not leaks(err)
    # a drift diff shows the line as written
    path = out / "requirements.txt"
    path.write_text(path.read_text().replace("torch==", "torch>="), encoding="utf-8")
    code, text, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 1 and not leaks(text, err)


def test_check_of_a_login_lock_is_current_with_or_without_the_login(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _lock(capsys, out, *GPU, "--pytorch-index", MIRROR, "--channel", CHANNEL)
    record = json.loads(
        next(
            ln.split(": ", 1)[1]
            for ln in (out / "requirements.txt").read_text().splitlines()
            if ln.startswith("# gpuresolve-inputs:")
        )
    )
    assert record["logins"] == {
        "https://conda.example/main": "token",
        "https://mirror.example/whl": "login",
    }
    for again in ([], ["--pytorch-index", f"https://{USER}:other@mirror.example/whl"]):
        code, stdout, err = run_cli(capsys, "lock", "--check", "-o", str(out), *again)
        assert code == 0, err
        assert "override" not in err and not leaks(stdout, err)


def test_check_diff_of_a_file_holding_a_login_masks_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A lock written before this rule (or edited by hand) holds the login: the diff that
    restores it never prints it."""
    out = tmp_path / "out"
    _lock(capsys, out, *GPU, "--pytorch-index", "https://mirror.example/whl")
    path = out / "requirements.txt"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("https://mirror.example", MIRROR.rsplit("/", 1)[0]))
    code, stdout, err = run_cli(capsys, "lock", "--check", "-o", str(out))
    assert code == 1
    assert not leaks(stdout, err) and f"{USER}:****@mirror.example" in stdout + err
    code, stdout, err = run_cli(capsys, "lock", "--check", "-o", str(out), "--json")
    assert code == 1 and not leaks(stdout, err)


def test_install_dry_run_never_shows_the_login(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import sys

    for extra in ([], ["--json"]):
        code, stdout, err = run_cli(
            capsys,
            "install",
            "--python",
            sys.executable,
            *GPU[:4],
            "--pytorch-index",
            MIRROR,
            "--dry-run",
            *extra,
        )
        assert code == 0, stdout + err
        assert not leaks(stdout, err) and "mirror.example/whl/cu126" in stdout


WHEEL = f"mypkg @ https://{USER}:{SECRET}@files.example/mypkg-1.0-py3-none-any.whl"
CLUSTERS = {
    "slurm": (
        "nodes.txt",
        Path(__file__).parent / "fixtures" / "slurm" / "scontrol_show_node_oneliner.txt",
    ),
    "kubernetes": ("nodes.json", Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"),
}


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_cluster_files_never_hold_the_login(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    """A cluster's lock: per-group files, sbatch scripts or Kubernetes Jobs with their lock in a
    ConfigMap, fleet.yaml, report.md, and what --check prints."""
    name, nodes = CLUSTERS[kind]
    (tmp_path / name).write_bytes(nodes.read_bytes())
    spec = (
        'name: hpc\npython: "3.12"\nlock: top-level\nimage: registry.example/ml/train:1\n'
        f'packages:\n  torch: ">=2.4"\n  pip: [numpy, "{WHEEL}"]\ntargets:\n  - {kind}: {name}\n'
    )
    (tmp_path / "hpc.yaml").write_text(spec, encoding="utf-8")
    monkeypatch.setenv("GPURESOLVE_DEFAULT_INDEX", DEFAULT)
    out = tmp_path / "out"
    argv = ["--pytorch-index", MIRROR, "--channel", CHANNEL, *FORMATS, "-o", str(out), "-v"]
    code, stdout, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), "--split", *argv)
    assert code == 0, stdout + err
    written = {p.name for p in out.rglob("*")}
    job = ".sbatch" if kind == "slurm" else ".yaml"
    assert {"fleet.yaml", "report.md"} <= written
    assert any(n.startswith("verify-") and n.endswith(job) for n in written)
    assert not leaks(stdout, err, folder=out)
    requirements = next(out.rglob("requirements.txt")).read_text()
    assert "idx.example/simple" in requirements
    assert "mypkg @ https://files.example/mypkg-1.0-py3-none-any.whl" in requirements
    assert "# login: https://files.example/mypkg-1.0-py3-none-any.whl is written" in requirements
    check = ["--split", "--check", "--channel", CHANNEL, "-o", str(out), "--json"]
    code, stdout, err = run_cli(capsys, "lock", str(tmp_path / "hpc.yaml"), *check)
    assert code == 0, stdout + err
    assert not leaks(stdout, err)


# --- errors --------------------------------------------------------------------------------------


def test_http_errors_name_the_url_without_its_login() -> None:
    port = closed_port()
    url = credentials.keep(f"http://{USER}:{SECRET}@127.0.0.1:{port}/whl/")
    assert SECRET not in url
    with Client(timeout=2, tries=1) as client, pytest.raises(FetchError) as exc:
        client.get(url)
    assert SECRET not in str(exc.value)
    with pytest.raises(FetchError) as raw:  # a login reaching the client whole: still masked
        Client(timeout=2, tries=1).get(f"http://{USER}:{SECRET}@127.0.0.1:{port}/x")
    assert SECRET not in str(raw.value) and f"{USER}:****@" in str(raw.value)


@pytest.mark.slow
def test_db_update_and_inspect_wheel_errors_never_show_the_login(
    capsys: pytest.CaptureFixture[str], dbupdate_hermetic: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = closed_port()
    base = f"http://{USER}:{SECRET}@127.0.0.1:{port}"
    monkeypatch.setenv("GR_TOKEN", SECRET)
    written = f"http://{USER}:${{GR_TOKEN}}@127.0.0.1:{port}/whl"  # shown as written
    code, stdout, err = run_cli(capsys, "db", "update", "--pytorch-index", written, "--no-pypi")
    assert code != 0 and not leaks(stdout, err) and "${GR_TOKEN}" in stdout + err
    for argv in (
        ["db", "update", "--pytorch-index", f"{base}/whl", "--no-pypi", "--timeout", "2"],
        ["db", "inspect-wheel", f"{base}/torch-2.8.0-cp312-cp312-linux_x86_64.whl"],
        ["db", "inspect-wheel", f"{base}/torch-2.8.0-cp312-cp312-linux_x86_64.whl", "--json"],
    ):
        code, stdout, err = run_cli(capsys, *argv)
        assert code != 0, argv
        assert not leaks(stdout, err), (argv, stdout, err)
        assert "127.0.0.1" in stdout + err


def test_a_bad_url_is_refused_without_showing_its_login(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, stdout, err = run_cli(
        capsys, "suggest", *GPU, "--pytorch-index", f"gopher://{USER}:{SECRET}@h/whl", "--json"
    )
    assert code == 2 and not leaks(stdout, err) and f"{USER}:****@h" in err


# --- the login is used for the request -----------------------------------------------------------


@pytest.fixture
def private_index() -> Iterator[ClosureIndex]:
    with serve_closure_index(login=(USER, SECRET)) as server:
        yield server


def test_the_http_client_sends_the_login_it_was_given(
    private_index: ClosureIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = private_index.url
    page = f"{base}/simple/filelock/"
    with Client(timeout=5, tries=1) as client:
        with pytest.raises(FetchError, match="HTTP 401"):
            client.get(page)  # no login: refused
        url = credentials.keep(f"http://{USER}:{SECRET}@127.0.0.1:{private_index.port}/simple")
        answer = client.get(f"{url}/filelock/")
        assert SECRET not in answer.url
        credentials.forget()
        monkeypatch.setenv("GR_TOKEN", SECRET)
        written = credentials.keep(f"http://{USER}:${{GR_TOKEN}}@127.0.0.1:{private_index.port}/")
        assert "${GR_TOKEN}" in written  # as written; expanded only for the request
        assert client.get(f"{written.rstrip('/')}/simple/filelock/").body


@pytest.fixture
def synth_db(
    scrubbed_tools: Path, synth_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = write_db(scrubbed_tools / "db", lock_raw(synth_raw))
    monkeypatch.setenv("GPURESOLVE_DATA_DIR", str(db))


@pytest.mark.slow
def test_a_full_lock_from_a_private_index_gets_uv_the_login_through_netrc(
    private_index: ClosureIndex,
    synth_db: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """uv resolves the closure from an index that answers 401 without the login: it got it (in
    a private netrc, never on its command line), and nothing written or printed holds it."""
    host = f"127.0.0.1:{private_index.port}"
    out = tmp_path / "out"
    argv = ["lock", *MAC[:4], "--no-gpu", "--python", "3.11", "--with", "torchvision"]
    argv += ["--pytorch-index", f"http://{USER}:{SECRET}@{host}/whl"]
    argv += ["--default-index", f"http://{USER}:{SECRET}@{host}/simple"]
    argv += ["--format", "requirements", "--format", "pylock", "-o", str(out)]
    with pytest.raises(SystemExit) as done:
        main(argv)
    stdout, err = capsys.readouterr()
    assert done.value.code == 0, stdout + err
    assert not leaks(stdout, err, folder=out)
    assert "--hash=sha256:" in (out / "requirements.txt").read_text()
    # --check without the login: uv is refused (one line, no secret) ...
    with pytest.raises(SystemExit) as done:
        main(["lock", "--check", "-o", str(out)])
    stdout, err = capsys.readouterr()
    assert done.value.code == 2 and not leaks(stdout, err)
    # ... with it in the user's netrc, as pip and uv would take it: current
    (tmp_path / "netrc").write_text(f"machine 127.0.0.1 login {USER} password {SECRET}\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    with pytest.raises(SystemExit) as done:
        main(["lock", "--check", "-o", str(out)])
    stdout, err = capsys.readouterr()
    assert done.value.code == 0, stdout + err
    assert not leaks(stdout, err)


def test_a_keyring_login_is_asked_for_after_a_401(private_index: ClosureIndex) -> None:
    """pip's order: no login in the URL and none in netrc, a 401, then the keyring (through its
    own backend interface: one holding this index's login in memory)."""
    keyring = pytest.importorskip("keyring", reason="keyring is optional, as for pip")
    from keyring.backend import KeyringBackend
    from keyring.credentials import SimpleCredential

    host = f"127.0.0.1:{private_index.port}"

    class Held(KeyringBackend):  # type: ignore[misc,unused-ignore]
        priority = 1

        def get_password(self, service: str, username: str) -> str | None:
            return SECRET if service == host and username == USER else None

        def get_credential(self, service: str, username: str | None) -> Any:
            return SimpleCredential(USER, SECRET) if service == host else None  # type: ignore[no-untyped-call,unused-ignore]

        def set_password(self, service: str, username: str, password: str) -> None:
            raise NotImplementedError

        def delete_password(self, service: str, username: str) -> None:
            raise NotImplementedError

    before = keyring.get_keyring()
    keyring.set_keyring(Held())  # type: ignore[no-untyped-call,unused-ignore]
    try:
        with Client(timeout=5, tries=1) as client:
            page = client.get(f"{private_index.url}/simple/filelock/")
    finally:
        keyring.set_keyring(before)
    assert page.body and SECRET not in page.url
    assert private_index.denied == ["/simple/filelock/"]  # once, then with the keyring's login


def test_a_lock_read_back_keeps_its_login_variables_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pip expands ``${VAR}`` in a requirements file; a login there stays as written in what
    gpuresolve reads back and shows (the variant in the path is still expanded)."""
    import sys

    from resolver.readers import lockfile

    monkeypatch.setenv("GR_TOKEN", SECRET)
    monkeypatch.setenv("GR_VARIANT", "cu126")
    url = "https://robot:${GR_TOKEN}@mirror.example/whl/${GR_VARIANT}"
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"--index-url {url}\ntorch==2.14.1+cu126\n", encoding="utf-8")
    assert lockfile.read(lock).index_urls == ("https://robot:${GR_TOKEN}@mirror.example/whl/cu126",)
    for extra in ([], ["--json"]):
        argv = ["install", "--python", sys.executable, "--lock", str(lock), "--dry-run"]
        code, stdout, err = run_cli(capsys, *argv, "--ignore-target", *extra)
        assert code == 0, stdout + err
        assert not leaks(stdout, err)


def test_the_childs_netrc_is_private_and_keeps_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import netrc
    import stat

    (tmp_path / "mine").write_text("machine other.example login me password theirs\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "mine"))
    assert credentials.child_netrc(str(tmp_path)) is None  # no login given: nothing to hand on
    credentials.keep(MIRROR)
    credentials.keep(DEFAULT)
    path = credentials.child_netrc(str(tmp_path))
    assert path is not None and stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    hosts = netrc.netrc(path).hosts
    assert hosts["mirror.example"][0] == USER and hosts["mirror.example"][2] == SECRET
    assert hosts["idx.example"][0] == SECRET  # a token alone: the login, as pip sends it
    assert hosts["other.example"][0] == "me"  # the user's own netrc after ours
    assert credentials.child_url("https://${GR_HOST}/whl") == "https://${GR_HOST}/whl"


def test_fleet_report_never_repeats_a_login_a_node_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A node's verify result is foreign text: a failing check's reason naming a URL with its
    login is masked in the text, the -o file and --json."""
    diag = Path(__file__).parent / "fixtures" / "verify" / "h100_diag" / "cvd_empty.json"
    doc = json.loads(diag.read_text(encoding="utf-8"))
    doc["checks"][5]["reason"] = f"cannot read {MIRROR}/cu126/torch/: HTTP 403"
    (tmp_path / "node.json").write_text(json.dumps(doc), encoding="utf-8")
    report = tmp_path / "report.md"
    code, out, err = run_cli(
        capsys, "fleet", "report", str(tmp_path / "node.json"), "-o", str(report)
    )
    assert code == 1 and f"{USER}:****@mirror.example" in out
    assert not leaks(out, err, report.read_text(encoding="utf-8"))
    code, out, err = run_cli(capsys, "fleet", "report", str(tmp_path / "node.json"), "--json")
    assert code == 1 and not leaks(out, err)


def test_a_login_typed_into_an_image_reference_is_masked_in_the_refusal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An image reference holds no login: one typed into it is refused, and the refusal shows
    it masked (`image` and a team spec's `image:`)."""
    code, out, err = run_cli(capsys, "image", "me:s3cr3t-tok@reg/x:1", "--gpu", "8.0")
    assert code == 2 and "s3cr3t-tok" not in out + err and "me:****@reg/x:1" in err
    spec = tmp_path / "team.yaml"
    spec.write_text(
        "name: t\npython: '3.12'\nimage: 'robot:s3cr3t-tok@registry.example/x:1'\n"
        "targets:\n- gpus: ['8.0']\n",
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, "lock", str(spec), "--top-level")
    assert code == 2 and "s3cr3t-tok" not in out + err and "robot:****@" in err
