"""``artifact_patch``: a new artifact derived from an old one without the model emitting the body.

Driven through ``Hold.call_tool``, as a model's tool call reaches cargohold: JSON Patch (RFC 6902)
on JSON bodies with their formatting kept, exact line and byte edits on any body, every failure
a typed outcome that stores nothing, and every derived artifact recording its parent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from cargohold import Hold, Limits, ListSink, MemoryStore, Ref, ToolAnswer
from cargohold.testing import FakeClock

TENANT, USER, SESSION = "tenant-acme", "user-ana", "session-1"
CANARY = "body-canary-4e1b"

ROWS = [
    {"id": index, "customer": f"c-{index % 97:05d}", "status": ("paid", "open")[index % 2]}
    for index in range(600)
]
PAGE = {"title": "Orders Zürich", "note": CANARY, "rows": ROWS}


def open_hold(store: Any = "memory://", **options: Any) -> Hold:
    return cargohold.open(store, tenant=TENANT, user=USER, session=SESSION, **options)


@pytest.fixture
def hold() -> Iterator[Hold]:
    with open_hold() as opened:
        yield opened


def put(hold: Hold, data: bytes, media_type: str = "application/json", **fields: Any) -> str:
    return str(hold.store.put(data, media_type=media_type, tool="get_page", **fields).ref)


def patch(hold: Hold, ref: str, **arguments: Any) -> ToolAnswer:
    return hold.call_tool("artifact_patch", {"ref": ref, **arguments})


def body_of(hold: Hold, ref: Ref | str | None) -> bytes:
    assert ref is not None
    return hold.store.read(ref).raise_for_outcome()


def with_status(document: dict[str, Any], row: int, status: str) -> dict[str, Any]:
    changed = json.loads(json.dumps(document))
    changed["rows"][row]["status"] = status
    return changed


# -- JSON Patch -----------------------------------------------------------------------------


def test_a_json_patch_derives_a_new_artifact_that_differs_only_in_the_patched_value(
    hold: Hold,
) -> None:
    original = json.dumps(PAGE, indent=2, ensure_ascii=False).encode()
    ref = put(hold, original)

    answer = patch(
        hold,
        ref,
        json_patch=[
            {"op": "test", "path": "/rows/321/status", "value": "open"},
            {"op": "replace", "path": "/rows/321/status", "value": "refunded"},
        ],
    )

    expected = json.dumps(with_status(PAGE, 321, "refunded"), indent=2, ensure_ascii=False)
    assert answer.outcome == "resolved", answer.text
    assert answer.ref == Ref.of(expected.encode())
    assert answer.parent == Ref.parse(ref)
    assert body_of(hold, answer.ref) == expected.encode()
    assert body_of(hold, ref) == original  # the old reference names the old bytes still
    assert answer.change is not None
    assert answer.change["formatting"] == "preserved"
    assert answer.change["operations"] == {"replace": 1, "test": 1}
    statuses = [n for n, text in enumerate(original.decode().splitlines(), 1) if '"status"' in text]
    line = statuses[321]
    assert (answer.change["first_line"], answer.change["last_line"]) == (line, line)
    assert (answer.change["lines_removed"], answer.change["lines_added"]) == (1, 1)
    assert (answer.change["bytes_before"], answer.change["bytes_after"]) == (
        len(original),
        len(expected.encode()),
    )
    changed = hold.call_tool(
        "artifact_read_lines", {"ref": str(answer.ref), "start_line": line, "end_line": line}
    )
    assert changed.content == '      "status": "refunded"\n'


@pytest.mark.parametrize(
    "dump",
    [
        pytest.param(lambda doc: json.dumps(doc, indent=2), id="indent-2-escaped"),
        pytest.param(lambda doc: json.dumps(doc, indent=4, ensure_ascii=False), id="indent-4-raw"),
        pytest.param(lambda doc: json.dumps(doc, indent="\t", ensure_ascii=False), id="tabs"),
        pytest.param(lambda doc: json.dumps(doc), id="python-default"),
        pytest.param(lambda doc: json.dumps(doc, separators=(",", ":")), id="compact"),
        pytest.param(lambda doc: json.dumps(doc, indent=2) + "\n", id="final-newline"),
        pytest.param(
            lambda doc: json.dumps(doc, indent=2, ensure_ascii=False).replace("\n", "\r\n"),
            id="crlf",
        ),
        pytest.param(lambda doc: "\ufeff" + json.dumps(doc, indent=1) + "\n\n", id="bom"),
    ],
)
def test_the_patched_document_is_written_back_in_the_originals_style(hold: Hold, dump: Any) -> None:
    ref = put(hold, dump(PAGE).encode())

    answer = patch(
        hold,
        ref,
        json_patch=[
            {"op": "replace", "path": "/rows/7/status", "value": "void"},
            {"op": "add", "path": "/rows/8/city", "value": "Genève"},
        ],
    )

    expected = with_status(PAGE, 7, "void")
    expected["rows"][8]["city"] = "Genève"
    assert answer.outcome == "resolved", answer.text
    assert answer.change is not None
    assert answer.change["formatting"] == "preserved"
    assert body_of(hold, answer.ref) == dump(expected).encode()


def test_a_document_whose_formatting_cannot_be_reproduced_is_reformatted_and_says_so(
    hold: Hold,
) -> None:
    original = b'{"total": 12.50, "rows": [1, 2,3],\n  "status":"open"}'
    ref = put(hold, original)

    answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/status", "value": "paid"}])

    assert answer.outcome == "resolved", answer.text
    assert answer.change is not None
    assert answer.change["formatting"] == "reformatted"
    assert "re-serialized" in answer.text
    assert json.loads(body_of(hold, answer.ref)) == {
        "total": 12.5,
        "rows": [1, 2, 3],
        "status": "paid",
    }


def test_a_json_patch_works_whatever_media_type_the_json_was_stored_under(hold: Hold) -> None:
    ref = put(hold, json.dumps(PAGE).encode(), media_type="text/plain; charset=utf-8")

    answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])

    assert answer.outcome == "resolved", answer.text
    assert CANARY.encode() not in body_of(hold, answer.ref)
    assert hold.store.stat(answer.ref).record.media_type == "text/plain; charset=utf-8"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("operations", "named"),
    [
        ([{"op": "test", "path": "/rows/1/status", "value": "paid"}], ["not the one tested"]),
        ([{"op": "test", "path": "/rows/0/id", "value": False}], ["not the one tested"]),
        ([{"op": "replace", "path": "/rows/600/status", "value": 1}], ["600 items", "item 600"]),
        ([{"op": "remove", "path": "/rows/3/zip"}], ["/rows/3", 'no member "zip"']),
        ([{"op": "add", "path": "/nothing/here", "value": 1}], ['no member "nothing"']),
        ([{"op": "add", "path": "/title/x", "value": 1}], ["/title is a string"]),
        ([{"op": "move", "from": "/rows", "path": "/rows/0/all"}], ["into one of its own"]),
        ([{"op": "copy", "from": "/rows/x", "path": "/y"}], ['"x" is not an index']),
        (
            [
                {"op": "replace", "path": "/title", "value": "first applies"},
                {"op": "test", "path": "/title", "value": "Orders Zürich"},
            ],
            ["json_patch[1]", "not the one tested"],
        ),
    ],
)
def test_a_patch_that_does_not_apply_is_a_conflict_that_says_where_and_stores_nothing(
    hold: Hold, operations: list[dict[str, Any]], named: list[str]
) -> None:
    ref = put(hold, json.dumps(PAGE, indent=2).encode())
    before = hold.store.artifacts()

    answer = patch(hold, ref, json_patch=operations)

    assert answer.outcome == "conflict"
    assert answer.is_error
    assert (answer.ref, answer.parent, answer.change) == (Ref.parse(ref), None, None)
    for fragment in named:
        assert fragment in answer.text
    assert "Nothing was stored" in answer.text
    assert hold.store.artifacts() == before
    assert CANARY not in answer.text
    assert "c-000" not in answer.text  # no value of the document, tested or found


def test_a_json_patch_on_a_body_that_is_not_json_is_a_conflict_that_points_to_edits(
    hold: Hold,
) -> None:
    ref = put(hold, b"2026-01-01 INFO started\n", media_type="text/plain")

    answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/0"}])

    assert answer.outcome == "conflict"
    assert "not JSON" in answer.text
    assert "edits" in answer.text


def test_a_document_that_repeats_a_member_name_is_refused_rather_than_losing_one(
    hold: Hold,
) -> None:
    ref = put(hold, b'{"status": "open", "status": "paid", "id": 1}')

    answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/id", "value": 2}])

    assert answer.outcome == "conflict"
    assert "repeats a member name" in answer.text


def test_a_result_over_the_artifact_limit_is_rejected_and_stores_nothing() -> None:
    backend = MemoryStore(limits=Limits(max_artifact_bytes=64 * 1024))
    sink = ListSink()
    with open_hold(backend, sinks=[sink]) as hold:
        ref = put(hold, json.dumps({"text": "x" * 40_000}).encode())
        before = hold.store.artifacts()

        grown = patch(hold, ref, json_patch=[{"op": "add", "path": "/more", "value": "y" * 30_000}])
        copied = patch(
            hold, ref, json_patch=[{"op": "copy", "from": "", "path": f"/c{i}"} for i in range(30)]
        )

        assert hold.store.artifacts() == before
    for answer in (grown, copied):
        assert answer.outcome == "rejected", answer.text
        assert "65,536" in answer.text
        assert answer.change is None
    stored = [
        e for e in sink.events if e.operation.value == "offload" and e.tool == "artifact_patch"
    ]
    assert [(e.outcome.value, e.reason.value, e.ref) for e in stored] == [
        ("rejected", "artifact_too_large", None)
    ] * 2


def test_a_patch_that_changes_nothing_answers_with_the_same_reference_and_stores_nothing(
    hold: Hold,
) -> None:
    ref = put(hold, json.dumps(PAGE, indent=2).encode())
    before = hold.store.artifacts()

    answer = patch(hold, ref, json_patch=[{"op": "test", "path": "/rows/0/id", "value": 0.0}])

    assert answer.outcome == "resolved"
    assert answer.ref == Ref.parse(ref)
    assert answer.parent is None
    assert answer.change is not None
    assert answer.change["unchanged"] is True
    assert hold.store.artifacts() == before


def test_the_same_patch_twice_gives_the_same_reference_stored_once_with_the_first_parent(
    hold: Hold,
) -> None:
    ref = put(hold, json.dumps(PAGE).encode())
    operations = [{"op": "replace", "path": "/title", "value": "Orders"}]

    first = patch(hold, ref, json_patch=operations)
    second = patch(hold, ref, json_patch=operations)

    assert first.ref == second.ref
    assert first.change is not None
    assert second.change is not None
    assert (first.change["existing"], second.change["existing"]) == (False, True)
    assert "already stored" in second.text
    assert len(hold.store.artifacts()) == 2
    assert hold.store.stat(second.ref).record.parent == Ref.parse(ref)  # type: ignore[union-attr]


# -- the derived record ---------------------------------------------------------------------


def test_the_derived_artifact_keeps_the_parents_media_type_sensitivity_and_completeness() -> None:
    clock = FakeClock()
    with open_hold(MemoryStore(clock=clock), ttl=600) as hold:
        ref = put(
            hold,
            json.dumps(PAGE).encode(),
            kind="page",
            sensitivity="restricted",
            complete=False,
            classification="compressible",
        )

        answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/rows/0"}])
        record = hold.store.stat(answer.ref).record  # type: ignore[arg-type]

    assert record is not None
    assert (record.media_type, record.kind, record.classification) == (
        "application/json",
        "page",
        "compressible",
    )
    assert (record.sensitivity.value, record.complete) == ("restricted", False)
    assert (record.tool, record.parent) == ("artifact_patch", Ref.parse(ref))
    assert record.expires == clock() + 600  # the hold's TTL


def test_a_derived_artifact_of_a_parent_stored_without_kind_or_class_records_them(
    hold: Hold,
) -> None:
    ref = put(hold, json.dumps(PAGE).encode())  # a plain put: no kind, no class
    log = put(hold, b"".join(b"2026-01-02 INFO step %d\n" % i for i in range(50)), "text/plain")

    answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/rows/0"}])
    edited = patch(hold, log, edits=[{"start_line": 1, "lines": ["2026-01-02 WARN step 0"]}])

    for parent, derived in ((ref, answer), (log, edited)):
        before = hold.store.stat(parent).record
        record = hold.store.stat(derived.ref).record  # type: ignore[arg-type]
        assert before is not None
        assert record is not None
        assert (before.kind, before.classification) == (None, None)
        # What an offload of the same bytes records, so artifact_info and a stub agree.
        with open_hold(threshold=64) as other:
            offloaded = other.offload(body_of(hold, derived.ref), media_type=record.media_type)
            assert offloaded.ref is not None
            expected = other.store.stat(offloaded.ref).record
        assert expected is not None
        assert expected.kind is not None
        assert (record.kind, record.classification) == (expected.kind, expected.classification)


def test_artifact_info_names_the_parent_of_a_derived_artifact(hold: Hold) -> None:
    ref = put(hold, json.dumps(PAGE).encode())
    derived = patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])

    derived_info = json.loads(hold.call_tool("artifact_info", {"ref": str(derived.ref)}).text)
    original_info = json.loads(hold.call_tool("artifact_info", {"ref": ref}).text)

    assert derived_info["parent"] == ref
    assert derived_info["tool"] == "artifact_patch"
    assert original_info["parent"] is None


def test_a_patch_of_a_patch_records_the_chain_of_parents(hold: Hold) -> None:
    ref = put(hold, json.dumps(PAGE).encode())

    first = patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])
    second = patch(hold, str(first.ref), edits=[{"offset": 0, "length": 1, "text": "[{"}])

    assert second.parent == first.ref
    assert hold.store.stat(second.ref).record.parent == first.ref  # type: ignore[union-attr]
    assert hold.store.stat(first.ref).record.parent == Ref.parse(ref)  # type: ignore[union-attr]


# -- the references that do not resolve ---------------------------------------------------------


def test_a_reference_of_another_session_or_tenant_patches_nothing() -> None:
    backend = MemoryStore()
    with open_hold(backend) as owner:
        ref = put(owner, json.dumps(PAGE).encode())
        other_session = owner.derive(session="session-2")
        with cargohold.open(backend, tenant="globex", user=USER, session=SESSION) as other_tenant:
            calls = {
                "unauthorized": patch(other_session, ref, edits=[{"offset": 0, "text": " "}]),
                "missing": patch(other_tenant, ref, edits=[{"offset": 0, "text": " "}]),
            }
            assert other_tenant.store.artifacts() == []
        assert other_session.store.artifacts() == []
    for outcome, answer in calls.items():
        assert answer.outcome == outcome
        assert (answer.parent, answer.change, answer.content) == (None, None, None)


def test_stale_bytes_are_never_patched() -> None:
    backend = MemoryStore()
    with open_hold(backend) as hold:
        ref = put(hold, json.dumps(PAGE).encode())
        backend.corrupt_for_tests(TENANT, Ref.parse(ref), offset=3)

        answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])

        assert answer.outcome == "stale"
        assert len(hold.store.artifacts()) == 1


# -- edits ----------------------------------------------------------------------------------

LOG = b"".join(f"2026-03-01 line {n} INFO ok\n".encode() for n in range(1, 101))


def lines_of(data: bytes) -> list[str]:
    return data.decode().splitlines()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"start_line": 5, "lines": ["five"]}, lambda ls: [*ls[:4], "five", *ls[5:]]),
        ({"start_line": 5, "end_line": 7, "lines": []}, lambda ls: [*ls[:4], *ls[7:]]),
        (
            {"start_line": 5, "end_line": 4, "lines": ["a", "b"]},
            lambda ls: [*ls[:4], "a", "b", *ls[4:]],
        ),
        ({"start_line": 101, "end_line": 100, "lines": ["end"]}, lambda ls: [*ls, "end"]),
        ({"start_line": 1, "end_line": 100, "lines": ["all"]}, lambda ls: ["all"]),
    ],
    ids=["replace-one", "delete-three", "insert-before", "append", "replace-all"],
)
def test_a_line_edit_replaces_exactly_those_lines(hold: Hold, edit: Any, expected: Any) -> None:
    ref = put(hold, LOG, media_type="text/plain")

    answer = patch(hold, ref, edits=[edit])

    assert answer.outcome == "resolved", answer.text
    data = body_of(hold, answer.ref)
    assert lines_of(data) == expected(lines_of(LOG))
    assert data.endswith(b"\n")


def test_edits_all_refer_to_the_original_body_and_apply_together(hold: Hold) -> None:
    ref = put(hold, LOG, media_type="text/plain")
    offset = LOG.index(b"line 50 ")

    answer = patch(
        hold,
        ref,
        edits=[
            {"start_line": 90, "end_line": 90, "lines": ["ninety"]},
            {"start_line": 2, "end_line": 3, "lines": []},
            {"offset": offset, "length": len(b"line 50"), "text": "LINE FIFTY"},
        ],
    )

    assert answer.outcome == "resolved", answer.text
    expected = lines_of(LOG)
    expected[89] = "ninety"
    expected[49] = expected[49].replace("line 50", "LINE FIFTY")
    del expected[1:3]
    assert lines_of(body_of(hold, answer.ref)) == expected
    assert answer.change is not None
    assert answer.change["operations"] == {"bytes": 1, "lines": 2}
    assert (answer.change["lines_removed"], answer.change["lines_added"]) == (4, 2)


def test_a_body_without_a_final_line_break_keeps_it_that_way(hold: Hold) -> None:
    ref = put(hold, b"a\r\nb\r\nc", media_type="text/plain")

    replaced = patch(hold, ref, edits=[{"start_line": 3, "lines": ["C", "D"]}])
    appended = patch(hold, ref, edits=[{"start_line": 4, "end_line": 3, "lines": ["d"]}])
    deleted = patch(hold, ref, edits=[{"start_line": 3, "lines": []}])

    assert body_of(hold, replaced.ref) == b"a\r\nb\r\nC\r\nD"
    assert body_of(hold, appended.ref) == b"a\r\nb\r\nc\r\nd"
    assert body_of(hold, deleted.ref) == b"a\r\nb"


def test_a_byte_edit_is_exact_even_in_a_binary_body(hold: Hold) -> None:
    binary = bytes(range(256)) * 4
    ref = put(hold, binary, media_type="application/octet-stream")

    answer = patch(hold, ref, edits=[{"offset": 10, "length": 3, "text": "OK"}])

    assert body_of(hold, answer.ref) == binary[:10] + b"OK" + binary[13:]
    assert hold.store.stat(answer.ref).record.media_type == "application/octet-stream"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("edits", "outcome", "named"),
    [
        ([{"start_line": 102, "end_line": 102, "lines": []}], "conflict", ["100 lines"]),
        ([{"start_line": 100, "end_line": 101, "lines": []}], "conflict", ["start_line=101"]),
        ([{"offset": 3000, "length": 1, "text": ""}], "conflict", ["past the end"]),
        ([{"offset": 1, "length": 0, "text": "x"}], "conflict", ["inside a UTF-8 character"]),
        ([{"offset": 0, "length": 1, "text": "x"}], "conflict", ["byte 1 falls inside"]),
        (
            [{"start_line": 1, "lines": ["x"]}, {"offset": 3, "length": 1, "text": ""}],
            "invalid_arguments",
            ["overlap"],
        ),
        ([{"start_line": 1, "lines": ["two\nlines"]}], "invalid_arguments", ["line break"]),
        ([{"start_line": 3, "end_line": 1, "lines": []}], "invalid_arguments", ["at least 2"]),
        ([{"offset": 0, "lenght": 1, "text": ""}], "invalid_arguments", ["lenght"]),
        ([], "invalid_arguments", ["non-empty array"]),
    ],
)
def test_an_edit_that_does_not_fit_the_body_is_refused_and_stores_nothing(
    hold: Hold, edits: list[dict[str, Any]], outcome: str, named: list[str]
) -> None:
    body = "é" + LOG.decode()
    ref = put(hold, body.encode(), media_type="text/plain")
    before = hold.store.artifacts()

    answer = patch(hold, ref, edits=edits)

    assert answer.outcome == outcome
    for fragment in named:
        assert fragment in answer.text
    assert hold.store.artifacts() == before


def test_a_byte_edit_whose_end_falls_inside_a_character_is_refused(hold: Hold) -> None:
    ref = put(hold, "é".encode(), media_type="text/plain")  # b"\xc3\xa9"
    before = hold.store.artifacts()

    answer = patch(hold, ref, edits=[{"offset": 0, "length": 1, "text": "x"}])  # b"x\xa9"

    assert answer.outcome == "conflict"
    assert "byte 1 falls inside a UTF-8 character" in answer.text
    assert hold.store.artifacts() == before


@settings(max_examples=200, deadline=None)
@given(
    text=st.text("aé☕😀\n", min_size=1, max_size=12),
    offset=st.integers(0, 40),
    length=st.integers(0, 40),
    new=st.text("xé", max_size=3),
)
def test_a_byte_edit_of_utf8_text_is_refused_or_leaves_utf8_text(
    text: str, offset: int, length: int, new: str
) -> None:
    body = text.encode()
    with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
        ref = put(hold, body, media_type="text/plain")
        answer = patch(hold, ref, edits=[{"offset": offset, "length": length, "text": new}])
        if answer.outcome == "resolved":
            body_of(hold, answer.ref).decode("utf-8")  # strict: every character whole
        else:
            assert answer.outcome == "conflict"
            assert offset + length > len(body) or any(
                point < len(body) and (body[point] & 0xC0) == 0x80
                for point in (offset, offset + length)
            )


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"json_patch": [{"op": "remove", "path": "/0"}], "edits": [{"offset": 0, "text": ""}]},
        {"json_patch": [{"op": "jump", "path": "/0"}]},
        {"json_patch": [{"op": "remove", "path": "rows"}]},
        {"json_patch": [{"op": "replace", "path": "/0"}]},
        {"json_patch": "not json"},
    ],
    ids=["neither", "both", "unknown-op", "bad-pointer", "no-value", "not-json"],
)
def test_a_malformed_call_is_invalid_arguments_before_anything_is_read(
    arguments: dict[str, Any],
) -> None:
    class Unreadable(MemoryStore):
        def read(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a malformed patch must not read the body")

    with open_hold(Unreadable()) as hold:
        ref = put(hold, b"[1, 2, 3]")
        answer = patch(hold, ref, **arguments)

    assert answer.outcome == "invalid_arguments"
    assert answer.text.startswith("artifact_patch: invalid arguments: ")


def test_a_patch_given_as_json_text_or_as_one_operation_is_understood(hold: Hold) -> None:
    ref = put(hold, b'{"a": 1}')

    as_text = patch(hold, ref, json_patch='[{"op": "replace", "path": "/a", "value": 2}]')
    as_one = patch(hold, ref, json_patch={"op": "replace", "path": "/a", "value": 2})

    assert as_text.ref == as_one.ref == Ref.of(b'{"a": 2}')


# -- what the model and the events see -------------------------------------------------------


def test_neither_the_answer_nor_the_events_carry_the_body() -> None:
    sink = ListSink()
    with open_hold(sinks=[sink]) as hold:
        ref = put(hold, json.dumps(PAGE, indent=2).encode())
        answers = [
            patch(hold, ref, json_patch=[{"op": "remove", "path": "/rows/5"}]),
            patch(hold, ref, edits=[{"start_line": 1, "end_line": 3, "lines": []}]),
            patch(hold, ref, json_patch=[{"op": "test", "path": "/note", "value": "other"}]),
        ]

    assert [a.outcome for a in answers] == ["resolved", "resolved", "conflict"]
    for answer in answers:
        for shown in (answer.text, json.dumps(answer.structured()), repr(answer)):
            assert CANARY not in shown
            assert "c-00005" not in shown
            assert len(shown.encode()) < 2048
    for event in sink.events:
        assert CANARY not in repr(event)
        assert SESSION not in repr(event)
    decisions = [(e.operation.value, e.outcome.value, e.content_kind.value) for e in sink.events]
    assert decisions == [
        ("rehydrate", "resolved", "tool_arguments"),
        ("offload", "offloaded", "tool_result"),
        ("rehydrate", "resolved", "tool_arguments"),
        ("offload", "offloaded", "tool_result"),
        ("rehydrate", "resolved", "tool_arguments"),
    ]
    assert answers[0].event is sink.events[1]


def test_the_structured_part_of_a_patch_answer_is_json_ready_with_parent_and_change(
    hold: Hold,
) -> None:
    ref = put(hold, json.dumps(PAGE).encode())

    answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])

    facts = json.loads(json.dumps(answer.structured()))
    assert facts["outcome"] == "resolved"
    assert facts["ref"] == str(answer.ref)
    assert facts["sha256"] == answer.ref.digest  # type: ignore[union-attr]
    assert facts["parent"] == ref
    assert set(facts["change"]) >= {"method", "operations", "bytes_before", "bytes_after"}


def test_the_async_call_patches_as_the_sync_call_does(hold: Hold) -> None:
    import asyncio

    ref = put(hold, json.dumps(PAGE).encode())
    arguments = {"ref": ref, "json_patch": [{"op": "remove", "path": "/rows/1"}]}

    answer = asyncio.run(hold.acall_tool("artifact_patch", arguments))

    assert answer.outcome == "resolved"
    assert answer.ref == hold.call_tool("artifact_patch", arguments).ref


# -- properties --------------------------------------------------------------------------------

_LINE = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=12),
    final_break=st.booleans(),
    start=st.integers(1, 14),
    span=st.integers(-1, 4),
    new=st.lists(_LINE, max_size=4),
)
def test_a_line_edit_gives_what_splicing_the_lines_gives(
    lines: list[str], final_break: bool, start: int, span: int, new: list[str]
) -> None:
    text = "\n".join(lines) + ("\n" if final_break and lines else "")
    end = start + span
    with open_hold() as hold:
        ref = put(hold, text.encode(), media_type="text/plain")
        answer = patch(hold, ref, edits=[{"start_line": start, "end_line": end, "lines": new}])
        count = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        if start > count + 1 or end > count or end < start - 1:
            assert answer.outcome in {"conflict", "invalid_arguments"}
            return
        if answer.ref == Ref.parse(ref):
            result = text.encode()
        else:
            assert answer.outcome == "resolved", answer.text
            result = body_of(hold, answer.ref)
    original = text.split("\n") if text else []
    if text.endswith("\n"):
        original.pop()
    spliced = original[: start - 1] + new + original[end:]
    ends_open = bool(text) and not text.endswith("\n")
    expected = "\n".join(spliced) + ("\n" if spliced and not ends_open else "")
    assert result == expected.encode()


def test_with_a_sliding_ttl_a_patch_keeps_the_parent_it_read_alive() -> None:
    clock = FakeClock()
    with open_hold(MemoryStore(clock=clock), ttl=100, sliding_ttl=True) as hold:
        ref = put(hold, json.dumps(PAGE).encode())
        clock.advance(90)

        patch(hold, ref, json_patch=[{"op": "remove", "path": "/note"}])

        clock.advance(90)
        assert hold.store.stat(ref).outcome.value == "resolved"


_WORD = st.text("abcXYZ019 _-é☕", max_size=6)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _WORD,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_WORD, inner, max_size=4),
    max_leaves=20,
)
_STYLES = st.fixed_dictionaries(
    {
        "indent": st.sampled_from([None, 0, 1, 2, 4, "\t"]),
        "separators": st.sampled_from([(", ", ": "), (",", ":"), (",", ": ")]),
        "ensure_ascii": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None)
@given(document=st.dictionaries(_WORD, _JSON, min_size=2, max_size=5), style=_STYLES, value=_JSON)
def test_a_document_written_by_json_dumps_keeps_its_exact_style_through_a_patch(
    document: dict[str, Any], style: dict[str, Any], value: Any
) -> None:
    """Two members or more, so that the document shows its separators and indentation."""
    original = json.dumps(document, **style)
    patched = {**document, "added": value}
    with open_hold() as hold:
        ref = put(hold, original.encode())
        answer = patch(hold, ref, json_patch=[{"op": "add", "path": "/added", "value": value}])
        result = body_of(hold, answer.ref)
    assert answer.outcome == "resolved", answer.text
    assert answer.change is not None
    assert answer.change["formatting"] == "preserved"
    assert json.loads(result) == patched
    # New non-ASCII text is escaped only where the document shows it escapes (or cannot tell).
    evident = not json.dumps(document, ensure_ascii=False).isascii()
    if not style["ensure_ascii"] or evident or json.dumps(value, ensure_ascii=False).isascii():
        assert result == json.dumps(patched, **style).encode()


def test_a_number_json_cannot_write_back_is_a_conflict_not_a_crash(hold: Hold) -> None:
    ref = put(hold, b'{"huge": 1e400, "status": "open"}')

    answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/status", "value": "x"}])

    assert answer.outcome == "conflict"
    assert "edits" in answer.text


def test_changes_far_apart_in_a_large_body_are_counted_line_by_line(hold: Hold) -> None:
    big = b"".join(b"2026-03-01 line %d INFO ok\n" % n for n in range(1, 50_001))
    ref = put(hold, big, media_type="text/plain")

    answer = patch(
        hold,
        ref,
        edits=[
            {"start_line": 10, "end_line": 9, "lines": ["inserted"]},
            {"start_line": 25_000, "end_line": 25_002, "lines": ["three became one"]},
            {"start_line": 49_990, "end_line": 49_990, "lines": []},
        ],
    )

    assert answer.change is not None
    assert (answer.change["lines_removed"], answer.change["lines_added"]) == (4, 2)
    assert answer.change["exact"] is True
    # the span from the first change to the last: the deleted line 49,990 sat after 49,988
    assert (answer.change["first_line"], answer.change["last_line"]) == (10, 49_988)
    assert "4 removed, 2 added" in answer.text


def test_a_reformatted_document_is_counted_whole_and_says_at_most(hold: Hold) -> None:
    rows = [{"id": n, "total": n + 0.5} for n in range(1500)]
    ref = put(hold, json.dumps(rows, indent=2).replace(".5", ".50").encode())

    answer = patch(hold, ref, json_patch=[{"op": "remove", "path": "/0"}])

    assert answer.change is not None
    assert answer.change["formatting"] == "reformatted"
    assert answer.change["exact"] is False
    assert "at most" in answer.text


# -- credentials written in by a patch ------------------------------------------------------

TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def test_a_credential_patched_in_is_redacted_before_it_is_stored_under_the_default(
    hold: Hold,
) -> None:
    ref = put(hold, json.dumps(PAGE).encode())

    answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/note", "value": TOKEN}])

    stored = body_of(hold, answer.ref)
    assert answer.outcome == "resolved"
    assert TOKEN.encode() not in stored
    assert b"[REDACTED:" in stored
    assert answer.change is not None
    assert answer.change["credentials"] == "redacted"
    assert answer.event is not None
    assert answer.event.reason.value == "credential_redacted"
    assert TOKEN not in answer.text


def test_a_credential_patched_in_is_refused_under_the_parent_tools_reject_policy(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text('secrets_policy = { get_page = "reject" }\n', encoding="utf-8")
    with open_hold(config_file=config) as hold:
        ref = put(hold, json.dumps(PAGE).encode())
        before = hold.store.artifacts()

        answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/note", "value": TOKEN}])

        assert hold.store.artifacts() == before
    assert (answer.outcome, answer.ref) == ("rejected", Ref.parse(ref))
    assert answer.event is not None
    assert answer.event.reason.value == "credential_detected"
    assert TOKEN not in answer.text


def test_a_credential_patched_in_is_stored_restricted_under_a_mask_policy(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text('secrets_policy = { "*" = "mask" }\n', encoding="utf-8")
    with open_hold(config_file=config) as hold:
        ref = put(hold, json.dumps(PAGE).encode())

        answer = patch(hold, ref, json_patch=[{"op": "replace", "path": "/note", "value": TOKEN}])
        record = hold.store.stat(answer.ref).record  # type: ignore[arg-type]

        assert record is not None
        assert record.sensitivity.value == "restricted"
        assert TOKEN.encode() in body_of(hold, answer.ref)  # the exact bytes, kept restricted
        assert answer.change is not None
        assert answer.change["credentials"] == "masked"
