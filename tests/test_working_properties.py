"""Properties of worker-result projections over generated results: never over budget, the same
input gives the same text, failures always stated, and any report either validates or is
refused with a stable reason (never another exception)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold import Budget, MemoryStore, Ref
from cargohold.working import (
    WorkerReport,
    WorkerResultError,
    WorkerStatus,
    WorkingContext,
)
from working_fixtures import build_log, failing_test_run, open_hold, orders_json

_char = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from("\n\t")
_line = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))
_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}", fullmatch=True)
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(_line, max_size=60),
)
_message = st.text(_char, max_size=120)
_OUTPUTS = [build_log(300), failing_test_run(60), orders_json(150), "", "short output"]


REASONS = {
    "wrong_type",
    "unknown_field",
    "too_large",
    "too_many",
    "invalid_value",
    "invalid_text",
    "malformed_reference",
    "reserved",
    "duplicate",
    "not_json",
}


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    kinds = ["worker", "test", "build", "security", "cancellation", "timeout"]
    changes = draw(st.lists(st.tuples(_ids, _values), max_size=16, unique_by=lambda c: c[0]))
    return {
        "summary": draw(st.text(_char, max_size=500)),
        "findings": draw(st.lists(st.text(_char, max_size=120), max_size=16)),
        "errors": [
            {"kind": kind, "message": message}
            for kind, message in draw(
                st.lists(
                    st.tuples(st.sampled_from(kinds), st.text(_char, max_size=120)), max_size=16
                )
            )
        ],
        "state_delta": {"changes": [{"op": "set", "key": k, "value": v} for k, v in changes]},
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    report=reports(),
    output=st.sampled_from(_OUTPUTS),
    status=st.sampled_from(["passed", "failed", "cancelled"]),
    budget=st.sampled_from(list(Budget)),
    association=st.none() | _ids,
)
def test_a_projection_never_exceeds_its_budget_and_is_the_same_for_the_same_input(
    report: dict[str, Any], output: str, status: str, budget: Budget, association: str | None
) -> None:
    store = MemoryStore()
    with open_hold(store) as first_hold, open_hold(store) as second_hold:
        first = WorkingContext(first_hold, budget=budget)
        second = WorkingContext(second_hold, budget=budget)

        a = first.submit(
            output, worker="w", status=status, report=report, association_id=association
        )
        b = second.submit(
            output, worker="w", status=status, report=report, association_id=association
        )
        text = first.project(a)

        assert len(text.encode()) <= budget
        assert text == second.project(b)
        assert f"status {a.status.value}" in text.split("\n", 1)[0]
        if a.status is not WorkerStatus.PASSED:
            assert not a.ok
        for error in a.errors:  # every kind of failure is counted on the second line
            assert f"{error.kind.value} " in text.split("\n")[1]


@settings(max_examples=200, deadline=None)
@given(
    data=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
        lambda inner: (
            st.lists(inner, max_size=5)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "summary",
                        "findings",
                        "errors",
                        "refs",
                        "state_delta",
                        "status",
                        "kind",
                        "message",
                        "ref",
                        "role",
                        "changes",
                        "op",
                        "key",
                        "value",
                        "x",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_any_report_either_validates_or_is_refused_with_a_stable_reason(data: object) -> None:
    reason: str | None = None
    parsed: WorkerReport | None = None
    try:
        parsed = WorkerReport.parse(data)
    except WorkerResultError as exc:
        reason = exc.reason

    if parsed is None:
        assert reason in REASONS
    else:
        assert all(isinstance(entry.ref, Ref) for entry in parsed.refs)
