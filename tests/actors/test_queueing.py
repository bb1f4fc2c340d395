"""The in-process runtime's inboxes on the virtual clock: an overloaded node queues, and
with shedding keeps its latency bound; without shedding a graph runs as before."""

from __future__ import annotations

import numpy as np
import pytest
from naive import content

from specula import CostModel, Graph, InProcessRuntime
from specula.actors.report import format_detectors
from specula.detectors import Detector, Emitter, EventView
from specula.detectors.examples import FollowedWithin, Threshold, example_registry
from specula.events import CONTROL
from specula.pipelines.synthetic import abc_stream, example_graph
from specula.shedding import Shedding

TPS = 1_000.0  # virtual ticks per second: one raw C per tick is 1,000 events/s


def c_stream(n: int, seed: int = 0) -> np.ndarray:
    """``n`` C events, one per tick of occurrence and of arrival, values 0-99."""
    reg = example_registry()
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype(["C"]))
    out["type"] = reg.id("C")
    out["ts"] = out["ats"] = out["seq"] = np.arange(n)
    out["v"] = rng.integers(0, 100, n)
    out["key"] = rng.integers(0, 4, n)
    return out


def one_node(shedding: Shedding | None) -> Graph:
    return Graph(example_registry(), sources=("C",)).add(
        "big_c", Threshold(), k0=0, shedding=shedding)


#: 1.5 ms per event: a throughput of 667 events/s against 1,000 arriving, 50 % over.
SLOW = CostModel(per_event=1.5e-3)


def detections(report) -> set[tuple[int, int, int]]:
    """(ts, key, v) of big_c's net output (counters differ when input was dropped)."""
    net = report.net("big_c")
    return set(zip(net["ts"].tolist(), net["key"].tolist(), net["v"].tolist(), strict=True))


def run(graph: Graph, raw: np.ndarray, cost: CostModel = SLOW, **kw):
    return InProcessRuntime(graph, ticks_per_second=TPS, cost_model=cost, **kw).run(
        raw, step_ticks=5)


def test_overloaded_node_keeps_its_bound_by_random_shedding_and_not_without():
    raw = c_stream(8_000)
    shed = run(one_node(Shedding(latency_bound_s=1.0)), raw)
    queued = run(one_node(None), raw, queueing=True)
    s, q = (r.summary()["detectors"]["big_c"] for r in (shed, queued))
    # unshed, the queue grows by 333 events/s: the last events wait ~4 s
    assert q["latency_p99_s"] > 3.5 and q["inbox"]["wait_p99_s"] > 3.5
    assert q["inbox"]["shed"] == 0 and q["inbox"]["latency_bound_s"] is None
    # shed, the queue stays near f·q_max = 0.8 · 667 events: 0.8 s of waiting
    assert s["latency_p99_s"] <= 1.0 and s["inbox"]["latency_p99_s"] <= 1.0
    assert s["inbox"]["violations"] == 0
    assert 0.6 < s["inbox"]["wait_p99_s"] < 0.9
    # δ / R = 1/3 of the input once the queue is long (not in its first ~1.6 s)
    assert 0.24 < s["inbox"]["shed"] / len(raw) < 1 / 3
    assert shed.shed("big_c") == {"C": s["inbox"]["shed"]}
    assert s["inbox"]["processing_rate_eps"] == pytest.approx(1 / 1.5e-3)
    # what it detected is a subset of the full answer: Threshold is per event
    assert detections(shed) < detections(queued)
    assert any("big_c: shed" in line and "0 over the 1 s bound" in line
               for line in format_detectors(shed.summary()["detectors"]))
    again = run(one_node(Shedding(latency_bound_s=1.0)), raw)
    assert content(again.net("big_c")) == content(shed.net("big_c"))  # deterministic
    assert again.summary()["detectors"]["big_c"]["inbox"] == s["inbox"]


