"""Stubs of every corpus file: whole-output snapshots, and the facts a model needs, checked.

Snapshots live in ``tests/snapshots/stubs/``; after a reviewed change to a projector, rewrite them
with ``CARGOHOLD_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_projection_corpus.py`` and read the
diff by eye before committing.

The fact checks compute each fact from the file itself, independently of the projector, and
require the preview to state it (or to state that it was left out, and how much).
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import orjson
import pytest

from cargohold import Budget, Ref, render_stub

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "stubs"
UPDATE = os.environ.get("CARGOHOLD_UPDATE_SNAPSHOTS") == "1"

MEDIA = {
    ".json": "application/json",
    ".geojson": "application/geo+json",
    ".topojson": "application/json",
    ".csv": "text/csv",
    ".log": "text/plain",
    ".html": "text/html",
    ".c": "text/x-c",
    ".py": "text/x-python",
    ".diff": "text/x-diff",
    ".txt": "text/plain",
    ".png": "image/png",
    ".pdf": "application/pdf",
}


def corpus_files() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(p.name for p in CORPUS.iterdir() if p.suffix in MEDIA)


@pytest.fixture(scope="module", autouse=True)
def corpus_present() -> None:
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing at {CORPUS}")
        pytest.skip(f"the shared corpus is not at {CORPUS}")


def stub_of(name: str, budget: Budget) -> str:
    data = (CORPUS / name).read_bytes()
    media = MEDIA[Path(name).suffix]
    return render_stub(data, Ref.of(data), media_type=media, tool="fetch", budget=budget).text


def preview_of(stub: str) -> str:
    return stub.split("--- preview ---\n", 1)[1].rsplit("--- end of preview ---", 1)[0]


FILES = corpus_files()
BUDGETS = [Budget.LIGHT, Budget.BALANCED]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", FILES)
def test_the_stub_of_each_corpus_file_matches_its_reviewed_snapshot(
    name: str, budget: Budget
) -> None:
    stub = stub_of(name, budget)
    path = SNAPSHOTS / f"{name}.{budget.label}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stub + "\n", encoding="utf-8")
    assert path.exists(), f"no snapshot yet: run with CARGOHOLD_UPDATE_SNAPSHOTS=1 ({path.name})"
    assert stub + "\n" == path.read_text(encoding="utf-8")
    assert len(stub.encode()) <= budget


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", FILES)
def test_each_stub_represents_the_end_of_its_body(name: str, budget: Budget) -> None:
    data = (CORPUS / name).read_bytes()
    preview = preview_of(stub_of(name, budget))
    tail = data[-max(200, len(data) // 100) :].decode("utf-8", "replace")
    tokens = [t for t in re.findall(r"[A-Za-z0-9_]{4,}", tail)]
    states_omission = any(
        phrase in preview for phrase in ("omitted", "not shown", "last bytes", "more between lines")
    )
    assert states_omission or any(token in preview for token in tokens)
    if not states_omission:
        assert any(token in preview for token in tokens[-20:])


JSON_FILES = [n for n in FILES if Path(n).suffix in (".json", ".geojson", ".topojson")]


@pytest.mark.parametrize("name", JSON_FILES)
def test_a_json_stub_names_the_top_level_keys_and_array_lengths(name: str) -> None:
    document = orjson.loads((CORPUS / name).read_bytes())
    preview = preview_of(stub_of(name, Budget.BALANCED))

    if isinstance(document, list):
        assert f"json array of {len(document):,} items" in preview
        return
    assert f"json object with {len(document):,} keys" in preview
    for key, value in document.items():
        quoted = key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f'"{key}"'
        assert quoted in preview
        if isinstance(value, list):
            assert f"array[{len(value):,}]" in preview


CSV_FILES = [n for n in FILES if n.endswith(".csv")]


@pytest.mark.parametrize("name", CSV_FILES)
def test_a_csv_stub_names_the_columns_and_the_exact_row_count(name: str) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], [r for r in rows[1:] if r]
    preview = preview_of(stub_of(name, Budget.BALANCED))

    assert f"{len(body):,}" in preview
    shown = [column for column in header if column in preview]
    more = re.search(r"\+(\d+) more columns", preview)
    assert len(shown) + (int(more.group(1)) if more else 0) >= len(header)


LOG_FILES = [n for n in FILES if n.endswith(".log")]
_ERROR = re.compile(r"\b(ERROR|FATAL|SEVERE|CRITICAL)\b")


@pytest.mark.parametrize("name", LOG_FILES)
def test_a_log_stub_shows_every_distinct_error_line_or_counts_it(name: str) -> None:
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").split("\n")
    preview = preview_of(stub_of(name, Budget.BALANCED))
    first_of: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        match = _ERROR.search(line, 0, 160)
        if match:
            message = re.sub(r"\d+", "#", line[match.end() :])[:120]
            first_of.setdefault(message, number)
    not_shown = re.search(r"([\d,]+) more distinct messages not shown", preview)
    missing = [n for n in first_of.values() if not re.search(rf"\b{n}\b", preview)]
    if missing:
        assert not_shown is not None
        assert int(not_shown.group(1).replace(",", "")) >= 1


DIFF_FILES = [n for n in FILES if n.endswith(".diff")]


@pytest.mark.parametrize("name", DIFF_FILES)
def test_a_diff_stub_names_the_changed_files(name: str) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
    files = set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M))
    preview = preview_of(stub_of(name, Budget.BALANCED))

    shown = {f for f in files if f in preview}
    more = re.search(r"([\d,]+) more files", preview)
    assert len(shown) + (int(more.group(1).replace(",", "")) if more else 0) >= len(files)
    assert shown


FAILURE_FILES = [n for n in FILES if n.startswith("defects4j")]


@pytest.mark.parametrize("name", FAILURE_FILES)
def test_a_failure_stub_names_the_failing_tests(name: str) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
    tests = re.findall(r"^--- ([\w.$]+::\w+)", text, re.M)
    preview = preview_of(stub_of(name, Budget.BALANCED))

    shown = [t for t in dict.fromkeys(tests) if t in preview]
    more = re.search(r"([\d,]+) more failing tests", preview)
    assert shown
    assert len(shown) + (int(more.group(1).replace(",", "")) if more else 0) >= len(set(tests))
