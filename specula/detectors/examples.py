"""Small example detectors: the paper's A!BC and a few companions for demos and tests."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, EventView, type_ids


class ANotBC(Detector):
    """A, then C, with no B in between, generates D (the paper's Fig. 3a negation).

    In soccer terms: the ball is near a player (A), then an acceleration peak (C), and
    the ball did not leave the player (B) in between: the player hit the ball (D).
    Events of type A set the ordering unit's clock.

    Examples
    --------
    >>> from specula.detectors import Emitter, EventView
    >>> import numpy as np
    >>> det, emit = ANotBC(), Emitter()
    >>> row = np.zeros(1, [("ts", "i8"), ("key", "i8")])[0]
    >>> for name, ts in [("A", 1), ("C", 2), ("A", 3), ("B", 4), ("C", 5)]:
    ...     row["ts"] = ts
    ...     det.on_event(EventView.of(row, name), emit)
    >>> [(t, ts, p["a_ts"]) for t, ts, _, p in emit.rows]
    [('D', 2, 1)]
    """

    inputs = ("A", "B", "C")
    outputs = ("D",)
    clock = ("A",)

    def __init__(self) -> None:
        self.armed_at = -1

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "A":
            self.armed_at = event.ts
        elif event.type == "B":
            self.armed_at = -1
        elif self.armed_at >= 0:
            emit("D", event.ts, event.key, a_ts=self.armed_at)
            self.armed_at = -1


class ANotBCBatch(ANotBC):
    """:class:`ANotBC` vectorised over a time-ordered batch (same output, same state).

    A C fires when the latest A before it is later than the latest B and the latest C
    before it (a C disarms whether it fired or not, since a fired C consumed the A and
    an unarmed C has nothing to consume). The state carried between batches is the time
    stamp of a pending A, entered as a virtual A in front of the batch.

    Examples
    --------
    >>> import numpy as np
    >>> from specula.ordering.emitter import Emitter
    >>> reg = example_registry()
    >>> seen = [("A", 1), ("C", 2), ("A", 3), ("B", 4), ("C", 5)]
    >>> rows = [{"type": t, "ts": ts} for t, ts in seen]
    >>> batch = reg.from_records(rows, dtype=reg.dtype(["A", "B", "C"]))
    >>> det, emit = ANotBCBatch(), Emitter()
    >>> det.on_batch(batch, ["?", "A", "B", "C"], emit)
    >>> [(t, int(c["ts"][0]), int(c["a_ts"][0])) for t, c, _ in emit.column_batches]
    [('D', 2, 1)]
    """

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        none = -2  # no such event; -1 is the pending A carried in from the previous batch
        types = events["type"]
        type_a, type_b, type_c = type_ids(type_names, "A", "B", "C")
        idx = np.arange(len(events))
        ts = events["ts"]
        last_a = np.maximum.accumulate(np.where(types == type_a, idx, none))
        if self.armed_at >= 0:
            last_a = np.maximum(last_a, -1)
        last_b = np.maximum.accumulate(np.where(types == type_b, idx, none))
        last_c = np.maximum.accumulate(np.where(types == type_c, idx, none))
        prev_c = np.concatenate(([none], last_c[:-1]))
        fires = (types == type_c) & (last_a > np.maximum(last_b, prev_c))
        if fires.any():
            a = last_a[fires]
            a_ts = np.where(a >= 0, ts[np.maximum(a, 0)], self.armed_at)
            emit.many("D", ts=ts[fires], key=events["key"][fires], cause=idx[fires], a_ts=a_ts)
        a, blocked = last_a[-1], max(last_b[-1], last_c[-1])
        self.armed_at = -1 if a <= blocked else (self.armed_at if a == -1 else int(ts[a]))


class Threshold(Detector):
    """Stateless and vectorised: every C whose value exceeds ``limit`` becomes an E.

    Examples
    --------
    >>> from specula.testing import feed
    >>> cs = [{"type": "C", "ts": t, "key": k, "v": v} for t, k, v in
    ...       [(1, 1, 20), (2, 1, 70), (3, 2, 90), (4, 1, 60)]]
    >>> [(e["ts"], e["v"]) for e in feed(Threshold(), cs, registry=example_registry()).net]
    [(2, 70), (3, 90), (4, 60)]
    """

    inputs = ("C",)
    outputs = ("E",)

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        hit = np.flatnonzero(events["v"] > self.limit)
        if len(hit):
            emit.many("E", ts=events["ts"][hit], key=events["key"][hit], cause=hit,
                      v=events["v"][hit])


class SlowThreshold(Threshold):
    """A :class:`Threshold` that spends ``seconds_per_event`` of wall time per event: the
    stand-in for an expensive detector, to overload an actor in tests of shedding.

    It sleeps, leaving the CPU to others, so its processing rate hardly depends on the
    machine's load; its output is Threshold's.

    Examples
    --------
    >>> from specula.testing import feed
    >>> cs = [{"type": "C", "ts": t, "key": k, "v": v} for t, k, v in
    ...       [(1, 1, 20), (2, 1, 70), (3, 2, 90), (4, 1, 60)]]
    >>> slow = SlowThreshold(seconds_per_event=0.001)  # 1 ms of wall time per event
    >>> [(e["ts"], e["v"]) for e in feed(slow, cs, registry=example_registry()).net]
    [(2, 70), (3, 90), (4, 60)]
    """

    def __init__(self, limit: int = 50, seconds_per_event: float = 0.0) -> None:
        super().__init__(limit)
        self.seconds_per_event = seconds_per_event

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        if self.seconds_per_event > 0 and len(events):
            time.sleep(len(events) * self.seconds_per_event)
        super().on_batch(events, type_names, emit)


class FollowedWithin(Detector):
    """A D followed by an E within ``window`` time units gives F (A and D set the clock).

    Examples
    --------
    >>> from specula.testing import feed
    >>> events = [{"type": t, "ts": ts} for t, ts in [("D", 1), ("E", 4), ("A", 10), ("E", 30)]]
    >>> feed(FollowedWithin(), events, registry=example_registry()).net
    [{'type': 'F', 'ts': 4, 'key': 0, 'gap': 3}]
    """

    inputs = ("D", "E", "A")
    outputs = ("F",)
    clock = ("A", "D")

    def __init__(self, window: int = 10) -> None:
        self.window = window
        self.last_d = -(2**62)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "D":
            self.last_d = event.ts
        elif event.type == "E" and event.ts - self.last_d <= self.window:
            emit("F", event.ts, event.key, gap=event.ts - self.last_d)


class RunningCount(Detector):
    """State changes on every event: emits G carrying the running number of F events.

    Examples
    --------
    >>> from specula.testing import feed
    >>> fs = [{"type": "F", "ts": t} for t in (2, 5, 9)]
    >>> [(e["ts"], e["count"]) for e in feed(RunningCount(), fs, registry=example_registry()).net]
    [(2, 1), (5, 2), (9, 3)]
    """

    inputs = ("F",)
    outputs = ("G",)

    def __init__(self) -> None:
        self.count = 0

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.count += 1
        emit("G", event.ts, count=self.count)


class CountPerKey(Detector):
    """State per key: on every C above ``limit``, emits G with how many such C its key had.

    Its state is per key, so it can run partitioned by key.

    Examples
    --------
    >>> from specula.testing import feed
    >>> cs = [{"type": "C", "ts": t, "key": k, "v": v} for t, k, v in
    ...       [(1, 1, 20), (2, 1, 70), (3, 2, 90), (4, 1, 60)]]
    >>> [(e["ts"], e["key"], e["count"])
    ...  for e in feed(CountPerKey(), cs, registry=example_registry(), partitions=2).net]
    [(2, 1, 1), (3, 2, 1), (4, 1, 2)]
    """

    inputs = ("C",)
    outputs = ("G",)

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit
        self.counts: dict[int, int] = {}

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event["v"] > self.limit:
            n = self.counts.get(event.key, 0) + 1
            self.counts[event.key] = n
            emit("G", event.ts, event.key, count=n)


def example_registry():
    """The event types the example detectors use."""
    from specula.events import TypeRegistry

    reg = TypeRegistry()
    reg.register("A")
    reg.register("B")
    reg.register("C", v="i8")
    reg.register("D", a_ts="i8")
    reg.register("E", v="i8")
    reg.register("F", gap="i8")
    reg.register("G", count="i8")
    return reg
