# Two entry points for a fresh machine (Python 3.11+ and make; nothing else by hand):
#   make demo   runs cargohold's main job on the embedded default store
#   make test   runs lint, strict type checking and the whole test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps: the demo needs only what cargohold itself runs on; the tests need the whole dev
# toolchain (linters, type checker, every framework the adapters are tested against).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

# The npm MCP servers the MCP tests run against (tests/test_mcp_npm.py), pinned, installed once
# per version into the user's cache (kept between runs and checkouts; npm's own cache helps the
# first). Without npm the target says so and those tests skip; under CI=true they fail instead.
MCP_NPM_VERSION := 2026.8.31
MCP_SERVERS_PREFIX ?= $(HOME)/.cache/cargohold-test/mcp-npm-$(MCP_NPM_VERSION)
export MCP_SERVERS_PREFIX
# The MCP Inspector, whose CLI mode runs a client's JSON config (tests/test_mcp_inspector.py
# runs the configs docs/mcp.md shows), both generations pinned into the same prefix: v1 (still
# widely installed, deprecated) splits a config's args at `--`, v2 does not.
MCP_INSPECTOR_VERSION := 2.12.0
MCP_INSPECTOR_V1_VERSION := 1.0.3
MCP_STAMP := $(MCP_SERVERS_PREFIX)/.installed-inspector-$(MCP_INSPECTOR_VERSION)-$(MCP_INSPECTOR_V1_VERSION)
# Claude Code, for the gateway's end-to-end test (tests/test_gateway_claude_code.py: same pin).
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_CODE_PREFIX ?= $(HOME)/.cache/cargohold-test/claude-code-$(CLAUDE_CODE_VERSION)
export CLAUDE_CODE_PREFIX
CLAUDE_CODE_STAMP := $(CLAUDE_CODE_PREFIX)/.installed
# Codex CLI, likewise (tests/test_gateway_codex.py).
CODEX_VERSION := 0.171.0
CODEX_PREFIX ?= $(HOME)/.cache/cargohold-test/codex-$(CODEX_VERSION)
export CODEX_PREFIX
CODEX_STAMP := $(CODEX_PREFIX)/.installed

.PHONY: demo test lint typecheck pytest bench clean mcp-servers browser

# The first run says how long it takes (figures from a cold pip cache, README "Set-up") and lets
# pip show what it collects and its progress bars; creating the venv and upgrading pip stay quiet.
$(VENV)/bin/python:
	@echo "cargohold: creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip

$(STAMP): pyproject.toml | $(VENV)/bin/python
	@echo "cargohold: installing cargohold and its runtime dependencies (first run only, under a minute)..."
	@$(BIN)/python -m pip install --progress-bar on --disable-pip-version-check -e .
	@touch $(STAMP)
	@echo "cargohold: ready"

$(DEV_STAMP): pyproject.toml | $(VENV)/bin/python
	@echo "cargohold: installing the dev toolchain for the tests (first run only, a few minutes)..."
	@$(BIN)/python -m pip install --progress-bar on --disable-pip-version-check -e '.[dev,postgres]'
	@touch $(STAMP) $(DEV_STAMP)
	@echo "cargohold: ready for make test"

# The demo's command is spelt as it can be pasted: .venv/bin is not on PATH.
demo: $(STAMP)
	$(BIN)/cargohold demo

test: lint typecheck pytest

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

pytest: $(DEV_STAMP) mcp-servers browser
	$(BIN)/python -m pytest

mcp-servers: $(MCP_STAMP) $(CLAUDE_CODE_STAMP) $(CODEX_STAMP)

$(CODEX_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		echo "cargohold: installing Codex CLI $(CODEX_VERSION) for the gateway's test (first run only)"; \
		npm install --prefix "$(CODEX_PREFIX)" --no-audit --no-fund --loglevel=error \
			@openai/codex@$(CODEX_VERSION) \
		&& touch "$@" \
		|| echo "cargohold: npm install failed: the Codex test will skip (fail under CI)"; \
	else \
		echo "cargohold: npm not found: the Codex test will skip (fail under CI)"; \
	fi

$(CLAUDE_CODE_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		echo "cargohold: installing Claude Code $(CLAUDE_CODE_VERSION) for the gateway's test (first run only)"; \
		npm install --prefix "$(CLAUDE_CODE_PREFIX)" --no-audit --no-fund --loglevel=error \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) \
		&& touch "$@" \
		|| echo "cargohold: npm install failed: the Claude Code test will skip (fail under CI)"; \
	else \
		echo "cargohold: npm not found: the Claude Code test will skip (fail under CI)"; \
	fi

$(MCP_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		echo "cargohold: installing the npm MCP servers and the Inspector the tests use (first run only)"; \
		npm install --prefix "$(MCP_SERVERS_PREFIX)" --no-audit --no-fund --loglevel=error \
			@modelcontextprotocol/server-filesystem@$(MCP_NPM_VERSION) \
			@modelcontextprotocol/server-everything@$(MCP_NPM_VERSION) \
			@modelcontextprotocol/inspector@$(MCP_INSPECTOR_VERSION) \
			mcp-inspector-v1@npm:@modelcontextprotocol/inspector@$(MCP_INSPECTOR_V1_VERSION) \
		&& touch "$@" \
		|| echo "cargohold: npm install failed: the npm MCP server tests will skip (fail under CI)"; \
	else \
		echo "cargohold: npm not found: the npm MCP server tests will skip (fail under CI)"; \
	fi

# Headless Chromium for the run report's browser test (tests/test_report_browser.py), from
# Debian's packages (apt needs root; the package lists are refreshed only when the first try
# fails). Without it those tests skip; under CI=true they fail instead.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "cargohold: installing Debian's chromium for the report's browser test (first run only)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null \
		|| { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends chromium >/dev/null; } \
		|| echo "cargohold: apt-get install chromium failed: the browser tests will skip (fail under CI)"; \
	else \
		echo "cargohold: chromium not found (apt-get install chromium as root): the browser tests will skip (fail under CI)"; \
	fi

bench: $(DEV_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
