"""What the crossover figures of ``benchmarks/rules_gpu.py --crossover`` rest on: the
sizes it sweeps, the work a size stands for in its stream, and how the crossover is read
off a table (the timings themselves need a GPU and live in the benchmark)."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """The benchmark module (it imports ``benchmarks/rules.py`` as ``rules``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("rules_gpu")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _rows(ratios: list[float]) -> list[dict[str, float]]:
    return [{"pairs": 10 ** (3 + i), "cpu_vs_gpu": r} for i, r in enumerate(ratios)]


def test_the_crossover_is_where_the_device_wins_from_on(bench):
    assert bench.first_win(_rows([0.2, 0.9, 1.5, 3.0, 8.0])) == 100_000
    assert bench.first_win(_rows([0.2, 1.2, 0.9, 3.0, 8.0])) == 1_000_000  # a loss resets
    assert bench.first_win(_rows([1.1, 2.0])) == 1_000
    assert bench.first_win(_rows([0.2, 3.0, 1.0])) is None  # even is no win
    assert bench.first_win(_rows([])) is None


def test_the_constants_block_says_what_each_figure_rests_on(bench):
    rows = _rows([0.5, 1.5, 2.5])
    line = bench.constant_line("scan_last", 10_000, rows)
    assert line.startswith("MIN_GPU_WORK_SCAN_LAST = 10_000  #") and "100,000" in line
    assert bench.constant_line("reduce", None, rows[:1]).startswith(
        "MIN_GPU_WORK_REDUCE = None  # the CPU was faster up to 1,000 pairs")


@settings(max_examples=30, deadline=None)
@given(low=st.floats(10, 1e6), decades=st.floats(0, 3), per_decade=st.integers(1, 4))
def test_the_sizes_cover_the_range_in_steps(bench, low, decades, per_decade):
    high = low * 10**decades
    sizes = bench.crossover_sizes(low, high, per_decade)
    pairs = [t * w for t, w in sizes]
    assert pairs == sorted(pairs) and len(set(sizes)) == len(sizes)
    assert all(1 <= t <= bench.MAX_TERMINATORS and w >= 1 for t, w in sizes)
    assert pairs[0] == pytest.approx(low, rel=0.5, abs=2)
    assert pairs[-1] <= high * 1.5 + 2
    assert pairs[-1] >= high / 10 ** (1 / per_decade) / 1.5
    assert len(sizes) <= math.floor(per_decade * decades + 1e-9) + 1


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 40), width=st.integers(1, 200), batches=st.integers(1, 4))
def test_each_terminator_sees_exactly_width_events_in_its_window(bench, t, width, batches):
    """The sweep's pairs are ``t * width``: each batch holds ``t`` terminators (C) and
    the window of ``2 * width`` ticks before each holds ``width`` B events."""
    reg = bench.registry()
    events = bench.crossover_stream(reg, t, width, batches, seed=3)
    assert len(events) == width + 2 * t * batches
    assert np.all(np.diff(events["ts"]) > 0)
    head, measured = events[:width], events[width:]
    assert np.all(head["type"] == reg.id("B"))
    b_ts = events["ts"][events["type"] == reg.id("B")]
    for part in np.split(measured, batches):
        c_ts = part["ts"][part["type"] == reg.id("C")]
        assert len(c_ts) == t
        seen = np.searchsorted(b_ts, c_ts) - np.searchsorted(b_ts, c_ts - 2 * width)
        assert np.all(seen == width)
