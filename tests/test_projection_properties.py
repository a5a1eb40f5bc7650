"""Properties of the structure-aware projectors over generated documents.

For arbitrary JSON documents, tables and logs: the stub is within its budget at every budget, the
same bytes give the same stub, the projector did not fall back (its output is structured, not a
verbatim excerpt), and every JMESPath query a JSON stub suggests compiles and runs on the document.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re

import jmespath
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold import Budget, ProjectionClass, Ref, render_stub

BUDGETS = list(Budget)
KEYS = st.one_of(
    st.sampled_from(["id", "name", "status", "total", "created_at", "a-b", "x y", "ключ", ""]),
    st.text(max_size=12),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=12), st.dictionaries(KEYS, inner, max_size=10)
    ),
    max_leaves=60,
)
RECORDS = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 10**6), "status": st.sampled_from(["paid", "open", "void"])},
        optional={"total": st.floats(0, 10**5, allow_nan=False), "note": st.text(max_size=30)},
    ),
    min_size=2,
    max_size=300,
)
# PROPERTY_EXAMPLES=1500 for a deeper search than CI's.
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _stub_of(data: bytes, media_type: str, budget: Budget) -> str:
    return render_stub(data, Ref.of(data), media_type=media_type, budget=budget).text


def _queries(stub: str) -> list[str]:
    return [json.loads(q) for q in re.findall(r'artifact_query\(ref, ("(?:[^"\\]|\\.)*")\)', stub)]


@SLOW
@given(document=st.one_of(JSON, RECORDS), budget=st.sampled_from(BUDGETS))
def test_a_json_stub_fits_its_budget_and_its_queries_run_on_the_document(
    document: object, budget: Budget
) -> None:
    data = json.dumps(document, ensure_ascii=False).encode()

    stub = render_stub(data, Ref.of(data), media_type="application/json", budget=budget)

    assert len(stub.text.encode()) <= budget
    assert stub.text == _stub_of(data, "application/json", budget)
    if stub.projection.classification is ProjectionClass.COMPRESSIBLE:
        for expression in _queries(stub.text):
            jmespath.search(expression, document)  # raises if the hint is not valid JMESPath


@SLOW
@given(records=RECORDS)
def test_a_records_stub_states_the_exact_record_count(records: list[dict[str, object]]) -> None:
    data = json.dumps(records).encode()

    stub = _stub_of(data, "application/json", Budget.BALANCED)

    assert f"json array of {len(records):,} items" in stub
    assert "class compressible" in stub


@SLOW
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-1000, 10**6),
            # No control characters: a NUL makes any body binary, by design, not a table.
            st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=20),
            st.floats(allow_nan=False, allow_infinity=False, width=32),
        ),
        min_size=3,
        max_size=400,
    ),
    budget=st.sampled_from(BUDGETS),
)
def test_a_csv_stub_fits_its_budget_and_counts_every_row(
    rows: list[tuple[int, str, float]], budget: Budget
) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["id", "label", "value"])
    writer.writerows(rows)
    data = buffer.getvalue().encode()

    stub = _stub_of(data, "text/csv", budget)

    assert len(stub.encode()) <= budget
    assert stub == _stub_of(data, "text/csv", budget)
    assert f"{len(rows):,}" in stub


@SLOW
@given(
    levels=st.lists(st.sampled_from(["INFO", "WARN", "ERROR", "DEBUG"]), min_size=5, max_size=500),
    budget=st.sampled_from(BUDGETS),
)
def test_a_log_stub_fits_its_budget_and_counts_its_errors(
    levels: list[str], budget: Budget
) -> None:
    lines = [
        f"2026-11-29T02:{i // 60 % 60:02d}:{i % 60:02d}Z {level} [w-{i % 4}] step {i} done"
        for i, level in enumerate(levels)
    ]
    data = ("\n".join(lines) + "\n").encode()

    stub = _stub_of(data, "text/plain", budget)

    assert len(stub.encode()) <= budget
    assert stub == _stub_of(data, "text/plain", budget)
    assert "kind log" in stub
    if "ERROR" in levels:
        assert f"ERROR {levels.count('ERROR'):,}" in stub


def _parses(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


@SLOW
@given(
    document=st.one_of(JSON, RECORDS),
    as_repr=st.booleans(),
    media_type=st.sampled_from(["application/json", "text/plain"]),
)
def test_a_stub_offers_the_query_tool_only_for_a_body_that_is_json(
    document: object, as_repr: bool, media_type: str
) -> None:
    data = (repr(document) if as_repr else json.dumps(document, ensure_ascii=False)).encode()

    stub = render_stub(data, Ref.of(data), media_type=media_type, budget=Budget.LIGHT)

    if "artifact_query(ref, expression)" in stub.text:
        assert _parses(data)
    if not as_repr and isinstance(document, dict | list):
        assert "artifact_query(ref, expression)" in stub.text
