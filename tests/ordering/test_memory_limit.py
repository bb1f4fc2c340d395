"""The memory limit of an ordering unit: back-off, capped K, clear error; and a limit
that is never reached changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import Graph, InProcessRuntime
from specula.actors.report import format_detectors
from specula.detectors import Detector
from specula.detectors.examples import example_registry
from specula.options import MemoryLimit, OptionError
from specula.ordering import NetOutput, OrderingUnit
from specula.ordering.memory import MemoryLimitError
from specula.ordering.samples import SampleLog
from specula.pipelines.synthetic import abc_stream


class Record(Detector):
    """Remembers what it saw, in order; emits D for every C, with its running count."""

    inputs = ("A", "B", "C")
    outputs = ("D",)
    clock = ("A",)

    def __init__(self, ballast: int = 0) -> None:
        self.seen: list[tuple[int, int]] = []
        self.ballast = bytes(ballast)  # snapshot size, for the snapshot limit

    def on_event(self, event, emit):
        self.seen.append((event.ts, event["seq"]))
        if event.type == "C":
            emit("D", event.ts, a_ts=len(self.seen))


def unit(alpha, limit: MemoryLimit | None = None, det: Detector | None = None,
         **kw) -> OrderingUnit:
    det = det or Record()
    return OrderingUnit(det, example_registry(), producer=9, inputs=det.inputs,
                        outputs=det.outputs, clock=det.clock_types(), alpha=alpha,
                        memory=limit, **kw)


def run(u: OrderingUnit, raw: np.ndarray, cuts: list[int]) -> list[np.ndarray] | None:
    """Push ``raw`` cut at ``cuts``; check the unit's promises after every push: at most
    the limit of events the clock has reached, at most twice the limit in all, or a
    :class:`MemoryLimitError` (then None) when the events ahead of the clock pass it."""
    out, start = [], 0
    for end in [*cuts, len(raw)]:
        if end > start:
            try:
                out.append(u.push(raw[start:end]))
            except MemoryLimitError:
                assert len(u) > 2 * u.memory.max_events
                assert _reached(u) <= u.memory.max_events
                return None
            assert _reached(u) <= u.memory.max_events, (_reached(u), u.memory.max_events)
            assert len(u) <= 2 * u.memory.max_events
            start = end
    out.append(u.flush())
    return out


def _reached(u: OrderingUnit) -> int:
    """Held events the unit's clock has reached (those a cap of K can release)."""
    return int(np.count_nonzero(u.buffer.time_stamps() <= u.clk))


def accounted(u: OrderingUnit, n: int) -> None:
    """Every input event went to the detector in order, or is late and counted."""
    late = {int(s) for s in u.late_events()["seq"]}
    assert u.stats.late == len(late)
    assert len(u.detector.seen) + len(late) == n
    seen = u.detector.seen if u.late_policy == "side" else []
    assert seen == sorted(seen)


ALPHAS = [1.0, 0.0, 0.5]


@pytest.mark.parametrize("alpha", ALPHAS)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 300), limit=st.integers(2, 40),
       delay=st.integers(0, 120), cut=st.integers(1, 40))
def test_any_stream_stays_within_the_limit_and_every_event_is_counted(alpha, seed, n,
                                                                      limit, delay, cut):
    raw = abc_stream(example_registry(), n, seed=seed, max_delay=delay, burst=0.2)
    u = unit(alpha, MemoryLimit(buffered_events=limit))
    if run(u, raw, list(range(cut, n, cut))) is None:
        return  # ahead of the clock: the error was right (run checked it)
    accounted(u, n)
    if u.stats.memory_caps:
        assert u.stats.memory_released > 0


@pytest.mark.parametrize("alpha", ALPHAS)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 250), delay=st.integers(0, 60),
       cut=st.integers(1, 30))
def test_a_limit_never_reached_changes_nothing(alpha, seed, n, delay, cut):
    """Speculation never changes the answer; neither does a limit it stays under."""
    raw = abc_stream(example_registry(), n, seed=seed, max_delay=delay)
    cuts = list(range(cut, n, cut))
    plain = unit(alpha, MemoryLimit())
    roomy = unit(alpha, MemoryLimit(buffered_events=2 * n + 2, snapshot_mb=64))
    a, b = run(plain, raw, cuts), run(roomy, raw, cuts)
    assert len(a) == len(b) and all((x == y).all() for x, y in zip(a, b, strict=True))
    assert plain.stats == roomy.stats
    assert roomy.stats.memory_backoffs == roomy.stats.memory_caps == 0
    # a limit that backs speculation off but never caps K keeps the net output
    backing = unit(alpha, MemoryLimit(buffered_events=n + 1))
    c = run(backing, raw, cuts)
    assert backing.stats.memory_caps == 0
    assert net(a, plain) == net(c, backing)


