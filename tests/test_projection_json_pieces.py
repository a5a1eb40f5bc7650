"""A large top-level JSON array, or one that is most of a top-level object, is parsed in
pieces, and its preview is the one the whole document gives (issue 27: simdjson's document of a
body is about four times the body resident).

Each test that compares previews makes the pieces small (``_PIECE``) and the bodies read in
pieces small (``_PIECED_MIN``), so a body of a few hundred KiB is cut many times, and checks
that the pieces were taken: a comparison with a body read whole would prove nothing otherwise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import orjson
import pytest
import simdjson

from cargohold.projection import project

_json = sys.modules["cargohold.projection._json"]  # the package's ``_json`` is a function

BUDGET = 8 * 1024
PIECE = 8 * 1024


def _records(count: int) -> list[dict[str, object]]:
    return [
        {
            "id": n,
            "customer": f"c-{(n * 7919) % 100_000:05d}",
            "total": round(10_000 + (n * 37) % 9_000 + n / 100, 2),
            "status": ("paid", "void", "refunded")[n % 3],
            "note": None if n % 5 else "checked",
        }
        for n in range(count)
    ]


def _nested(count: int) -> list[dict[str, object]]:
    return [
        {
            "id": n,
            "items": [{"sku": f"s{k}", "q": k} for k in range(n % 4)],
            "meta": {"a": {"b": [n, {"c": None}]}},
        }
        for n in range(count)
    ]


DOCUMENTS: dict[str, tuple[Callable[[], bytes], bool]] = {
    # name: (body, read in pieces)
    "records": (lambda: orjson.dumps(_records(6000)), True),
    "records indented": (lambda: orjson.dumps(_records(3000), option=orjson.OPT_INDENT_2), True),
    "nested, indented": (lambda: json.dumps(_nested(4000), indent=2).encode(), True),
    "integers": (lambda: orjson.dumps(list(range(60_000))), True),
    "floats with all their digits": (
        lambda: orjson.dumps(
            [[-65.61361699999998 + n / 1e3, 43.420273000000014] for n in range(9000)]
        ),
        True,
    ),
    "mixed types": (
        lambda: orjson.dumps(
            [
                (1, 2.5, "s,", None, True, [1, [2]], {"a": 1}, -0.0, 1e300, 2**64 - 1)[n % 10]
                for n in range(30_000)
            ]
        ),
        True,
    ),
    "unicode": (
        lambda: json.dumps(
            [{"name": f"héllo ü€ 😀 {n}", "v": '日本語,{}"\\', "id": n} for n in range(6000)],
            ensure_ascii=False,
        ).encode(),
        True,
    ),
    "big numbers": (
        lambda: orjson.dumps(
            [
                {"i": -(2**63) + n, "u": 2**64 - 1 - n, "f": 1.0000000000000002e-300 * n}
                for n in range(6000)
            ]
        ),
        True,
    ),
    "arrays of arrays": (
        lambda: orjson.dumps([[n, [n, n + 1], {"k": [n]}] for n in range(20_000)]),
        True,
    ),
    "separator inside strings": (
        lambda: orjson.dumps([f'}},{{"k":{n}' for n in range(20_000)]),
        True,
    ),
    "whitespace around elements": (
        lambda: (
            b"  \n [ \n"
            + b" ,\n\t".join(orjson.dumps({"i": n, "s": "a b"}) for n in range(12_000))
            + b"\n ] \n "
        ),
        True,
    ),
    "duplicate keys": (
        lambda: b"[" + b",".join(b'{"a":%d,"a":%d}' % (n, -n) for n in range(20_000)) + b"]",
        True,
    ),
    "nested, one line (cuts inside elements)": (lambda: orjson.dumps(_nested(6000)), True),
    "commas inside strings": (lambda: orjson.dumps([f"a,b,{n}" for n in range(40_000)]), True),
    "a first element past 64 KiB": (
        lambda: orjson.dumps([{"blob": "y" * 70_000}, *_records(3000)]),
        False,
    ),
    "few large elements": (
        lambda: orjson.dumps([{"pad": "p" * 300, "i": n} for n in range(1001)]),
        False,
    ),
    "records in an object": (
        lambda: orjson.dumps({"meta": {"page": 1}, "rows": _records(3000), "total": 3000}),
        True,
    ),
    "records in an object, indented": (
        lambda: orjson.dumps({"rows": _records(3000), "next": None}, option=orjson.OPT_INDENT_2),
        True,
    ),
    "records in an object after an array": (
        lambda: orjson.dumps({"tags": ["a"], "rows": _records(3000)}),
        False,
    ),
    "records in an object before an array": (
        lambda: orjson.dumps({"rows": _records(3000), "after": [1, {"z": [2]}]}),
        False,
    ),
    "records in an object, its key twice": (
        lambda: b'{"rows":' + orjson.dumps(_records(3000)) + b',"rows":2}',
        False,
    ),
    "records two objects deep": (lambda: orjson.dumps({"outer": {"rows": _records(3000)}}), False),
}


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_json, "_PIECED_MIN", 0)
    monkeypatch.setattr(_json, "_PIECE", PIECE)


def _whole(data: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(_json, "_PIECED_MIN", len(data))
        return project(data, media_type="application/json", budget=BUDGET).preview


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
@pytest.mark.usefixtures("small_pieces")
def test_a_json_preview_is_the_same_whether_the_array_is_read_in_pieces_or_whole(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, in_pieces = DOCUMENTS[name]
    data = make()

    pieced = _json._parse(data)
    preview = project(data, media_type="application/json", budget=BUDGET).preview

    assert isinstance(pieced, (_json._Pieced, _json._Grafted)) is in_pieces
    assert preview == _whole(data, monkeypatch)


@pytest.mark.parametrize(
    "body",
    [
        b"[" + b",".join(b'{"a":%d}' % n for n in range(20_000)) + b",]",
        b"[" + b",".join(b'{"a":%d}' % n for n in range(20_000)) + b",,{}]",
        b"[" + b",".join(b'{"a":%d}' % n for n in range(20_000)) + b"] x",
        b"[" + b",".join(b'{"a":%d}' % n for n in range(20_000)) + b',{"b":}]',
        b"["
        + b",".join(b'{"a":%d}' % n for n in range(20_000))
        + b',{"i":123456789012345678901234567890}]',
    ],
    ids=[
        "trailing comma",
        "empty element",
        "content after",
        "invalid element",
        "integer past 64 bits",
    ],
)
@pytest.mark.usefixtures("small_pieces")
def test_a_large_array_no_piece_can_read_is_left_to_the_whole_parse(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieced = _json._parse_pieces(body)
    preview = project(body, media_type="application/json", budget=BUDGET).preview

    assert pieced is None
    assert _json._parse_grafted(b'{"rows":' + body + b"}") is None
    assert preview == _whole(body, monkeypatch)


@pytest.mark.usefixtures("small_pieces")
def test_an_element_not_picked_is_found_in_its_piece() -> None:
    data = orjson.dumps(_records(6000))
    whole = simdjson.Parser().parse(data)

    pieced = _json._parse_pieces(data)

    assert pieced is not None
    assert len(pieced) == 6000
    assert 4321 not in pieced._at  # not one of the picks: looked up in its piece
    assert orjson.loads(_json._mini(pieced[4321])) == orjson.loads(_json._mini(whole[4321]))
    assert orjson.loads(_json._mini(pieced[-1])) == _records(6000)[-1]
    assert [orjson.loads(_json._mini(e)) for e in pieced] == _records(6000)
    assert orjson.loads(pieced.mini) == _records(6000)
    with pytest.raises(IndexError):
        pieced[6000]


def test_a_large_array_is_read_in_pieces_of_bounded_size() -> None:
    data = orjson.dumps(_records(int(1.3 * _json._PIECED_MIN) // 80))
    assert len(data) > _json._PIECED_MIN

    pieced = _json._parse(data)

    assert isinstance(pieced, _json._Pieced)
    pieces = pieced._pieces
    assert len(pieces) >= len(data) // (2 * _json._PIECE)
    assert max(end - start for start, end, _ in pieces) < 2 * _json._PIECE


@pytest.mark.usefixtures("small_pieces")
def test_an_object_around_a_large_array_looks_its_members_up_as_the_whole_document_does() -> None:
    records = _records(3000)
    data = orjson.dumps({"meta": {"page": 1, "tags": None}, "rows": records, "total": 3000})

    grafted = _json._parse_grafted(data)

    assert grafted is not None
    assert list(grafted) == grafted.keys() == ["meta", "rows", "total"]
    assert "rows" in grafted
    assert "next" not in grafted
    assert isinstance(grafted["rows"], _json._Pieced)
    assert len(grafted["rows"]) == 3000
    assert orjson.loads(_json._mini(grafted["rows"][-1])) == records[-1]
    assert orjson.loads(_json._mini(grafted["meta"])) == {"page": 1, "tags": None}
    assert grafted["total"] == 3000
    assert orjson.loads(grafted.mini) == orjson.loads(data)
    with pytest.raises(KeyError):
        grafted["next"]
