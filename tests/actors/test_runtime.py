"""The in-process runtime and graph declaration."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from naive import canonical, content

from specula import CostModel, Graph, GraphError, InProcessRuntime, OrderingUnit
from specula.detectors import Detector
from specula.detectors.examples import (
    ANotBC,
    FollowedWithin,
    Threshold,
    example_registry,
)
from specula.options import NODE_OPTIONS, OptionError
from specula.pipelines.synthetic import abc_stream, example_graph


def run(alpha, cost_us: float, n: int = 10_000, k0: int = 150):
    raw = abc_stream(example_registry(), n, seed=3, max_delay=20)
    rt = InProcessRuntime(example_graph(alpha, k0=k0), ticks_per_second=1_000.0,
                          cost_model=CostModel(per_event=cost_us * 1e-6,
                                               per_snapshot=cost_us * 0.5e-6,
                                               per_restore=cost_us * 1e-6))
    return rt.run(raw, step_ticks=5)


def test_adaptive_speculation_cuts_latency_and_keeps_the_answer():
    # K starts above any delay the units see (raw delays reach 100), so no event is late
    # and the answers must match. 10,000 events span ~15 s: 29 adaptation spans.
    pure = run(1.0, cost_us=100)
    adaptive = run("adaptive", cost_us=100)
    for name in ("a_not_bc", "d_then_e", "count"):
        assert len(pure.late(name)) == len(adaptive.late(name)) == 0
        assert content(pure.net(name)) == content(canonical(adaptive.net(name)))
        assert adaptive.latencies(name).mean() < 0.6 * pure.latencies(name).mean()
    history = adaptive.alpha_history("d_then_e")
    assert len(history) > 10
    assert min(s.alpha for s in history) < 0.5
    # the busy factor spends most spans at or below the target zone's upper bound
    busy = np.array([s.busy_factor for s in history])
    assert (busy <= 0.9).mean() > 0.7


def test_adaptation_backs_off_to_pure_buffering_under_overload():
    # 3 ms per event at ~1,300 events/s per unit: overloaded even without speculation.
    heavy = run("adaptive", cost_us=3_000, n=6_000)
    history = heavy.alpha_history("a_not_bc")
    # the first span (buffers filling, little emitted) may halve alpha once; from the
    # first overloaded span on, alpha is reset and stays at 1
    assert len(history) > 10 and history[1].alpha == 1.0
    assert all(s.busy_factor > 0.9 and s.alpha == 1.0 for s in history[1:])


def test_runs_are_deterministic_and_leave_the_graph_untouched():
    g = example_graph("adaptive")
    raw = abc_stream(g.registry, 5_000, seed=1, max_delay=10)
    rt = InProcessRuntime(g, cost_model=CostModel(), ticks_per_second=1_000.0)
    a, b = rt.run(raw, step_ticks=3), rt.run(raw, step_ticks=3)
    for name in g.nodes:
        assert content(a.net(name)) == content(b.net(name))
        assert a.stats(name) == b.stats(name)
        assert a.alpha_history(name) == b.alpha_history(name)
    assert g.nodes["count"].detector.count == 0


def test_latency_is_measured_from_the_newest_raw_event():
    g = Graph(example_registry(), sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC(), alpha=1.0, k0=10)
    reg = g.registry
    raw = reg.from_records([
        {"type": "A", "ts": 0, "seq": 0, "ats": 0},
        {"type": "C", "ts": 5, "seq": 1, "ats": 7},
        {"type": "A", "ts": 20, "seq": 2, "ats": 21},
    ], dtype=reg.dtype(["A", "B", "C"]))
    res = InProcessRuntime(g).run(raw)
    # D (from A0/C5) is released when A20 arrives (5 + 10 <= 20) at t = 21; the newest
    # raw event it depends on, C5, arrived at t = 7.
    assert res.latencies("a_not_bc").tolist() == [14]


class Pulls(Detector):
    """Passes A on as D, and notes how many batches its stream had given when it first
    saw an event."""

    inputs = ("A",)
    outputs = ("D",)

    def __init__(self, pulled: list[int]) -> None:
        self.pulled, self.first = pulled, None

    def on_batch(self, events, type_names, emit):
        if self.first is None:
            self.first = self.pulled[0]
        for e in events:
            emit("D", int(e["ts"]), int(e["key"]))

    def snapshot(self):
        return self.first

    def restore(self, state):
        self.first = state


def test_a_stream_of_batches_is_read_as_it_comes_a_step_per_batch():
    reg = example_registry()
    raw = abc_stream(reg, 3_000, seed=5, max_delay=20)
    pulled = [0]

    def batches(size: int):
        for i in range(0, len(raw), size):
            pulled[0] += 1
            yield raw[i:i + size]

    g = Graph(reg, sources=("A", "B", "C"))
    g.add("pass_a", Pulls(pulled), alpha=1.0, k0=100)
    whole = InProcessRuntime(g, ticks_per_second=1_000.0).run(raw)
    rt = InProcessRuntime(g, ticks_per_second=1_000.0)
    streamed = rt.run(batches(50))
    assert content(streamed.net("pass_a")) == content(whole.net("pass_a"))
    assert len(streamed.late("pass_a")) == len(whole.late("pass_a")) == 0
    assert streamed.raw_events == len(raw) and streamed.played_seconds == whole.played_seconds
    # the detector saw its first events after a few steps of 50 events, not after all 60
    assert streamed.units["pass_a"][0].detector.first < 5
    # a step per batch: each event waits for the end of its batch at most
    assert streamed.latencies("pass_a").mean() > whole.latencies("pass_a").mean()
    for batching in ({"step_ticks": 5}, {"batch_rows": 10}):
        with pytest.raises(OptionError, match="the batches of an iterable are delivered as "
                                              "they come, a step each"):
            rt.run(batches(50), **batching)


def test_a_stream_of_batches_without_counters_is_numbered_across_batches():
    """Equal time stamps in different batches keep their order: the second batch is
    numbered after the first, as the whole array is."""
    g = example_graph(1.0, k0=60)
    raw = abc_stream(g.registry, 2_000, seed=2, max_delay=10)
    raw["seq"] = 0
    whole = InProcessRuntime(g, ticks_per_second=1_000.0).run(raw, step_ticks=30)
    streamed = InProcessRuntime(g, ticks_per_second=1_000.0).run(
        iter([raw[i:i + 30] for i in range(0, len(raw), 30)]))
    for name in g.nodes:
        assert len(whole.late(name)) == len(streamed.late(name)) == 0
        assert content(streamed.net(name)) == content(whole.net(name))


class Loop(Detector):
    inputs = ("D",)
    outputs = ("A",)


def test_graph_validation_errors_say_what_to_fix():
    reg = example_registry()
    with pytest.raises(GraphError, match="already in the graph"):
        Graph(reg, sources=("A",)).add("x", ANotBC()).add("x", Threshold())
    with pytest.raises(GraphError, match="nobody produces its input 'D'"):
        Graph(reg, sources=("A", "B", "C")).add("f", FollowedWithin()).validate()
    with pytest.raises(GraphError, match="cycle in the graph"):
        Graph(reg, sources=("B", "C")).add("a", ANotBC()).add("loop", Loop()).validate()

    class BadClock(Threshold):
        clock = ("A",)

    with pytest.raises(GraphError, match=r"clock types \['A'\] are not among its inputs"):
        Graph(reg, sources=("C",)).add("t", BadClock()).validate()
    with pytest.raises(OptionError, match="alpha must be a number in"):
        Graph(reg, sources=("C",)).add("t", Threshold(), alpha=1.5)
    with pytest.raises(GraphError, match="not registered"):
        Graph(reg, sources=("Z",)).validate()


def test_node_defaults_come_from_the_table_and_the_unit_checks_options_as_the_graph_does():
    reg = example_registry()
    node = Graph(reg, sources=("C",)).add("t", Threshold()).nodes["t"]
    for name, option in NODE_OPTIONS.items():
        if name not in ("k0", "gpus"):  # resolved: the default K, the detector's GPUs
            assert getattr(node, name) == option.default, name
    for bad in ({"alpha": 1.5}, {"retraction": "partial"}, {"late": "drop"}, {"k0": -1},
                {"memory": 100}):
        with pytest.raises(OptionError) as declared:
            Graph(reg, sources=("C",)).add("t", Threshold(), **bad)
        with pytest.raises(OptionError) as direct:
            OrderingUnit(Threshold(), reg, producer=1, inputs=("C",), outputs=("E",),
                         clock=("C",), name="t", **bad)
        assert str(direct.value) == str(declared.value)
    with pytest.raises(OptionError, match="t: unknown option 'colour'; the options are alpha, "):
        Graph(reg, sources=("C",)).add("t", Threshold(), colour="red")
    unit = OrderingUnit(Threshold(), reg, producer=1, inputs=("C",), outputs=("E",),
                        clock=("C",), alpha="adaptive", k0=None)
    assert unit.controller is not None and unit.k == node.k0


def test_option_errors_list_the_valid_values_and_a_class_is_not_a_detector():
    reg = example_registry()
    g = Graph(reg, sources=("C",))
    with pytest.raises(OptionError, match=r"t: k0 must be an integer >= 0 and < 2\*\*63 "
                                          r"\(ticks\) or None; got -5"):
        g.add("t", Threshold(), k0=-5)
    with pytest.raises(OptionError, match="retraction must be one of 'on-demand', 'full'"):
        g.add("t", Threshold(), retraction="partial")
    with pytest.raises(OptionError, match=r"partitions must be an integer in 1\.\.1024; got 2\.0"):
        g.add("t", Threshold(), partitions=2.0)
    with pytest.raises(GraphError, match=r"got the class Threshold.*add\('t', Threshold\(\)\)"):
        g.add("t", Threshold)
    with pytest.raises(GraphError, match="expected a Detector instance, got str"):
        g.add("t", "Threshold")
    assert not g.nodes


class Pull(Detector):
    """Each C as an E, pulled 7 ticks earlier when an A came at most 10 ticks before it:
    an A that arrives late moves the E of a later C, its revision an update to an
    earlier time stamp."""

    inputs, outputs = ("A", "C"), ("E",)

    def __init__(self) -> None:
        self.last_a = -(10**9)

    def on_event(self, event, emit):
        if event.type == "A":
            self.last_a = event.ts
        else:
            emit("E", event.ts - 7 if event.ts - self.last_a <= 10 else event.ts, event.key)


class PassE(Detector):
    """Stateless: each E as a D (so every state of its replay equals the recorded one)."""

    inputs, outputs = ("E",), ("D",)

    def on_event(self, event, emit):
        emit("D", event.ts, event.key)


def test_on_demand_replay_runs_past_every_change_of_an_update():
    """A@55 arrives late: ``pull`` moves its E56 to E49 by an update. ``pass`` removes
    E56 and inserts E49 at the front; its replay from E49 must not stop at the first
    equal state (in front of E50), or the D of E56 would survive."""
    from naive import reference_graph

    reg = example_registry()
    g = Graph(reg, sources=("A", "C"))
    g.add("pull", Pull(), alpha=0.0, retraction="on-demand", k0=150)
    g.add("pass", PassE(), alpha=0.0, retraction="on-demand", k0=150)
    arrivals = [("A", 0, 0), ("C", 50, 50), ("C", 52, 52), ("C", 54, 54), ("C", 56, 56),
                ("A", 55, 60)]
    raw = reg.from_records([{"type": t, "ts": ts, "ats": a, "seq": i}
                            for i, (t, ts, a) in enumerate(arrivals)], dtype=reg.dtype())
    res = InProcessRuntime(g).run(raw, step_ticks=0)
    ref = reference_graph(g, raw)
    assert res.stats("pull").updates_sent == 1 and res.stats("pass").updates_applied == 1
    for name in g.nodes:
        assert len(res.late(name)) == 0
        assert content(canonical(res.net(name))) == content(ref[name]), name


_FROZEN_SEEN: list[int] = []  # runs copy their detectors: the counts go here


class Freezes(Detector):
    """Records the collector's frozen count as it sees each batch."""

    inputs = ("A",)
    outputs = ("D",)

    def on_batch(self, events, type_names, emit):
        _FROZEN_SEEN.append(gc.get_freeze_count())


def test_a_run_freezes_the_heap_only_while_it_runs_and_never_undoes_another_freeze():
    raw = abc_stream(example_registry(), 200, seed=1)
    _FROZEN_SEEN.clear()
    graph = Graph(example_registry(), sources=("A", "B", "C")).add("f", Freezes())
    before = gc.get_freeze_count()  # another test's chain host may have frozen some
    InProcessRuntime(graph).run(raw)
    assert gc.get_freeze_count() == before  # none left frozen, none handed back
    if before:
        return
    assert _FROZEN_SEEN and min(_FROZEN_SEEN) > 0  # frozen while it ran
    gc.freeze()  # another's freeze (a chain host's) is left as it is
    try:
        frozen = gc.get_freeze_count()
        InProcessRuntime(graph).run(raw)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
