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

# Tests run on TEST_WORKERS pytest-xdist workers, a module per worker at a time (its
# fixtures start Ray or Spark once): most of a Ray or Spark test is waiting for processes
# to start, which two workers overlap even on two cores. Tests that measure wall-clock
# rates on real Ray (marked serial) run afterwards, alone.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope

test: $(STAMP)
	$(BIN)/ruff check specula tests benchmarks
	$(PYTEST) -m "not serial"
	$(BIN)/python -m pytest -m serial

# the inner loop: everything but Spark, Ray and whole generated matches (under 2 minutes)
test-quick: $(STAMP)
	$(BIN)/ruff check specula tests benchmarks
	$(PYTEST) -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/ordering.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
