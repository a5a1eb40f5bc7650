# Two entry points for a fresh machine (Python 3.11+ and make; nothing else by hand):
#   make demo   runs cargohold's main job on the embedded default store
#   make test   runs lint, strict type checking and the whole test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean

# The first run takes about half a minute: say so, and let pip show what it collects and its
# progress bars for the main install (creating the venv and upgrading pip stay quiet).
$(STAMP): pyproject.toml
	@echo "cargohold: creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "cargohold: installing dependencies (first run only, ~30 s)..."
	@$(BIN)/python -m pip install --progress-bar on --disable-pip-version-check -e '.[dev,postgres]'
	@touch $(STAMP)
	@echo "cargohold: ready"

demo: $(STAMP)
	$(BIN)/cargohold demo

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
