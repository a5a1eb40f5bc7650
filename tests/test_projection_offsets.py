"""Previews name byte offsets that reach what they quote, and show small top-level values as the
body has them.

A body of one line (minified JSON, NDJSON with long lines) makes line numbers useless: the stub
names byte offsets, and ``artifact_read(ref, offset, length)`` at that offset returns the very
text the preview quotes. Driven through the front door and the read tool a model calls.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator

import orjson
import pytest

import cargohold
from cargohold import Hold, Ref, render_stub

JOINER = "\u21b5"
CUT = re.compile(r" \[\+\d+ chars\]$")


@pytest.fixture
def hold() -> Iterator[Hold]:
    with cargohold.open("memory://", tenant="t", user="u", session="s") as opened:
        yield opened


def _records(count: int, seed: int = 1) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [
        {
            "id": i,
            "customer": f"c-{rng.randint(1, 99_999):05d}",
            "total": rng.randint(99, 1_845_000) / 100,
            "status": rng.choice(["paid", "refunded", "open", "void"]),
            "note": "x" * rng.randint(0, 300),
        }
        for i in range(1, count + 1)
    ]


def _response(count: int) -> dict[str, object]:
    return {
        "meta": {"page": 3, "per_page": count, "total": 12_034, "next_cursor": "Y3Vyc29yOjMwMA=="},
        "status": "ok",
        "items": _records(count),
        "links": {"next": "https://api.example.com/orders?cursor=Y3Vyc29yOjMwMA%3D%3D"},
    }


def _read(hold: Hold, ref: Ref, offset: int, length: int) -> bytes:
    answer = hold.call_tool("artifact_read", {"ref": str(ref), "offset": offset, "length": length})
    assert answer.ok, answer.text
    data = answer.data()
    assert data is not None
    return data


def _quoted(preview: str, label: str) -> tuple[int, str]:
    """The byte offset and the quoted text of the preview line whose label starts ``label``."""
    match = re.search(
        rf"^{re.escape(label)} \((?:byte|bytes) ([\d,]+)[^)]*\): (.*)$", preview, re.M
    )
    assert match is not None, label
    return int(match[1].replace(",", "")), CUT.sub("", match[2])


def test_a_minified_json_stub_names_byte_offsets_where_artifact_read_finds_its_records(
    hold: Hold,
) -> None:
    document = _response(2_000)
    data = orjson.dumps(document)  # one line of about 400 KB
    assert b"\n" not in data

    result = hold.offload(data, tool="list_orders", media_type="application/json")

    assert result.stub is not None
    assert result.ref is not None
    preview = result.stub.projection.preview
    assert "one line of" in preview.split("\n", 1)[0]
    items = document["items"]
    assert isinstance(items, list)
    for label, record in (("first items[0]", items[0]), ("last  items[-1]", items[-1])):
        offset, text = _quoted(preview, label)
        raw = _read(hold, result.ref, offset, len(text.encode()))
        assert raw.decode() == text
        assert raw.startswith(b'{"id":')
        assert orjson.dumps(record).startswith(raw)  # the record itself, as the body has it
    sizes = re.search(r"^top-level keys by size [^:]*: (.*)$", preview, re.M)
    assert sizes is not None
    member = re.search(r"\bitems ([\d,]+) at ([\d,]+)", sizes[1])
    assert member is not None
    size, at = (int(member[k].replace(",", "")) for k in (1, 2))
    assert at == data.index(b'"items":') + len(b'"items":')
    assert size == len(orjson.dumps(document["items"]))
    assert _read(hold, result.ref, at + size - 1, 1) == b"]"


def test_a_pretty_printed_json_stub_quotes_records_with_the_bodys_own_spacing() -> None:
    document = _response(300)
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2)

    preview = render_stub(data, Ref.of(data), media_type="application/json").projection.preview

    offset, text = _quoted(preview, "first items[0]")
    pieces = text.split(JOINER)
    first = document["items"][0]  # type: ignore[index]  # a list of dicts, made above
    assert pieces[:3] == ["{", '"id": 1,', f'"customer": "{first["customer"]}",']
    assert data[offset:].startswith(b'{\n      "id": 1,')
    assert all(piece.encode() in data for piece in pieces)  # grep finds each line as shown


def test_ndjson_with_long_lines_names_byte_offsets_of_its_first_and_last_records(
    hold: Hold,
) -> None:
    lines = [orjson.dumps(r) for r in _records(60)]
    lines = [line[:-1] + b', "blob": "' + b"A" * 5_000 + b'"}' for line in lines]
    data = b"\n".join(lines) + b"\n"

    result = hold.offload(data, tool="export", media_type="application/x-ndjson")

    assert result.stub is not None
    assert result.ref is not None
    preview = result.stub.projection.preview
    first = re.search(r"^first record \(line 1, byte ([\d,]+)\): (.*)$", preview, re.M)
    last = re.search(r"^last record \(line 60, byte ([\d,]+)\): (.*)$", preview, re.M)
    assert first is not None
    assert last is not None
    assert int(first[1].replace(",", "")) == 0
    assert int(last[1].replace(",", "")) == len(data) - len(lines[-1]) - 1
    for match, line in ((first, lines[0]), (last, lines[-1])):
        text = CUT.sub("", match[2]).encode()
        assert _read(hold, result.ref, int(match[1].replace(",", "")), len(text)) == text
        assert line.startswith(text)
    longest = re.search(r"longest line is line ([\d,]+) at byte ([\d,]+), ([\d,]+) bytes", preview)
    assert longest is not None
    number, at, width = (int(longest[k].replace(",", "")) for k in (1, 2, 3))
    assert width == max(map(len, lines))
    assert len(lines[number - 1]) == width
    assert _read(hold, result.ref, at, 20) == lines[number - 1][:20]


@pytest.mark.parametrize("indent", [False, True], ids=["minified", "pretty"])
def test_small_top_level_values_appear_verbatim_with_their_offsets(indent: bool) -> None:
    document = _response(500)
    document["error"] = None
    document["incomplete_results"] = False
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2 if indent else 0)

    preview = render_stub(data, Ref.of(data), media_type="application/json").projection.preview

    small = preview.split("small values (verbatim, in document order):\n", 1)[1]
    for path, value in (
        ("meta", document["meta"]),
        ("status", "ok"),
        ("links", document["links"]),
        ("error", None),
        ("incomplete_results", False),
    ):
        offset, text = _quoted(small, f"  {path}")
        raw = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
        assert text == JOINER.join(line.strip() for line in raw.split("\n"))
        assert data[offset:].startswith(text.split(JOINER)[0].encode())
        parsed, _ = json.JSONDecoder().raw_decode(data[offset:].decode())
        assert parsed == value  # the offset is that of the value itself
    assert "12034" in preview
    assert "Y3Vyc29yOjMwMA==" in preview


def test_small_values_of_a_nested_response_object_appear_with_their_path() -> None:
    document = {"data": {"total_count": 9_876, "cursor": "abc123==", "items": _records(400)}}
    data = orjson.dumps(document)

    preview = render_stub(data, Ref.of(data), media_type="application/json").projection.preview

    for path, raw in (("data.total_count", b"9876"), ("data.cursor", b'"abc123=="')):
        offset, text = _quoted(preview, f"  {path}")
        assert text.encode() == raw
        assert data[offset : offset + len(raw)] == raw
