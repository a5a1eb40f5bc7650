"""The log projector's scan of a long log, held to the body's lines as ``split`` gives them.

Past 4,096 lines the scan no longer splits the body: the severe scan counts the newlines before
each hit and the rest after the last, the sampled lines come from a strided ``islice`` over the
body's lines, the last lines from ``rfind``. These tests hold the line count, the sample, the
time span and the tail to the ones computed from ``data.split(b"\\n")`` (the way the scan read
the body before), over generated logs with CRLF endings, blank lines, a last line without its
newline, lines of another encoding and many severe lines; and the message pattern with its
first-byte lookahead to the pattern without it.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project

_log = sys.modules["cargohold.projection._log"]  # the package's ``_log`` is a function

LINES = [
    b"2026-11-29T02:00:01Z INFO [worker-3] billing.charge invoice=INV-0000001 amount=12.50",
    b"2026-11-29T02:00:02Z WARN [worker-1] slow response latency_ms=812",
    b"2026-11-29T02:00:03Z ERROR [worker-2] charge failed code=0x1f"
    b" id=3f2a9c1e-1111-2222-3333-444455556666",
    b"2026-11-29T02:00:04Z DEBUG cache hit key=abcdef0123456789",
    b"Nov 29 02:00:05 host sshd[42]: FATAL: cannot bind",
    b"081109 203615 148 INFO dfs.DataNode: Receiving block blk_-1608999687919862906",
    b"  continuation of the previous message",
    b"ERRATA is not a level but holds ERR",
    b"\xff\xfe bytes of another encoding WARNING x",
    b"",
    b"\r",
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LOG = Detection("log", ProjectionClass.COMPRESSIBLE)
VARIABLE_BEFORE = re.compile(
    r"0x[0-9a-fA-F]+|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}"
    r"|(?<![A-Za-z0-9])-?\d+(?:[.:/_-]\d+)*|\d+(?:[.:/_-]\d+)*|[0-9a-f]{12,}"
)


def _split_scan(data: bytes) -> dict[str, object]:
    """The figures of a long log's scan as read from the body's ``split`` lines."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    total = len(lines)
    stride = max(1, -(-total // _log._SAMPLE))
    sample = [(n + 1, lines[n].decode("utf-8", "replace")) for n in range(0, total, stride)]
    tail_start = max(0, total - 50)
    tail = [line.decode("utf-8", "replace") for line in lines[tail_start:]]
    expected = _log._Scan()
    for line in (line.decode("utf-8", "replace") for line in lines[:50]):
        expected.first_stamp = _log._stamp(line)
        if expected.first_stamp:
            break
    _log._ends(expected, tail, tail_start)
    _log._common(expected, sample)
    sampled = Counter(found[0] for _, line in sample if (found := _log._level(line)) is not None)
    return {
        "total": total,
        "stride": stride,
        "sample_size": len(sample),
        "sampled": sampled,
        "common": expected.common,
        "first_stamp": expected.first_stamp,
        "last_stamp": expected.last_stamp,
        "tail": expected.tail,
    }


def _figures(scan: object) -> dict[str, object]:
    return {name: getattr(scan, name) for name in _split_scan(b"x\n")}


@SLOW
@given(
    lines=st.lists(st.sampled_from(LINES), min_size=1, max_size=30),
    repeat=st.integers(min_value=1, max_value=3),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    extra=st.integers(min_value=0, max_value=300),
)
def test_a_long_log_is_scanned_as_its_split_lines_read(
    lines: list[bytes], repeat: int, crlf: bool, final_newline: bool, extra: int
) -> None:
    end = b"\r\n" if crlf else b"\n"
    count = (_log._EXACT_LINES * repeat) // len(lines) + 1
    body = (lines * count)[: len(lines) * count - extra % len(lines) or None]
    body += [b"2026-11-29T03:00:00Z INFO the very last line %d" % extra]
    data = end.join(body) + (end if final_newline else b"")

    assert _figures(_log._fast(data)) == _split_scan(data)


def test_a_long_log_without_a_final_newline_counts_its_last_line() -> None:
    data = b"\n".join(b"2026-11-29T02:00:00Z INFO line %d" % n for n in range(5000))

    preview = project(data, media_type="text/plain", budget=4096, detection=LOG).preview

    assert preview.startswith("log: 5,000 lines;")
    assert "5000: 2026-11-29T02:00:00Z INFO line 4999" in preview


def test_the_message_pattern_replaces_what_it_replaced_without_its_lookahead() -> None:
    texts = [line.decode("utf-8", "replace") for line in LINES] + [
        "a-12 -12 x-0x1f 0xZZ 12.3.4/5 ab-1 abcdef012345 ABCDEF012345 --3 -a1 1-",
        "3f2a9c1e-1111-2222-3333-444455556666-77 deadbeefdeadbeef9 -0:1_2",
    ]
    for text in texts:
        for start in range(len(text)):
            piece = text[start:]
            assert _log._VARIABLE.sub("#", piece) == VARIABLE_BEFORE.sub("#", piece)
