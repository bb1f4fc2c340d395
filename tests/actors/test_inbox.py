"""The inbox, its histograms and the gate, on random sequences of pushes and takes."""

from __future__ import annotations

import numpy as np
import pytest

from specula import events as ev
from specula.actors.inbox import Gate, Histogram, Inbox, InboxFullError, InboxStats
from specula.detectors.examples import example_registry
from specula.shedding import KEEP_ALL, DropCommand, Shedding


def batch(n: int, first: int) -> np.ndarray:
    out = np.zeros(n, ev.CORE_DTYPE)
    out["seq"] = np.arange(first, first + n)
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("capacity", [None, 1, 17, 100])
def test_inbox_invariants_under_random_pushes_and_takes(seed, capacity):
    rng = np.random.default_rng(seed)
    inbox = Inbox(capacity, seconds_per_tick=0.001)
    model: list[tuple[np.ndarray, float]] = []  # what it should hold, oldest first
    now, sent, taken, wait_total, high = 0.0, 0, [], 0.0, 0
    for _ in range(400):
        now += float(rng.integers(0, 5))
        if rng.random() < 0.55:
            b = batch(int(rng.integers(0, 30)), sent)
            held = sum(len(m) for m, _ in model)
            room = capacity is None or held == 0 or held + len(b) <= capacity
            assert inbox.has_room(len(b)) == room
            if not room:
                with pytest.raises(InboxFullError):
                    inbox.push(b, now)
                continue
            inbox.push(b, now)
            model.append((b, now))
            sent += len(b)
        elif model:
            got, arrival, _, _ = inbox.pop(now)
            want, want_arrival = model.pop(0)
            assert got is want and arrival == want_arrival  # FIFO, arrival kept
            taken.append(got)
            wait_total += (now - arrival) * 0.001 * len(got)
        held = sum(len(m) for m, _ in model)
        high = max(high, held)
        assert inbox.events == held and len(inbox) == len(model)
        # bounded: over capacity only by one batch that came into an empty inbox
        assert capacity is None or held <= capacity or sum(len(m) > 0 for m, _ in model) == 1
        assert inbox.max_events == high and inbox.pushed == sent
        if model:
            assert inbox.head_arrival == model[0][1]
    seqs = np.concatenate([b["seq"] for b in taken]) if taken else np.empty(0, int)
    assert np.array_equal(seqs, np.arange(len(seqs)))  # every event once, in order
    assert inbox.waits.count == len(seqs)
    assert inbox.waits.total == pytest.approx(wait_total)


@pytest.mark.parametrize("seed", range(4))
def test_a_step_takes_the_oldest_batches_within_its_rows_or_the_senders_named(seed):
    """Against a list model: ``take`` without senders returns the oldest batches while
    their rows fit ``max_events`` (the oldest always); with senders, each one's oldest
    batch in turn, each with its arrival, sender and stamp; ``holds`` counts a sender
    named twice twice."""
    rng = np.random.default_rng(seed)
    inbox = Inbox(None)
    model: list[tuple[np.ndarray, float, int, int | None]] = []
    now = 0.0
    for _ in range(300):
        now += 1.0
        if rng.random() < 0.6:
            b, sender = batch(int(rng.integers(1, 40)), 0), int(rng.integers(0, 3))
            stamp = None if rng.random() < 0.5 else int(rng.integers(0, 2**62))
            inbox.push(b, now, sender, stamp=stamp)
            model.append((b, now, sender, stamp))
            continue
        waiting = [m[2] for m in model]
        if rng.random() < 0.5:
            senders = [int(s) for s in rng.integers(0, 3, int(rng.integers(1, 4)))]
            held = all(waiting.count(s) >= senders.count(s) for s in set(senders))
            assert inbox.holds(senders) == held
            if not held:
                continue
            want = []
            for s in senders:
                want.append(model.pop(next(i for i, m in enumerate(model) if m[2] == s)))
            got = inbox.take(now, senders)
        else:
            max_events = int(rng.integers(0, 100))
            want, rows = [], 0
            while model and (not want or rows + len(model[0][0]) <= max_events):
                want.append(model.pop(0))
                rows += len(want[-1][0])
            got = inbox.take(now, None, max_events)
        assert [(id(b), *rest) for b, *rest in got] == [(id(b), *rest) for b, *rest in want]
        assert inbox.events == sum(len(m[0]) for m in model) and len(inbox) == len(model)


def test_inbox_refuses_no_capacity():
    with pytest.raises(ValueError, match="at least one event"):
        Inbox(0)


@pytest.mark.parametrize("seed", range(4))
def test_histogram_percentiles_bound_the_exact_ones_within_a_bin(seed):
    rng = np.random.default_rng(seed)
    values = np.exp(rng.uniform(np.log(1e-7), np.log(50.0), 3_000))
    counts = rng.integers(1, 4, len(values))
    h, halves = Histogram(), (Histogram(), Histogram())
    for i, (v, n) in enumerate(zip(values, counts, strict=True)):
        h.add(float(v), int(n))
        halves[i % 2].add(float(v), int(n))
    every = np.repeat(values, counts)
    for q in (1, 50, 90, 99, 100):
        exact = float(np.sort(every)[int(np.ceil(q / 100 * len(every))) - 1])
        got = h.percentile(q)
        assert exact <= got <= max(exact * 10 ** (1 / Histogram.PER_DECADE), 1e-6) + 1e-12
    assert (h.count, h.max) == (len(every), every.max())
    assert h.total == pytest.approx(every.sum())
    merged = Histogram()
    for half in halves:
        merged.absorb(half)
    assert np.array_equal(merged.counts, h.counts) and merged.max == h.max
    assert Histogram().percentile(99) is None and Histogram().mean is None


