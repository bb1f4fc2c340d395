"""specula.testing, used as a user would: on detectors defined here.

:func:`~specula.testing.feed` runs a detector (or a small graph) on records, in order or
in an arrival order given by a permutation or by arrival times; its promise is the
runtime's: out of order within K, the net output is the in-order output, which is what
the detector emits when handed its events in time-stamp order. The property tests below
check that on random detectors of every kind in ``graph_shapes.py``, random streams and
random arrival orders and unit options, against the detector called directly.

:func:`~specula.testing.check_detector` must pass every correct detector (the same kinds
on random streams) and catch each way of breaking the contract, with a message that
says which: one broken detector per way below.
"""

from __future__ import annotations

import copy
import random
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from graph_shapes import KINDS, RAW, Generic, shape_registry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specula import Detector, Emitter, EventView, Graph, TypeRegistry
from specula.events import InvalidEvent
from specula.options import OptionError
from specula.testing import check_detector, feed, records


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    reg.register("reading", value="i8")
    reg.register("streak", length="i4", since="i8")
    reg.register("alarm", since="i8")
    reg.register("note", text=str)
    return reg


class Streak(Detector):
    """Three or more readings above 10 in a row, per sensor: one ``streak`` when the third
    arrives, and one more each time it grows, with its length and its first time stamp."""

    inputs = ("reading",)
    outputs = ("streak",)

    def __init__(self, threshold: int = 10) -> None:
        self.threshold = threshold
        self.runs: dict[int, tuple[int, int]] = {}  # sensor -> (length, first ts)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event["value"] <= self.threshold:
            self.runs.pop(event.key, None)
            return
        length, since = self.runs.get(event.key, (0, event.ts))
        self.runs[event.key] = (length + 1, since)
        if length + 1 >= 3:
            emit("streak", event.ts, event.key, length=length + 1, since=since)


def readings(values: Sequence[int], key: int = 1, step: int = 10) -> list[dict[str, Any]]:
    return [{"type": "reading", "ts": step * i, "key": key, "value": v}
            for i, v in enumerate(values)]


VALUES = [12, 15, 11, 3, 20, 21, 22, 23, 5]


# ------------------------------------------------------------------------------ feed


def test_feed_gives_the_net_output_as_records():
    out = feed(Streak(), readings(VALUES), registry=registry())
    assert out.net == [
        {"type": "streak", "ts": 20, "key": 1, "length": 3, "since": 0},
        {"type": "streak", "ts": 60, "key": 1, "length": 3, "since": 40},
        {"type": "streak", "ts": 70, "key": 1, "length": 4, "since": 40},
    ]
    assert out.late == []
    assert [e["kind"] for e in out.emitted] == ["event"] * 3
    assert out.report.stats("Streak").events_in == len(VALUES)


def test_events_arrive_in_time_stamp_order_unless_told_otherwise():
    by_sensor = readings([30, 31, 32, 33], key=2, step=7) + readings([12, 15, 11, 3, 20])
    by_time = sorted(by_sensor, key=lambda e: e["ts"])
    out = feed(Streak(), by_sensor, registry=registry())
    assert out.net == feed(Streak(), by_time, registry=registry()).net
    assert [(r["key"], r["ts"]) for r in out.net] == [(2, 14), (1, 20), (2, 21)]
    as_given = feed(Streak(), by_sensor, registry=registry(), order=range(9), k0=0)
    assert [(r["key"], r["ts"]) for r in as_given.late] == [(1, 0), (1, 10), (1, 20)]


def test_out_of_order_arrival_revises_then_nets_to_the_in_order_output():
    events = readings(VALUES)
    in_order = feed(Streak(), events, registry=registry()).net
    late_first = [1, 0, *range(2, len(events))]  # the reading of ts 10 arrives second
    late_middle = [0, 2, 1, 3, 4, 5, 7, 6, 8]
    for order in (late_first, late_middle, list(reversed(range(len(events))))):
        for retraction in ("on-demand", "full"):
            out = feed(Streak(), events, registry=registry(), order=order, alpha=0.0,
                       retraction=retraction, k0=100)
            assert out.net == in_order
            assert out.late == []
    out = feed(Streak(), events, registry=registry(), order=late_middle, alpha=0.0, k0=100)
    assert {e["kind"] for e in out.emitted} > {"event"}  # it revised what it sent


