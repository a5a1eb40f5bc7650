"""The code outline's definition patterns run under RE2: the same matches as the bytes patterns
they are written as, and no backtracking blow-up on lines that open a definition and never
close it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.code_fixtures import CODE_FIXTURES

from cargohold.projection import _code

PATTERNS = sorted(
    {pattern for patterns in _code._DEFS.values() for pattern in patterns},
    key=lambda pattern: pattern.pattern,
)


def _matches(pattern: object, data: bytes) -> list[tuple[int, int, tuple[bytes | None, ...]]]:
    return [(m.start(), m.end(), m.groups()) for m in pattern.finditer(data)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda pattern: pattern.pattern[:30].decode())
def test_each_definition_pattern_matches_the_fixtures_as_its_bytes_pattern_does(
    pattern: object,
) -> None:
    bodies = [fixture.read() for fixture in CODE_FIXTURES.values()]
    linear = _code._linear(pattern)  # type: ignore[arg-type]

    for body in bodies:
        assert _matches(linear, body) == _matches(pattern, body)


_CODE_BITS = st.sampled_from(
    [
        b"  ",
        b"\t",
        b"\n",
        b"public ",
        b"static ",
        b"void ",
        b"int ",
        b"class ",
        b"struct ",
        b"def ",
        b"async ",
        b"function ",
        b"foo",
        b"(",
        b")",
        b"{",
        b"}",
        b";",
        b"<T>",
        b"throws IOException ",
        b"=> ",
        b"const ",
        b"export ",
        b"fn ",
        b"pub ",
        b"*",
        b"::",
        b"#define ",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_CODE_BITS, max_size=60).map(b"".join))
def test_each_definition_pattern_matches_generated_code_as_its_bytes_pattern_does(
    body: bytes,
) -> None:
    for pattern in PATTERNS:
        assert _matches(_code._linear(pattern), body) == _matches(pattern, body)


def test_a_java_body_of_unclosed_method_lines_is_projected_without_a_backtracking_blow_up() -> None:
    # 1 MiB of "foo(a, b" lines: Python's backtracking took 6 s for 64 KiB of them (half an
    # hour for this body). In a child process, bounded, so a regression fails instead of hanging.
    script = textwrap.dedent(
        """
        from cargohold.projection import project
        body = (b"    foo(a, b\\n" * 90000)[: 1 << 20]
        stub = project(body, media_type="text/x-java", budget=4096)
        print(stub.kind, len(stub.preview) > 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["code", "True"]