def test_a_node_that_holds_events_for_k_measures_its_cost_per_event_handed_on():
    """The unit hands events to the detector K after it takes them (here 0.4 s), so a
    batch's busy time is the work of events taken K earlier. l(p) is measured per event
    handed on: counted per row taken, the first drops would raise it, and it would ask
    for more drops (the estimated throughput fell to a fifth of the real one, and
    events went over the bound until the end of the run, 13 s)."""
    raw = c_stream(12_000)
    graph = Graph(example_registry(), sources=("C",)).add(
        "big_c", Threshold(), k0=400, shedding=Shedding(latency_bound_s=1.0))
    rep = run(graph, raw, CostModel(per_event=3e-3))  # 333 events/s against 1,000: 3x over
    inbox = rep.summary()["detectors"]["big_c"]["inbox"]
    assert inbox["violations"] == 0
    assert 0.6 < inbox["shed"] / len(raw) < 2 / 3  # δ / R, once the queue is long
    assert inbox["processing_rate_eps"] == pytest.approx(1 / 3e-3)


@pytest.mark.parametrize("alpha", [1.0, 0.5, "adaptive"])
@pytest.mark.parametrize(("k0", "cost_ms"), [(200, 1.2), (400, 3.0), (1000, 1.5),
                                              (1000, 3.0), (1500, 2.0)])
def test_the_bound_holds_from_the_onset_whatever_k_holds(alpha, k0, cost_ms):
    """From 20 % to 200 % over capacity, behind K up to 1.5 s (the bound is 1 s),
    speculating or not: no event goes over the bound, not even at the onset. A unit
    holds what it took for K before its detector works on it, so drops at the inbox
    alone lighten the work only K later (before: 144 to 569 events over the bound here,
    the longest 2.3 s); RI also drops from what the unit holds and has not handed on.
    What is detected is a subset of the whole answer, and every event is counted."""
    raw = c_stream(8_000, seed=k0)
    graph = Graph(example_registry(), sources=("C",)).add(
        "big_c", Threshold(), k0=k0, alpha=alpha, shedding=Shedding(latency_bound_s=1.0))
    cost = CostModel(per_event=cost_ms * 1e-3)
    rep = run(graph, raw, cost)
    inbox = rep.summary()["detectors"]["big_c"]["inbox"]
    assert inbox["violations"] == 0 and inbox["latency_max_s"] <= 1.0
    assert inbox["shed_held"] > 0
    whole = run(Graph(example_registry(), sources=("C",)).add(
        "big_c", Threshold(), k0=k0, alpha=alpha), raw, cost)
    assert detections(rep) < detections(whole)
    s = rep.stats("big_c")
    assert s.events_shed == inbox["shed_held"]
    assert s.events_in == s.purged + s.late + s.events_shed  # nothing lost uncounted
    assert s.events_in + inbox["shed"] - inbox["shed_held"] == len(raw)


def test_latency_trigger_brings_the_latency_back_to_its_bound():
    # 50 % over capacity: the share settles where μ = θ (a third of what arrives once
    # shedding started), so half the events wait longer than θ and half shorter; the
    # p99 is the start, before μ first passed θ (choose θ below the real bound)
    raw = c_stream(8_000)
    rep = run(one_node(Shedding(latency_bound_s=1.0, trigger="latency", smoothing=300)), raw)
    inbox = rep.summary()["detectors"]["big_c"]["inbox"]
    assert 0.85 < inbox["wait_p50_s"] < 1.1
    assert inbox["latency_p99_s"] < 1.4
    assert 0.2 < inbox["shed"] / len(raw) < 1 / 3


class CopyA(Detector):
    """Every A becomes a D (stateless)."""

    inputs, outputs = ("A",), ("D",)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        emit("D", event.ts, event.key, a_ts=event.ts)


