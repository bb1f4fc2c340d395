"""The replay job's options reach the graph that runs, and only those reach the summary.

These run without Spark: the graph a replay runs, its summary from an in-process run,
and the refusals that come before Spark starts.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from specula import CostModel, Graph, InProcessRuntime, TypeRegistry
from specula.cli import main
from specula.detectors.examples import ANotBC, FollowedWithin, Threshold, example_registry
from specula.events import RegistryMismatchError
from specula.options import OptionError, Shedding
from specula.pipelines.plots import latency_figure
from specula.pipelines.replay import (
    Annotations,
    ReplayConfig,
    replay,
    replay_graph,
    summarize,
)
from specula.pipelines.synthetic import abc_stream
from specula.soccer.spark_log import PositionLog
from specula.soccer.types import PICOS_PER_SECOND, POSITION_FIELDS, WEARER_FIELDS

PS_PER_MS = 10**9


def _user_graph() -> Graph:
    """Two levels with options of its own: a_not_bc and big_c, then d_then_e."""
    g = Graph(example_registry(), sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC(), alpha=1.0, retraction="on-demand", k0=7, late="process")
    g.add("big_c", Threshold(), alpha=0.2, retraction="full", k0=9)
    g.add("d_then_e", FollowedWithin(), alpha=1.0, k0=11, partitions=2)
    return g


def _options(graph: Graph) -> dict[str, tuple]:
    return {n: (x.alpha, x.retraction, x.k0, x.late, x.partitions)
            for n, x in graph.nodes.items()}


def test_replay_graph_applies_alpha_retraction_and_k0_to_every_node_of_a_user_graph():
    mine = _user_graph()
    before = _options(mine)
    graph = replay_graph(ReplayConfig(graph=mine, alpha=0.5, retraction="full", k0_ms=300),
                         PositionLog())
    # the example registry counts seconds: 300 ms is K = 0 ticks (milliseconds below)
    assert {n: o[:3] for n, o in _options(graph).items()} == {
        n: (0.5, "full", 0) for n in mine.nodes}
    assert _options(mine) == before  # the user's graph is not changed
    assert [_options(graph)[n][3:] for n in mine.nodes] == [
        ("process", 1), ("side", 1), ("side", 2)]  # options not given stay the graph's

    fine = TypeRegistry(ticks_per_second=1_000)  # milliseconds
    for t in example_registry().types():
        fine.register(t.name, **dict(t.fields))
    g = Graph(fine, sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC()).add("big_c", Threshold()).add("d_then_e", FollowedWithin())
    graph = replay_graph(ReplayConfig(graph=g, k0_ms=300), PositionLog())
    assert {n: x.k0 for n, x in graph.nodes.items()} == {
        "a_not_bc": 300, "big_c": 300, "d_then_e": 300}  # every level alike
    assert {n: x.alpha for n, x in graph.nodes.items()} == {n: 1.0 for n in g.nodes}


def test_replay_graph_leaves_a_user_graph_alone_without_options():
    mine = _user_graph()
    assert _options(replay_graph(ReplayConfig(graph=mine), PositionLog())) == _options(mine)


def test_the_default_graph_gets_the_given_options_and_defaults_for_the_rest():
    graph = replay_graph(ReplayConfig(retraction="full", k0_ms=250), PositionLog())
    for node in graph.nodes.values():
        assert (node.alpha, node.retraction) == ("adaptive", "full")
        assert node.k0 == 250 * PS_PER_MS
    graph = replay_graph(ReplayConfig(), PositionLog())
    assert graph.nodes["ball_in_play"].k0 == 400 * PS_PER_MS


def test_invalid_options_for_a_user_graph_name_the_node_and_the_valid_values():
    with pytest.raises(OptionError, match=r"a_not_bc: alpha must be a number in \[0, 1\] "
                       r"or 'adaptive'; got 2"):
        replay_graph(ReplayConfig(graph=_user_graph(), alpha=2), PositionLog())
    with pytest.raises(OptionError, match="retraction must be one of 'on-demand', 'full'"):
        replay_graph(ReplayConfig(graph=_user_graph(), retraction="partial"), PositionLog())
    with pytest.raises(OptionError, match="k0_ms must be a number of milliseconds >= 0"):
        replay_graph(ReplayConfig(graph=_user_graph(), k0_ms=-1), PositionLog())


def test_the_summary_records_the_options_of_the_nodes_that_ran():
    mine = replay_graph(ReplayConfig(graph=_user_graph(), alpha=0.5), PositionLog())
    raw = abc_stream(example_registry(), 500, seed=1)
    report = InProcessRuntime(mine).run(raw)
    ingested = SimpleNamespace(rows=500, events=500, quarantined=0, duplicates=0,
                               first_quarantined=(), first_ts=int(raw["ts"].min()),
                               last_ts=int(raw["ts"].max()))
    summary = summarize(report, mine, ingested, ReplayConfig(graph=mine, alpha=0.5))
    assert summary["alpha"] == 0.5
    assert summary["retraction"] is None  # it differs per node: no one value is claimed
    assert summary["options"]["a_not_bc"] == {"alpha": 0.5, "retraction": "on-demand",
                                              "late": "process", "k0": 7, "idle_after": None,
                                              "partitions": 1,
                                              "shedding": None,
                                              "memory": {"buffered_events": 1_000_000,
                                                         "snapshot_mb": 256.0},
                                              "cpus": 0.0, "gpus": 0.0, "chain": True}
    assert summary["options"]["d_then_e"]["partitions"] == 2
    json.dumps(summary)  # what summary.json holds


def test_the_real_time_factor_counts_the_played_seconds_not_the_gaps():
    """A log with a 60 s break: the seconds that hold readings are what was played."""
    mine = replay_graph(ReplayConfig(graph=_user_graph()), PositionLog())
    raw = abc_stream(example_registry(), 400, seed=1)
    raw["ts"] = np.where(np.arange(len(raw)) < 200, raw["ts"] % 3, 63 + raw["ts"] % 2)
    report = InProcessRuntime(mine).run(raw)
    assert report.played_seconds == 5  # seconds 0, 1, 2, 63 and 64
    ingested = SimpleNamespace(rows=400, events=400, quarantined=0, duplicates=0,
                               first_quarantined=(), first_ts=0, last_ts=64)
    summary = summarize(report, mine, ingested, ReplayConfig(graph=mine))
    assert summary["stream_seconds"] == 64 and summary["played_seconds"] == 5
    assert summary["realtime_factor"] == pytest.approx(5 / report.wall_seconds)


def test_an_empty_latency_plot_says_why():
    mine = replay_graph(ReplayConfig(graph=_user_graph()), PositionLog())
    report = InProcessRuntime(mine).run(abc_stream(example_registry(), 50, seed=1)[:0])
    fig = latency_figure({"run": report}, "a_not_bc")
    assert [t.get_text() for t in fig.axes[0].texts] == ["no detections of a_not_bc in "
                                                         "this run"]


def test_the_summary_records_shedding_and_what_it_dropped():
    bound = Shedding(latency_bound_s=0.5, f=0.6)
    mine = _user_graph().with_options(["big_c"], shedding=bound)
    raw = abc_stream(example_registry(), 500, seed=1)
    report = InProcessRuntime(mine, cost_model=CostModel(per_event=0.5)).run(raw)
    ingested = SimpleNamespace(rows=500, events=500, quarantined=0, duplicates=0,
                               first_quarantined=(), first_ts=int(raw["ts"].min()),
                               last_ts=int(raw["ts"].max()))
    summary = json.loads(json.dumps(summarize(report, mine, ingested, ReplayConfig(graph=mine))))
    assert summary["options"]["big_c"]["shedding"] == bound.describe()
    assert summary["options"]["a_not_bc"]["shedding"] is None
    inbox = summary["detectors"]["big_c"]["inbox"]
    assert inbox["shed"] > 0 and inbox["shed_by_type"] == {"C": inbox["shed"]}
    assert inbox["latency_bound_s"] == 0.5


def _soccer_types(raw_order: tuple[str, ...], vx: str = "i4") -> TypeRegistry:
    reg = TypeRegistry(ticks_per_second=PICOS_PER_SECOND)
    for name in raw_order:
        wearer = {} if name == "ball" else WEARER_FIELDS
        reg.register(name, **{**POSITION_FIELDS, "vx": vx}, **wearer)
    reg.register("seen", n="i8")
    return reg


class _Seen(ANotBC):
    """Any position event, seen."""

    inputs, outputs, clock = ("ball", "player"), ("seen",), ("ball", "player")

    def on_event(self, event, emit):
        emit("seen", event.ts, n=1)


def test_replay_refuses_a_graph_the_log_cannot_feed_before_spark_starts(tmp_path):
    other_fields = Graph(_soccer_types(("player", "ball"), vx="i8"),
                         sources=("ball", "player")).add("seen", _Seen())
    with pytest.raises(RegistryMismatchError, match=r"event type 'ball' has fields"):
        replay(ReplayConfig(graph=other_fields, out=tmp_path / "run"), PositionLog())
    assert not (tmp_path / "run").exists()
    # the same names in another order are fine: the ids are translated by name
    reordered = Graph(_soccer_types(("player", "ball")), sources=("ball", "player"))
    reordered.add("seen", _Seen())
    assert replay_graph(ReplayConfig(graph=reordered), PositionLog()) is reordered


CLI_GRAPH = '''
from specula import Detector, Graph, TypeRegistry
from specula.soccer.types import PICOS_PER_SECOND, POSITION_FIELDS

class Seen(Detector):
    """Any ball reading, seen."""
    inputs, outputs = ("ball",), ("seen",)
    def on_event(self, event, emit):
        emit("seen", event.ts)

registry = TypeRegistry(ticks_per_second=PICOS_PER_SECOND)
registry.register("ball", **{**POSITION_FIELDS, "vx": "i8"})
registry.register("seen")
graph = Graph(registry, sources=("ball",)).add("seen", Seen())
'''


def test_cli_replay_refuses_a_mismatched_graph_with_exit_status_2(tmp_path, monkeypatch,
                                                                  capsys):
    (tmp_path / "mismatched.py").write_text(CLI_GRAPH)
    monkeypatch.chdir(tmp_path)
    code = main(["replay", "--graph", "mismatched:graph", "--out", str(tmp_path / "run"),
                 "--in-process", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "specula replay: error: the raw events do not fit the graph's registry: event " \
           "type 'ball' has fields" in err and "register it with the same fields" in err
    assert not (tmp_path / "run").exists()


def _merged_one_by_one(batches: list[np.ndarray], notes: np.ndarray) -> np.ndarray:
    """The reference: walk the log event by event; before each, deliver the next
    annotations while it arrived no sooner and has reached their time stamps, stamped
    no earlier than the newest time stamp before, nor than 1 before the event's."""
    out, newest, i = [], -1, 0
    for row in (r for b in batches for r in b):
        while i < len(notes) and row["ats"] >= notes[i]["ats"] and row["ts"] >= notes[i]["ts"]:
            note = notes[i].copy()
            note["ts"] = max(int(note["ts"]), newest, int(row["ts"]) - 1)
            note["ats"] = note["origin"] = row["ats"]
            out.append(note)
            i += 1
        out.append(row)
        newest = max(newest, int(row["ts"]))
    return np.array(out, notes.dtype)


