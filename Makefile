# Two commands do all set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench dist clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The research-team workflow on SQLite in ./demo.db (recreated on each run).
demo: $(STAMP)
	$(BIN)/python workflows/research_team.py demo.db

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/fork.py
	$(BIN)/python bench/stores.py
	$(BIN)/python bench/views.py
	$(BIN)/python bench/checkpoints.py
	$(BIN)/python bench/workflows.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/contention.py
	$(BIN)/python bench/jsonfile_lines.py
	$(BIN)/python bench/service.py
	$(BIN)/python bench/peers.py

# The release: sdist and wheel in dist/, checked, installed with every extra into a fresh
# build/dist-venv beside llama-index-workflows, openai-agents and langgraph, quickstart run.
dist: $(STAMP)
	$(BIN)/python scripts/check_dist.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
