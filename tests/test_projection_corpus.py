"""Stubs of every corpus file and code fixture: whole-output snapshots, and the facts a model needs.

Snapshots live in ``tests/snapshots/stubs/``, one per source file and budget. After a reviewed
change to a projector, rewrite them with ``CARGOHOLD_UPDATE_SNAPSHOTS=1 .venv/bin/pytest
tests/test_projection_corpus.py``: each snapshot that changes is written and its test FAILS, so a
blessing run never reports a pass; read ``git diff tests/snapshots`` and run again without the
switch. The switch is refused under ``CI``. A snapshot whose source no longer exists fails too.
docs/testing.md has the whole procedure.

The fact checks compute each fact from the file itself, independently of the projector, and
require the preview to state it (or to state that it was left out, and how much): they hold
whatever the snapshots say.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path

import orjson
import pytest

from cargohold import Budget, Ref, render_stub
from cargohold._tokens import count_tokens
from code_fixtures import CODE_FIXTURES

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "stubs"

MEDIA = {
    ".json": "application/json",
    ".geojson": "application/geo+json",
    ".topojson": "application/json",
    ".csv": "text/csv",
    ".log": "text/plain",
    ".html": "text/html",
    ".txt": "text/plain",
    ".png": "image/png",
    ".pdf": "application/pdf",
}


def _ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def corpus_files() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(p.name for p in CORPUS.iterdir() if p.suffix in MEDIA)


@pytest.fixture(scope="module", autouse=True)
def corpus_present() -> None:
    if not CORPUS.is_dir():
        if _ci():
            pytest.fail(f"the shared corpus is missing at {CORPUS}")
        pytest.skip(f"the shared corpus is not at {CORPUS}")


def source_of(name: str) -> tuple[bytes, str]:
    """The bytes and media type of a corpus file or a code fixture."""
    if name in CODE_FIXTURES:
        return CODE_FIXTURES[name].read(), CODE_FIXTURES[name].media_type
    return (CORPUS / name).read_bytes(), MEDIA[Path(name).suffix]


def stub_of(name: str, budget: Budget) -> str:
    data, media = source_of(name)
    return render_stub(data, Ref.of(data), media_type=media, tool="fetch", budget=budget).text


def preview_of(stub: str) -> str:
    return stub.split("--- preview ---\n", 1)[1].rsplit("--- end of preview ---", 1)[0]


CORPUS_FILES = corpus_files()
FILES = CORPUS_FILES + sorted(CODE_FIXTURES)
BUDGETS = [Budget.LIGHT, Budget.BALANCED]


def _updating() -> bool:
    """Whether this run rewrites snapshots; read when a test runs, refused under CI."""
    if os.environ.get("CARGOHOLD_UPDATE_SNAPSHOTS") != "1":
        return False
    if _ci():
        pytest.fail("CARGOHOLD_UPDATE_SNAPSHOTS=1 is refused under CI: snapshots are reviewed")
    return True


def check_snapshot(path: Path, actual: str) -> None:
    """Compare ``actual`` with the reviewed snapshot at ``path``; with the update switch, write
    what changed and fail, so that no run both rewrites a snapshot and passes."""
    expected = path.read_text(encoding="utf-8") if path.is_file() else None
    if actual == expected:
        return
    if _updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        pytest.fail(f"snapshot {path.name} rewritten: review git diff, then run without the switch")
    assert expected is not None, f"no snapshot: run with CARGOHOLD_UPDATE_SNAPSHOTS=1 ({path.name})"
    assert actual == expected


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", FILES)
def test_the_stub_of_each_corpus_file_matches_its_reviewed_snapshot(
    name: str, budget: Budget
) -> None:
    stub = stub_of(name, budget)

    assert len(stub.encode()) <= budget
    check_snapshot(SNAPSHOTS / f"{name}.{budget.label}.txt", stub + "\n")


def test_every_snapshot_has_a_source_and_a_budget() -> None:
    expected = {f"{name}.{budget.label}.txt" for name in FILES for budget in BUDGETS}
    orphans = sorted(p.name for p in SNAPSHOTS.iterdir() if p.name not in expected)

    assert orphans == []


def test_the_update_switch_is_refused_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CARGOHOLD_UPDATE_SNAPSHOTS", "1")

    with pytest.raises(pytest.fail.Exception, match="refused under CI"):
        _updating()


def test_the_update_switch_rewrites_a_changed_snapshot_and_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("CARGOHOLD_UPDATE_SNAPSHOTS", "1")
    path = tmp_path / "x.light.txt"
    path.write_text("reviewed\n", encoding="utf-8")

    with pytest.raises(pytest.fail.Exception, match="rewritten"):
        check_snapshot(path, "changed\n")

    assert path.read_text(encoding="utf-8") == "changed\n"
    check_snapshot(path, "changed\n")  # unchanged now: passes, with or without the switch


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", FILES)
def test_each_stub_represents_the_end_of_its_body(name: str, budget: Budget) -> None:
    data = source_of(name)[0]
    preview = preview_of(stub_of(name, budget))
    tail = data[-max(200, len(data) // 100) :].decode("utf-8", "replace")
    tokens = [t for t in re.findall(r"[A-Za-z0-9_]{4,}", tail)]
    states_omission = any(
        phrase in preview for phrase in ("omitted", "not shown", "last bytes", "more between lines")
    )
    assert states_omission or any(token in preview for token in tokens)
    if not states_omission:
        assert any(token in preview for token in tokens[-20:])


JSON_FILES = [n for n in CORPUS_FILES if Path(n).suffix in (".json", ".geojson", ".topojson")]


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


CSV_FILES = [n for n in CORPUS_FILES if n.endswith(".csv")]


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


LOG_FILES = [n for n in CORPUS_FILES if n.endswith(".log")]
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


_LEVEL = re.compile(r"\b(FATAL|CRITICAL|SEVERE|ERROR|ERR|WARNING|WARN|INFO|NOTICE|DEBUG|TRACE)\b")
_SAME = {"ERR": "ERROR", "WARNING": "WARN"}


def _levels(lines: list[str]) -> dict[str, int]:
    """Lines per level: the first level word within a line's first 160 characters."""
    counts: dict[str, int] = {}
    for line in lines:
        match = _LEVEL.search(line, 0, 160)
        if match:
            level = _SAME.get(match.group(1), match.group(1))
            counts[level] = counts.get(level, 0) + 1
    return counts


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", LOG_FILES)
def test_a_log_stub_counts_the_lines_of_every_level_warnings_included(
    name: str, budget: Budget
) -> None:
    """Every level counted exactly; or, where the stub states a sample, the severe levels
    counted exactly over every line and the others' shares exactly those of the stated sample."""
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    counts = _levels(lines)
    flagged = sum(n for level, n in counts.items() if level in _SEVERE)

    preview = preview_of(stub_of(name, budget))

    levels = preview.split("\n", 1)[0].split("levels:")[1]
    sample = re.search(r"of an even sample of ([\d,]+) lines: every ([\d,]+)th from line 1", levels)
    exact = levels.split(" (every line read)")[0]
    stated = {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"([A-Z]+) ([\d,]+)", exact)}
    if sample is None:
        assert stated == counts
    else:
        assert stated == {level: n for level, n in counts.items() if level in _SEVERE}
        picked = lines[:: int(sample[2].replace(",", ""))]
        assert len(picked) == int(sample[1].replace(",", ""))
        shares = {m[1]: int(m[2]) for m in re.finditer(r"([A-Z]+) ~(\d+)%", levels)}
        expected = {
            level: round(100 * n / len(picked))
            for level, n in _levels(picked).items()
            if level not in _SEVERE
        }
        assert shares == expected
    if flagged:
        assert f"errors and warnings: {flagged:,} lines in " in preview


