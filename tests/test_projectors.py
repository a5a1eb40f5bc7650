"""Projectors by kind: each preview states facts the test computes on its own from the input.

Inputs are built here (so the facts are known independently of the projector) or read from the
shared corpus (``../shared/corpus``; absent: skipped, or failed when ``CI=true``). Every stub goes
through :func:`cargohold.render_stub` at the LIGHT and BALANCED budgets: within budget, the same
for the same bytes, its end represented, and never an exception, whatever the input.
"""

from __future__ import annotations

import ast
import base64
import csv
import gzip
import html
import io
import os
import random
import re
import struct
import zipfile
import zlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold import Budget, ProjectionClass, Ref, Stub, render_stub
from code_fixtures import CODE_FIXTURES, of_kind

CORPUS = Path(__file__).parents[1] / ".." / "shared" / "corpus"
BUDGETS = [Budget.LIGHT, Budget.BALANCED]
MEDIA = {
    ".csv": "text/csv",
    ".html": "text/html",
    ".c": "text/x-c",
    ".py": "text/x-python",
    ".diff": "text/x-diff",
    ".txt": "text/plain",
    ".png": "image/png",
    ".pdf": "application/pdf",
}


def stub_of(data: bytes, media_type: str, budget: Budget = Budget.BALANCED) -> Stub:
    stub = render_stub(data, Ref.of(data), media_type=media_type, tool="t", budget=budget)
    assert len(stub.text.encode()) <= budget
    assert render_stub(data, Ref.of(data), media_type=media_type, tool="t", budget=budget) == stub
    return stub


def preview(data: bytes, media_type: str, budget: Budget = Budget.BALANCED) -> str:
    return stub_of(data, media_type, budget).projection.preview


def corpus(name: str) -> bytes:
    path = CORPUS / name
    if not path.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the corpus file is missing: {path}")
        pytest.skip(f"the shared corpus is not at {CORPUS.resolve()}")
    return path.read_bytes()


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- CSV / TSV ----------------------------------------------------------------------------------


def _table(rows: int, seed: int = 7) -> list[list[str]]:
    rnd = random.Random(seed)
    table = [["id", "name", "price", "active", "day", "at", "note"]]
    for i in range(1, rows + 1):
        table.append(
            [
                str(i),
                rnd.choice(["alpha", "beta", "gamma"]),
                f"{rnd.uniform(-50, 900):.2f}",
                rnd.choice(["true", "false"]),
                f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
                f"2024-05-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:15:00Z",
                rnd.choice(["", "plain", 'says "hi", twice', "two\nlines"]),
            ]
        )
    return table


def _csv_bytes(table: list[list[str]], delimiter: str = ",") -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\n").writerows(table)
    return buffer.getvalue().encode()


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_csv_preview_states_the_exact_row_count_despite_quoted_newlines(budget: Budget) -> None:
    data = _csv_bytes(_table(3000))
    rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
    assert data.count(b"\n") > len(rows)  # quoted newlines make lines outnumber rows

    stub = stub_of(data, "text/csv", budget)

    assert stub.projection.kind == "csv"
    assert stub.projection.classification is ProjectionClass.COMPRESSIBLE
    assert f"{len(rows) - 1:,} data rows (exact count, after 1 header row)" in stub.text
    for name in rows[0]:
        assert f" {name}:" in stub.projection.preview


def test_csv_columns_get_their_types_and_numeric_ranges_over_all_rows() -> None:
    table = _table(400)
    data = _csv_bytes(table)
    body = table[1:]

    text = preview(data, "text/csv")

    prices = [float(r[2]) for r in body]
    ids = [int(r[0]) for r in body]
    days = sorted(r[4] for r in body)
    empty_notes = sum(1 for r in body if not r[6])
    assert f"1 id: int {min(ids):,}..{max(ids):,}" in text
    assert f"3 price: float {min(prices):,.6g}..{max(prices):,.6g}" in text
    assert "4 active: bool" in text
    assert f"5 day: date {days[0]}..{days[-1]}" in text
    assert "6 at: datetime" in text
    assert f"empty {empty_notes:,}" in text
    counts = Counter(r[1] for r in body)
    for value, count in counts.items():
        assert f"{value} {count:,}" in text


def test_csv_preview_ends_with_the_last_rows_as_rows() -> None:
    table = _table(2000)
    data = _csv_bytes(table)

    text = preview(data, "text/csv", Budget.LIGHT)

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(table[-1])
    last = buffer.getvalue().replace("\n", "\\n")
    assert text.split("\n")[-1].startswith(f"  row {len(table) - 1:,} (line ")
    assert last[:60] in text.split("\n")[-1]


