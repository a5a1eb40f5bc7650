"""cargohold.mcp's public surface, its extra, and what its objects show about themselves."""

from __future__ import annotations

import subprocess
import sys

from _require import require

require("mcp", "mcp")

import cargohold.mcp  # noqa: E402 - after the extra's check
from cargohold.mcp import Upstream  # noqa: E402
from test_exported_members import _isort_style, _names_bound_in  # noqa: E402


def test_all_is_sorted_and_exactly_the_public_names_of_the_package() -> None:
    exported = cargohold.mcp.__all__

    assert exported == sorted(set(exported), key=_isort_style)
    assert set(exported) == _names_bound_in(cargohold.mcp)


def test_importing_it_without_the_sdk_raises_one_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "try:\n    import cargohold.mcp\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert done.stdout.startswith("ConfigError ")
    assert "cargohold[mcp]" in done.stdout


def test_an_upstream_shows_neither_its_command_line_nor_its_url() -> None:
    command = Upstream(command=("npx", "server", "/home/ana/secret-folder", "--token=abc"))
    remote = Upstream(url="http://user:pw@127.0.0.1:9/mcp")

    assert repr(command) == "Upstream(stdio)"
    assert repr(remote) == "Upstream(http)"


def test_the_mcp_settings_come_from_the_environment_and_are_checked() -> None:
    import pytest

    from cargohold import ConfigError, load_settings

    settings = load_settings(
        environ={
            "CARGOHOLD_REF_ARGUMENTS": "write_file, update_page",
            "CARGOHOLD_TOOL_DISPOSITIONS": "shot=inline,scan=tool:ocr",
            "CARGOHOLD_ATTACHMENT_DISPOSITION": "ref",
            "CARGOHOLD_UPSTREAM_TIMEOUT": "2.5",
        }
    )

    assert settings.ref_arguments == ("write_file", "update_page")
    assert settings.tool_dispositions == {"shot": "inline", "scan": "tool:ocr"}
    assert settings.upstream_timeout == 2.5
    with pytest.raises(ConfigError, match=r"tool_dispositions\.shot"):
        load_settings({"tool_dispositions": {"shot": "sideways"}}, environ={})
    with pytest.raises(ConfigError, match="upstream_timeout"):
        load_settings({"upstream_timeout": 0}, environ={})
