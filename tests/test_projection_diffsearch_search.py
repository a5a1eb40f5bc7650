"""The search projector's plain reading, a file's run of lines at a time, against a line-by-line
reading of the same bytes.

Plain ``path:line:text`` output is read one regex match per run of lines of one path, its lines
counted by their newlines and only the quoted ones split. These tests hold what it finds (the
files, their counts, first and last line numbers and quoted matches, the line count and the last
line) and the preview made of it to a reading of every line: runs of one line and of thousands,
paths that come back later, empty paths, CRLF endings, a missing or doubled final newline, and
the lines that make a body not plain (an empty line, a line number with a letter, a line of two
pieces, a context or heading line, a path over 1,000 bytes on a sampled line or off one).
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project
from cargohold.projection._model import quote
from cargohold.projection._search import _File, _plain, _render

SEARCH = Detection("search", ProjectionClass.COMPRESSIBLE)
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
Found = tuple[list[tuple[bytes, int, int, int, list[tuple[int, str]]]], int, tuple[int, bytes]]


def _per_line(data: bytes) -> Found | None:
    """What a plain reading must find, read line by line: every line ``path:digits:text``, the
    path of every ``len(lines) // 64``-th line at most 1,000 bytes; ``None`` otherwise."""
    if not data:
        return None
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    stride = max(1, len(lines) // 64)
    files: dict[bytes, tuple[int, int, int, list[tuple[int, str]]]] = {}
    for index, line in enumerate(lines):
        pieces = line.split(b":", 2)
        if len(pieces) < 3 or not pieces[1].isdigit():
            return None
        path, number, text = pieces[0], int(pieces[1][:18]), pieces[2]
        if index % stride == 0 and len(path) > 1000:
            return None
        count, first, _, kept = files.get(path, (0, number, 0, []))
        if len(kept) < 3:
            kept = [*kept, (number, quote(text, 160, strip=True))]
        files[path] = (count + 1, first, number, kept)
    entries = [(path, *figures) for path, figures in files.items()]
    return entries, len(lines), (len(lines), lines[-1].rstrip(b"\r"))


def _by_runs(data: bytes) -> Found | None:
    found = _plain(data)
    if found is None:
        return None
    files, total, last, ending = found
    assert ending == last[1]
    entries = [(path, f.count, f.first_line, f.last_line, f.matches) for path, f in files.items()]
    return entries, total, last


PATHS = [b"src/app.py", b"src/lib/util.py", b"c", b"", b"with space.txt", b"\xff.py"]
TEXTS = [b"hello", b"", b"  spaced  ", b"a:b:c", b"tab\there", b"x\r", b"\xc3\xa9t\xc3\xa9"]
ODD = [b"", b"src/app.py", b"src/app.py:12", b"src/app.py:1a:text", b"src/app.py-3-context", b"--"]


def _body(pick: random.Random, runs: int, odd: float, long_path: float) -> bytes:
    lines: list[bytes] = []
    for _ in range(runs):
        path = b"p" * pick.choice([999, 1000, 1001]) if pick.random() < long_path else b""
        path = path or pick.choice(PATHS)
        start = pick.randint(1, 5000)
        for offset in range(pick.choice([1, 1, 2, 3, 7, 40, 300])):
            if pick.random() < odd:
                lines.append(pick.choice(ODD))
            else:
                lines.append(b"%s:%d:%s" % (path, start + offset, pick.choice(TEXTS)))
    return b"\n".join(lines) + pick.choice([b"\n", b"\n", b"", b"\r\n", b"\n\n"])


@SLOW
@given(
    seed=st.integers(0, 2**32),
    runs=st.integers(1, 60),
    odd=st.sampled_from([0.0, 0.0, 0.001, 0.05]),
    long_path=st.sampled_from([0.0, 0.0, 0.02, 0.2]),
)
def test_the_plain_reading_by_runs_finds_what_a_reading_of_every_line_finds(
    seed: int, runs: int, odd: float, long_path: float
) -> None:
    data = _body(random.Random(seed), runs, odd, long_path)

    assert _by_runs(data) == _per_line(data)


def test_every_form_of_line_that_is_not_plain_sends_the_body_to_the_line_reader() -> None:
    plain = b"src/app.py:1:one\nsrc/app.py:2:two\nsrc/lib.py:9:nine\n"
    assert _plain(plain) is not None
    for odd in ODD:
        for data in (
            odd + b"\n" + plain,
            plain[:17] + odd + b"\n" + plain[17:],
            plain + odd + b"\n",
        ):
            assert _plain(data) is None, data
            assert _per_line(data) is None, data


def test_a_long_path_sends_the_body_to_the_line_reader_only_on_a_sampled_line() -> None:
    # 640 lines: every 10th line's path is held to 1,000 bytes. A run of a long path between
    # two sampled lines passes, as the line-by-line reading let it pass.
    lines = [b"f%d.py:%d:text" % (n // 5, n) for n in range(640)]
    unsampled = lines[:11] + [b"p" * 1200 + b":1:x"] * 9 + lines[20:]  # lines 11-19
    sampled = lines[:11] + [b"p" * 1200 + b":1:x"] * 10 + lines[21:]  # lines 11-20
    for data in (b"\n".join(unsampled) + b"\n", b"\n".join(sampled) + b"\n"):
        assert _by_runs(data) == _per_line(data)
    assert _plain(b"\n".join(unsampled) + b"\n") is not None
    assert _plain(b"\n".join(sampled) + b"\n") is None


def test_a_file_seen_again_later_keeps_its_first_line_and_first_matches() -> None:
    data = b"a.py:3:first\nb.py:1:other\na.py:7:second\na.py:9:third\na.py:11:fourth\n"

    found = _by_runs(data)

    assert found == _per_line(data)
    assert found is not None
    assert found[0][0] == (b"a.py", 4, 3, 11, [(3, "first"), (7, "second"), (9, "third")])


def test_a_run_of_many_thousand_lines_of_one_file_is_one_entry() -> None:
    data = b"".join(b"src/big.py:%d:line %d\r\n" % (n, n) for n in range(1, 200_001))

    found = _by_runs(data)

    assert found == _per_line(data)
    assert found is not None
    assert found[0][0][:4] == (b"src/big.py", 200_000, 1, 200_000)


def test_previews_of_generated_results_are_those_rendered_from_the_line_by_line_figures() -> None:
    pick = random.Random(11)
    checked = 0
    for _ in range(60):
        data = _body(pick, pick.randint(1, 200), 0.0, pick.choice([0.0, 0.05]))
        found = _per_line(data)
        if found is None:  # a doubled final newline, a long path on a sampled line
            assert _plain(data) is None
            continue
        checked += 1
        entries, total, last = found
        files = {}
        for path, count, first, final, kept in entries:
            files[path] = _File(path.decode("utf-8", "replace"), count, first, final, kept)
        head = (1, data[: data.find(b"\n")].rstrip(b"\r"))
        for budget in (600, 2000, 8192):
            expected = _render(data, budget, files, total, 0, 0, head, last, last[1])

            preview = project(data, media_type="text/plain", budget=budget, detection=SEARCH)

            assert preview.preview == expected
    assert checked >= 30