def test_a_large_csv_states_that_its_column_facts_come_from_a_sample() -> None:
    table = _table(60_000, seed=3)
    data = _csv_bytes(table)

    text = preview(data, "text/csv")

    assert f"{len(table) - 1:,} data rows (exact count" in text
    assert "a sample of" in text


def test_tsv_is_read_with_its_tab_delimiter() -> None:
    table = [["city", "population"]] + [[f"c{i}", str(i * 1000)] for i in range(1, 501)]
    data = _csv_bytes(table, "\t")

    stub = stub_of(data, "text/tab-separated-values")

    assert stub.projection.kind == "tsv"
    assert "delimiter tab" in stub.projection.preview
    assert "2 population: int 1,000..500,000" in stub.projection.preview
    assert "c500\t500000" in stub.projection.preview


@pytest.mark.parametrize("name", ["faa_birdstrikes.csv", "usgs_gap_species_by_county.csv"])
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_corpus_csv_previews_name_every_column_and_the_exact_row_count(
    name: str, budget: Budget
) -> None:
    data = corpus(name)
    rows = list(csv.reader(io.StringIO(data.decode(), newline="")))

    text = preview(data, "text/csv", budget)

    assert f"{len(rows) - 1:,} data rows (exact count" in text
    for index, column in enumerate(rows[0], 1):
        assert f"  {index} {column}:" in text
    last_line = data.rstrip(b"\r\n").rsplit(b"\n", 1)[-1].rstrip(b"\r").decode()
    assert last_line in text


