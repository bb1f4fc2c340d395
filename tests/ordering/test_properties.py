"""Property tests: speculation never changes the answer.

Random streams with random delays go through a 3-level hierarchy (with the paper's
negation detector A!BC at the bottom) on the in-process runtime, for random alpha,
both retraction modes and both ordering paths. After the flush, every detector's net
output must equal its output on the same events delivered in time-stamp order (its
counters taken by rank: on-demand labels leave gaps, ``naive.canonical``), except
for the events its unit declared late, and the late events must be exactly those a
slow reference K-slack calls late. Upper levels of every graph shape, late revisions
included, are checked in ``test_graph_shapes.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import canonical, content, kslack_late, reference_graph, run_detector

from specula import CostModel, Graph, InProcessRuntime
from specula.detectors.examples import (
    ANotBC,
    FollowedWithin,
    RunningCount,
    Threshold,
)
from specula.detectors.examples import example_registry as registry
from specula.ordering import NetOutput
from specula.pipelines.synthetic import example_graph


def ident(row: np.void) -> tuple[int, int, int, int]:
    """An event's identity across dtypes: producer, counter, time stamp, type."""
    return int(row["producer"]), int(row["seq"]), int(row["ts"]), int(row["type"])


def graph(reg, alpha, retraction, k0=0) -> Graph:
    g = Graph(reg, sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC(), alpha=alpha, retraction=retraction, k0=k0)
    g.add("big_c", Threshold(), alpha=alpha, retraction=retraction, k0=k0)
    g.add("d_then_e", FollowedWithin(), alpha=alpha, retraction=retraction, k0=k0)
    g.add("count", RunningCount(), alpha=alpha, retraction=retraction, k0=k0)
    return g


def make_stream(reg, seed: int, n: int, max_delay: int, burst: float) -> np.ndarray:
    """Raw events with non-decreasing ts (ties allowed) and random arrival delays."""
    rng = np.random.default_rng(seed)
    types = rng.choice(["A", "B", "C"], size=n, p=[0.4, 0.2, 0.4])
    ts = np.cumsum(rng.integers(0, 4, size=n))
    delay = rng.integers(0, max_delay + 1, size=n)
    delay[rng.random(n) < burst] += rng.integers(0, 4 * max_delay + 1)
    rows = [{"type": t, "ts": int(s), "key": int(rng.integers(0, 3)), "seq": i,
             "ats": int(s + d), **({"v": int(rng.integers(0, 100))} if t == "C" else {})}
            for i, (t, s, d) in enumerate(zip(types, ts, delay, strict=True))]
    raw = reg.from_records(rows, dtype=reg.dtype(["A", "B", "C"]))
    return raw[np.argsort(raw["ats"], kind="stable")]


streams = st.builds(lambda seed, n, d, b: (seed, n, d, b), st.integers(0, 2**32 - 1),
                    st.integers(1, 120), st.integers(0, 25), st.sampled_from([0.0, 0.05, 0.2]))