_SEVERE = {"FATAL", "CRITICAL", "SEVERE", "ERROR", "WARN"}


def test_a_generated_log_stub_counts_and_quotes_its_warnings() -> None:
    lines = [f"2026-01-01 00:00:{i % 60:02d} INFO request {i} served" for i in range(3000)]
    for at in range(7, 3000, 500):
        lines[at] = f"2026-01-01 00:00:{at % 60:02d} WARN cache {at} is cold"
    data = "\n".join(lines).encode()

    stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=Budget.LIGHT).text

    assert "levels: INFO 2,994, WARN 6" in stub
    assert "errors and warnings: 6 lines in 1 distinct message" in stub
    assert f"WARN x6 line 8, 508, 1008, 1508, ...: {lines[7]}" in stub


TEXT_FILES = [n for n in CORPUS_FILES if n.endswith((".log", ".csv"))] + sorted(
    n for n, f in CODE_FIXTURES.items() if f.kind in ("diff", "search")
)


@pytest.mark.parametrize("name", TEXT_FILES)
def test_the_token_count_of_a_large_body_is_scaled_to_the_whole_body(name: str) -> None:
    data = source_of(name)[0]
    exact = count_tokens(data.decode("utf-8", "replace"))
    assert exact is not None
    assert len(data) > 16 * 1024

    stated = re.search(r"about ([\d,]+) tokens", stub_of(name, Budget.LIGHT))

    # three 4 KiB samples scaled to the body: near the exact count, far from the samples alone
    assert stated is not None
    assert math.isclose(int(stated[1].replace(",", "")), exact, rel_tol=0.25)