def _mixed(n: int, seed: int) -> np.ndarray:
    reg = example_registry()
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype(["C", "E"]))
    out["type"] = rng.choice([reg.id("C"), reg.id("E")], n)
    out["seq"] = np.arange(n)
    out["flags"] = np.where(rng.random(n) < 0.1, ev.PROGRESS, 0)
    out["flags"][rng.random(n) < 0.05] = ev.RETRACTION
    return out


def test_gate_never_sheds_control_messages_and_counts_by_type():
    reg = example_registry()
    gate = Gate(Shedding(latency_bound_s=1.0), reg, 1.0)
    b = _mixed(5_000, 1)
    kept = gate.admit(b, DropCommand(0.7))
    control = b["flags"] != 0
    assert (kept["flags"] != 0).sum() == control.sum()  # every control message passes
    assert np.isin(b["seq"][control], kept["seq"]).all()
    dropped = b[~np.isin(b["seq"], kept["seq"])]
    assert (dropped["flags"] == 0).all()
    stats = gate.report(Inbox())
    assert stats.shed == {t: int((dropped["type"] == reg.id(t)).sum()) for t in ("C", "E")}
    assert sum(stats.shed.values()) == gate.shed_total == len(b) - len(kept)
    assert 0.6 < len(dropped) / (~control).sum() < 0.8
    assert stats.overloaded_batches == 1
    assert gate.admit(b, KEEP_ALL) is b  # not overloaded: all of it, as it is


def test_gate_without_shedding_passes_everything_and_measures():
    gate = Gate(None, example_registry(), 1e-3)
    b = _mixed(100, 2)
    assert gate.admit(b, gate.command(10**9)) is b
    gate.done(100, 0.5, 2.0)
    gate.done(50, 0.25, 0.1)
    s = gate.report(Inbox())
    assert (s.processed, s.busy_s, s.violations, s.shed) == (150, 0.75, 0, {})
    assert s.summary()["processing_rate_eps"] == pytest.approx(200)
    assert s.summary()["latency_bound_s"] is None


def test_gate_counts_the_bound_violations_of_processed_events():
    gate = Gate(Shedding(latency_bound_s=1.0), example_registry(), 1.0)
    gate.done(10, 0.01, 0.99)
    gate.done(7, 0.01, 1.01)
    gate.done(3, 0.01, 1.0)  # at the bound is within it
    stats = gate.report(Inbox())
    assert stats.violations == 7
    merged = InboxStats.merge([stats, stats])
    assert merged.violations == 14 and merged.processed == 40
    assert merged.summary()["latency_p99_s"] >= 1.01


class _Shedding:
    """A detector that sheds inside itself, with work counters the test sets."""

    def __init__(self):
        self.kept = self.shed = 0

    def on_drop_command(self, command):
        pass

    def pairs_shed(self):
        return {"C": self.shed}

    def work_done(self):
        return self.kept


def test_a_detector_that_sheds_inside_itself_is_measured_at_its_unshed_cost():
    """l(p) follows the load while the detector sheds: the busy time of a batch counts
    as if the work it shed had been done (kept + shed over kept), so a batch that shed
    three quarters of its work at 1 ms per event reads as 4 ms per event."""
    det = _Shedding()
    gate = Gate(Shedding(latency_bound_s=1.0, strategy="detector"), example_registry(),
                1.0, detector=det)
    b = _mixed(100, 3)
    gate.admit(b, KEEP_ALL)
    det.kept += 400
    gate.done(100, 0.1, 0.2)  # unshed: 1 ms per event
    assert gate.detector.lp_s == pytest.approx(1e-3)
    gate.admit(b, DropCommand(0.75))
    det.kept, det.shed = det.kept + 100, det.shed + 300
    gate.done(100, 0.025, 0.2)  # a quarter of the work, a quarter of the time
    assert gate.detector.lp_s == pytest.approx(1e-3)  # the same unshed cost
    gate.admit(b, DropCommand(0.75))
    det.kept, det.shed = det.kept + 100, det.shed + 300
    gate.done(100, 0.1, 0.2)  # more windows open: 4 ms per event unshed
    assert gate.detector.busy.mean == pytest.approx((0.1 + 0.1 + 0.4) / 300)
    assert gate.detector.lp_s == pytest.approx(4e-3)  # the last 100 events: the rise
    gate.admit(b, DropCommand(1.0))
    det.shed += 400
    gate.done(100, 0.001, 0.2)  # everything shed: nothing to scale, not measured
    assert gate.detector.lp_s == pytest.approx(4e-3)
