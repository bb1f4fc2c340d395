"""Shedding the events a unit holds and has not handed on (``OrderingUnit.shed_held``):
the answer is the one of the stream without them, in both buffers."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from naive import canonical, content

from specula.detectors.examples import ANotBC, example_registry
from specula.events.hashing import uniform
from specula.ordering import NetOutput, OrderingUnit
from specula.pipelines.synthetic import abc_stream


def unit(alpha: float, retraction: str) -> OrderingUnit:
    det = ANotBC()
    return OrderingUnit(det, example_registry(), producer=9, inputs=det.inputs,
                        outputs=det.outputs, clock=det.clock_types(), alpha=alpha,
                        retraction=retraction, k0=300)


def drive(u: OrderingUnit, batches: list[np.ndarray], shed_at: set[int],
          share: float, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Push ``batches``; before each push in ``shed_at``, shed ``share`` of the held
    events not yet handed on (a hashed draw per event). The net output, and what was
    shed."""
    net, shed = NetOutput(u.out_dtype), []
    for i, batch in enumerate(batches):
        if i in shed_at:
            shed.append(u.shed_held(lambda rows: uniform(seed, 1, rows["seq"]) >= share))
        net.apply(u.push(batch, now=i), now=i)
    net.apply(u.flush(len(batches)), now=len(batches))
    return net.net(), shed


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([1.0, 0.5, 0.2, 0.0]),
       retraction=st.sampled_from(["full", "on-demand"]), share=st.floats(0.05, 1.0),
       size=st.integers(1, 40), when=st.sets(st.integers(0, 60), max_size=20))
@example(seed=5292, alpha=0.2, retraction="on-demand", share=0.375, size=1, when={48, 55})
def test_shedding_held_events_answers_as_if_they_never_came(seed, alpha, retraction, share,
                                                            size, when):
    raw = abc_stream(example_registry(), 600, seed=seed, max_delay=20)
    batches = [raw[i:i + size] for i in range(0, len(raw), size)]
    u = unit(alpha, retraction)
    got, shed = drive(u, batches, when, share, seed)
    gone = np.concatenate([s["seq"] for s in shed]) if shed else np.zeros(0, np.int64)
    without = [b[~np.isin(b["seq"], gone)] for b in batches]
    ref = unit(alpha, retraction)
    expect, _ = drive(ref, without, set(), share, seed)
    assert u.stats.late == ref.stats.late == 0
    # an on-demand unit names its outputs by labels with gaps, which depend on how
    # far it speculated: the events shed after they moved the clock make it speculate
    # differently from the stream without them, so compare labels by rank
    assert content(canonical(got)) == content(canonical(expect))
    assert u.stats.events_shed == len(gone) == len(np.unique(gone))
    assert u.stats.events_in == ref.stats.events_in + len(gone)


def test_both_buffers_shed_what_they_hold_and_only_that():
    """K is 300 ticks, the stream ~0.7 events a tick: pure K-slack holds everything of the
    last 300 ticks (~200 events); at alpha 0.5 the newest 150 ticks are not handed on
    yet; at 0 only what is newer than the clock."""
    raw = abc_stream(example_registry(), 600, seed=4, max_delay=20)
    batches = [raw[i:i + 20] for i in range(0, len(raw), 20)]
    held = {}
    for alpha in (1.0, 0.5, 0.0):
        u = unit(alpha, "full")
        _, shed = drive(u, batches, {20}, 1.0, 0)
        held[alpha] = len(shed[0])
        assert u.stats.events_shed == held[alpha]
    assert held[1.0] > 150 and 50 < held[0.5] < held[1.0] and held[0.0] < 5
