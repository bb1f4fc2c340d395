"""Embedded Ray comes up for a run and goes away after it, on success and on failure."""

from __future__ import annotations

import subprocess
import time

import pytest

from specula import Graph
from specula.actors.ray_runtime import RayRuntime
from specula.detectors.examples import Threshold, example_registry
from specula.ordering.unit import DetectorError
from specula.pipelines.synthetic import abc_stream

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # starts embedded Ray

ray = pytest.importorskip("ray")


class Exploding(Threshold):
    """Fails on the first C above 90."""

    def on_batch(self, events, type_names, emit):
        if (events["v"] > 90).any():
            emit.at(int((events["v"] > 90).argmax()))
            raise ValueError("sensor value out of range")


def raylets() -> int:
    out = subprocess.run(["pgrep", "-f", "raylet"], capture_output=True, text=True)
    return len(out.stdout.split())


def gone(before: int, seconds: float = 15.0) -> bool:
    """Whether the raylets started since ``before`` was counted have exited (they take a
    moment after ``ray.shutdown()``, longer on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while raylets() > before and time.monotonic() < deadline:
        time.sleep(0.2)
    return raylets() <= before


def graph(detector) -> Graph:
    g = Graph(example_registry(), sources=("A", "B", "C"))
    return g.add("t", detector, k0=50)


def test_embedded_ray_is_shut_down_after_a_run_and_after_an_error():
    assert not ray.is_initialized()
    before = raylets()
    raw = abc_stream(example_registry(), 2_000, seed=1)
    report = RayRuntime(graph(Threshold())).run(raw, batch_rows=500)
    assert len(report.net("t")) > 100
    assert not ray.is_initialized()
    with pytest.raises(DetectorError, match=r"detector 't' failed on event type=C .*out of range"):
        RayRuntime(graph(Exploding())).run(raw, batch_rows=500)
    assert not ray.is_initialized()
    assert gone(before)


def test_embedded_ray_starts_its_own_cluster_whatever_ray_address_names(monkeypatch):
    """RAY_ADDRESS may name a cluster of another program (or none that answers):
    embedded mode never joins it."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")  # the discard port: nobody answers
    raw = abc_stream(example_registry(), 500, seed=2)
    report = RayRuntime(graph(Threshold())).run(raw, batch_rows=250)
    assert len(report.net("t")) > 10
    assert not ray.is_initialized()


SEQUENCE = """
import numpy as np
from specula import Graph, InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.cluster.spark import spark_session
from specula.detectors.examples import Threshold, example_registry
from specula.pipelines.synthetic import abc_stream

reg = example_registry()
graph = Graph(reg, sources=("C",)).add("t", Threshold(), k0=0)
raw = abc_stream(reg, 500, seed=3)
want = InProcessRuntime(graph).run(raw).net("t")
for step in ("ray", "spark", "ray"):
    if step == "spark":
        with spark_session("local[1]", small_input=True):
            pass
    else:
        got = RayRuntime(graph).run(raw, batch_rows=250).net("t")
        assert np.array_equal(got, want), step
print("all three ran")
"""


def test_an_embedded_run_after_a_spark_session_in_the_same_process_keeps_its_actors():
    """Ray reads its authentication mode once per process, and starting Spark must not
    change it under a driver. An embedded run, a Spark session and an embedded run
    again, in one new process (this one's mode is the suite's): the second run's actors
    live and give the first run's answer."""
    import sys

    done = subprocess.run([sys.executable, "-c", SEQUENCE], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0 and "all three ran" in done.stdout, done.stderr[-3000:]