def net(pushes: list[np.ndarray], u: OrderingUnit) -> list[tuple]:
    out = NetOutput(u.out_dtype)
    for p in pushes:
        out.apply(p, 0)
    return sorted((int(r["ts"]), int(r["a_ts"])) for r in out.net())


def test_disorder_beyond_the_limit_backs_off_then_caps_k_and_the_report_says_so():
    """A stream whose disorder needs ~10x the limit: the run completes within it,
    alpha backs off to 1, K is capped, and the summary carries all of it."""
    reg = example_registry()
    raw = abc_stream(reg, 3_000, seed=3, max_delay=1_000, burst=0.1)
    graph = Graph(reg, sources=("A", "B", "C")).add(
        "rec", Record(), alpha=0.3, k0=0, memory=MemoryLimit(buffered_events=150))
    unlimited = Graph(reg, sources=("A", "B", "C")).add("rec", Record(), alpha=0.3, k0=0)
    report = InProcessRuntime(graph).run(raw)
    free = InProcessRuntime(unlimited).run(raw)
    summary = report.summary()["detectors"]["rec"]
    assert free.summary()["detectors"]["rec"]["memory"]["peak_buffered"] > 1_500
    assert summary["memory"]["peak_buffered"] <= 150
    assert summary["memory_backoffs"] >= 1
    assert summary["memory_caps"] >= 1 and summary["memory_released"] > 0
    assert summary["late"] > 0  # what came behind the capped horizon, counted
    [line] = [x for x in format_detectors(report.summary()["detectors"]) if "memory" in x]
    assert line.startswith("rec: memory limit (150 events): speculation backed off ")
    [u] = report.units["rec"]
    assert len(u.detector.seen) + summary["late"] == len(raw)


def test_snapshots_beyond_their_limit_back_off_and_are_purged():
    """A detector with a 64 KiB state, snapshots limited to 1 MiB: a speculative unit
    would hold one per emission run; it backs off and keeps the estimate in bounds."""
    reg = example_registry()
    raw = abc_stream(reg, 1_200, seed=5, max_delay=400)
    u = unit(0.0, MemoryLimit(snapshot_mb=1), det=Record(ballast=64 * 1024))
    free = unit(0.0, MemoryLimit(), det=Record(ballast=64 * 1024))
    cuts = list(range(1, len(raw)))  # one event per push: a snapshot per premature event
    run(u, raw, cuts)
    run(free, raw, cuts)
    assert free.memory.peak_snapshot_bytes > 4 * 2**20
    assert u.memory.peak_snapshot_bytes <= 2**20
    assert u.stats.memory_backoffs >= 1
    accounted(u, len(raw))


def test_events_no_k_releases_end_the_run_with_a_clear_error():
    """B and C only, and the clock type is A: nothing can be released."""
    reg = example_registry()
    raw = abc_stream(reg, 200, seed=1, mix=(0.0, 0.5, 0.5))
    u = unit(1.0, MemoryLimit(buffered_events=20))
    with pytest.raises(MemoryLimitError, match=r"Record: holds 41 events, more than twice "
                       r"its limit of 20 \(MemoryLimit.buffered_events\), and no K releases "
                       r"them: they are ahead of the unit's clock \(it has no clock yet\)\. "
                       r"Raise the node's memory=MemoryLimit\(buffered_events=\.\.\.\), or "
                       r"send its clock types \(A\) with the other inputs"):
        for i in range(len(raw)):
            u.push(raw[i:i + 1])


def test_a_memory_limit_is_checked_where_it_is_given():
    with pytest.raises(OptionError, match="snapshot_mb must be a number of megabytes > 0"):
        MemoryLimit(snapshot_mb=-1)
    reg = example_registry()
    with pytest.raises(OptionError, match="rec: memory must be a MemoryLimit"):
        Graph(reg, sources=("A", "B", "C")).add("rec", Record(), memory=300)


@settings(max_examples=50, deadline=None)
@given(capacity=st.integers(2, 50), n=st.integers(0, 3000))
def test_a_sample_log_keeps_at_most_its_capacity_spread_over_the_run(capacity, n):
    """Per-batch samples and alpha histories of a run that never ends stay bounded."""
    log = SampleLog(capacity)
    for i in range(n):
        log.append(i)
    assert len(log) <= capacity
    assert list(log) == list(range(0, n, log.stride))
    if n > capacity:
        assert len(log) >= (capacity + 1) // 2
    copy = SampleLog(capacity)
    copy.load_state(log.state())
    for i in range(n, n + 100):
        log.append(i)
        copy.append(i)
    assert list(copy) == list(log)
