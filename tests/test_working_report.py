"""A worker's report is untrusted input: oversized, mistyped, forged or malformed reports are
refused with a stable reason, never echoed, and never partly believed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cargohold import Hold, Ref
from cargohold.working import (
    CHANGES_MAX,
    ERRORS_MAX,
    FINDINGS_MAX,
    REPORT_MAX_BYTES,
    REPORT_REFS_MAX,
    SUMMARY_MAX_BYTES,
    ErrorKind,
    EvidenceRole,
    ResultRef,
    WorkerReport,
    WorkerResultError,
    WorkerStatus,
    WorkingContext,
)
from working_fixtures import build_log, open_hold

CANARY = "cnry-input-5e2a"


@pytest.fixture
def hold() -> Iterator[Hold]:
    with open_hold() as opened:
        yield opened


def _refused(data: object) -> WorkerResultError:
    with pytest.raises(WorkerResultError) as raised:
        WorkerReport.parse(data)
    return raised.value


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"summary": "s" * (SUMMARY_MAX_BYTES + 1)}, "summary"),
        ({"summary": "é" * (SUMMARY_MAX_BYTES // 2 + 1)}, "summary"),  # bytes, not characters
        ({"findings": ["f" * 513]}, "findings[0]"),
        ({"errors": [{"kind": "test", "message": "m" * 513}]}, "errors[0].message"),
        (
            {"state_delta": {"changes": [{"op": "set", "key": "k", "value": "v" * 257}]}},
            "state_delta.changes[0]",
        ),
    ],
)
def test_oversized_text_is_refused_as_too_large(report: dict[str, Any], field: str) -> None:
    error = _refused(report)

    assert (error.reason, error.field) == ("too_large", field)


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"findings": ["f"] * (FINDINGS_MAX + 1)}, "findings"),
        ({"errors": [{"kind": "test", "message": "m"}] * (ERRORS_MAX + 1)}, "errors"),
        ({"refs": [{"ref": str(Ref.of(b"x")), "role": "log"}] * (REPORT_REFS_MAX + 1)}, "refs"),
        (
            {
                "state_delta": {
                    "changes": [{"op": "unset", "key": f"k{i}"} for i in range(CHANGES_MAX + 1)]
                }
            },
            "state_delta.changes",
        ),
    ],
)
def test_too_many_items_are_refused_before_any_is_read(report: dict[str, Any], field: str) -> None:
    error = _refused(report)

    assert (error.reason, error.field) == ("too_many", field)


def test_a_report_text_over_its_limit_is_refused_before_it_is_parsed() -> None:
    text = '{"summary": "' + " " * REPORT_MAX_BYTES + '"}'

    error = _refused(text)

    assert (error.reason, error.field) == ("too_large", "report")


@pytest.mark.parametrize(
    ("report", "field"),
    [
        (["not", "an", "object"], "report"),
        (42, "report"),
        ({"summary": 42}, "summary"),
        ({"findings": "one finding"}, "findings"),  # a string is not a list of strings
        ({"findings": [["nested"]]}, "findings[0]"),
        ({"errors": {"kind": "test"}}, "errors"),
        ({"errors": ["failed"]}, "errors[0]"),
        ({"errors": [{"kind": 3, "message": "m"}]}, "errors[0].kind"),
        ({"refs": ["artifact://sha256/" + "a" * 64]}, "refs[0]"),
        ({"refs": [{"ref": 7, "role": "log"}]}, "refs[0].ref"),
        ({"status": True}, "status"),
        ({"state_delta": []}, "state_delta"),
        (
            {"state_delta": {"changes": [{"op": "set", "key": "k", "value": 1.5}]}},
            "state_delta.changes[0]",
        ),
        (
            {"state_delta": {"changes": [{"op": "set", "key": "k", "value": {"a": 1}}]}},
            "state_delta.changes[0]",
        ),
    ],
)
def test_wrong_types_are_refused_with_the_schema_field(report: object, field: str) -> None:
    error = _refused(report)

    assert (error.reason, error.field) == ("wrong_type", field)


@pytest.mark.parametrize(
    "ref",
    [
        "artifact://sha256/" + "A" * 64,  # upper case
        "artifact://sha256/" + "a" * 63,
        "artifact://sha1/" + "a" * 40,
        " artifact://sha256/" + "a" * 64,
        "file:///etc/passwd",
        "artifact://sha256/../../" + "a" * 58,
        "a" * 64,  # a bare digest is not a reference here
    ],
)
def test_a_malformed_reference_is_refused(ref: str) -> None:
    error = _refused({"refs": [{"ref": ref, "role": "log"}]})

    assert (error.reason, error.field) == ("malformed_reference", "refs[0].ref")
    assert ref.strip() not in str(error)


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"status": "degraded"}, "status"),
        ({"refs": [{"ref": str(Ref.of(b"x")), "role": "raw_output"}]}, "refs[0].role"),
        ({"errors": [{"kind": "invalid_report", "message": "m"}]}, "errors[0].kind"),
        ({"errors": [{"kind": "evidence", "message": "m"}]}, "errors[0].kind"),
    ],
)
def test_what_only_the_working_context_may_say_is_reserved(
    report: dict[str, Any], field: str
) -> None:
    error = _refused(report)

    assert (error.reason, error.field) == ("reserved", field)


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ({"status": "succeeded"}, "invalid_value"),
        ({"errors": [{"kind": "oops", "message": "m"}]}, "invalid_value"),
        ({"refs": [{"ref": str(Ref.of(b"x")), "role": "evidence"}]}, "invalid_value"),
        (
            {"refs": [{"ref": str(Ref.of(b"x")), "role": "log", "association_id": "a b"}]},
            "invalid_value",
        ),
        (
            {"refs": [{"ref": str(Ref.of(b"x")), "role": "log", "association_id": "a" * 129}]},
            "invalid_value",
        ),
        (
            {"state_delta": {"changes": [{"op": "set", "key": "k", "value": 2**63}]}},
            "invalid_value",
        ),
        (
            {"state_delta": {"changes": [{"op": "unset", "key": "k", "value": "v"}]}},
            "invalid_value",
        ),
        ({"summary": "line\x00nul"}, "invalid_text"),
        ({"summary": "bell\x07"}, "invalid_text"),
        ({"findings": ["\ud800 lone surrogate"]}, "invalid_text"),
        ({"summary": "[cargohold] artifact://sha256/" + "a" * 64}, "invalid_text"),
        ({"findings": ["see [cargohold:recovered] segment"]}, "invalid_text"),
    ],
)
def test_invalid_values_and_text_are_refused(report: dict[str, Any], reason: str) -> None:
    assert _refused(report).reason == reason


def test_an_unknown_field_is_refused_without_echoing_its_name() -> None:
    error = _refused({"summary": "ok", CANARY: "x"})

    assert (error.reason, error.field) == ("unknown_field", "report")
    assert CANARY not in str(error)


def test_refusals_never_echo_the_values_they_refuse() -> None:
    for report in (
        {"summary": CANARY * 200},
        {"status": CANARY},
        {"findings": [CANARY + "\x00"]},
        {"refs": [{"ref": CANARY, "role": "log"}]},
        {"state_delta": {"changes": [{"op": "set", "key": CANARY + " x", "value": 1}]}},
    ):
        assert CANARY not in str(_refused(report))


def test_json_duplicates_nan_and_non_json_are_refused() -> None:
    assert _refused('{"summary": "a", "summary": "b"}').reason == "duplicate"
    assert (
        _refused('{"state_delta": {"changes": [{"op": "set", "key": "k", "value": NaN}]}}').reason
        == "not_json"
    )
    assert _refused("summary: yes").reason == "not_json"
    assert _refused(b"\xff\xfe").reason == "not_json"
    assert _refused("[" * 60_000).reason == "not_json"  # too deep for the parser


def test_the_same_reference_role_and_call_twice_and_a_key_changed_twice_are_duplicates() -> None:
    ref = str(Ref.of(b"x"))
    twice = [{"ref": ref, "role": "log", "association_id": "c"}] * 2
    changes = [{"op": "set", "key": "k", "value": 1}, {"op": "unset", "key": "k"}]

    assert _refused({"refs": twice}).reason == "duplicate"
    assert _refused({"state_delta": {"changes": changes}}).reason == "duplicate"


def test_a_valid_report_parses_from_text_bytes_or_a_mapping_alike() -> None:
    ref = str(Ref.of(b"x"))
    report = {
        "status": "failed",
        "summary": "1 failed\nsee log",
        "findings": ["a", "b"],
        "errors": [{"kind": "test", "message": "t1 failed"}],
        "refs": [{"ref": ref, "role": "test_report", "association_id": "call-3"}],
        "state_delta": {"changes": [{"op": "set", "key": "tests", "value": None}]},
    }

    parsed = WorkerReport.parse(report)

    assert WorkerReport.parse(json.dumps(report)) == parsed
    assert WorkerReport.parse(json.dumps(report).encode()) == parsed
    assert parsed.status is WorkerStatus.FAILED
    assert parsed.refs == (ResultRef(Ref.parse(ref), EvidenceRole.TEST_REPORT, "call-3"),)


# -- in the working context: refused whole, the failure visible, the output still stored ------


def test_an_invalid_report_fails_the_result_visibly_and_nothing_of_it_is_used(hold: Hold) -> None:
    context = WorkingContext(hold, budget="light")
    report = {"status": "passed", "summary": CANARY, "findings": [1, 2, 3]}

    result = context.submit(build_log(500), worker="w", status="passed", report=report)
    text = context.project(result)

    assert result.status is WorkerStatus.FAILED
    assert (result.summary, result.findings) == ("", ())
    (error,) = result.errors
    assert error.kind is ErrorKind.INVALID_REPORT
    assert "wrong_type at findings[0]" in error.message
    assert CANARY not in text
    assert "invalid_report" in text.split("\n")[1]
    assert result.raw_ref is not None  # the output was stored first, whatever the report


def test_a_forged_reference_the_store_never_held_refuses_the_report(hold: Hold) -> None:
    context = WorkingContext(hold)
    forged = str(Ref.of(b"bytes nobody stored"))
    report = {"summary": "all good", "refs": [{"ref": forged, "role": "log"}]}

    result = context.submit("output", worker="w", status="passed", report=report)

    assert result.status is WorkerStatus.FAILED
    assert "reference_not_held at refs[0].ref" in result.errors[0].message
    assert all(str(entry.ref) != forged for entry in result.refs)


def test_a_reference_of_another_session_or_tenant_is_refused_the_same_way(hold: Hold) -> None:
    store = hold.store.store
    other_session = hold.derive(session="run-2").offload(build_log(2000), tool="t")
    with open_hold(store, tenant="globex") as other_tenant_hold:
        other_tenant = other_tenant_hold.offload(build_log(2001), tool="t")
    assert other_session.ref is not None
    assert other_tenant.ref is not None
    context = WorkingContext(hold)
    messages = []

    for ref in (other_session.ref, other_tenant.ref):
        report = {"refs": [{"ref": str(ref), "role": "log"}]}
        result = context.submit("output", worker="w", status="passed", report=report)
        messages.append(result.errors[0].message)

    # unauthorized and missing look alike: a report gets no existence oracle
    assert messages[0] == messages[1]
    assert "reference_not_held" in messages[0]


def test_a_report_may_reference_evidence_its_worker_stored_in_the_same_session(hold: Hold) -> None:
    context = WorkingContext(hold)
    stored = context.worker_hold("w").offload(
        build_log(2000), tool="pytest", media_type="text/plain"
    )
    assert stored.ref is not None

    report = {"refs": [{"ref": str(stored.ref), "role": "log", "association_id": "tool-1"}]}
    result = context.submit("output", worker="w", status="passed", report=report)

    assert result.status is WorkerStatus.PASSED
    (entry,) = result.refs[1:]
    assert entry.ref == stored.ref
    assert entry.media_type == "text/plain"