def two_levels(shedding: Shedding | None) -> Graph:
    """Level 1 speculates and retracts in full (out-of-order input); level 2 hears raw A
    and both level-1 outputs, 120 % of the stream, and is the one overloaded."""
    g = Graph(example_registry(), sources=("A", "B", "C"))
    g.add("copy_a", CopyA(), alpha=0.0, retraction="full", k0=0)
    g.add("all_c", Threshold(limit=-1), alpha=0.0, retraction="full", k0=0)
    g.add("d_then_e", FollowedWithin(window=6), k0=200, shedding=shedding)
    return g


def test_shedding_drops_plain_events_only_and_leaves_the_producers_alone():
    raw = abc_stream(example_registry(), 5_000, seed=3, max_delay=30)
    # level 1 is fast, level 2 (120 % of the stream) 20x slower: overloaded ~1.7x
    cost = CostModel(per_event=1e-4, slower={"d_then_e": 20})
    kw = {"ticks_per_second": TPS, "cost_model": cost}
    shed = InProcessRuntime(two_levels(Shedding(latency_bound_s=0.5)), **kw).run(
        raw, step_ticks=20)
    full = InProcessRuntime(two_levels(None), queueing=True, **kw).run(raw, step_ticks=20)
    for name in ("copy_a", "all_c"):  # upstream runs exactly as without shedding
        assert content(shed.net(name)) == content(full.net(name))
        assert shed.stats(name) == full.stats(name)
    a, b = shed.stats("d_then_e"), full.stats("d_then_e")
    assert b.control_in > 100 and b.progress_in > 500  # retractions and punctuations
    assert (a.control_in, a.progress_in) == (b.control_in, b.progress_in)
    inbox = shed.summary()["detectors"]["d_then_e"]["inbox"]
    # shed at the inbox, or held by the unit (taken in, then shed before it was handed on)
    assert 0 < inbox["shed_held"] == a.events_shed
    assert a.events_in + sum(shed.shed("d_then_e").values()) - a.events_shed == b.events_in
    assert set(shed.shed("d_then_e")) == {"A", "D", "E"}
    assert inbox["violations"] == 0 and inbox["latency_p99_s"] <= 0.5
    assert full.summary()["detectors"]["d_then_e"]["inbox"]["latency_p99_s"] > 4.0
    lates = {n: len(shed.late(n)) for n in shed.detectors}
    assert lates == {n: len(full.late(n)) for n in full.detectors} and not lates["d_then_e"]
    assert not (shed.net("d_then_e")["flags"] & CONTROL).any()


@pytest.mark.parametrize("alpha, retraction", [(1.0, "on-demand"), (0.0, "full")])
def test_free_queueing_gives_the_answers_of_the_plain_runtime(alpha, retraction):
    # Processing that takes no virtual time never waits: the inbox model must then give
    # what the runtime gave before it existed. It hands a unit each producer's batch on
    # its own, not all of a step's at once, so a speculating unit may revise at other
    # times (same net output); without speculation the latencies are the same too.
    raw = abc_stream(example_registry(), 3_000, seed=7, max_delay=20)
    graph = example_graph(alpha, retraction, k0=400)
    free = CostModel(per_event=0.0, per_snapshot=0.0, per_restore=0.0, per_comparison=0.0)
    plain = InProcessRuntime(graph).run(raw, step_ticks=20)
    assert not InProcessRuntime(graph).queueing
    queued = InProcessRuntime(graph, cost_model=free, queueing=True).run(raw, step_ticks=20)
    for name in graph.nodes:
        assert content(queued.net(name)) == content(plain.net(name)), name
        assert len(queued.late(name)) == len(plain.late(name)), name
        if alpha == 1.0:
            assert np.array_equal(np.sort(queued.latencies(name)),
                                  np.sort(plain.latencies(name))), name
        assert plain.detectors[name].inbox is None
        inbox = queued.summary()["detectors"][name]["inbox"]
        assert inbox["wait_p99_s"] is None or inbox["wait_p99_s"] <= 1e-6
        assert inbox["shed"] == 0
