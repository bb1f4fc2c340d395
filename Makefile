# Two commands on a fresh clone: `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the browser the replay page's test opens (Debian's; playwright never downloads one)
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: run test test-quick bench gpu-check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# installed through apt-get where it is missing (CI's clean Debian machine); without
# apt-get the browser test skips, or fails under CI (tests/soccer/test_replay_page.py)
$(CHROMIUM):
	@if command -v apt-get >/dev/null; then \
		$(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else echo "no apt-get: install Chromium as $(CHROMIUM) for the replay page's test"; fi

run: $(STAMP)
	$(BIN)/specula replay

# two workers: the tests that start Ray or Spark (marked `cluster`) one after another on
# one, the rest beside them (tests/conftest.py)
test: $(STAMP) $(CHROMIUM)
	$(BIN)/ruff check specula tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=25

# the inner loop: everything but Spark, Ray and whole generated matches (under 2 minutes)
test-quick: $(STAMP)
	$(BIN)/ruff check specula tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/ordering.py --quick

# on a machine with a CUDA GPU (never in CI): the GPU engine against the reference with
# every step on the device, the rule detector's tests on it, then the GPU benchmark's
# headline ratios and the crossover of each kind of step (docs/measurements.md, "Rule
# engines on a lent GPU"); GPU_PYTHON is a Python that imports the project
GPU_PYTHON ?= $(BIN)/python
gpu-check:
	NUMBA_ENABLE_CUDASIM=0 $(GPU_PYTHON) tests/detectors/rules/rules_reference.py \
		--engine gpu --min-gpu-work 0 --n 120 --max-batch 40
	NUMBA_ENABLE_CUDASIM=0 $(GPU_PYTHON) -m pytest -q -p no:cacheprovider \
		tests/detectors/rules/test_rules_detector.py
	$(GPU_PYTHON) benchmarks/rules_gpu.py --quick
	$(GPU_PYTHON) benchmarks/rules_gpu.py --crossover

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
