"""Raw events enter a graph as plain events from outside it: producer 0, no flags.

Producer ids 1, 2, ... are the graph's detector instances. A raw event that claimed one
would be taken, at a consumer that hears both, as that detector's output: the detector's
retraction of its counters would remove it. Every entry (the in-process runtime's array
and iterable, the Ray driver and source actors) refuses such a batch and names the row,
the field and the reason; ``specula run`` quarantines the rows (``tests/test_cli.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_shapes import Case, Count, Echo, Spec
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import InProcessRuntime
from specula import events as ev
from specula.actors.sources import ArrayPart, Sources

#: Echo (speculating, full retraction) and a count over its output and raw B.
CASE = Case(nodes=(Spec("echo", Echo(("A",), ("T0",)), alpha=0.0, k0=0),
                   Spec("count", Count(("T0", "B"), ("T1",)))),
            events=(("A", 5, 0, 0, 0), ("B", 6, 0, 0, 1), ("A", 1, 0, 0, 2)))


def raw_with(producer: int) -> np.ndarray:
    graph = CASE.graph()
    raw = CASE.raw(graph.registry)
    raw["producer"] = producer
    return raw


def test_raw_events_of_producer_zero_are_counted_once():
    graph = CASE.graph()
    report = InProcessRuntime(graph).run(raw_with(0), step_ticks=0)
    net = report.net("count")
    # the late A@1 is replayed before A@5: the count sees A@1, A@5, B@6
    assert sorted(zip(net["ts"].tolist(), net["v"].tolist(), strict=True)) == [
        (1, 1), (5, 2), (6, 3)]


@pytest.mark.parametrize("as_batches", [False, True])
def test_a_raw_event_that_claims_a_detector_is_refused(as_batches):
    graph = CASE.graph()
    raw = raw_with(0)
    raw["producer"][1] = 1  # the id of the echo detector
    given_raw = iter([raw[:1], raw[1:]]) if as_batches else raw
    with pytest.raises(ev.InvalidEvent) as info:
        InProcessRuntime(graph).run(given_raw)
    assert info.value.field == "producer"
    assert info.value.record == (0 if as_batches else 1)
    assert "a raw event's producer must be 0, not 1" in str(info.value)
    assert "1 of" in str(info.value)


def test_sources_are_checked_too():
    graph = CASE.graph()
    raw = raw_with(0)
    raw["flags"][2] = ev.RETRACTION
    with pytest.raises(ev.InvalidEvent, match="record 2, field 'flags'"):
        InProcessRuntime(graph).run(Sources([ArrayPart(raw)]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2, 7, -1]),
                          st.sampled_from([0, 0, 0, ev.RETRACTION, ev.UPDATE, ev.LATE,
                                           ev.REVOKE, ev.PROGRESS])),
                min_size=1, max_size=12))
def test_any_producer_or_flags_but_zero_is_refused_and_zero_is_taken(rows):
    graph = CASE.graph()
    raw = np.zeros(len(rows), graph.registry.dtype(("A", "B")))
    raw["type"] = graph.registry.id("A")
    raw["ts"] = raw["ats"] = np.arange(len(rows))
    raw["producer"] = [p for p, _ in rows]
    raw["flags"] = [f for _, f in rows]
    bad = [i for i, (p, f) in enumerate(rows) if p or f]
    mask, errors = ev.validate_raw(raw)
    assert np.flatnonzero(mask).tolist() == bad
    assert sorted({e.record for e in errors}) == bad
    if bad:
        with pytest.raises(ev.InvalidEvent) as info:
            InProcessRuntime(graph).run(raw)
        assert info.value.record == bad[0]
    else:
        report = InProcessRuntime(graph).run(raw)
        assert report.stats("echo").events_in == len(rows)


@pytest.mark.slow
@pytest.mark.cluster
def test_ray_refuses_them_at_the_driver_and_at_a_source_actor(local_ray):
    from specula.actors.ray_runtime import RayRuntime

    graph = CASE.graph()
    raw = raw_with(0)
    raw["producer"][1] = 1
    with pytest.raises(ev.InvalidEvent, match="field 'producer'"):
        RayRuntime(graph).run(raw, batch_rows=1)
    with pytest.raises(ev.InvalidEvent, match="field 'producer'"):
        RayRuntime(graph, max_restarts=0).run(Sources([ArrayPart(raw)]), batch_rows=1)
