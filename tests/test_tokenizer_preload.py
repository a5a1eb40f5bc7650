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


_STARTED = """
def started():
    import threading
    import cargohold._tokens as tokens

    running = any(t.name == "cargohold-tokenizer" for t in threading.enumerate())
    return running or "o200k_base" in tokens._preloads
"""


def test_warmup_is_the_preload_a_surface_starts_so_the_tokenizer_loads_once() -> None:
    figures = _fresh(
        """
        import json
        import cargohold
        import cargohold._tokens as tokens

        with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
            hold.warmup()
            thread = tokens._preloads.get("o200k_base")
            done = thread is not None and not thread.is_alive()
            print(json.dumps({"done": done, "same": tokens.preload() is thread}))
        """
    )
    assert figures == {"done": True, "same": True}


def test_the_langchain_middleware_starts_loading_the_tokenizer_when_it_is_built() -> None:
    pytest.importorskip("langchain")
    figures = _fresh(
        _STARTED
        + """
import json
import cargohold
from cargohold.langchain import CargoholdMiddleware

with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
    before = started()
    CargoholdMiddleware(hold)
    print(json.dumps({"before": before, "after": started()}))
"""
    )
    assert figures == {"before": False, "after": True}


def test_the_openai_agents_adapter_starts_loading_the_tokenizer_when_it_is_built() -> None:
    pytest.importorskip("agents")
    figures = _fresh(
        _STARTED
        + """
import json
import cargohold
from cargohold.openai_agents import AgentsAdapter

with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
    before = started()
    AgentsAdapter(hold)
    print(json.dumps({"before": before, "after": started()}))
"""
    )
    assert figures == {"before": False, "after": True}


def test_the_openai_agents_input_filter_starts_loading_the_tokenizer_when_it_is_built() -> None:
    pytest.importorskip("agents")
    figures = _fresh(
        _STARTED
        + """
import json
import cargohold
from cargohold.openai_agents import InputFilter

with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
    before = started()
    InputFilter(hold)
    print(json.dumps({"before": before, "after": started()}))
"""
    )
    assert figures == {"before": False, "after": True}


def test_the_gateway_starts_loading_the_tokenizer_when_its_app_is_built() -> None:
    pytest.importorskip("starlette")
    figures = _fresh(
        _STARTED
        + """
import json
import cargohold
from cargohold.gateway import build_app

with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
    before = started()
    build_app(hold)
    print(json.dumps({"before": before, "after": started()}))
"""
    )
    assert figures == {"before": False, "after": True}


def test_cli_offload_starts_loading_the_tokenizer_before_it_reads_stdin(tmp_path: Path) -> None:
    figures = _fresh(
        _STARTED
        + f"""
import io
import json
from click.testing import CliRunner
from cargohold.cli._app import cli

seen = {{}}


class Stdin(io.BytesIO):
    def read(self, size=-1):
        if size != 0:  # click probes the stream with read(0)
            seen.setdefault("at_read", started())
        return super().read(size)


before = started()
result = CliRunner().invoke(
    cli,
    ["--store", {str(tmp_path / "store")!r}, "offload", "-", "--tool", "t"],
    input=Stdin(b"x" * 40_000),
)
print(json.dumps({{"before": before, "at_read": seen.get("at_read"), "code": result.exit_code}}))
"""
    )
    assert figures == {"before": False, "at_read": True, "code": 0}


def test_a_tokenizer_load_that_failed_once_is_tried_again_not_remembered_as_missing() -> None:
    figures = _fresh(
        f"""
        import json
        import cargohold._tokens as tokens

        real = tokens._open
        calls = []

        def flaky(name):
            calls.append(name)
            if len(calls) == 1:
                raise OSError("transient")
            return real(name)

        tokens._open = flaky
        first = tokens.count_tokens({TEXT!r})
        second = tokens.count_tokens({TEXT!r})
        third = tokens.count_tokens({TEXT!r})
        print(json.dumps({{"first": first, "second": second, "third": third, "loads": len(calls)}}))
        """
    )

    assert figures["first"] is None  # that one count falls back to an estimate
    assert figures["second"] == count_tokens(TEXT)  # exact again once the load succeeds
    assert figures["third"] == count_tokens(TEXT)
    assert figures["loads"] == 2  # then remembered: loaded once


def test_a_count_loads_the_compiled_tokenizer_alone_not_the_package_and_its_tables() -> None:
    figures = _fresh(
        f"""
        import json
        import sys
        import cargohold._tokens as tokens

        count = tokens.count_tokens({TEXT!r})
        print(json.dumps({{"count": count, "package": "bpe_openai" in sys.modules}}))
        """
    )
    assert figures == {"count": count_tokens(TEXT), "package": False}


def test_the_package_imported_after_a_count_shares_the_bindings_and_counts_the_same() -> None:
    figures = _fresh(
        f"""
        import json
        import cargohold._tokens as tokens

        count = tokens.count_tokens({TEXT!r})
        import bpe_openai  # initialising the bindings twice would raise (PyO3)

        public = len(bpe_openai.get_encoding("o200k_base").encode_ordinary({TEXT!r}))
        print(json.dumps({{"count": count, "public": public}}))
        """
    )
    assert figures["count"] == figures["public"] == count_tokens(TEXT)


def test_a_wheel_without_the_bindings_file_counts_through_the_public_api() -> None:
    figures = _fresh(
        f"""
        import json
        import sys
        import cargohold._tokens as tokens

        tokens._bindings_module = lambda: None  # a wheel laid out otherwise
        count = tokens.count_tokens({TEXT!r})
        print(json.dumps({{"count": count, "package": "bpe_openai" in sys.modules}}))
        """
    )
    assert figures == {"count": count_tokens(TEXT), "package": True}


def test_the_preload_also_compiles_the_credential_scanner_so_no_first_scan_does() -> None:
    figures = _fresh(
        """
        import json
        import cargohold._secrets as secrets
        import cargohold._tokens as tokens

        before = secrets._scanner.cache_info().currsize
        tokens.preload().join(60)
        after = secrets._scanner.cache_info().currsize
        token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
        found = [f.kind.value for f in secrets.find_secrets(("token=" + token).encode())]
        print(json.dumps({"before": before, "after": after, "found": len(found)}))
        """
    )
    assert figures == {"before": 0, "after": 1, "found": 1}