@pytest.mark.parametrize(
    "data",
    [
        b'a,b,c\n1,2,3\n4,"unterminated,5\n6,7,8\n' * 50,
        b'a,b\n"x' + b"y" * 100_000,
        b"a,b\n" + b"1,2,3,4,5\n" * 300 + b"\n\n\n",
        b"only,a,header\n",
        b"a,b\n\x00,1\n" * 100,
        "é,ü\n\xff\n".encode("utf-8", "surrogateescape") + b"\xff\xfe,\n" * 100,
        b",,,\n,,,\n" * 1000,
    ],
    ids=["truncated-quote", "endless-field", "ragged", "header-only", "nul", "bad-utf8", "empty"],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_malformed_csv_never_raises_and_stays_within_budget(data: bytes, budget: Budget) -> None:
    stub_of(data, "text/csv", budget)


# -- NDJSON -------------------------------------------------------------------------------------


def test_ndjson_preview_counts_records_and_names_invalid_lines() -> None:
    rnd = random.Random(5)
    lines = [
        f'{{"id": {i}, "level": "{rnd.choice(["info", "warn"])}", "ms": {rnd.random():.3f}}}'
        for i in range(5000)
    ]
    lines.insert(41, "{not json")
    data = ("\n".join(lines) + "\n").encode()

    stub = stub_of(data, "application/x-ndjson")

    text = stub.projection.preview
    assert stub.projection.kind == "ndjson"
    assert f"{len(lines) - 1:,} records on {len(lines):,} lines" in text
    assert "1 lines not JSON: 42" in text
    assert "{id: int, level: str, ms: float}" in text
    last_at = data.rindex(lines[-1].encode())
    assert f"last record (line {len(lines):,}, byte {last_at:,}): {lines[-1]}" in text
    assert f"first record (line 1, byte 0): {lines[0]}" in text


# -- HTML ---------------------------------------------------------------------------------------


def _page(sections: int) -> tuple[bytes, list[tuple[int, str]]]:
    outline = [(1, "Release notes")]
    parts = [
        "<!doctype html><html lang='en'><head><title>Notes &amp; more</title>",
        "<style>.x{color:red}</style><script>var secret_script_text = 1;</script></head><body>",
        "<nav><a href='/a'>Home</a><a href='/b'>Docs</a></nav>",
        "<main><h1>Release notes</h1>",
    ]
    for i in range(sections):
        outline.append((2, f"Version {i}"))
        parts.append(f"<h2>Version {i}</h2><p>Paragraph {i} with a <a href='#{i}'>link</a>.</p>")
        if i % 3 == 0:
            outline.append((3, f"Details {i}"))
            parts.append(f"<h3>Details {i}</h3><table><tr><td>{i}</td></tr></table>")
    parts.append("<form><input name='q'></form><p>The very last words.</p></main>")
    parts.append("<footer>footer_text_here</footer></body></html>")
    return "".join(parts).encode(), outline


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_html_preview_has_title_outline_counts_and_the_end_of_the_text(budget: Budget) -> None:
    data, outline = _page(12)

    stub = stub_of(data, "text/html", budget)

    text = stub.projection.preview
    assert stub.projection.kind == "html"
    assert text.startswith("html (lang en): ")
    assert "\ntitle: Notes & more\n" in text  # decoded from Notes &amp; more: no offset named
    levels = Counter(level for level, _ in outline)
    assert f"headings: h1 {levels[1]}, h2 {levels[2]}, h3 {levels[3]}" in text
    shown = [line.strip() for line in text.splitlines() if re.match(r"\s+h[123] ", line)]
    assert shown == [f"h{level} {title}" for level, title in outline][: len(shown)]
    assert len(shown) >= 10
    assert f"{12 + 2} links, 1 forms, {len(range(0, 12, 3))} tables" in text
    assert text.splitlines()[-1].endswith("The very last words.")
    assert "secret_script_text" not in text
    assert "footer_text_here" not in text


@pytest.mark.parametrize(
    "name", ["wikipedia_page_large.html", "mercurial_evolve_docs.html", "yahoo_news_article.html"]
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_corpus_html_previews_show_the_title_and_text_from_the_page(
    name: str, budget: Budget
) -> None:
    data = corpus(name)
    page = data.decode("utf-8", "replace")
    title = re.search(r"<title[^>]*>(.*?)</title>", page, re.S | re.I)
    assert title is not None

    text = preview(data, "text/html", budget)

    assert one_line(html.unescape(title.group(1)))[:60] in text
    visible = one_line(html.unescape(re.sub(r"<[^>]+>", " ", page)))
    end = text.split("\n")[-1]
    assert end.startswith("text ends with: ...")
    fragment = re.sub(r"\s", "", end.split("...", 1)[1].split(" / ")[-1])[-30:]
    assert fragment in re.sub(r"\s", "", visible)


@pytest.mark.parametrize(
    "data",
    [
        b"<html><body><div><p>unclosed <b>bold <nav>menu " * 2000,
        b"<html><title>t</title><body>" + b"<" * 50_000 + b"</body>",
        b"<!doctype html><script>" + b"x" * 200_000,
        b"<html>\xff\xfe<h1>\xc3(</h1></html>",
    ],
    ids=["unclosed", "angle-brackets", "endless-script", "bad-utf8"],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_broken_html_never_raises_and_stays_within_budget(data: bytes, budget: Budget) -> None:
    stub_of(data, "text/html", budget)


# -- code ---------------------------------------------------------------------------------------


def _python_module(classes: int) -> bytes:
    lines = ["import os", "from collections import Counter", ""]
    for c in range(classes):
        lines += [f"class Service{c}(Base):", f'    """Service {c}."""', ""]
        for m in range(3):
            lines += [f"    def method_{m}(self, value: int) -> int:", "        return value", ""]
    lines += ["def main() -> None:", "    print('done')", ""]
    return "\n".join(lines).encode()


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_python_outline_lists_definitions_with_their_line_numbers(budget: Budget) -> None:
    data = _python_module(6)
    tree = ast.parse(data)

    stub = stub_of(data, "text/x-python", budget)

    text = stub.projection.preview
    assert stub.projection.detail == "python"
    assert f"code (python): {len(data.splitlines())} lines" in text
    assert "imports (2): os, collections" in text
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            line = data.splitlines()[node.lineno - 1].decode()
            assert f"{node.lineno}: {line}" in text
    assert text.splitlines()[-1].endswith("    print('done')")


def test_a_long_python_outline_keeps_the_top_level_and_counts_what_it_nests() -> None:
    data = _python_module(200)
    tree = ast.parse(data)

    text = preview(data, "text/x-python", Budget.LIGHT)

    top = [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)]
    every = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef)]
    assert f"{len(every):,} definitions ({len(top):,} at top level)" in text
    assert "(+3 nested):" in text or "(3 nested " in text
    assert f"{top[-1].lineno}: def main() -> None:" in text  # the end of the outline is kept


def test_c_outline_lists_functions_structs_and_counts_defines() -> None:
    lines = ["#include <stdio.h>", '#include "server.h"', "#define MAX 10", "#define MIN 1"]
    expected = []
    for i in range(30):
        lines.append(f"struct item{i} {{")
        expected.append((len(lines), f"struct item{i} {{"))
        lines += ["    int x;", "};", ""]
        lines.append(f"static int handler_{i}(const char *name, int flags) {{")
        expected.append((len(lines), lines[-1]))
        lines += ["    if (flags) {", "        return 1;", "    }"]
        # Bodies long enough (60 KB in all) that a tenth of the file holds the whole outline.
        lines += [
            f"    flags += strlen(name) * {k}; /* step {k} of the handler */" for k in range(28)
        ]
        lines += ["    return 0;", "}", ""]
    data = "\n".join(lines).encode()

    text = preview(data, "text/x-c")

    assert "imports (2): stdio.h, server.h" in text
    assert ", 2 #defines" in text
    for number, line in expected:
        assert f"{number}: {line}" in text
    assert "if (flags)" not in text.split("last lines")[0]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", of_kind("code"))
