"""HTML and JSON bodies far above a page's usual size are projected in bounded memory (issue 27:
an offload's peak memory at most 3x its body), and their previews say which figures are estimated.

Peak memory is tracemalloc's (Python's allocations, and lexbor's, which allocates through
Python's raw allocator), over one projection of a body of about 6 MiB: past the size an HTML page
is parsed whole and a JSON document read as Python values, so a whole DOM (about nine times the
page) or a whole tree of Python values (ten to twenty times the document) stands out.
"""

from __future__ import annotations

import re
import sys
import tracemalloc

import orjson
import pytest

from cargohold import Budget, ProjectionClass, Ref, render_stub
from cargohold.projection import detect, project

_json = sys.modules["cargohold.projection._json"]  # the package's ``_json`` is a function

SIZE = 6 * 1024 * 1024
BUDGET = 8 * 1024


def _peak(data: bytes, media_type: str) -> int:
    found = detect(data, media_type=media_type)
    project(data[:4096], media_type=media_type, budget=BUDGET)  # imports, first-use set-up
    tracemalloc.start()
    try:
        project(data, media_type=media_type, budget=BUDGET, detection=found)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- HTML ---------------------------------------------------------------------------------------


def _section(number: int) -> str:
    return (
        f"<section><h2>Chapter {number}</h2>"
        f"<p>Chapter {number} opens with a paragraph long enough to be found in the page, "
        f"and a <a href='/chapter/{number}'>link to it</a> among its words.</p>"
        f"<h3>Notes on chapter {number}</h3><ul><li>First note of chapter {number}</li>"
        f"<li>Second note, with an <img src='/{number}.png' alt='figure'> image</li></ul>"
        f"<table><tr><th>key</th><td>value {number}</td></tr></table></section>\n"
    )


def _large_page(size: int = SIZE) -> bytes:
    head = (
        "<!doctype html><html lang='en'><head><title>The long report of the year</title>"
        "<script>var script_text_never_shown = 1;</script></head><body>"
        "<nav><a href='/'>Home</a></nav><main><h1>The long report</h1>\n"
    )
    end = "<p>The report closes with these very last words.</p></main></body></html>\n"
    parts = [head]
    total = len(head) + len(end)
    number = 0
    while total < size:
        number += 1
        section = _section(number)
        parts.append(section)
        total += len(section)
    parts.append(end)
    return "".join(parts).encode()


def _about(line: str, what: str) -> int:
    found = re.search(rf"about ([\d,]+) {what}", line)
    assert found is not None, what
    return int(found.group(1).replace(",", ""))


def test_a_page_too_large_to_parse_whole_is_projected_within_its_own_size_in_memory() -> None:
    data = _large_page()

    peak = _peak(data, "text/html")

    assert peak < len(data)


def test_a_page_too_large_to_parse_whole_says_its_whole_page_figures_are_estimates() -> None:
    data = _large_page()
    elements = len(re.findall(rb"<[A-Za-z]", data)) + 1  # and lexbor's implied <tbody>s
    elements += data.count(b"<table>")
    links = data.count(b"<a href=")

    projection = project(data, media_type="text/html", budget=BUDGET)

    assert projection.kind == "html"
    assert projection.classification is ProjectionClass.COMPRESSIBLE
    lines = projection.preview.splitlines()
    assert lines[0].startswith(f"html (lang en): {len(data):,} bytes, too large to parse whole")
    assert "estimated" in lines[0]
    # Estimates of a regular page: within a tenth of the counts in its markup.
    assert abs(_about(lines[0], "elements") - elements) < elements / 10
    assert abs(_about(lines[0], "links") - links) < links / 10
    assert lines[1].startswith("in its first ")
    assert "title (byte " in projection.preview
    assert "  h2 Chapter 1\n" in projection.preview
    assert lines[-1].startswith("text ends with: ...")
    assert lines[-1].endswith(" / The report closes with these very last words.")
    assert "script_text_never_shown" not in projection.preview


def test_paragraphs_of_a_large_page_are_quoted_at_their_own_byte_offsets() -> None:
    data = _large_page()

    preview = project(data, media_type="text/html", budget=Budget.MAX).preview

    quoted = re.findall(r"^  at byte ([\d,]+): (.+)$", preview, re.M)
    assert len(quoted) >= 3
    for at, text in quoted:
        start = int(at.replace(",", ""))
        assert data[start : start + len(text.encode())] == text.encode()


def test_a_large_page_of_text_with_no_tag_near_its_cuts_is_read_from_its_text() -> None:
    words = b"word " * 700_000
    data = b"<html><body><p>" + words + b"</p></body></html>"
    visible = len(words.strip()) - words.count(b" ") + words.count(b" ")  # spaces are shown

    projection = project(data, media_type="text/html", budget=BUDGET)

    first = projection.preview.splitlines()[0]
    assert abs(_about(first, "characters of visible text") - visible) < visible / 10
    assert "\n  at byte 15: word word word" in projection.preview
    assert projection.preview.splitlines()[-1].endswith("word word word")


def test_markup_nested_past_the_parsers_bound_is_shown_verbatim_not_parsed() -> None:
    # lexbor looks through the open containers at each new one: 2 MiB of unclosed <div> took
    # minutes to parse; a page nesting 12,000 of them gets the verbatim head and tail.
    data = b"<html><body>" + b"<div><span>deep</span>" * 12_000 + b"</body></html>"

    projection = project(data, media_type="text/html", budget=BUDGET)

    assert projection.kind == "html"
    assert projection.classification is ProjectionClass.EXACT_REQUIRED


