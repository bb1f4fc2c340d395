"""A net output as an actor reports it answers every read as the net output does, after
a trip through pickle (as Ray sends it), and merged as the net outputs merge."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import events as ev
from specula.actors.reported_net import ReportedNet
from specula.detectors.examples import example_registry
from specula.ordering import NetOutput

DTYPE = example_registry().dtype(["G"])
FLAGS = {"event": 0, "update": ev.UPDATE, "revoke": ev.REVOKE, "retraction": ev.RETRACTION}


@st.composite
def streams(draw) -> list[tuple[int, np.ndarray]]:
    """(time, batch) pairs: of 1-3 producers, counters mostly new and ascending, some
    sent again, updates equal or not, revocations and range retractions anywhere, long
    plain batches too (the net output's fast path), times repeating."""
    n_producers = draw(st.integers(1, 3))
    top = dict.fromkeys(range(1, n_producers + 1), 0)
    out = []
    now = 0
    for _ in range(draw(st.integers(0, 12))):
        now += draw(st.integers(0, 2))
        rows = []
        if draw(st.booleans()):  # a plain run of one producer's new events
            p = draw(st.integers(1, n_producers))
            n = draw(st.integers(1, 40))
            rows = [("event", p, top[p] + i, i % 3) for i in range(n)]
            top[p] += n
        for _ in range(draw(st.integers(0, 8))):
            p = draw(st.integers(1, n_producers))
            kind = draw(st.sampled_from((*FLAGS, "event")))
            if kind == "event" and draw(st.booleans()):
                seq, top[p] = top[p], top[p] + 1
            else:
                seq = draw(st.integers(0, max(top[p] - 1, 0)))
            rows.append((kind, p, seq, draw(st.integers(0, 2))))
        if rows:
            batch = np.zeros(len(rows), DTYPE)
            for i, (kind, p, seq, count) in enumerate(rows):
                batch[i]["producer"], batch[i]["seq"], batch[i]["count"] = p, seq, count
                batch[i]["ts"], batch[i]["origin"] = seq * 10 + p, seq * 3 - now
                batch[i]["flags"] = FLAGS[kind]
            out.append((now, batch))
    return out


def reads(net) -> tuple:
    """Every read a report makes of a net output, as plain values."""
    times, latencies = net.timeline()
    return (len(net), net.applied, net.net().tolist(), net.emissions().tolist(),
            net.emissions(since=3).tolist(), times.tolist(), latencies.tolist(),
            sorted(net.latencies().tolist()))


def applied(stream: list[tuple[int, np.ndarray]], keep=lambda p: True) -> NetOutput:
    net = NetOutput(DTYPE)
    for now, batch in stream:
        mine = batch[[keep(int(p)) for p in batch["producer"]]]
        net.apply(mine, now)
    return net


@settings(max_examples=60, deadline=None)
@given(stream=streams())
def test_a_reported_net_reads_as_the_net_output(stream):
    net = applied(stream)
    reported = pickle.loads(pickle.dumps(ReportedNet.of(net)))
    assert reads(reported) == reads(net)


@settings(max_examples=40, deadline=None)
@given(stream=streams())
def test_reported_nets_merge_as_the_net_outputs_do(stream):
    """Two instances' nets (each its own producers), merged after the report, against
    the net outputs absorbed into one (the in-process runtime's merge)."""
    odd, even = applied(stream, lambda p: p % 2 == 1), applied(stream, lambda p: p % 2 == 0)
    merged = NetOutput(DTYPE)
    merged.absorb(odd)
    merged.absorb(even)
    reported = ReportedNet.merge([ReportedNet.of(odd), ReportedNet.of(even)])
    assert reads(reported) == reads(merged)