def test_events_behind_k_are_late_and_listed():
    events = readings([12, 15, 3, 13])
    assert feed(Streak(), events, registry=registry()).net == []
    out = feed(Streak(), events, registry=registry(), order=[0, 1, 3, 2], k0=0)
    assert out.late == [{"type": "reading", "ts": 20, "key": 1, "value": 3}]
    # the late reading is not processed, so nothing broke the run of three
    assert out.net == [{"type": "streak", "ts": 30, "key": 1, "length": 3, "since": 0}]


def test_events_with_arrival_times_arrive_by_them():
    events = [dict(e, ats=a) for e, a in zip(readings(VALUES), [5, 40, 12, 30, 41, 50,
                                                                80, 70, 90], strict=True)]
    out = feed(Streak(), events, registry=registry(), k0=20, alpha=0.0, step_ticks=0)
    assert out.net == feed(Streak(), readings(VALUES), registry=registry()).net
    assert out.late == []


def test_a_graph_is_fed_its_sources_and_read_per_node():
    class Long(Detector):
        """A streak of five or more."""

        inputs, outputs = ("streak",), ("alarm",)

        def on_event(self, event: EventView, emit: Emitter) -> None:
            if event["length"] == 5:
                emit("alarm", event.ts, event.key, since=event["since"])

    graph = Graph(registry(), sources=("reading",)).add("streaks", Streak()).add("long",
                                                                                  Long())
    out = feed(graph, readings([11, 12, 13, 14, 15, 16, 1]), alpha=0.5, k0=30)
    assert [r["length"] for r in out["streaks"].net] == [3, 4, 5, 6]
    assert out["long"].net == [{"type": "alarm", "ts": 40, "key": 1, "since": 0}]
    with pytest.raises(ValueError, match=r"nodes streaks, long: read one as result\['streaks'\]"):
        _ = out.net
    with pytest.raises(KeyError, match="no node 'short'; the nodes are streaks, long"):
        out["short"]


def test_feed_refuses_what_it_cannot_run():
    reg = registry()
    with pytest.raises(InvalidEvent, match="record 1, field 'type': 'note' is not an input"):
        feed(Streak(), [readings([1])[0], {"type": "note", "ts": 3}], registry=reg)
    with pytest.raises(InvalidEvent, match="record 0, field 'value': not an integer"):
        feed(Streak(), [{"type": "reading", "ts": 1, "value": "high"}], registry=reg)
    with pytest.raises(ValueError, match=r"a permutation of 0..2\); got \[0, 0, 1\]"):
        feed(Streak(), readings([1, 2, 3]), registry=reg, order=[0, 0, 1])
    with pytest.raises(ValueError, match="give either ats or order="):
        feed(Streak(), [dict(e, ats=1) for e in readings([1, 2])], registry=reg, order=[1, 0])
    with pytest.raises(ValueError, match="without ats each event arrives alone"):
        feed(Streak(), readings([1, 2]), registry=reg, step_ticks=5)
    with pytest.raises(TypeError, match=r"feed\(Streak\(\), events, registry=...\)"):
        feed(Streak(), readings([1, 2]))
    with pytest.raises(OptionError, match="Streak: alpha must be a number in"):
        feed(Streak(), readings([1, 2]), registry=reg, alpha=2)


def test_records_reads_each_event_with_its_own_fields():
    reg = registry()
    batch = reg.from_records([{"type": "note", "ts": 4, "key": 2, "text": "kick-off"},
                              {"type": "reading", "ts": 5, "value": -3}],
                             dtype=reg.dtype())
    assert records(batch, reg) == [{"type": "note", "ts": 4, "key": 2, "text": "kick-off"},
                                   {"type": "reading", "ts": 5, "key": 0, "value": -3}]


# --------------------------------------------------------- feed: random detectors


@st.composite
def detectors(draw: st.DrawFn) -> Generic:
    """A detector of any kind of ``graph_shapes`` on raw types, with 1-3 outputs."""
    kind = draw(st.sampled_from(KINDS))
    lo_in, hi_in, lo_out, hi_out = kind.arity
    inputs = draw(st.permutations(RAW))[:draw(st.integers(lo_in, hi_in))]
    outputs = [f"T{i}" for i in range(draw(st.integers(lo_out, hi_out)))]
    clock = draw(st.one_of(st.none(), st.just(inputs[:1])))
    return kind(inputs, outputs, clock=clock)


