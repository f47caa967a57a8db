# Two commands on a fresh machine (Python 3.11, pip, a C compiler): `make run` and `make test`.
# Both create or refresh .venv from pyproject.toml first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest openapi bench bench-quick clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/herald dev

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

# `make bench ENGINE=jobs` measures the engine being retired; BENCH_ARGS takes bench/run.py's
# other options, e.g. BENCH_ARGS="--workers 1" (one worker of concurrency 200) or "--only e2e".
ENGINE ?= wakeups
BENCH_ARGS ?=

bench: $(STAMP)
	$(BIN)/python bench/run.py --engine $(ENGINE) $(BENCH_ARGS)
	$(BIN)/python bench/idle_latency.py --engine $(ENGINE) --beside-paused 10000

bench-quick: $(STAMP)
	$(BIN)/python bench/run.py --quick --engine $(ENGINE) $(BENCH_ARGS)
	$(BIN)/python bench/idle_latency.py --engine $(ENGINE) --count 50 --beside-paused 2000

openapi: $(STAMP)
	$(BIN)/herald openapi > openapi/openapi.json

clean:
	rm -rf $(VENV) .herald .mypy_cache .pytest_cache .ruff_cache