def test_the_token_count_of_a_small_body_is_exact() -> None:
    data = (CORPUS / "hdfs_2k.log").read_bytes()[: 12 * 1024]

    stub = render_stub(data, Ref.of(data), media_type="text/plain")

    assert stub.estimated_tokens == count_tokens(data.decode("utf-8", "replace"))


DIFF_FILES = sorted(n for n, f in CODE_FIXTURES.items() if f.kind == "diff")


@pytest.mark.parametrize("name", DIFF_FILES)
def test_a_diff_stub_names_the_changed_files(name: str) -> None:
    text = source_of(name)[0].decode("utf-8", errors="replace")
    files = set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M))
    preview = preview_of(stub_of(name, Budget.BALANCED))

    shown = {f for f in files if f in preview}
    more = re.search(r"([\d,]+) more files", preview)
    assert len(shown) + (int(more.group(1).replace(",", "")) if more else 0) >= len(files)
    assert shown


FAILURE_FILES = [n for n in CORPUS_FILES if n.startswith("defects4j")]


@pytest.mark.parametrize("name", FAILURE_FILES)
def test_a_failure_stub_names_the_failing_tests(name: str) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
    tests = re.findall(r"^--- ([\w.$]+::\w+)", text, re.M)
    preview = preview_of(stub_of(name, Budget.BALANCED))

    shown = [t for t in dict.fromkeys(tests) if t in preview]
    more = re.search(r"([\d,]+) more failing tests", preview)
    assert shown
    assert len(shown) + (int(more.group(1).replace(",", "")) if more else 0) >= len(set(tests))


# A quote is a preview line whose label (the text before its first ": ") names where in the body
# it is (``line 12``, ``lines 3-9``, ``byte 4,096``, ``row 7``), or is a bare line number
# (``  1,234: text``), perhaps with a note (``  52 (+6 nested): class Store:``). Its text is
# the body's, grep-true: each piece between two ``↵`` (where a quote joins several body lines,
# their indentation dropped) is found in the body by a plain substring search, after the stated
# cut (``[+N chars]``, or a failure line's ``[... line cut: N more bytes]``) is taken off.
QUOTE_LINE = re.compile(
    r"^\s*(?:(?P<label>[^:\n]*?\b(?:line|lines|byte|bytes|row)\s[\d,]+[^:\n]*?)"
    r"|(?P<number>[\d,]+(?: \([^:()\n]*\))?))"
    r": (?P<quote>.*)$"
)
CUT = re.compile(r" (?:\[\+[\d,]+ chars\]|\[\.\.\. line cut: [\d,]+ more bytes\])$")
ALL_BUDGETS = list(Budget)


def quotes_of(preview: str) -> list[str]:
    """The quoted text of every quote line of a preview, its cut marker taken off."""
    found = []
    for line in preview.split("\n"):
        match = QUOTE_LINE.match(line)
        if match is not None:
            found.append(CUT.sub("", match.group("quote")))
    return found


def test_quote_lines_are_told_apart_from_summary_lines() -> None:
    preview = "\n".join(
        [
            "log: 2,000 lines; levels: INFO 1,998, ERROR 2",
            "  ERROR x2 line 7, 9: 2026-01-01 ERROR disk\tfull",
            "first items[0] (byte 1,024, lines 40-46): "
            '{\u21b5"id": 1,\u21b5"name": "a" [+20 chars]',
            "  1,999: the last line",
            "  performances: array[243] ~452,513 bytes (26%), at byte 45,678",
        ]
    )

    assert quotes_of(preview) == [
        "2026-01-01 ERROR disk\tfull",
        '{\u21b5"id": 1,\u21b5"name": "a"',
        "the last line",
    ]


@pytest.mark.parametrize("budget", ALL_BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", FILES)
def test_every_line_a_preview_quotes_is_found_in_the_body_by_plain_substring_search(
    name: str, budget: Budget
) -> None:
    data, media = source_of(name)
    stub = render_stub(data, Ref.of(data), media_type=media, tool="fetch", budget=budget)
    body = data.decode("utf-8", "replace")

    quoted = quotes_of(stub.projection.preview)

    missing = [piece for text in quoted for piece in text.split("\u21b5") if piece not in body]
    assert missing == []
    if stub.projection.classification.value == "unsupported":
        assert quoted == []  # binary and base64 are described, never quoted
    else:
        assert quoted  # every text preview quotes the body somewhere, its end at least