@st.composite
def streams(draw: st.DrawFn, inputs: Sequence[str]) -> list[dict[str, Any]]:
    """1-40 events of ``inputs``, time stamps with ties, in time-stamp order."""
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return [{"type": draw(st.sampled_from(list(inputs))), "ts": int(ts),
             "key": draw(st.integers(0, 2)), "v": draw(st.integers(0, 20))}
            for ts in np.cumsum(gaps)]


def direct(detector: Detector, events: list[dict[str, Any]], reg: TypeRegistry) -> list[tuple]:
    """The reference: what a copy of ``detector`` emits when called with all of
    ``events`` in time-stamp order, as sorted (type, ts, key, v)."""
    detector = copy.deepcopy(detector)
    batch = reg.from_records(sorted(events, key=lambda e: e["ts"]),
                             dtype=reg.dtype(detector.inputs))
    emit = Emitter()
    detector.on_batch(batch, [""] + [t.name for t in reg.types()], emit)
    detector.on_end(emit)
    out = [(t, ts, k, int(p["v"])) for t, ts, k, p in emit.rows]
    for t, cols, _ in emit.column_batches:
        out += [(t, int(ts), int(k), int(v))
                for ts, k, v in zip(cols["ts"], cols["key"], cols["v"], strict=True)]
    return sorted(out)


def as_tuples(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["type"], r["ts"], r["key"], r["v"]) for r in rows)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_feed_out_of_order_within_k_nets_to_the_detector_called_in_order(data):
    reg = shape_registry()
    detector = data.draw(detectors())
    events = data.draw(streams(detector.inputs))
    order = data.draw(st.permutations(range(len(events))))
    newest = np.maximum.accumulate([events[i]["ts"] for i in order])
    # K above how far behind the newest time stamp any event arrives: an event arriving
    # exactly K behind is late if it ties with one purged before it and comes before it
    # in time-stamp order (its counter is lower)
    behind = max(int(n) - events[i]["ts"] for n, i in zip(newest, order, strict=True))
    alpha = data.draw(st.sampled_from([0.0, 0.5, 1.0, "adaptive"]))
    retraction = data.draw(st.sampled_from(["on-demand", "full"]))
    out = feed(detector, events, registry=reg, order=order, alpha=alpha,
               retraction=retraction, k0=behind + 1)
    assert out.late == []
    assert as_tuples(out.net) == direct(detector, events, reg)


# ------------------------------------------------------------------ check_detector


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_check_detector_passes_every_correct_detector(data):
    reg = shape_registry()
    detector = data.draw(detectors())
    events = data.draw(streams(detector.inputs))
    if not direct(detector, events, reg):
        with pytest.raises(ValueError, match="detects nothing on the events given"):
            check_detector(detector, events, reg)
    else:
        check_detector(detector, events, reg)


class SharedSnapshot(Detector):
    """Numbers the readings, keeping them in a list; its snapshot is that list itself,
    which later input grows."""

    inputs, outputs = ("reading",), ("streak",)

    def __init__(self) -> None:
        self.values: list[int] = []

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.values.append(event["value"])
        emit("streak", event.ts, length=len(self.values))

    def snapshot(self) -> Any:
        return self.values  # should be a copy: list(self.values)

    def restore(self, state: Any) -> None:
        self.values = state


class Mutates(Streak):
    """Clips the readings it is given, in place."""

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        np.minimum(events["value"], 20, out=events["value"])
        super().on_batch(events, type_names, emit)


class Unseeded(Streak):
    """Reports a random share of the streaks."""

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if random.random() < 0.5:  # the fault under test
            super().on_event(event, emit)


class PerBatch(Detector):
    """Counts the readings of each batch (it should count per time, not per delivery)."""

    inputs, outputs = ("reading",), ("streak",)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        emit("streak", int(events["ts"][-1]), length=len(events))


class Undeclared(Streak):
    """Emits a type it does not declare."""

    def on_event(self, event: EventView, emit: Emitter) -> None:
        emit("note", event.ts, text="seen")


class ExtraField(Streak):
    """Emits a field its output type does not have."""

    def on_event(self, event: EventView, emit: Emitter) -> None:
        emit("streak", event.ts, length=1, colour=3)


class Locked(Streak):
    """Keeps a lock among its attributes, which no pickle carries."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def snapshot(self) -> Any:
        return dict(self.runs)

    def restore(self, state: Any) -> None:
        self.runs = dict(state)


class CopyOnly:
    """A value that copies but does not pickle (a handle to something outside)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> CopyOnly:
        return CopyOnly()

    def __reduce__(self) -> Any:
        raise TypeError("a CopyOnly does not pickle")


