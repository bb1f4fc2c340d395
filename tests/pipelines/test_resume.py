"""The state record of a watch that suspends and resumes, and which graph resumes it."""

from __future__ import annotations

import pytest

from specula import Graph
from specula.actors.recovery import Suspension, graph_shape
from specula.detectors.examples import Threshold, example_registry
from specula.detectors.graph import GraphError
from specula.pipelines.resume import (
    read_suspension,
    save_suspension,
    state_dir,
    suspended_watch,
)
from specula.pipelines.synthetic import example_graph


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


def test_a_suspension_record_that_names_a_path_is_refused(tmp_path):
    state_dir(tmp_path).mkdir()
    save_suspension(tmp_path, Suspension("ab12", {}, {}, []))
    record = state_dir(tmp_path) / "suspended.json"
    record.write_text(record.read_text().replace('"ab12"', '"../../elsewhere"'))
    with pytest.raises(GraphError, match=r"not a suspension record .*is not a folder name"):
        read_suspension(tmp_path)
    record.write_text("[1, 2]")
    with pytest.raises(GraphError, match="not a suspension record"):
        read_suspension(tmp_path)


def test_a_watch_in_process_is_refused_before_anything_starts(tmp_path):
    from specula.pipelines.replay import ReplayConfig, replay
    from specula.soccer.spark_log import PositionLog

    with pytest.raises(ValueError, match="a watch runs on Ray"):
        replay(ReplayConfig(log=str(tmp_path), watch=True, in_process=True,
                            out=tmp_path / "run"), PositionLog())
    assert not (tmp_path / "run").exists()
