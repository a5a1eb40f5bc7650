"""The tokenizer loads off the caller's path (issue 27): a preload at start, not a first call.

Each test runs in a fresh interpreter, because what is tested is a process's first count: the
test process has loaded the tokenizer long before (any stub does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cargohold._tokens import count_tokens

TEXT = "The first heavy result after start: 2,431,907 bytes, kept out of context."


def _fresh(script: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    figures: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return figures


def test_a_preloaded_tokenizer_is_loaded_before_the_first_count_asks_for_it() -> None:
    figures = _fresh(
        f"""
        import json
        import cargohold._tokens as tokens

        tokens.preload().join(60)

        def refuse(name):
            raise AssertionError("the tokenizer was loaded on the caller's call")

        tokens._load = refuse  # from here, a load on the caller's call fails the count
        print(json.dumps({{"count": tokens.count_tokens({TEXT!r})}}))
        """
    )
    assert figures["count"] == count_tokens(TEXT)


def test_preload_started_twice_is_one_load() -> None:
    figures = _fresh(
        """
        import json
        import cargohold._tokens as tokens

        first, second = tokens.preload(), tokens.preload()
        first.join(60)
        print(json.dumps({"same": first is second, "alive": second.is_alive()}))
        """
    )
    assert figures == {"same": True, "alive": False}


def test_the_read_server_starts_loading_the_tokenizer_when_it_is_built(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    figures = _fresh(
        f"""
        import json
        import threading
        import cargohold
        import cargohold._tokens as tokens
        from cargohold.mcp import build_read_server

        with cargohold.open({str(tmp_path / "store")!r}, tenant="t", user="u", session="s") as hold:
            build_read_server(hold)
            started = any(t.name == "cargohold-tokenizer" for t in threading.enumerate())
            started = started or "o200k_base" in tokens._loaded  # already done
            tokens.preload().join(60)
        print(json.dumps({{"started": started}}))
        """
    )
    assert figures == {"started": True}
