"""Media type sniffing: what a body's own bytes prove, for a producer that named no media type.

The sniffer names a type only where the bytes leave no doubt (magic numbers, a body that parses as
JSON), and ``None`` otherwise, so the caller's default stands rather than a guess.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zipfile
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from cargohold import Budget, ProjectionClass, Ref, render_stub
from cargohold.projection import detect, sniff_media_type


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    raw = b"".join(b"\x00" + bytes(width * 4) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | (height - 1) << 14
    payload = b"\x2f" + struct.pack("<I", bits) + bytes(64)
    chunk = b"VP8L" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def _zip() -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("a.txt", "hello")
    return archive.getvalue()


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (_png(40, 30), "image/png"),
        (b"\xff\xd8\xff\xe0" + bytes(600), "image/jpeg"),
        (b"GIF89a" + struct.pack("<HH", 7, 5) + bytes(300), "image/gif"),
        (_webp_lossless(320, 200), "image/webp"),
        (b"%PDF-1.7\n" + bytes(range(256)) * 4, "application/pdf"),
        (gzip.compress(b"a,b\n" * 100, mtime=0), "application/gzip"),
        (_zip(), "application/zip"),
    ],
    ids=["png", "jpeg", "gif", "webp", "pdf", "gzip", "zip"],
)
def test_binary_formats_are_sniffed_by_their_magic_number(data: bytes, media_type: str) -> None:
    assert sniff_media_type(data) == media_type


def test_unknown_binary_bytes_have_no_sniffed_media_type() -> None:
    assert sniff_media_type(bytes(range(256)) * 8) is None


def test_a_json_document_is_sniffed_as_json() -> None:
    rows = [{"id": i, "name": f"n{i}", "tags": ["a", None, True]} for i in range(50)]

    assert sniff_media_type(json.dumps(rows, indent=2).encode()) == "application/json"
    assert sniff_media_type(b'\xef\xbb\xbf {"big": 123456789012345678901234567890}') == (
        "application/json"
    )


def test_ndjson_lines_are_sniffed_as_ndjson() -> None:
    body = b"".join(json.dumps({"id": i, "ok": i % 2 == 0}).encode() + b"\n" for i in range(40))

    assert sniff_media_type(body) == "application/x-ndjson"


@pytest.mark.parametrize(
    "data",
    [
        b"[{'id': 1, 'name': 'a'}, {'id': 2, 'name': None}]",  # mcp-server-sqlite's Python repr
        b'[{"id": 1, "name": "a"}, {"id": 2, "name": None}]',
        b'{"truncated": [1, 2, 3',
        b'{"a": 1}, {"b": 2}\n{"c": 3}\n',  # two values on one line
        b"[NaN, Infinity]",
        b"id,name\n1,a\n2,b\n3,c\n",
        b"2024-05-01 12:00:00 INFO started\n" * 10,
        b"plain prose, nothing more\n",
        b"",
    ],
    ids=[
        "python-repr",
        "none-literal",
        "truncated",
        "two-per-line",
        "nan",
        "csv",
        "log",
        "text",
        "empty",
    ],
)
def test_text_the_bytes_do_not_prove_has_no_sniffed_media_type(data: bytes) -> None:
    assert sniff_media_type(data) is None


def test_a_webp_stub_reads_its_dimensions_and_counts_it_as_an_image() -> None:
    data = _webp_lossless(320, 200)

    stub = render_stub(data, Ref.of(data), media_type="image/webp", budget=Budget.LIGHT)

    assert stub.projection.classification is ProjectionClass.UNSUPPORTED
    assert stub.projection.detail == "webp"
    assert "format: WebP image 320x200 (lossless)" in stub.projection.preview
    assert "as an image" in stub.text


_TEXT = st.text(st.characters(exclude_categories=["Cs"]))
"""Strings without lone surrogates: simdjson and orjson refuse their escapes, the sniffer too."""
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=_JSON, indent=st.sampled_from([None, 2]))
def test_every_json_container_is_sniffed_as_json(value: object, indent: int | None) -> None:
    body = json.dumps({"v": value}, indent=indent).encode()

    assert sniff_media_type(body) == "application/json"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600))
def test_a_sniffed_type_is_deterministic_and_agrees_with_detection(data: bytes) -> None:
    sniffed = sniff_media_type(data)

    assert sniff_media_type(data) == sniffed
    if sniffed is not None and not sniffed.endswith("json"):
        assert detect(data, media_type=sniffed).kind == "binary"


def test_a_stub_rendered_with_the_detection_made_before_the_put_is_the_same_stub() -> None:
    data = json.dumps([{"id": i, "status": "paid"} for i in range(3000)]).encode()
    media_type = sniff_media_type(data)
    assert media_type == "application/json"
    found = detect(data, media_type=media_type)

    given_detection = render_stub(data, Ref.of(data), media_type=media_type, detection=found)
    sniffed_again = render_stub(data, Ref.of(data), media_type=media_type)

    assert (found.kind, found.classification) == ("json", ProjectionClass.COMPRESSIBLE)
    assert given_detection == sniffed_again
    assert given_detection.projection.kind == found.kind


def test_a_big_integer_before_deep_nesting_is_offloaded_not_a_recursion_error() -> None:
    deep = "[123456789012345678901234567890," + "[" * 200_000 + "]" * 200_000 + "]"
    with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
        result = hold.offload(deep, tool="x")

        assert result.outcome.value == "offloaded"
        assert hold.store.read(result.ref).raise_for_outcome() == deep.encode()  # type: ignore[arg-type]
    assert sniff_media_type(deep.encode()) is None  # not provably JSON


@pytest.mark.parametrize("tail", [b"\xff", b"\xe2\x82", b"\xc3", b"ok \xf0\x9f\x98"])
def test_a_short_body_ending_in_bytes_that_are_not_utf8_is_not_text(tail: bytes) -> None:
    found = detect(b"plain words " + tail, media_type="application/octet-stream")

    assert found.kind == "binary"


def test_a_character_cut_by_the_sniff_window_of_a_longer_body_is_still_text() -> None:
    body = b"a" * 8191 + "é".encode() + b" and more text\n"

    found = detect(body, media_type="application/octet-stream")

    assert found.kind == "text"