alphas = st.one_of(st.floats(0.0, 1.0), st.just(1.0), st.just("adaptive"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams, alphas, st.sampled_from(["full", "on-demand"]), st.sampled_from([0, 1, 5]),
       st.sampled_from([0, 40, 150]))
def test_net_output_equals_in_order_output(stream, alpha, retraction, step_ticks, k0):
    reg = registry()
    raw = make_stream(reg, *stream)
    g = graph(reg, alpha, retraction, k0)
    runtime = InProcessRuntime(g, cost_model=CostModel(per_event=0.02), ticks_per_second=1.0)
    result = runtime.run(raw, step_ticks=step_ticks)
    late = {name: result.late(name) for name in g.nodes}
    n_late = sum(len(x) for x in late.values())

    # Level 1 sees raw events only: its late set is exactly the reference K-slack's, and
    # its net output is the in-order output of everything else.
    if alpha != "adaptive":
        arrivals = raw[np.argsort(raw["ats"], kind="stable")]
        for name, clock_types in (("a_not_bc", {"A"}), ("big_c", {"C"})):
            node = g.nodes[name]
            mine = arrivals[np.isin(arrivals["type"], [reg.id(t) for t in node.inputs])]
            pure = kslack_late(mine, {reg.id(t) for t in clock_types}, 1.0, k0)
            if alpha == 1.0:
                assert content(late[name]) == content(mine[pure])
            else:  # speculation purges a subset of what K-slack purges, so it is never later
                assert set(content(late[name])) <= set(content(mine[pure]))
                if step_ticks == 0 and len(np.unique(arrivals["ats"])) == len(arrivals):
                    expect = kslack_late(mine, {reg.id(t) for t in clock_types},
                                         float(alpha), k0)
                    assert set(content(late[name])) <= set(content(mine[expect]))
    producer = {n.name: i + 1 for i, n in enumerate(g.topological_order())}
    for name in ("a_not_bc", "big_c"):
        node = g.nodes[name]
        gone = {ident(r) for r in late[name]}
        rows = [r for r in raw if reg.name(int(r["type"])) in node.inputs and ident(r) not in gone]
        expect = run_detector(node.detector, rows, reg, producer[name], reg.dtype(node.outputs))
        assert content(canonical(result.net(name))) == content(expect)

    # No late event anywhere: the whole hierarchy equals the in-order hierarchy.
    if n_late == 0:
        reference = reference_graph(g, raw)
        for name in g.nodes:
            assert content(canonical(result.net(name))) == content(reference[name]), name
    for name in g.nodes:
        assert result.stats(name).late == len(late[name])


@pytest.mark.parametrize("seed", range(6))
def test_long_streams_through_pure_k_slack_match_the_reference(seed):
    """The pure K-slack buffer over thousands of events, so that the held events
    outgrow their arrays, move to the front of them and are merged with long runs of
    out-of-order arrivals: its late events are exactly the reference K-slack's, and
    each level-1 net output is the in-order output of the rest."""
    rng = np.random.default_rng(seed)
    reg = registry()
    raw = make_stream(reg, seed, 4_000, int(rng.choice([20, 200, 800])),
                      float(rng.choice([0.0, 0.05, 0.3])))
    k0 = int(rng.choice([0, 150, 600]))
    result = InProcessRuntime(graph(reg, 1.0, "full", k0), ticks_per_second=1.0).run(
        raw, step_ticks=int(rng.choice([0, 3, 40, 400])))
    arrivals = raw[np.argsort(raw["ats"], kind="stable")]
    for name, clock_types, producer, det in (("a_not_bc", {"A"}, 1, ANotBC()),
                                             ("big_c", {"C"}, 2, Threshold())):
        inputs = [reg.id(t) for t in graph(reg, 1.0, "full").nodes[name].inputs]
        mine = arrivals[np.isin(arrivals["type"], inputs)]
        late = kslack_late(mine, {reg.id(t) for t in clock_types}, 1.0, k0)
        assert content(result.late(name)) == content(mine[late])
        gone = {ident(r) for r in mine[late]}
        rows = [r for r in raw if r["type"] in inputs and ident(r) not in gone]
        expect = run_detector(det, rows, reg, producer, result.net(name).dtype)
        assert content(result.net(name)) == content(expect)


@settings(max_examples=40, deadline=None)
@given(streams, st.floats(0.0, 1.0), st.sampled_from(["full", "on-demand"]),
       st.integers(0, 60), st.one_of(st.none(), st.integers(1, 30)))
def test_batching_does_not_change_the_answer(stream, alpha, retraction, step_ticks,
                                             batch_rows):
    """Delivering arrivals in bigger batches (of any arrival time and rows) changes when
    the units decide, so it may change which events come too late; with K starting
    above the whole stream's span nothing is late (emission is still speculative) and
    every answer must be the same."""
    reg = registry()
    raw = make_stream(reg, *stream)
    k0 = int(raw["ats"].max() - raw["ts"].min()) + 1 if len(raw) else 0  # above any delay
    one = InProcessRuntime(example_graph(alpha, retraction, k0)).run(raw, step_ticks=0)
    many = InProcessRuntime(example_graph(alpha, retraction, k0)).run(
        raw, step_ticks=step_ticks, batch_rows=batch_rows)
    for name in one.detectors:
        assert len(one.late(name)) == len(many.late(name)) == 0
        assert content(canonical(one.net(name))) == content(canonical(many.net(name)))


@settings(max_examples=40, deadline=None)
@given(streams, st.sampled_from([0.0, 0.4, 0.8, 1.0, "adaptive"]),
       st.sampled_from(["full", "on-demand"]), st.sampled_from(["a_not_bc", "count", "big_c"]),
       st.integers(1, 12), st.sampled_from(["side", "process"]))
def test_what_a_unit_declared_settled_never_changes(stream, alpha, retraction, name, pieces,
                                                   late):
    """After every push, the unit's net events with a counter below ``settled_seq`` are
    final: the net output after the flush has exactly those below it (the promise a
    sink that persists as it goes relies on). The bound never goes back."""
    reg = registry()
    raw = make_stream(reg, *stream)
    det = {"a_not_bc": ANotBC, "count": RunningCount, "big_c": Threshold}[name]()
    g = Graph(reg, sources=("A", "B", "C")).add(name, det, alpha=alpha, retraction=retraction,
                                                 late=late)
    unit = g.instances()[0].unit(reg)
    net = NetOutput(unit.out_dtype)
    taken: list[tuple[int, list]] = []  # (bound, net rows below it) after every push
    for part in np.array_split(raw, min(pieces, max(len(raw), 1))):
        net.apply(unit.push(part), 0)
        bound = unit.settled_seq
        assert not taken or bound >= taken[-1][0]
        live = net.net()
        taken.append((bound, live[live["seq"] < bound].tolist()))
    net.apply(unit.flush(), 0)
    final = net.net()
    for bound, rows in taken:
        assert final[final["seq"] < bound].tolist() == rows