def test_markup_nested_a_few_thousand_deep_is_still_parsed() -> None:
    data = b"<html><body>" + b"<DIV><span>deep</span>" * 3_000 + b"<p>The last words.</p>"

    projection = project(data, media_type="text/html", budget=BUDGET)

    assert projection.classification is ProjectionClass.COMPRESSIBLE
    assert projection.preview.splitlines()[-1].endswith("The last words.")


def test_a_large_page_stub_stays_within_its_budget_at_every_budget() -> None:
    data = _large_page(3 * 1024 * 1024)

    for budget in Budget:
        stub = render_stub(data, Ref.of(data), media_type="text/html", budget=budget)

        assert len(stub.text.encode()) <= budget
        assert stub.projection.kind == "html"


# -- JSON ---------------------------------------------------------------------------------------


def _records(count: int) -> list[dict[str, object]]:
    statuses = ["paid", "refunded", "open", "void"]
    return [
        {
            "id": n,
            "customer": f"c-{n * 7919 % 99991:05d}",
            "total": n * 37 % 184500 / 100,
            "status": statuses[n % 4],
            "created_at": f"2026-{n % 11 + 1:02d}-{n % 28 + 1:02d}T08:14:03Z",
        }
        for n in range(count)
    ]


def _wrapped(size: int) -> bytes:
    """``{"meta": {...}, "data": [records], "next": null}`` of about ``size`` bytes."""
    count = size // 110
    body = {"meta": {"page": 1, "total": count}, "data": _records(count), "next": None}
    return orjson.dumps(body)


def test_a_json_object_too_large_for_python_values_is_projected_without_them() -> None:
    data = _wrapped(SIZE)

    peak = _peak(data, "application/json")

    assert peak < len(data)


def test_a_json_array_of_a_mebibyte_is_projected_within_its_own_size_in_memory() -> None:
    data = orjson.dumps(_records(1024 * 1024 // 110))
    assert len(data) > _json._ORJSON_MAX

    peak = _peak(data, "application/json")

    assert peak < len(data)


def _geo(points: int) -> bytes:
    """A GeoJSON-like document, indented, whose floats have more digits than their shortest
    form (simdjson writes such a float with all its digits, orjson with the fewest)."""
    ring = [[-65.61361699999998 + n / 1000, 43.420273000000014 - n / 1000] for n in range(points)]
    body = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"name": "Border"},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)


DOCUMENTS = {
    "records": lambda: orjson.dumps(_records(3000)),
    "wrapped": lambda: _wrapped(300_000),
    "map of records": lambda: orjson.dumps({f"id-{r['id']:06d}": r for r in _records(3000)}),
    "geo": lambda: _geo(12_000),
    "records over 64 KiB": lambda: orjson.dumps(
        [
            {"id": n, "points": [[-61.14917 + k * 1e-4, 43.42027 - k * 1e-4] for k in range(3000)]}
            for n in range(30)
        ]
    ),
    "maps of maps": lambda: orjson.dumps(
        [{f"k{j}": {"a": j, "b": [j, j]} for j in range(60)} for _ in range(200)]
    ),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_a_json_preview_is_the_same_whichever_parser_reads_the_document(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = DOCUMENTS[name]()
    monkeypatch.setattr(_json, "_ORJSON_MAX", len(data))
    as_python_values = project(data, media_type="application/json", budget=BUDGET).preview

    monkeypatch.setattr(_json, "_ORJSON_MAX", 0)
    as_simdjson_proxies = project(data, media_type="application/json", budget=BUDGET).preview

    assert as_simdjson_proxies == as_python_values


def test_the_bulk_below_the_top_level_of_a_json_document_is_sized_exactly_in_its_bytes() -> None:
    data = _geo(12_000)
    features = data.index(b"[", data.index(b'"features"'))
    feature = data.index(b"{", features)  # the only feature, to its closing brace
    feature_end = data.rindex(b"}", 0, data.rindex(b"]")) + 1
    geometry = data.index(b"{", data.index(b'"geometry"', feature))
    geometry_end = data.rindex(b"}", 0, feature_end - 1) + 1

    preview = project(data, media_type="application/json", budget=BUDGET).preview

    bulk = dict(re.findall(r"^  (features\S*): .*? (~?[\d,]+) bytes \(", preview, re.M))
    assert bulk["features[0]"] == f"{feature_end - feature:,}"
    assert bulk["features[0].geometry"] == f"{geometry_end - geometry:,}"


def test_a_large_json_body_with_an_integer_past_64_bits_is_still_previewed_as_json() -> None:
    records = _records(3000)
    data = orjson.dumps(records)[:-1] + b',{"id":123456789012345678901234567890}]'
    assert len(data) > _json._ORJSON_MAX

    projection = project(data, media_type="application/json", budget=BUDGET)

    assert projection.kind == "json"
    assert projection.classification is ProjectionClass.COMPRESSIBLE
    assert projection.preview.startswith(f"json array of {len(records) + 1:,} items")


def test_a_json_map_of_very_many_keys_sizes_a_stated_sample_of_them() -> None:
    data = orjson.dumps({f"key-{n:06d}": {"n": n, "text": "x" * (n % 50)} for n in range(20_000)})

    preview = project(data, media_type="application/json", budget=BUDGET).preview

    assert "top-level keys of an even sample of 96 of the 20,000 keys by size" in preview
    assert preview.startswith("json object with 20,000 keys")
    assert "records at values(@): 20,000; fields over an even sample of 1,000 of 20,000" in preview
    assert "\n  n: int 0..19,999\n" in preview