@pytest.mark.parametrize("seed", range(30))
def test_annotations_enter_where_the_log_reaches_them_however_the_batches_are_cut(seed):
    """Annotations at any time (before the log, inside it, after it) arriving with any
    delay: each enters once, in order, right before the first event that arrives no
    sooner and has reached its time stamp, stamped no earlier than the newest event
    before it nor than 1 before the event after it (so it is never behind a clock, and
    never measured as delayed); the log's events keep their order; those the log never
    reaches are not delivered."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype([("ts", "i8"), ("ats", "i8"), ("seq", "i8"), ("origin", "i8")])
    log = np.zeros(int(rng.integers(0, 60)), dtype)
    log["ts"] = np.sort(rng.integers(0, 100, len(log)))
    log["ats"] = np.sort(log["ts"] + rng.integers(0, 15, len(log)))  # out of order in ts
    log["seq"] = np.arange(len(log))
    notes = np.zeros(int(rng.integers(0, 15)), dtype)
    notes["ts"] = np.sort(rng.integers(-5, 120, len(notes)))
    notes["ats"] = np.sort(notes["ts"] + rng.integers(0, 30, len(notes)))
    notes["seq"] = 1_000 + np.arange(len(notes))
    cuts = np.sort(rng.integers(0, len(log) + 1, int(rng.integers(0, 6))))
    batches = np.split(log, cuts)
    annotations = Annotations(notes)
    out = np.concatenate(list(annotations.into(batches)) or [log[:0]])
    expected = _merged_one_by_one(batches, notes)
    assert out.tolist() == expected.tolist()
    assert annotations.merged == int((expected["seq"] >= 1_000).sum())
    assert annotations.delivered.tolist() == expected[expected["seq"] >= 1_000].tolist()
    assert out[out["seq"] < 1_000].tolist() == log.tolist()
    assert (np.diff(out["ats"]) >= 0).all()
    newest_before = np.maximum.accumulate(np.where(out["seq"] < 1_000, out["ts"], -10**9))
    delivered = np.flatnonzero(out["seq"] >= 1_000)
    assert (out["ts"][delivered] >= newest_before[delivered]).all()
    assert (out["ts"][delivered] >= out["ts"][delivered + 1] - 1).all()
    # a watch's checkpoint between any two batches: the merge restored from its state
    # (through JSON, as the checkpoint's record holds it) goes on as if never stopped
    cut = int(rng.integers(0, len(batches) + 1))
    before = Annotations(notes)
    head = list(before.into(batches[:cut]))
    after = Annotations(notes)
    after.restore(json.loads(json.dumps(before.state())))
    tail = list(after.into(batches[cut:]))
    assert np.concatenate(head + tail or [log[:0]]).tolist() == expected.tolist()
    assert after.merged == annotations.merged
    assert after.delivered.tolist() == annotations.delivered.tolist()


def test_the_annotations_that_arrived_are_saved_beside_the_arrival_table(tmp_path):
    import pyarrow.parquet as pq

    dtype = np.dtype([("ts", "i8"), ("ats", "i8"), ("seq", "i8"), ("origin", "i8")])
    log = np.zeros(3, dtype)
    log["ts"] = log["ats"] = [10, 20, 30]
    notes = np.zeros(3, dtype)
    notes["ts"] = notes["ats"] = [5, 25, 40]
    annotations = Annotations(notes)
    assert annotations.save(tmp_path / "none", ("ts", "seq")) == {}
    list(annotations.into([log[:2], log[2:]]))
    assert annotations.save(tmp_path / "notes", ("ts", "seq"), run=2) == {
        "annotations": str(tmp_path / "notes")}
    saved = pq.read_table(tmp_path / "notes" / "part-2.parquet").to_pydict()
    # stamped where the log reached them; the one after the log's end never arrived
    assert saved == {"ts": [9, 29], "seq": [0, 0]}
