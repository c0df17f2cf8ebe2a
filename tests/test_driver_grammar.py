"""One driver grammar (`Driver`): options, specs, node lists, host files and the locks' records
accept the same values, so every value `lock` accepts, `lock --check` reads back."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from cli_support import run_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from resolver.core.errors import UserError
from resolver.core.versions import Driver

# Values near the grammar's edges: parts of 1-5 digits, 1-5 parts, the Device Manager form,
# spaces, signs, non-ASCII digits.
_PART = st.from_regex(r"\A[0-9]{1,5}\Z")
_NEAR = st.lists(_PART, min_size=1, max_size=5).map(".".join)
_ANY = st.one_of(
    _NEAR,
    _NEAR.map(lambda s: f" {s}\t"),
    st.from_regex(r"\A[0-9]{2}\.[0-9]{1,2}\.[0-9]{2}\.[0-9]{4}\Z"),
    st.text(alphabet="0123456789.٥５ -+e_", max_size=16),
)


@given(_ANY)
def test_parse_is_canonical_and_total(value: str) -> None:
    """Every string is a Driver or a UserError (never another exception); a Driver's text
    parses back to itself."""
    try:
        driver = Driver.parse(value)
    except UserError as exc:
        assert "not a driver version" in str(exc)
        return
    again = Driver.parse(str(driver))
    assert str(again) == str(driver) and again == driver
    assert driver.branch == driver.key[0] and driver.key <= (9999, 9999, 9999)


def test_order_equality_branch() -> None:
    assert Driver.parse("580") < Driver.parse("580.65.06") < Driver.parse("580.95.05")
    assert Driver.parse("570.124.6") == Driver.parse("570.124.06")
    assert str(Driver.parse(" 570.124.06 ")) == "570.124.06"  # NVIDIA's zeros kept
    assert str(Driver.parse("32.0.15.6094")) == "560.94"  # Windows' Device Manager
    assert Driver.parse("581.57").branch == 581
    assert len({Driver.parse("535.104.05"), Driver.parse("535.104.5")}) == 1


@pytest.mark.parametrize("value", ["570.124.06.1", "12345.1", "535.1.2.3.4", "٥٨٠.٩٥.٠٥", ""])
def test_out_of_grammar_is_exit_2_at_the_edge(
    value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The issue's values: refused by `lock` itself, never written into a lock that --check
    then calls damaged."""
    out = tmp_path / "lock"
    code, _, err = run_cli(capsys, "lock", "--gpu", "8.9", "--driver", value, "-o", str(out))
    assert code == 2 and "not a driver version" in err and "Traceback" not in err
    assert not out.exists()


_ACCEPTED = st.one_of(
    st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,4}){0,2}\Z"),
    st.from_regex(r"\A[0-9]{2}\.[0-9]{1,2}\.[0-9]{2}\.[0-9]{4}\Z"),
    _NEAR,
)


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_ACCEPTED)
@example("570.124.06")
@example("32.0.15.6094")
@example("9999.9999.9999")
def test_every_value_lock_accepts_check_reads_back(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """lock -> lock --check, for every driver `lock` accepts: current, never "damaged"."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lock"
        argv = ["--platform", "linux-x86_64", "--python", "3.12", "--gpu", "8.9"]
        code, _, err = run_cli(capsys, "lock", *argv, "--driver", value, "-o", str(out))
        if code == 2 and "not a driver version" in err:
            with pytest.raises(UserError):
                Driver.parse(value)
            return
        assert code in (0, 1), err  # 1: no build runs on so old a driver; still a lock?
        if code == 1:
            return
        code, stdout, err = run_cli(capsys, "lock", "--check", "-o", str(out))
        assert "damaged" not in err
        assert code == 0 and stdout.startswith("all current"), stdout + err


def test_a_host_file_and_a_spec_use_the_same_grammar(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A `detect --json` file or a team spec naming a driver outside the grammar is exit 2."""
    host = tmp_path / "host.json"
    host.write_text(
        '{"platform": "linux-x86_64", "python": "3.12", "driver": "570.124.06.1", "state": "ok",'
        ' "gpus": [{"index": 0, "name": "NVIDIA L4", "cc": "8.9"}]}',
        encoding="utf-8",
    )
    code, _, err = run_cli(capsys, "suggest", "--host", str(host))
    assert code == 2 and "driver" in err and "Traceback" not in err
    spec = tmp_path / "env.yaml"
    spec.write_text(
        'name: t\npython: "3.12"\ntargets:\n'
        '  - name: a\n    driver: "12345.1"\n    gpus: ["8.9"]\n',
        encoding="utf-8",
    )
    code, _, err = run_cli(capsys, "lock", str(spec), "-o", str(tmp_path / "o"))
    assert code == 2 and "not a driver version" in err and "Traceback" not in err
