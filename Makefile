# Two commands on a fresh clone: `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-quick bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/specula replay

# two workers: the tests that start Ray or Spark (marked `cluster`) one after another on
# one, the rest beside them (tests/conftest.py)
test: $(STAMP)
	$(BIN)/ruff check specula tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# the inner loop: everything but Spark, Ray and whole generated matches (under 2 minutes)
test-quick: $(STAMP)
	$(BIN)/ruff check specula tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/ordering.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
