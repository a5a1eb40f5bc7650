"""The run report in a real browser: headless Chromium (Debian's ``chromium``) loads the page of
a recorded demo run and of a 1,000-event run of three agent levels with no console message
(the page runs no script and fetches nothing: its Content-Security-Policy reports any attempt
on the console), draws every section, and looks like the committed reference screenshot within
a tolerance (not a byte match: fonts and anti-aliasing vary a little between installs).

Chromium comes from apt (``apt-get install chromium``); without it these tests skip, except
under ``CI=true``, where they fail. ``UPDATE_REPORT_REFS=1`` rewrites the references.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cargohold import ListSink, MemoryStore, Offloader, Rehydrator, Reporter, Scope, ScopedStore
from cargohold.cli import cli
from cargohold.report import SECTIONS, build_report, render_html

REFS = Path(__file__).parent / "report_refs"
WIDTH, HEIGHT = 1200, 1800
TOLERANCE = 0.02
"""The most pixels of a screenshot that may differ from its reference (2%)."""


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _browse(chromium: str, page: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # tests run as root in containers; the page is our own, offline
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--log-level=0",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, timeout=120, check=True)


def _console(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode(errors="replace").splitlines() if ":CONSOLE" in line]


def _add(a: int, b: int) -> int:
    return (a + b) & 255


def _unfilter(kind: int, line: bytearray, prior: bytes, channels: int) -> None:
    """Undo PNG filter 1 (sub), 3 (average) or 4 (Paeth) of one row, in place."""
    for x in range(len(line)):
        left = line[x - channels] if x >= channels else 0
        up, corner = prior[x], prior[x - channels] if x >= channels else 0
        if kind == 1:
            line[x] = (line[x] + left) & 255
        elif kind == 3:
            line[x] = (line[x] + (left + up) // 2) & 255
        else:
            guess = left + up - corner
            pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
            near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[x] = (line[x] + near) & 255


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB bytes of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert (depth, header[12]) == (8, 0)
    assert color in (2, 6)
    channels = 4 if color == 6 else 3
    raw, stride, rows, prior = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        at = y * (stride + 1)
        kind, line = raw[at], bytearray(raw[at + 1 : at + 1 + stride])
        if kind == 2:  # "up", most of a screenshot's rows: one pass, no per-byte branch
            line = bytearray(map(_add, line, prior))
        elif kind in (1, 3, 4):
            _unfilter(kind, line, prior, channels)
        prior = bytes(line)
        if channels == 3:
            rows.append(prior)
        else:  # drop the alpha channel
            rgb = bytearray(width * 3)
            for c in range(3):
                rgb[c::3] = prior[c::4]
            rows.append(bytes(rgb))
    return width, height, rows


def _differing(png: bytes, reference: bytes) -> float:
    """The share of pixels whose colour differs by more than 48 in some channel."""
    width, height, rows = _pixels(png)
    ref_width, ref_height, ref_rows = _pixels(reference)
    assert (width, height) == (ref_width, ref_height)
    step = 2  # every other row and column: a quarter of the pixels, ample for a page's layout
    differ = total = 0
    for y in range(0, height, step):
        row, ref = rows[y], ref_rows[y]
        for x in range(0, width * 3, 3 * step):
            total += 1
            if max(abs(row[x + c] - ref[x + c]) for c in range(3)) > 48:
                differ += 1
    return differ / total


def _check_page(chromium: str, page: Path, name: str) -> None:
    dom = _browse(chromium, page, "--dump-dom")
    assert _console(dom.stderr) == []
    text = dom.stdout.decode()
    missing = [s for s in SECTIONS if f'<section id="{s}">' not in text]
    assert missing == [], f"sections not drawn: {missing}"
    shot = page.with_suffix(".png")
    taken = _browse(chromium, page, f"--screenshot={shot}")
    assert _console(taken.stderr) == []
    reference = REFS / f"{name}.png"
    if os.environ.get("UPDATE_REPORT_REFS") == "1":
        REFS.mkdir(exist_ok=True)
        reference.write_bytes(shot.read_bytes())
    assert reference.exists(), f"no reference screenshot {reference.name}"
    assert _differing(shot.read_bytes(), reference.read_bytes()) <= TOLERANCE


def _demo_page(tmp_path: Path) -> Path:
    (tmp_path / "cargohold.toml").write_text(f'events_log = "{tmp_path / "events.jsonl"}"\n')
    config = ["--store", "memory://", "--config", str(tmp_path / "cargohold.toml")]
    ran = CliRunner().invoke(cli, [*config, "demo"])
    assert ran.exit_code == 0, ran.output
    return tmp_path / "demo-report.html"


def _three_level_page(tmp_path: Path) -> Path:
    """A real run of 1,000 decisions: a planner, 3 workers, 2 readers under each."""
    sink = ListSink()
    scoped = ScopedStore(MemoryStore(), Scope("acme", "ana", "three-levels"))
    planner = Reporter([sink], agent_id="planner")
    workers = [planner.child(f"worker-{w}") for w in range(3)]
    readers = [
        worker.child(f"reader-{w}-{r}") for w, worker in enumerate(workers) for r in range(2)
    ]
    agents: list[Any] = [planner, *workers, *readers]
    refs = []
    turn = 0
    while len(sink.events) < 1000:
        agent = agents[turn % len(agents)]
        tool = f"tool_{turn % 5}"
        if agent in readers and refs:
            Rehydrator(scoped, reporter=agent).read_lines(refs[turn % len(refs)], 1, 1 + turn % 30)
        else:
            lines = 40 + (turn * 37) % 1200
            body = "".join(f"{tool} turn {turn} line {i}: status ok\n" for i in range(lines))
            done = Offloader(scoped, reporter=agent).offload(body, tool=tool)
            if done.ref is not None:
                refs.append(done.ref)
        turn += 1
    page = tmp_path / "three-levels.html"
    page.write_text(render_html(build_report([e.as_dict() for e in sink.events[:1000]])))
    return page


def test_the_report_of_a_demo_run_loads_in_chromium_as_its_reference(
    chromium: str, tmp_path: Path
) -> None:
    _check_page(chromium, _demo_page(tmp_path), "demo")


def test_the_report_of_a_thousand_event_three_level_run_loads_as_its_reference(
    chromium: str, tmp_path: Path
) -> None:
    _check_page(chromium, _three_level_page(tmp_path), "three-levels")


def test_a_page_missing_a_section_fails_the_check(chromium: str, tmp_path: Path) -> None:
    page = _three_level_page(tmp_path)
    text = page.read_text()
    start = text.index('<section id="read-backs">')
    page.write_text(text[:start] + text[text.index("</section>", start) + 10 :])

    with pytest.raises(AssertionError, match="read-backs"):
        _check_page(chromium, page, "three-levels")


def test_a_page_that_tries_a_script_or_a_fetch_shows_on_the_console(
    chromium: str, tmp_path: Path
) -> None:
    page = _three_level_page(tmp_path)
    page.write_text(page.read_text().replace("</body>", "<script>1</script></body>"))

    assert _console(_browse(chromium, page, "--dump-dom").stderr) != []


def test_a_screenshot_of_another_page_is_beyond_the_tolerance() -> None:
    demo, other = (REFS / "demo.png").read_bytes(), (REFS / "three-levels.png").read_bytes()

    assert _differing(demo, other) > TOLERANCE
    assert _differing(demo, demo) == 0
