"""The stock example of OpenCEP, written naturally, gives exactly the skip-till-any-match
result set: on every engine, fed in random batches, and through a RuleDetector in a
graph (where the last minute's matches come out at the end of the stream)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from stock import STOCK_RULE, SYMBOLS, check, quotes, skip_till_any_match, stock_registry

from specula import InProcessRuntime
from specula.detectors.graph import Graph
from specula.detectors.rules import RuleDetector
from specula.detectors.rules.detector import engine_class


@pytest.mark.parametrize("engine", ["aip", "cdp"])
@pytest.mark.parametrize("seed", [0, 1])
def test_stock_example_equals_skip_till_any_match(engine: str, seed: int):
    registry = stock_registry()
    assert len(skip_till_any_match(registry, quotes(registry, 240, seed=seed), 5)) > 100
    assert check(engine_class(engine), seed=seed) == ""


def test_stock_example_on_the_gpu_engine_in_the_simulator():
    script = Path(__file__).with_name("stock.py")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_stock_example_in_a_speculative_graph(engine: str):
    """Quotes arrive up to three minutes late, a speculative unit (alpha 0.5) orders them
    for the RuleDetector, and the last minute's matches come out at the end of the
    stream: the net output is the skip-till-any-match set."""
    registry = stock_registry()
    events = quotes(registry, 90, seed=3)
    expected = skip_till_any_match(registry, events, 5)
    rng = np.random.default_rng(3)
    events["ats"] = events["ts"] + rng.integers(0, 181, len(events))
    raw = events[np.argsort(events["ats"], kind="stable")]
    graph = Graph(registry, sources=SYMBOLS)
    graph.add("rising", RuleDetector(STOCK_RULE.format(minutes=5), registry, engine=engine),
              alpha=0.5, k0=200)
    result = InProcessRuntime(graph).run(raw, step_ticks=30)
    assert len(result.late("rising")) == 0
    net = result.net("rising")
    got = sorted((float(r["a_open"]), float(r["b_open"]), float(r["c_open"]), int(r["a_ts"]))
                 for r in net)
    assert len(expected) > 20
    assert got == expected
    assert net["ts"].max() == events["ts"][events["type"] == registry.id("AVID")].max()
