"""The bounded node-list reader: the same items as json.load, `images` arrays emptied only when
that is exact, at any read size."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from resolver.core.errors import UserError
from resolver.fleet import jsonstream
from resolver.fleet.jsonstream import JsonStream

FIXTURE = Path(__file__).parent / "fixtures" / "kubernetes" / "nodes.json"


def stream(text: str) -> tuple[dict[str, Any], list[Any], int]:
    s = JsonStream(io.BytesIO(text.encode()), "x.json", 1 << 30)
    top: dict[str, Any] = {}
    items: list[Any] = []
    for key in s.object_keys():
        if key == "items":
            items.extend(s.array_items())
        else:
            top[key] = s.value()
    s.finish()
    return top, items, s.dropped_values


def emptied(items: list[Any]) -> list[Any]:
    out = copy.deepcopy(items)
    for item in out:
        if isinstance(item, dict) and isinstance(item.get("status"), dict):
            item["status"]["images"] = []
    return out


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 1 << 20])
def test_same_items_as_json_at_any_read_size(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    text = FIXTURE.read_text(encoding="utf-8")
    expected = json.loads(text)
    top, items, dropped = stream(text)
    assert dropped == len(expected["items"])  # every node's images skipped unread
    assert items == emptied(expected["items"])
    assert top == {k: v for k, v in expected.items() if k != "items"}
    compact = json.dumps(expected, separators=(",", ":"))  # no whitespace at all
    assert stream(compact)[1] == emptied(expected["items"])


TRICKY = [  # (images, skipped unread?)
    # a string holding "}]" ends no array: the segment up to it has an odd number of quotes
    ([{"names": ["weird}]name", "x"], "sizeBytes": 1}, {"names": ["y"], "sizeBytes": 2}], False),
    # brackets inside strings: left to the decoder
    ([{"names": ["x[y", "{"], "sizeBytes": 1}], False),
    ([{"names": ["a"], "sizeBytes": 1}, {"names": ["]"], "sizeBytes": 2}], False),
    # escaped quotes and backslashes: left to the decoder
    ([{"names": ['quote"d', "back\\slash"], "sizeBytes": 3}], False),
    # other shapes whose brackets balance: skipped (nobody reads them)
    ([{"names": ["a"], "more": {"b": [1, 2]}}], True),
    ([{"names": [["nested"]], "sizeBytes": 1}], True),
    # an early "}]" inside the array, or nesting deeper than four: left to the decoder
    ([{"a": [{"b": 1}], "c": 2}], False),
    ([{"a": {"b": {"c": {"d": {"e": 1}}}}}], False),
    # not objects at all; empty
    (["a", "b"], False),
    ([], False),
]


@pytest.mark.parametrize(("images", "skipped"), TRICKY)
@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_images_arrays_skipped_only_where_exact(
    images: list[Any], skipped: bool, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    node = {"metadata": {"name": "n"}, "status": {"images": images, "nodeInfo": {"a": "b"}}}
    doc = {"items": [node, node], "kind": "List"}
    _, items, dropped = stream(json.dumps(doc, indent=2))
    assert dropped == (2 if skipped else 0)
    for item in items:
        assert item["status"] == {"images": [] if skipped else images, "nodeInfo": {"a": "b"}}


def test_the_word_images_inside_a_string_is_not_a_key() -> None:
    value = '"images": [{"names": ["a"]}]'
    node = {"metadata": {"name": "n", "annotations": {"note": value}}, "status": {}}
    _, items, dropped = stream(json.dumps({"items": [node], "kind": "List"}))
    assert dropped == 0 and items == [node]


def test_numbers_at_the_window_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", 2)
    top, items, _ = stream('{"a": 1234567, "items": [12345, 6.5e10, true, null, "x"]}')
    assert top == {"a": 1234567} and items == [12345, 6.5e10, True, None, "x"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"items": [1, 2', "line 1 column"),
        ('{"items": [1 2]}', "expected ',' or ']'"),
        ('{"items" [1]}', "expected ':'"),
        ("[1]", "expected an object"),
        ('{"a": ' + "9" * 5000 + "}", "not JSON"),
        ('{"items": []} {}', "extra data"),
    ],
)
def test_errors_name_the_place(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        stream(text)


def test_the_cap_counts_what_is_read() -> None:
    s = JsonStream(io.BytesIO(b'{"items": [' + b"1," * 1000 + b"1]}"), "big.json", 100)
    with pytest.raises(UserError, match=r"big\.json: larger than"):
        list(s.object_keys())
        list(s.array_items())


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_multibyte_characters_across_reads(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    node = {
        "metadata": {"name": "n", "labels": {"team": "Lösung-数据-🚀"}, "annotations": {"a": "é"}},
        "status": {"images": [{"names": ["régistry/ü"], "sizeBytes": 1}]},
    }
    _, items, dropped = stream(json.dumps({"items": [node]}, ensure_ascii=False))
    assert items[0]["metadata"]["labels"] == {"team": "Lösung-数据-🚀"} and dropped == 1


def test_byte_order_marks() -> None:
    s = JsonStream(io.BytesIO(b'\xef\xbb\xbf{"items": [1]}'), "bom.json", 1 << 20)
    for key in s.object_keys():
        assert key == "items" and list(s.array_items()) == [1]
    s = JsonStream(io.BytesIO('{"items": []}'.encode("utf-16")), "ps.json", 1 << 20)
    with pytest.raises(UserError, match=r"ps\.json: UTF-16 text"):
        list(s.object_keys())


def test_columns_count_what_was_skipped_on_one_line() -> None:
    text = '{"items": [{"status": {"images": [{"names": ["abc"]}]}} {}]}'
    with pytest.raises(UserError, match=f"line 1 column {text.index(' {}') + 2}:"):
        stream(text)


@pytest.mark.parametrize("chunk", [3, 64, 4096])
@pytest.mark.parametrize("indent", [None, 2])
def test_error_places_after_non_ascii_text_and_skipped_images(
    chunk: int, indent: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window drops what was read at every read; the place an error names still counts the
    file's bytes (multi-byte characters, emptied images) before it."""
    monkeypatch.setattr(jsonstream, "CHUNK_BYTES", chunk)
    node = {
        "metadata": {"name": "n", "labels": {"team": "Lösung-数据-🚀"}},
        "status": {"images": [{"names": ["régistry/ü"], "sizeBytes": 1}]},
    }
    text = json.dumps({"items": [node] * 5 + ["@BAD@"]}, ensure_ascii=False, indent=indent)
    text = text.replace('"@BAD@"', "tru")
    line = text.count("\n", 0, text.index("tru")) + 1
    column = text.index("tru") - text.rfind("\n", 0, text.index("tru"))
    with pytest.raises(UserError, match=f"x.json: line {line} column {column}: not JSON"):
        stream(text)
