"""Regenerate the figures of ``docs/projection.md``: ``python -m bench.projection_doc [--write]``.

For every file of the shared corpus and every code fixture of the repository's own
(``tests/fixtures/code``, made from cargohold's history: the corpus holds no source code): body
bytes, stub bytes (balanced budget), body and stub tokens counted with the real o200k tokenizer
(bpe-openai), and the projection time (median of 5); then one example stub per kind, from the
reviewed snapshots. ``--write`` replaces the parts of
``docs/projection.md`` between their markers; without it the table is printed.
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

from cargohold import Budget, Ref, render_stub
from cargohold._tokens import count_tokens

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
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


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "code"


def sources() -> list[tuple[Path, str]]:
    """Every corpus file and code fixture with its media type, corpus first, each sorted."""
    found = [(p, MEDIA[p.suffix]) for p in sorted(CORPUS.iterdir()) if p.suffix in MEDIA]
    with (FIXTURES / "MANIFEST.tsv").open(newline="", encoding="utf-8") as handle:
        rows = sorted(csv.DictReader(handle, delimiter="\t"), key=lambda row: row["file"])
    return found + [(FIXTURES / row["file"], row["media_type"]) for row in rows]


def table() -> str:
    rows = [
        "| file | kind | class | body bytes | stub bytes | body tokens | stub tokens | "
        "kept out | projection ms |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    totals = [0, 0, 0, 0]
    for path, media in sources():
        data = path.read_bytes()
        ref = Ref.of(data)
        times = []
        for _ in range(5):
            began = time.perf_counter()
            stub = render_stub(data, ref, media_type=media, budget=Budget.BALANCED)
            times.append(time.perf_counter() - began)
        textual = stub.projection.classification.value != "unsupported" or path.suffix == ".txt"
        body_tokens = count_tokens(data.decode("utf-8", "replace")) if textual else None
        stub_tokens = count_tokens(stub.text) or 0
        body_cell = f"{body_tokens:,}" if body_tokens is not None else "(binary)"
        kept = f"{1 - stub_tokens / body_tokens:.1%}" if body_tokens else "-"
        rows.append(
            f"| {path.name} | {stub.projection.kind} | {stub.projection.classification.value} | "
            f"{len(data):,} | {stub.size_bytes:,} | {body_cell} | {stub_tokens:,} | {kept} | "
            f"{statistics.median(times) * 1000:.1f} |"
        )
        totals[0] += len(data)
        totals[1] += stub.size_bytes
        totals[2] += body_tokens or 0
        totals[3] += stub_tokens
    rows.append(
        f"| **all {len(rows) - 2} files** | | | {totals[0]:,} | {totals[1]:,} | {totals[2]:,} | "
        f"{totals[3]:,} | {1 - totals[3] / totals[2]:.1%} | |"
    )
    return "\n".join(rows)


EXAMPLES = (
    ("JSON", "citm_catalog.json"),
    ("CSV", "faa_birdstrikes.csv"),
    ("Log", "zookeeper_2k.log"),
    ("HTML", "wikipedia_page_large.html"),
    ("Code", "cargohold_conformance.py.txt"),
    ("Diff", "cargohold_git_diff.diff"),
    ("Search results", "cargohold_grep_rn.txt"),
    ("Test failures (exact_required)", "defects4j_time_failing_tests.txt"),
    ("Base64 (unsupported)", "geotopo_book.pdf.b64.txt"),
    ("Binary (unsupported)", "torus_render.png"),
)
SNAPSHOTS = Path(__file__).resolve().parents[1] / "tests" / "snapshots" / "stubs"
DOC = Path(__file__).resolve().parents[1] / "docs" / "projection.md"


def examples() -> str:
    parts = []
    for title, name in EXAMPLES:
        stub = (SNAPSHOTS / f"{name}.light.txt").read_text(encoding="utf-8").rstrip()
        parts.append(f"### {title}: `{name}`\n\n```\n{stub}\n```\n")
    return "\n".join(parts)


def _replace(doc: str, marker: str, body: str) -> str:
    begin, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    head, _, rest = doc.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def main(argv: list[str]) -> int:
    text = table()
    if "--write" in argv:
        doc = DOC.read_text(encoding="utf-8")
        doc = _replace(doc, "corpus-table", text)
        doc = _replace(doc, "examples", examples())
        DOC.write_text(doc, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
