"""The ordering unit's readings of the paper, its control messages and its invariants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import canonical, content

from specula import CostModel, Graph, InProcessRuntime
from specula import events as ev
from specula.detectors import Detector
from specula.detectors.examples import ANotBC, RunningCount, Threshold, example_registry
from specula.ordering import NetOutput, OrderingUnit, UnitStats
from specula.ordering.adaptation import AlphaController, ManualClock
from specula.ordering.unit import DetectorError
from specula.pipelines.synthetic import abc_stream


class Record(Detector):
    """Remembers the order it saw events in; generates nothing."""

    inputs = ("A", "B", "C")
    outputs = ("D",)
    clock = ("A",)

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def on_event(self, event, emit):
        self.seen.append((event.type, event.ts, event["seq"]))


def rows(reg, spec: list[tuple]) -> np.ndarray:
    """(type, ts, seq[, producer, kplus, flags]) tuples -> a batch in that arrival order."""
    recs = []
    for t in spec:
        r = {"type": t[0], "ts": t[1], "seq": t[2]}
        for name, v in zip(("producer", "kplus", "flags"), t[3:], strict=False):
            r[name] = v
        recs.append(r)
    return reg.from_records(recs, dtype=reg.dtype(["A", "B", "C"]))


def unit(det=None, **kw) -> OrderingUnit:
    det = det or Record()
    return OrderingUnit(det, example_registry(), producer=9, inputs=det.inputs,
                        outputs=det.outputs, clock=det.clock_types(), **kw)


def test_k_grows_by_kplus_of_premature_events():
    u = unit()
    reg = u.registry
    u.push(rows(reg, [("A", 10, 0), ("C", 8, 1, 3, 5), ("A", 11, 2)]))
    # C8 carries K+ = 5: its delay at the clock update A11 is 11 - 8 + 5 = 8.
    assert u.k == 8


def test_clock_never_moves_back():
    u = unit()
    u.push(rows(u.registry, [("A", 10, 0), ("A", 4, 1)]))
    assert u.clk == 10


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_equal_time_stamps_are_ordered_by_producer_and_counter(alpha):
    det = Record()
    u = unit(det, alpha=alpha, k0=5)
    reg = u.registry
    # B5 (seq 2) arrives before C5 (seq 1): the detector still sees C5 first.
    u.push(rows(reg, [("A", 0, 0), ("B", 5, 2), ("C", 5, 1), ("A", 20, 3)]))
    u.flush()
    assert [s[:2] for s in det.seen] == [("A", 0), ("C", 5), ("B", 5), ("A", 20)]


def test_pure_kslack_equal_key_behind_horizon_is_late():
    u = unit(alpha=1.0)
    reg = u.registry
    u.push(rows(reg, [("A", 5, 2), ("C", 5, 1)]))
    # A5 went out at once (K = 0); C5 sorts before it (seq 1 < 2) and is late.
    assert u.stats.late == 1


@pytest.mark.parametrize("alpha", [1.0, 0.0, 0.4])
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 200), cut=st.integers(1, 50))
def test_batch_boundaries_change_nothing_but_what_is_late(alpha, seed, n, cut):
    reg = example_registry()
    raw = abc_stream(reg, n, seed=seed, max_delay=8)
    whole, parts = unit(Record(), alpha=alpha), unit(Record(), alpha=alpha)
    whole.push(raw)
    for i in range(0, n, cut):
        parts.push(raw[i:i + cut])
    whole.flush()
    parts.flush()
    for u in (whole, parts):  # the detector saw every event but the late ones, in order
        late = {int(s) for s in u.late_events()["seq"]}
        ordered = raw[np.lexsort((raw["seq"], raw["ts"]))]
        expect = [(reg.name(int(r["type"])), int(r["ts"]), int(r["seq"])) for r in ordered
                  if int(r["seq"]) not in late]
        assert u.detector.seen == expect
        assert u.stats.late == len(late)
    if alpha == 1.0:  # pure K-slack decides per arrival whatever the batches
        assert content(whole.late_events()) == content(parts.late_events())
        assert whole.stats == parts.stats


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_retraction_removes_buffered_events_and_counts_purged_ones(alpha):
    det = Record()
    u = unit(det, alpha=alpha, k0=100)
    reg = u.registry
    gen = [("C", 1, 0, 3), ("C", 2, 1, 3), ("C", 3, 2, 3)]
    u.push(rows(reg, [("A", 0, 0), *gen]))
    u.push(rows(reg, [("A", 0, 1, 3, 0, ev.RETRACTION)]))  # revoke producer 3, seq >= 1
    u.flush()
    assert [s[:2] for s in det.seen] == [("A", 0), ("C", 1)]
    assert u.stats.retractions_received == 1 and u.stats.events_removed == 2
    assert u.stats.late == 0


def test_retraction_of_purged_events_is_late():
    u = unit(alpha=1.0)
    reg = u.registry
    u.push(rows(reg, [("C", 1, 0, 3), ("A", 10, 0)]))  # C1 emitted and purged
    u.push(rows(reg, [("A", 0, 0, 3, 0, ev.RETRACTION)]))
    assert u.stats.late == 1
    late = u.late_events()
    assert late["flags"][0] & ev.RETRACTION and late["flags"][0] & ev.LATE


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_equal_update_is_discarded_and_different_one_applied(alpha):
    det = Record()
    u = unit(det, alpha=alpha, k0=100)
    reg = u.registry
    u.push(rows(reg, [("A", 0, 0), ("C", 5, 0, 3), ("C", 6, 1, 3), ("A", 20, 1)]))
    u.push(rows(reg, [("C", 5, 0, 3, 0, ev.UPDATE)]))  # same content
    u.push(rows(reg, [("C", 9, 1, 3, 0, ev.UPDATE)]))  # moved from ts 6 to ts 9
    u.flush()
    assert u.stats.updates_discarded == 1 and u.stats.updates_applied == 1
    assert [s[:2] for s in det.seen] == [("A", 0), ("C", 5), ("C", 9), ("A", 20)]
    if alpha == 0.0:  # C5, C6 were processed speculatively: C6's change forces a replay
        assert u.stats.relocations == 1


def test_equal_consecutive_snapshots_are_shared():
    class EveryEventClocks(ANotBC):
        clock = ("A", "B", "C")

    u = unit(EveryEventClocks(), alpha=0.0, k0=100)
    reg = u.registry
    for row in rows(reg, [("A", 0, 0), ("B", 1, 1), ("B", 2, 2), ("B", 3, 3), ("A", 10, 4)]):
        u.push(np.array([row]))  # one arrival at a time: one run, one snapshot each
    snaps = u.buffer.snapshots()
    assert u.stats.snapshots_shared >= 1
    assert any(a is b for a, b in itertools.pairwise(snaps))


def test_detector_errors_name_the_detector_and_the_event():
    class Broken(Record):
        def on_event(self, event, emit):
            if event.ts == 7:
                raise ValueError("boom")

    u = unit(Broken(), name="broken")
    with pytest.raises(DetectorError, match=r"'broken' failed on event type=C ts=7 .*boom"):
        u.push(rows(u.registry, [("A", 0, 0), ("C", 7, 1), ("A", 9, 2)]))


def test_late_process_policy_keeps_late_events_across_replays():
    det = Record()
    u = unit(det, alpha=0.0, late="process", trace=True)
    reg = u.registry
    # K stays 0: A5 is purged at A10, so C3 is behind the horizon: late, processed at once.
    for row in rows(reg, [("A", 0, 0), ("A", 5, 1), ("A", 10, 2), ("C", 3, 3)]):
        u.push(np.array([row]))  # one arrival at a time
    assert [f"{t.kind}:{t.type}{t.ts}" for t in u.trace[-2:]] == ["late:C3", "emit:C3"]
    # B9 lands in front of A10: the replay from A10's snapshot keeps C3 after A10.
    u.push(rows(reg, [("B", 9, 4)]))
    assert [f"{t.kind}:{t.type}{t.ts}" for t in u.trace[-4:]] == [
        "restore:A10", "replay:B9", "replay:A10", "replay:C3"]
    u.flush()
    assert u.stats.late == 1 and u.stats.late_processed == 1
    # the detector's final timeline (its state is restored on replays)
    assert [s[:2] for s in det.seen] == [("A", 0), ("A", 5), ("B", 9), ("A", 10), ("C", 3)]


class CountC(RunningCount):
    """Changes state on every C: every output carries the running count."""

    inputs = ("C",)


def two_levels(stateful: bool, retraction: str):
    """A fully speculative 2-level hierarchy on a stream of C events with disorder.

    Returns (events revised at level 2, level-1 stats, level-2 stats, modelled busy
    seconds of both levels, run result). A revision is an event level 2 had to remove
    (counter message) or replace (an update that differs).
    """
    reg = example_registry()
    g = Graph(reg, sources=("A", "B", "C"))
    # K starts above the delays, so nothing is late and both modes must agree
    g.add("low", CountC() if stateful else Threshold(limit=90), alpha=0.0,
          retraction=retraction, k0=40)
    g.add("high", Pass(stateful), alpha=0.0, retraction=retraction, k0=40)
    raw = abc_stream(reg, 3_000, seed=7, max_delay=6, mix=(0.0, 0.0, 1.0))
    res = InProcessRuntime(g).run(raw, step_ticks=0)
    low, high = res.stats("low"), res.stats("high")
    work = sum(CostModel().busy(UnitStats().work(), s.work()) for s in (low, high))
    return high.events_removed + high.updates_applied, low, high, work, res


class Pass(Detector):
    """Level 2: forwards what level 1 produced (G or E) as F."""

    outputs = ("F",)

    def __init__(self, stateful: bool) -> None:
        self.inputs = ("G",) if stateful else ("E",)

    def clock_types(self):
        return self.inputs

    def on_event(self, event, emit):
        emit("F", event.ts, gap=0)


def test_on_demand_retracts_less_than_full_for_stateless_detectors():
    full, low_f, high_f, work_f, res_f = two_levels(stateful=False, retraction="full")
    lazy, low_l, high_l, work_l, res_l = two_levels(stateful=False, retraction="on-demand")
    # A selective stateless level 1 (10 % of the C events pass): an out-of-order C that
    # does not pass leaves state and counter unchanged, so on-demand retraction stops the
    # replay at once, while full retraction revokes and regenerates everything after it.
    assert low_l.relocations == low_f.relocations > 500
    assert low_l.early_stops > low_l.relocations / 2
    assert full > 100 and lazy < full / 5
    assert high_l.relocations < high_f.relocations / 5
    assert work_l < work_f
    assert content(canonical(res_f.net("high"))) == content(canonical(res_l.net("high")))


def test_full_retraction_wins_for_detectors_whose_state_changes_on_every_event():
    full, _, high_f, work_f, res_f = two_levels(stateful=True, retraction="full")
    lazy, low_l, high_l, work_l, res_l = two_levels(stateful=True, retraction="on-demand")
    # Every replayed snapshot differs (the count moved), so on-demand never stops early
    # and its comparisons are wasted; each changed update relocates level 2 on its own,
    # where full retraction needs one relocation per counter message.
    assert low_l.early_stops == 0 and low_l.snapshot_comparisons > 1000
    assert lazy > 1000 and full > 1000
    assert high_l.relocations > high_f.relocations
    assert work_l > work_f
    assert content(canonical(res_f.net("high"))) == content(canonical(res_l.net("high")))


def test_net_output_resolves_updates_and_retractions():
    reg = example_registry()
    dt = reg.dtype(["D"])
    net = NetOutput(dt)
    d = reg.batch("D", ts=[1, 2, 3], producer=4, seq=[0, 1, 2], a_ts=[0, 0, 0], dtype=dt)
    net.apply(d, now=10)
    upd = d[1:2].copy()
    upd["flags"] = ev.UPDATE
    net.apply(upd, now=20)  # equal: keeps first emission time
    retract = np.zeros(1, dt)
    retract["producer"], retract["seq"], retract["flags"] = 4, 2, ev.RETRACTION
    net.apply(retract, now=30)
    assert net.net()["ts"].tolist() == [1, 2]
    assert sorted(net.latencies().tolist()) == [10, 10]


def test_speculative_slack_is_exact_for_decimal_alphas():
    from specula.ordering.speculative import speculative_slack

    assert 0.55 * 100 > 55  # floating point would round this up to 56
    assert speculative_slack(0.55, 100) == 55
    assert speculative_slack(0.55, 101) == 56
    assert speculative_slack(0.3, 10) == 3
    assert speculative_slack(0.0, 10) == 0
    assert speculative_slack(1.0, 7) == 7
    assert speculative_slack(0.5, 0) == 0


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_the_raw_clock_handed_to_a_level_1_unit_is_an_update_only_where_it_moves_it(alpha):
    # PROGRESS(0, ts) is the raw stream's clock (a partition's node clock, or the stream
    # less idle_after): one ahead of the clock moves it and measures the delays pending,
    # as a clock event would; one behind it leaves them pending for the next update
    u = unit(alpha=alpha)
    reg = u.registry
    u.push(rows(reg, [("A", 10, 0), ("C", 5, 1)]))
    u.push(rows(reg, [("A", 8, 0, 0, 0, ev.PROGRESS)]))
    assert (u.clk, u.k) == (10, 0)  # C5's delay still pending
    u.push(rows(reg, [("A", 12, 0, 0, 0, ev.PROGRESS)]))
    assert (u.clk, u.k) == (12, 7)  # measured against the new clock, 12 - 5
    u.push(rows(reg, [("A", 20, 0, 3, 0, ev.PROGRESS)]))  # another producer's: no clock
    assert u.clk == 12


class Jumpy(AlphaController):
    """A controller whose every poll sets alpha to the next of ``alphas``: any decision
    an adaptation may take between two pushes."""

    def __init__(self, alphas: list[float]) -> None:
        super().__init__(clock=ManualClock())
        self.alphas = itertools.cycle(alphas)

    def poll(self) -> bool:
        self.force(next(self.alphas))
        return True


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from("AB")), min_size=1,
                max_size=40),
       st.lists(st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]), min_size=1, max_size=5),
       st.integers(1, 4))
def test_progress_is_what_was_handed_on_whatever_alpha_becomes(events, alphas, per_push):
    # The runtimes publish `progress` after a push: every input up to it must have been
    # handed to the detector, also when the controller changes alpha at the push's end.
    u = unit(alpha=Jumpy(alphas), k0=3)
    batch = rows(u.registry, [(t, ts, i) for i, (ts, t) in enumerate(events)])
    for i in range(0, len(batch), per_push):
        u.push(batch[i:i + per_push])
        if u.progress is None:
            continue
        handed = {seq for _, _, seq in u.detector.seen}
        late = set(u.late_events()["seq"].tolist())
        waiting = [int(r["ts"]) for r in batch[:i + per_push]
                   if int(r["seq"]) not in handed | late]
        assert not waiting or min(waiting) > u.progress, (waiting, u.progress, u.alpha)