class HoldsAHandle(Streak):
    """Keeps a value that does not pickle among its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.handle = CopyOnly()


class ShipsAHandle(HoldsAHandle):
    """Snapshots only what pickles, but the detector itself does not."""

    def snapshot(self) -> Any:
        return dict(self.runs)

    def restore(self, state: Any) -> None:
        self.runs = dict(state)


class ArraySnapshot(Streak):
    """Snapshots its state as arrays, which == compares element-wise."""

    def snapshot(self) -> Any:
        keys = np.array(sorted(self.runs), np.int64)
        return keys, np.array([self.runs[k] for k in keys.tolist()]).reshape(-1, 2)

    def restore(self, state: Any) -> None:
        keys, runs = state
        self.runs = {k: (int(n), int(s)) for k, (n, s) in zip(keys.tolist(), runs.tolist(),
                                                             strict=True)}


class TruncatingRestore(Detector):
    """Records every value; its snapshot is how many it holds, and restore cuts back to
    that many, which a fresh copy, holding none, cannot."""

    inputs, outputs = ("reading",), ("streak",)

    def __init__(self) -> None:
        self.values: list[int] = []

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.values.append(event["value"])
        emit("streak", event.ts, length=len(self.values), since=sum(self.values))

    def snapshot(self) -> Any:
        return len(self.values)

    def restore(self, state: Any) -> None:
        del self.values[state:]


class ForgetsWhenPickled(Detector):
    """Numbers the readings, but leaves the count out of its pickle, as if it were a
    cache."""

    inputs, outputs = ("reading",), ("streak",)

    def __init__(self) -> None:
        self.count = 0

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.count += 1
        emit("streak", event.ts, length=self.count)

    def __getstate__(self) -> dict[str, Any]:
        return {"count": 0}


class ReadsArrival(Detector):
    """Stamps each reading with when it arrived (an event's ``ats``): output that depends
    on the delivery, not on the events."""

    inputs, outputs = ("reading",), ("streak",)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        emit("streak", event.ts, length=1, since=event["ats"] - event.ts)


class Undocumented(Streak):
    pass


BROKEN = [
    (SharedSnapshot, "snapshot -> more input -> restore -> continue differs"),
    (Mutates, "changed the batch it was given"),
    (Unseeded, "gave different output for the same input"),
    (PerBatch, "gives other output when its input is cut into batches"),
    (Undeclared, "emitted 'note', which is not among its outputs"),
    (ExtraField, r"emitted 'streak' with fields \['colour'\] that the type does not have"),
    (Locked, "cannot be copied"),
    (HoldsAHandle, r"snapshot\(\) failed .*the default pickles its attributes"),
    (ShipsAHandle, "cannot be pickled .a CopyOnly does not pickle.; the Ray runtime"),
    (ArraySnapshot, "its snapshots cannot be compared with =="),
    (TruncatingRestore, "a fresh copy restored from a .pickled. snapshot does not continue"),
    (ForgetsWhenPickled, "a copy pickled mid-stream does not continue where it was"),
    (ReadsArrival, "gives another net output behind a speculative unit"),
    (Undocumented, "has no docstring of its own"),
]


@pytest.mark.parametrize(("cls", "message"), BROKEN, ids=[c.__name__ for c, _ in BROKEN])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_check_detector_names_what_broke(cls: type[Detector], message: str, seed: int):
    rng = np.random.default_rng(seed)
    events = [{"type": "reading", "ts": int(t), "key": int(rng.integers(0, 2)),
               "value": int(rng.integers(5, 25))}
              for t in np.cumsum(rng.integers(1, 4, 60))]
    random.seed(seed)
    with pytest.raises(AssertionError, match=f"^{cls.__name__}: {message}"):
        check_detector(cls(), events, registry())
    check_detector(Streak(), events, registry())  # the same events pass a correct one


def test_check_detector_refuses_events_it_cannot_check():
    with pytest.raises(ValueError, match="detects nothing on the events given"):
        check_detector(Streak(), readings([1, 2, 3]), registry())
    with pytest.raises(InvalidEvent, match="record 0, field 'type': 'note' is not an input "
                       r"of Streak \(reading\)"):
        check_detector(Streak(), [{"type": "note", "ts": 0}], registry())
    bare = TypeRegistry()
    bare.register("reading", value="i8")
    with pytest.raises(AssertionError, match="Streak: has output type 'streak', which the "
                       "registry does not know; register it first"):
        check_detector(Streak(), readings(VALUES), bare)