def test_code_fixture_previews_keep_every_top_level_python_definition_and_the_last_line(
    name: str, budget: Budget
) -> None:
    data = CODE_FIXTURES[name].read()
    tree = ast.parse(data)

    text = preview(data, "text/x-python", budget)

    kinds = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    definitions = [n for n in tree.body if isinstance(n, kinds)]
    assert f"({len(definitions)} at top level)" in text
    gaps = [
        (int(m[2].replace(",", "")), int(m[3].replace(",", "")), int(m[1].replace(",", "")))
        for m in re.finditer(r"\.\.\. ([\d,]+) more between lines ([\d,]+) and ([\d,]+)", text)
    ]
    listed = 0
    for node in definitions:
        # ``N: text``, or ``N (what it nests): text``
        if re.search(rf"^ *{node.lineno}(?: \([^)]*\))?: .*\b{re.escape(node.name)}\b", text, re.M):
            listed += 1
        else:  # left out, but inside a stated gap
            assert any(start <= node.lineno <= end for start, end, _ in gaps), node.name
    assert listed + sum(count for _, _, count in gaps) == len(definitions)
    # Half the definitions in a whole balanced budget; as many per byte in a stub scaled down to
    # its body (a tenth of a 36 KB file).
    limit = stub_of(data, "text/x-python", budget).limit
    assert listed >= min(len(definitions), len(definitions) * limit // (2 * Budget.BALANCED))
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode()
    assert text.splitlines()[-1].endswith(last)


@pytest.mark.parametrize("name", of_kind("code"))
def test_code_fixture_light_preview_states_the_line_count_and_ends_with_the_last_lines(
    name: str,
) -> None:
    data = CODE_FIXTURES[name].read()

    text = preview(data, "text/x-python", Budget.LIGHT)

    lines = data.count(b"\n")
    assert f"code (python): {lines:,} lines" in text
    for line in data.rstrip(b"\n").rsplit(b"\n", 3)[-3:]:
        assert line.decode().rstrip() in text


# -- diffs --------------------------------------------------------------------------------------


def _diff(files: dict[str, tuple[int, int]], commit: str | None = None) -> bytes:
    out = []
    if commit:
        out += [
            f"commit {commit}",
            "Date:   2025-01-02 03:04:05 +0000",
            "",
            f"    {commit[:4]} fix",
            "",
        ]
    for path, (added, removed) in files.items():
        out += [f"diff --git a/{path} b/{path}", "index 1111111..2222222 100644"]
        out += [f"--- a/{path}", f"+++ b/{path}"]
        out.append(f"@@ -1,{removed + 1} +1,{added + 1} @@ def head():")
        out.append(" context")
        out += ["--- removed comment line" for _ in range(removed)]  # looks like a file header
        out += [f"+added {i}" for i in range(added)]
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_diff_preview_lists_files_with_their_added_and_removed_counts(budget: Budget) -> None:
    files = {"src/app.py": (12, 3), "README.md": (1, 0), "tests/test_app.py": (40, 22)}
    data = _diff(files)

    stub = stub_of(data, "text/x-diff", budget)

    text = stub.projection.preview
    assert stub.projection.kind == "diff"
    total_added = sum(a for a, _ in files.values())
    total_removed = sum(r for _, r in files.values())
    assert f"3 files changed, +{total_added} -{total_removed} lines in 3 hunks" in text
    for path, (added, removed) in files.items():
        assert f"  {path} +{added} -{removed} (1 hunk)" in text
    order = [m.group(1) for m in re.finditer(r"^  (\S+) \+\d+ -\d+ \(", text, re.M)]
    assert order == sorted(files, key=lambda p: -sum(files[p]))
    assert "@@ -1,23 +1,41 @@ def head():" in text
    last_line = data.count(b"\n")
    assert text.splitlines()[-1] == f"  {last_line}: +added {files['tests/test_app.py'][0] - 1}"


def test_git_log_p_preview_names_the_first_and_last_commits_and_adds_up_files() -> None:
    shas = [f"{i:x}" * 40 for i in range(1, 6)]
    data = b"".join(_diff({"app.py": (i + 1, i)}, sha[:40]) for i, sha in enumerate(shas))

    text = preview(data, "text/x-diff")

    assert "git log -p: 5 commits" in text
    assert f"first {shas[0][:10]} 2025-01-02 '{shas[0][:4]} fix'" in text
    assert f"last  {shas[-1][:10]} 2025-01-02 '{shas[-1][:4]} fix'" in text
    assert f"  app.py +{sum(range(1, 6))} -{sum(range(5))} (5 hunks, 5 commits)" in text


def _changed_lines(data: bytes) -> tuple[int, int]:
    """Added and removed lines of a unified diff, counted by each hunk's own header (so a removed
    line that reads ``--- x`` inside a hunk is a removed line, not a file header)."""
    added = removed = old = new = 0
    for line in data.split(b"\n"):
        if old > 0 or new > 0:
            mark = line[:1]
            if mark == b"-":
                removed, old = removed + 1, old - 1
            elif mark == b"+":
                added, new = added + 1, new - 1
            elif mark != b"\\":  # "\ No newline at end of file" belongs to no side
                old, new = old - 1, new - 1
            continue
        header = re.match(rb"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", line)
        if header:
            old = int(header.group(1) if header.group(1) is not None else 1)
            new = int(header.group(2) if header.group(2) is not None else 1)
    return added, removed


@pytest.mark.parametrize("name", of_kind("diff"))
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_diff_fixture_previews_account_for_every_changed_file_and_line(
    name: str, budget: Budget
) -> None:
    data = CODE_FIXTURES[name].read()
    changed = set(re.findall(rb"^diff --git a/\S+ b/(\S+)$", data, re.M))
    commits = len(re.findall(rb"^commit [0-9a-f]{40}$", data, re.M))
    added, removed = _changed_lines(data)

    text = preview(data, "text/x-diff", budget)

    assert f"diff: {len(changed):,} files changed, +{added:,} -{removed:,} lines" in text
    listed = [line for line in text.splitlines() if re.match(r"  \S+ \+[\d,]+ -[\d,]+ \(", line)]
    assert all(line.split()[0].encode() in changed for line in listed)
    more = re.search(r"\.\.\. ([\d,]+) more files", text)
    assert len(listed) + (int(more.group(1).replace(",", "")) if more else 0) == len(changed)
    # Hunk headers: those shown and those counted account for every file, none dropped silently.
    headed = re.findall(r"^  \S+:$", text, re.M)
    untold = re.search(r"hunk headers of ([\d,]+) more files", text)
    if untold:
        assert len(headed) + int(untold.group(1).replace(",", "")) == len(changed)
    else:
        assert len(headed) == len(listed)
    if commits:
        assert f"git log -p: {commits:,} commits" in text
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode().rstrip()
    number, _, shown = text.splitlines()[-1].strip().partition(": ")
    assert int(number.replace(",", "")) == data.rstrip(b"\n").count(b"\n") + 1
    assert shown.strip() == last.strip()


@pytest.mark.parametrize(
    "data",
    [
        b"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n" * 200,
        b"diff --git a/bin b/bin\nBinary files a/bin and b/bin differ\n" * 100,
        b"--- a\n+++ b\n@@ -1,900 +1,900 @@\n-short\n",
        b"@@ -x +y @@\n" * 1000,
        b"diff --git a/\xff b/\xfe\n--- a/\xff\n+++ b/\xfe\n@@ -1 +1 @@\n-\xff\n+\xfe\n" * 50,
    ],
    ids=["no-hunks", "binary-only", "short-hunk", "bad-hunk-headers", "bad-utf8"],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_malformed_diffs_never_raise_and_stay_within_budget(data: bytes, budget: Budget) -> None:
    stub_of(data, "text/x-diff", budget)


# -- search results -----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_search_preview_counts_matches_per_file_and_shows_the_first_and_last(
    budget: Budget,
) -> None:
    rnd = random.Random(11)
    lines = []
    for f in range(40):
        for n in sorted(rnd.sample(range(1, 5000), rnd.randint(1, 30))):
            lines.append(f"src/mod{f}.py:{n}:    value = compute_{f}_{n}()")
    data = ("\n".join(lines) + "\n").encode()
    per_file = Counter(line.split(":", 1)[0] for line in lines)

    stub = stub_of(data, "text/plain", budget)

    text = stub.projection.preview
    assert stub.projection.kind == "search"
    assert f"search results: {len(lines):,} matches in {len(per_file)} files" in text
    top, count = per_file.most_common(1)[0]
    assert f"  {top} {count:,} (lines" in text
    assert f"\nfirst match (line 1): {lines[0]}\n" in text  # the body's own line, grep-true
    assert text.splitlines()[-1] == f"last match (line {len(lines):,}): {lines[-1]}"


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", of_kind("search"))
def test_grep_fixture_preview_counts_every_match_distinct_path_and_the_busiest_path(
    name: str, budget: Budget
) -> None:
    data = CODE_FIXTURES[name].read()
    matches = re.findall(rb"^([^:\n]+):\d+:", data, re.M)

    text = preview(data, "text/plain", budget)

    assert f"search results: {len(matches):,} matches in {len(set(matches)):,} files" in text
    top, count = Counter(matches).most_common(1)[0]
    assert f"  {top.decode()} {count:,} (lines" in text


# -- logs -----------------------------------------------------------------------------------------


def _common_entries(text: str) -> list[tuple[str, int, str]]:
    """``(share, line number, quote)`` of each "most common messages" entry of a log preview."""
    section = text.split("most common messages", 1)[1].split("\ntail:", 1)[0]
    entries = []
    for entry in section.splitlines()[1:]:
        match = re.fullmatch(r"  (\S+) line (\d+): (.*)", entry)
        assert match is not None, entry
        entries.append((match[1], int(match[2]), match[3]))
    return entries


@pytest.mark.parametrize("info_lines", [3_000, 20_000], ids=["every-line", "sampled"])
def test_the_most_common_messages_are_counted_within_their_level(info_lines: int) -> None:
    lines = [f"2026-01-02 08:00:{i % 60:02d} ERROR worker {i} handled request" for i in range(5)]
    lines += [
        f"2026-01-02 08:{i // 60 % 60:02d}:{i % 60:02d} INFO worker {i} handled request"
        for i in range(info_lines)
    ]
    data = ("\n".join(lines) + "\n").encode()

    entries = _common_entries(preview(data, "text/plain"))

    share, number, text = entries[0]
    assert text == lines[number - 1]
    assert " INFO " in text
    assert share != "100%"  # 5 of the lines are not this message
    for share, number, text in entries[1:]:
        assert text == lines[number - 1]
        assert " ERROR " in text
        assert share == "<1%"


# -- failures (exact_required) ------------------------------------------------------------------


def _verbatim_lines_match_the_body(text: str, data: bytes) -> int:
    """Every ``N: text`` line of the preview is line N of the body, verbatim (or its stated cut);
    returns the bytes of the body those lines show."""
    body = data.split(b"\n")
    shown = 0
    for line in text.split("\n")[1:]:
        match = re.match(r"(\d+): (.*)$", line, re.S)
        if match is None:
            assert line.startswith("[")  # gap markers and the closing statement
            continue
        number, excerpt = int(match.group(1)), match.group(2)
        raw = body[number - 1].rstrip(b"\r")
        cut = re.search(r" \[\.\.\. line cut: [\d,]+ more bytes\]$", excerpt)
        if cut:
            prefix = excerpt[: cut.start()].encode()
            assert raw.startswith(prefix)
            shown += len(prefix)
        else:
            assert excerpt.encode() == raw
            shown += len(body[number - 1]) + (1 if number < len(body) else 0)
    return shown


@pytest.mark.parametrize(
    "name",
    [
        "defects4j_closure_failing_tests.txt",
        "defects4j_mockito_failing_tests.txt",
        "defects4j_time_failing_tests.txt",
    ],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_corpus_failure_previews_are_verbatim_and_name_every_failing_test(
    name: str, budget: Budget
) -> None:
    data = corpus(name)
    tests = re.findall(rb"^--- (\S+::\S+)$", data, re.M)

    stub = stub_of(data, "text/plain", budget)

    text = stub.projection.preview
    assert stub.projection.classification is ProjectionClass.EXACT_REQUIRED
    for test in tests:
        assert f": --- {test.decode()}" in text
    shown = _verbatim_lines_match_the_body(text, data)
    statement = re.search(r"\[([\d,]+) of ([\d,]+) bytes not shown", text.splitlines()[-1])
    assert statement is not None
    assert int(statement.group(2).replace(",", "")) == len(data)
    assert int(statement.group(1).replace(",", "")) == len(data) - shown
    body = data.rstrip(b"\n")
    last, number = body.rsplit(b"\n", 1)[-1].decode(), body.count(b"\n") + 1
    assert f"{number}: {last}" in text


def test_pytest_and_unittest_failures_keep_their_test_names_and_exceptions_verbatim() -> None:
    lines = [f"tests/test_mod.py::test_ok_{i} PASSED" for i in range(1000)]
    lines += [
        "=================================== FAILURES ===================================",
        "___________________________________ test_div ___________________________________",
        ">       assert 1 / 0 == 2",
        "E       ZeroDivisionError: division by zero",
        "tests/test_mod.py:12: ZeroDivisionError",
        "FAIL: test_parse (pkg.tests.ParserTest)",
        "Traceback (most recent call last):",
        '  File "/app/pkg/tests.py", line 40, in test_parse',
        "    self.assertEqual(parse('x'), 1)",
        "AssertionError: 2 != 1",
    ]
    lines += [f"noise line {i}" for i in range(3000)]
    lines += [
        "FAILED tests/test_mod.py::test_div - ZeroDivisionError: division by zero",
        "1 failed",
    ]
    data = "\n".join(lines).encode()

    stub = stub_of(data, "text/plain", Budget.LIGHT)

    text = stub.projection.preview
    assert stub.projection.kind == "failure"
    _verbatim_lines_match_the_body(text, data)
    for wanted in (
        "___________________________________ test_div ___________________________________",
        "E       ZeroDivisionError: division by zero",
        "FAIL: test_parse (pkg.tests.ParserTest)",
        "Traceback (most recent call last):",
        '  File "/app/pkg/tests.py", line 40, in test_parse',
        "AssertionError: 2 != 1",
    ):
        assert f"{lines.index(wanted) + 1}: {wanted}" in text
    assert f"{len(lines)}: 1 failed" in text


# -- binary, base64, data URIs ------------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    pixels = random.Random(width * height).randbytes(width * 4)  # noise: not compressible
    raw = b"".join(b"\x00" + pixels for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + bytes(9)
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + bytes(9)
    return b"\xff\xd8" + app0 + sof + b"\xff\xda" + bytes(5000) + b"\xff\xd9"


def _pdf(pages: int) -> bytes:
    objects = [b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj"]
    objects.append(f"2 0 obj << /Type /Pages /Count {pages} /Kids [] >> endobj".encode())
    objects += [
        f"{i + 3} 0 obj << /Type /Page /Parent 2 0 R >> endobj".encode() for i in range(pages)
    ]
    return b"%PDF-1.7\n" + b"\n".join(objects) + b"\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"


@pytest.mark.parametrize(
    ("data", "facts"),
    [
        (_png(321, 123), "PNG image 321x123, 8-bit RGBA"),
        (_jpeg(640, 480), "JPEG image 640x480, 3 components, 8-bit baseline"),
        (b"GIF89a" + struct.pack("<HH", 77, 55) + bytes(300), "GIF image 77x55"),
        (_pdf(9), "PDF 1.7, about 9 pages (/Type /Page objects), page tree /Count 9"),
    ],
    ids=["png", "jpeg", "gif", "pdf"],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_binary_descriptions_read_dimensions_and_pages_from_the_headers(
    data: bytes, facts: str, budget: Budget
) -> None:
    stub = stub_of(data, "application/octet-stream", budget)

    text = stub.projection.preview
    assert stub.projection.classification is ProjectionClass.UNSUPPORTED
    assert f"format: {facts}" in text
    assert f"{len(data):,} bytes" in text
    assert " ".join(f"{b:02x}" for b in data[:16]) in text
    assert " ".join(f"{b:02x}" for b in data[-16:]) in text


def test_gzip_and_zip_descriptions_name_their_contents() -> None:
    packed = io.BytesIO()
    with gzip.GzipFile(filename="export.csv", mode="wb", fileobj=packed, mtime=0) as out:
        out.write(b"a,b\n" * 5000)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        for i in range(14):
            out.writestr(f"data/part{i:02d}.json", "{}" * i)

    gz = preview(packed.getvalue(), "application/gzip")
    zp = preview(archive.getvalue(), "application/zip")

    assert "original name 'export.csv', uncompressed size 20,000 bytes" in gz
    names = zipfile.ZipFile(archive).namelist()
    assert f"zip archive, {len(names)} entries" in zp
    assert ", ".join(names[:10]) + f", +{len(names) - 10} more" in zp


def test_corpus_png_description_states_the_dimensions_in_its_header() -> None:
    data = corpus("torus_render.png")
    width, height = struct.unpack(">II", data[16:24])

    text = preview(data, "image/png", Budget.LIGHT)

    assert f"PNG image {width}x{height}" in text


def _windows(encoded: bytes, size: int = 16) -> set[str]:
    text = encoded.decode().replace("\n", "")
    return {text[i : i + size] for i in range(0, max(1, len(text) - size), 7)}


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_base64_is_described_by_what_it_decodes_to_and_never_shown(budget: Budget) -> None:
    image = _png(240, 100)
    encoded = base64.encodebytes(image)

    stub = stub_of(encoded, "text/plain", budget)

    text = stub.text
    assert stub.projection.kind == "base64"
    assert f"decoding to {len(image):,} bytes" in text
    assert "PNG image 240x100" in text
    assert not any(window in text for window in _windows(encoded))


def test_a_data_uri_reports_its_declared_and_its_decoded_type() -> None:
    image = _jpeg(32, 16)
    data = b"data:image/png;base64," + base64.b64encode(image) + b'" alt="x">'

    stub = stub_of(data, "text/plain")

    text = stub.projection.preview
    assert stub.projection.kind == "data_uri"
    assert "decoded type: jpeg (the URI declares image/png)" in text
    assert "JPEG image 32x16" in text
    assert f"decoding to {len(image):,} bytes" in text
    assert not any(window in stub.text for window in _windows(base64.b64encode(image)))


def test_corpus_base64_pdf_is_decoded_to_its_size_version_and_pages() -> None:
    data = corpus("geotopo_book.pdf.b64.txt")
    decoded = base64.b64decode(data)
    pages = len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", decoded))

    stub = stub_of(data, "text/plain", Budget.LIGHT)

    text = stub.projection.preview
    assert f"decoding to {len(decoded):,} bytes" in text
    assert f"PDF {decoded[5:8].decode()}, about {pages:,} pages" in text
    assert not any(window in stub.text for window in list(_windows(data[:20_000])))


@pytest.mark.parametrize(
    "data",
    [
        base64.encodebytes(_png(64, 64) * 20)[:3000]
        + b"!!garbage**\n"
        + base64.encodebytes(_png(64, 64) * 20)[3000:],
        b"data:image/png;base64,@@@@" + b"A" * 5000,
        b"data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 truncated")[:-3],
        base64.encodebytes(bytes(range(256)) * 100).replace(b"=", b"")[:-7],
    ],
    ids=["garbage-line", "garbage-uri", "cut-uri", "no-padding"],
)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
def test_broken_base64_never_raises_and_stays_within_budget(data: bytes, budget: Budget) -> None:
    stub_of(data, "text/plain", budget)


# -- every projector: budget, determinism and the end, on any input ----------------------------

KIND_MEDIA = [
    "text/csv",
    "text/tab-separated-values",
    "text/html",
    "text/x-python",
    "text/x-c",
    "text/x-diff",
    "application/x-ndjson",
]


@settings(max_examples=120, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=4000),
        st.text(max_size=4000).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.lists(st.text(alphabet=',;\t"\n:<>/-+@ abc019é', max_size=60), max_size=400).map(
            lambda rows: "\n".join(rows).encode()
        ),
    ),
    media_type=st.sampled_from(KIND_MEDIA),
    budget=st.sampled_from(BUDGETS),
)
def test_any_body_gives_a_stub_within_budget_and_the_same_stub_twice(
    data: bytes, media_type: str, budget: Budget
) -> None:
    stub_of(data, media_type, budget)


CORPUS_KINDS = {
    "faa_birdstrikes.csv": "csv",
    "usgs_gap_species_by_county.csv": "csv",
    "hdfs_2k_structured.csv": "csv",
    "wikipedia_page_large.html": "html",
    "mercurial_evolve_docs.html": "html",
    "yahoo_news_article.html": "html",
    "defects4j_closure_failing_tests.txt": "failure",
    "defects4j_mockito_failing_tests.txt": "failure",
    "defects4j_time_failing_tests.txt": "failure",
    "geotopo_book.pdf": "binary",
    "geotopo_book.pdf.b64.txt": "base64",
    "torus_render.png": "binary",
}


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.label)
@pytest.mark.parametrize("name", sorted(CORPUS_KINDS) + sorted(CODE_FIXTURES))
def test_every_corpus_file_and_code_fixture_gets_its_own_projector_and_its_end_is_represented(
    name: str, budget: Budget
) -> None:
    if name in CODE_FIXTURES:
        fixture = CODE_FIXTURES[name]
        data, media_type, kind = fixture.read(), fixture.media_type, fixture.kind
    else:
        data, media_type, kind = corpus(name), MEDIA[Path(name).suffix], CORPUS_KINDS[name]

    stub = stub_of(data, media_type, budget)

    found = stub.projection
    assert found.kind == kind
    last_line = found.preview.splitlines()[-1]
    if found.kind in ("binary", "base64"):
        tail = data if found.kind == "binary" else base64.b64decode(data)
        assert " ".join(f"{b:02x}" for b in tail[-16:]) in last_line
    elif found.kind == "html":
        assert last_line.startswith("text ends with: ...")
    else:  # the last non-empty line of the body closes the preview, verbatim
        ending = data.rstrip(b"\r\n").rsplit(b"\n", 1)[-1].rstrip(b"\r").decode().strip()
        if found.kind == "search":
            ending = ending.split(":", 2)[2].strip()
        statement = (
            found.kind == "failure" and last_line.startswith("[") and "not shown" in last_line
        )
        assert ending in last_line or (statement and ending in found.preview)
