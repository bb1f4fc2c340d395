"""What each run of a watch that suspends and resumes persists, and its state record."""

from __future__ import annotations

import numpy as np
import pytest

from specula import Graph
from specula.actors.recovery import Suspension, graph_shape
from specula.detectors.examples import Threshold, example_registry
from specula.pipelines.resume import (
    OwnOutput,
    read_suspension,
    save_suspension,
    state_dir,
    suspended_watch,
)
from specula.pipelines.synthetic import example_graph


def _net(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = np.zeros(n, example_registry().dtype(["D"]))
    rows["producer"] = rng.integers(1, 4, n)
    rows["seq"] = rng.integers(0, 60, n)
    rows["ats"] = rng.integers(0, 100, n)
    return rows


def test_the_runs_between_suspensions_persist_each_event_once():
    # three runs: the first two suspend with settled counters that only grow, the last
    # flushes; whatever the counters, every event of the final net output is persisted
    # by exactly one run, the one whose range holds its counter
    rng = np.random.default_rng(3)
    for _ in range(50):
        net = _net(rng, 200)
        first = {p: int(rng.integers(0, 40)) for p in (1, 2, 3)}
        second = {p: first[p] + int(rng.integers(0, 30)) for p in (1, 2, 3)}
        runs = [OwnOutput({}, first), OwnOutput(first, second), OwnOutput(second, None)]
        taken = [own.complex(net) for own in runs]
        assert sum(map(len, taken)) == len(net)
        for own, rows in zip(runs, taken, strict=True):
            lo = np.array([own.since.get(int(p), 0) for p in rows["producer"]])
            hi = np.array([(own.upto or {}).get(int(p), 10**9) for p in rows["producer"]])
            assert ((rows["seq"] >= lo) & (rows["seq"] < hi)).all()
    assert len(OwnOutput().complex(net)) == len(net)  # a run that neither resumes nor stops


def test_a_resumed_run_persists_only_the_late_events_of_its_own_time():
    rows = _net(np.random.default_rng(1), 100)
    assert len(OwnOutput({}, None, start_ns=50).late(rows)) == 100  # a first run: all
    resumed = OwnOutput({1: 5}, None, start_ns=50).late(rows)
    assert len(resumed) == int((rows["ats"] >= 50).sum()) and (resumed["ats"] >= 50).all()


def test_the_suspension_record_round_trips_and_a_flush_removes_the_state(tmp_path):
    assert read_suspension(tmp_path) is None
    state_dir(tmp_path).mkdir()
    (state_dir(tmp_path) / "checkpoint").write_text("x")
    s = Suspension("ab12", {3: 17, 4: 2}, {3: 100, 4: 0, 5: 7}, ["a (A x1: C -> D)"])
    save_suspension(tmp_path, s)
    assert read_suspension(tmp_path) == s
    save_suspension(tmp_path, None)
    assert not state_dir(tmp_path).exists() and read_suspension(tmp_path) is None


def test_only_the_suspended_graph_resumes(tmp_path):
    g = example_graph(0.0, "on-demand")
    state_dir(tmp_path).mkdir()
    save_suspension(tmp_path, Suspension("ab12", {}, {}, graph_shape(g)))
    assert suspended_watch(tmp_path, g) == read_suspension(tmp_path)
    other = Graph(example_registry(), sources=("A", "B", "C")).add("huge_c", Threshold())
    with pytest.raises(ValueError) as refused:
        suspended_watch(tmp_path, other)
    message = str(refused.value)
    assert message.startswith(f"{state_dir(tmp_path)}: the suspended run had another graph")
    assert "it had a_not_bc (ANotBC x1: A,B,C -> D)" in message
    assert "this one has huge_c (Threshold x1: C -> E)" in message
    assert message.endswith("start afresh without its state (remove that folder)")
    with pytest.raises(ValueError, match="only the Ray runtime resumes"):
        suspended_watch(tmp_path, g, in_process=True)
