"""A detector instance's inbox, and the gate between it and the ordering unit.

:class:`Inbox` is a bounded FIFO of batches, each with its arrival time: producers push,
the instance's processing loop takes the oldest. It knows its length in events (rows),
and records every taken event's waiting time. It has no clock and no lock: the Ray
actor (:mod:`.worker`) wraps it in a condition variable and stamps arrivals with its
monotonic clock; the in-process runtime (:mod:`.queueing`) stamps them with virtual
time.

:class:`Gate` is what a taken batch passes before the ordering unit: for a node with
:class:`~specula.options.Shedding`, the overload detector's command and the shedder's
keep-mask (control messages always pass), also over the events the unit holds when the
share rises and the shedder can decide again; for every node, the metrics of what it
processed: busy time (the processing rate), each event's latency at the node (arrival
to the end of its batch's processing), the bound's violations, the shed events by type.
:class:`InboxStats` carries those metrics into the run report, mergeable across
instances, in bounded memory (:class:`Histogram`).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from specula.events import TypeRegistry
from specula.options import Shedding
from specula.shedding import (
    KEEP_ALL,
    DetectorShedding,
    DropCommand,
    OverloadDetector,
    StateShedder,
    make_shedder,
)


class Histogram:
    """Counts of durations in logarithmic bins, for percentiles in bounded memory.

    Bin 0 holds durations under 1 µs; then 40 bins per decade up to 10^4 s (each bin
    ~6 % wide); the last bin everything longer. Percentiles answer a bin's upper edge,
    so they never understate; count, total and maximum are exact.

    >>> h = Histogram(); h.add(0.010, 99); h.add(2.0, 1)
    >>> h.count, round(h.percentile(50), 4) >= 0.010, h.max
    (100, True, 2.0)
    """

    LOW, PER_DECADE, DECADES = 1e-6, 40, 10

    def __init__(self) -> None:
        self.counts = np.zeros(self.PER_DECADE * self.DECADES + 2, np.int64)
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, seconds: float, n: int = 1) -> None:
        """Count ``n`` events of duration ``seconds``."""
        if n <= 0:
            return
        self.counts[self._bin(seconds)] += n
        self.count += n
        self.total += seconds * n
        self.max = max(self.max, seconds)

    def add_all(self, seconds: np.ndarray) -> None:
        """Count one event per duration in ``seconds``."""
        if not len(seconds):
            return
        seconds = np.asarray(seconds, np.float64)
        low = np.maximum(seconds, self.LOW) / self.LOW
        bins = np.where(seconds < self.LOW, 0,
                        1 + np.floor(np.log10(low) * self.PER_DECADE).astype(np.int64))
        np.add.at(self.counts, np.minimum(bins, len(self.counts) - 1), 1)
        self.count += len(seconds)
        self.total += float(seconds.sum())
        self.max = max(self.max, float(seconds.max()))

    def _bin(self, seconds: float) -> int:
        if seconds < self.LOW:
            return 0
        i = 1 + math.floor(math.log10(seconds / self.LOW) * self.PER_DECADE)
        return min(i, len(self.counts) - 1)

    def upper(self, i: int) -> float:
        """The upper edge of bin ``i``, in seconds (the last bin's: the maximum seen)."""
        if i == len(self.counts) - 1:
            return self.max
        return self.LOW * 10 ** (i / self.PER_DECADE)

    def percentile(self, q: float) -> float | None:
        """An upper bound of the ``q``-th percentile (0-100); None when empty."""
        if not self.count:
            return None
        i = int(np.searchsorted(np.cumsum(self.counts), math.ceil(q / 100 * self.count)))
        return min(self.upper(i), self.max)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def absorb(self, other: Histogram) -> None:
        """Add another histogram's counts to this one."""
        self.counts += other.counts
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)


class Queued(NamedTuple):
    """A batch in an inbox, as it is taken."""

    #: its rows
    batch: np.ndarray
    #: when it arrived, ticks
    arrival: float
    #: who pushed it
    sender: int
    #: the arrival its raw rows are still to be stamped with (None: they carry theirs;
    #: :meth:`~specula.ordering.unit.OrderingUnit.push`)
    stamp: int | None


class InboxFullError(RuntimeError):
    """A push into an inbox without room; the caller should have waited."""


class Inbox:
    """A FIFO of batches with their arrival times, bounded in events.

    ``capacity`` bounds the rows it holds (None: unbounded); a batch larger than the
    capacity is taken only into an empty inbox, so that it never waits forever. Times
    are in ticks; ``seconds_per_tick`` converts the waits it records to seconds.
    """

    def __init__(self, capacity: int | None = None, seconds_per_tick: float = 1e-9) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"an inbox holds at least one event; got capacity {capacity}")
        self.capacity = capacity
        self.seconds_per_tick = seconds_per_tick
        self._queue: deque[Queued] = deque()
        self.events = 0           # rows now in the inbox
        self.max_events = 0       # the most it ever held
        self.pushed = 0           # rows ever pushed
        self.waits = Histogram()  # each taken row's time in the inbox

    def __len__(self) -> int:
        """Batches waiting."""
        return len(self._queue)

    def has_room(self, n: int) -> bool:
        """Can a batch of ``n`` rows be pushed now?"""
        return self.capacity is None or self.events == 0 or self.events + n <= self.capacity

    def push(self, batch: np.ndarray, arrival: float, sender: int = 0, *,
             force: bool = False, stamp: int | None = None) -> None:
        """Append ``batch`` from ``sender``, arrived at ``arrival`` ticks (its raw rows to
        be stamped with ``stamp``, if given); :class:`InboxFullError` if no room (unless
        ``force``: a resent batch)."""
        if not force and not self.has_room(len(batch)):
            raise InboxFullError(f"{len(batch)} events do not fit: {self.events} of "
                            f"{self.capacity} taken")
        self._queue.append(Queued(batch, arrival, sender, stamp))
        self.events += len(batch)
        self.pushed += len(batch)
        self.max_events = max(self.max_events, self.events)

    @property
    def head_arrival(self) -> float:
        """Arrival time of the oldest batch (the inbox must not be empty)."""
        return self._queue[0].arrival

    def holds(self, senders: list[int]) -> bool:
        """Are batches of all ``senders`` waiting (of a sender named k times, k)?"""
        waiting = Counter(q.sender for q in self._queue)
        return all(waiting[s] >= n for s, n in Counter(senders).items())

    def take(self, now: float, senders: list[int] | None = None, max_events: int = 0
             ) -> list[Queued]:
        """The batches of one step: the oldest batch of each of ``senders`` in turn; or
        (None) the oldest batch and those behind it while their rows stay within
        ``max_events``."""
        if senders is not None:
            return [self.pop(now, s) for s in senders]
        taken: list[Queued] = []
        rows = 0
        while self._queue and (not taken or rows + len(self._queue[0].batch) <= max_events):
            taken.append(self.pop(now))
            rows += len(taken[-1].batch)
        return taken

    def pop(self, now: float, sender: int | None = None) -> Queued:
        """Take the oldest batch (of ``sender``, if given) at ``now`` ticks."""
        if sender is None:
            got = self._queue.popleft()
        else:
            i = next(i for i, q in enumerate(self._queue) if q.sender == sender)
            got = self._queue[i]
            del self._queue[i]
        self.events -= len(got.batch)
        self.waits.add(max(0.0, now - got.arrival) * self.seconds_per_tick, len(got.batch))
        return got


@dataclass
class InboxStats:
    """What one node's inboxes (all its instances) saw, for the run report."""

    #: the node's latency bound in seconds, None without shedding
    latency_bound_s: float | None = None
    waits: Histogram = field(default_factory=Histogram)
    latencies: Histogram = field(default_factory=Histogram)
    max_events: int = 0
    pushed: int = 0
    processed: int = 0
    #: events the unit handed to the detector in that busy time (see :meth:`Gate.done`)
    handed: float = 0.0
    busy_s: float = 0.0
    #: plain events dropped by the shedder, by type name
    shed: dict[str, int] = field(default_factory=dict)
    #: of those, events the ordering unit held, not yet handed on (see :meth:`Gate.admit`)
    shed_held: int = 0
    #: (event, window) pairs a detector that sheds inside itself dropped, by type name
    shed_pairs: dict[str, int] = field(default_factory=dict)
    #: partial matches a state shedder dropped in the detector (hybrid: as they formed too)
    shed_partial_matches: int = 0
    #: processed events whose latency at the node exceeded the bound
    violations: int = 0
    #: batches taken while the overload detector asked for drops
    overloaded_batches: int = 0

    @classmethod
    def merge(cls, parts: list[InboxStats]) -> InboxStats:
        """The stats of several instances of one node as one (the inbox high-water mark is
        the largest of any instance)."""
        out = cls(latency_bound_s=parts[0].latency_bound_s if parts else None)
        for p in parts:
            out.waits.absorb(p.waits)
            out.latencies.absorb(p.latencies)
            out.max_events = max(out.max_events, p.max_events)
            out.pushed += p.pushed
            out.processed += p.processed
            out.handed += p.handed
            out.busy_s += p.busy_s
            for t, n in p.shed.items():
                out.shed[t] = out.shed.get(t, 0) + n
            out.shed_held += p.shed_held
            for t, n in p.shed_pairs.items():
                out.shed_pairs[t] = out.shed_pairs.get(t, 0) + n
            out.shed_partial_matches += p.shed_partial_matches
            out.violations += p.violations
            out.overloaded_batches += p.overloaded_batches
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures: inbox high-water mark, wait and latency percentiles,
        processing rate, shed events (total and by type) and the bound's violations."""
        return {
            "latency_bound_s": self.latency_bound_s,
            "inbox_max_events": self.max_events,
            "wait_p50_s": self.waits.percentile(50),
            "wait_p99_s": self.waits.percentile(99),
            "latency_p99_s": self.latencies.percentile(99),
            "latency_max_s": self.latencies.max if self.latencies.count else None,
            "processing_rate_eps": self.handed / self.busy_s if self.busy_s > 0 else None,
            "shed": sum(self.shed.values()),
            "shed_by_type": dict(sorted(self.shed.items())),
            "shed_held": self.shed_held,
            "shed_pairs": sum(self.shed_pairs.values()),
            "shed_pairs_by_type": dict(sorted(self.shed_pairs.items())),
            "shed_partial_matches": self.shed_partial_matches,
            "violations": self.violations,
            "overloaded_batches": self.overloaded_batches,
        }


class Gate:
    """Between an instance's inbox and its ordering unit: shedding and metrics.

    Without ``shedding`` every event passes and only the metrics are kept. Times given
    to it are in ticks of ``seconds_per_tick`` seconds. ``detector`` is the one the
    instance's ordering unit drives: ``Shedding(strategy="detector")`` hands it the drop
    commands, and a state shedder (one with ``attach``, :mod:`specula.shedding.state`)
    drops its partial matches. ``unit`` is that ordering unit: while the node sheds,
    its alpha controller speculates no more
    (:meth:`~specula.ordering.AlphaController.note_overload`), and when the share to
    drop rises, a shedder whose decisions may be taken again (``sheds_held``, as RI's)
    also drops from the events the unit holds and has not handed on
    (:meth:`~specula.ordering.OrderingUnit.shed_held`).
    """

    def __init__(self, shedding: Shedding | None, registry: TypeRegistry,
                 seconds_per_tick: float, detector: Any = None, unit: Any = None) -> None:
        self.shedding = shedding
        self.seconds_per_tick = seconds_per_tick
        self.detector = OverloadDetector(shedding) if shedding is not None else None
        self.shedder = make_shedder(shedding, detector) if shedding is not None else None
        self._names = {t.id: t.name for t in registry.types()}
        self._shed = np.zeros(max(self._names) + 2, np.int64)  # by type id; last: unknown
        self.stats = InboxStats(shedding.latency_bound_s if shedding else None)
        self._work = (0, 0)  # the shedding detector's work when the last batch was taken
        self.unit = unit
        self._sheds_held = getattr(self.shedder, "sheds_held", False) and unit is not None
        self._share = 0.0  # the share of the last command
        self._restored: tuple[dict[str, int], int] = ({}, 0)  # pairs, partial matches
        if detector is not None and self.shedder is not None and hasattr(self.shedder,
                                                                          "attach"):
            self.shedder.attach(detector)

    def arrived(self, n: int, now: float) -> None:
        """``n`` rows arrived at ``now`` ticks (for the measured input rate)."""
        if self.detector is not None:
            self.detector.arrived(n, now * self.seconds_per_tick)

    def command(self, q_size: int) -> DropCommand:
        """The overload detector's command for a batch taken with ``q_size`` rows in the
        inbox, the batch included."""
        return self.detector.command(q_size) if self.detector is not None else KEEP_ALL

    def admit(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """What of ``batch`` goes on to the ordering unit: all of it without shedding;
        else what the shedder keeps, plus every control message. Counts what it drops.

        A unit holds what it took for K before its detector works on it, so drops at
        the inbox alone lighten the work only K later, and the onset of an overload
        would pass the bound by up to K of excess input. So when the share rises, the
        events the unit holds and has not handed on are shed too; and while it sheds,
        the unit does not speculate more, which would hand held events on in a burst
        of work the drops did not allow for."""
        if self.shedder is None:
            return batch
        if command.overloaded:
            self.stats.overloaded_batches += 1
            if getattr(self.unit, "controller", None) is not None:
                self.unit.controller.note_overload()
        if self._sheds_held and command.share > self._share:
            dropped = self.unit.shed_held(lambda rows: self.shedder.keep(rows, command))
            self.stats.shed_held += len(dropped)
            self._count(dropped)
        self._share = command.share
        if isinstance(self.shedder, DetectorShedding):
            self._work = self.shedder.work()
        keep = np.asarray(self.shedder.keep(batch, command), bool)
        if len(keep) != len(batch):
            raise ValueError(f"{type(self.shedder).__name__}.keep returned {len(keep)} "
                             f"flags for a batch of {len(batch)} events")
        drop = ~keep & (batch["flags"] == 0)
        if not drop.any():
            return batch
        self._count(batch[drop])
        return batch[~drop]

    def _count(self, dropped: np.ndarray) -> None:
        """Count plain events dropped, by type."""
        ids = np.minimum(dropped["type"], len(self._shed) - 1)
        self._shed += np.bincount(ids, minlength=len(self._shed))

    def done(self, n: int, busy_s: float, latency_s: float, handed: float | None = None
             ) -> None:
        """``n`` rows were processed in ``busy_s`` seconds, ``latency_s`` after arrival;
        ``handed``: the events the ordering unit handed to the detector for the first
        time meanwhile (default ``n``).

        The processing time per event, l(p), is measured per event handed on, not per
        row taken: a unit holds events for K before it hands them on, so the busy time of
        a batch is the work of events taken up to K earlier. Counted against the rows
        taken, the first drops would shrink the count and not yet the work, and l(p)
        would grow with every drop, asking for more drops (measured: the estimated
        throughput fell from 680 to 200 events/s against a real 1,000, and the bound
        was broken). Replays are in the busy time but not in the count: an event costs
        its replays too."""
        handed = n if handed is None else handed
        s = self.stats
        s.processed += n
        s.handed += handed
        s.busy_s += busy_s
        s.latencies.add(latency_s, n)
        if s.latency_bound_s is not None and latency_s > s.latency_bound_s:
            s.violations += n
        if self.detector is not None:
            unshed = self._unshed_busy(busy_s)
            if unshed is not None:
                self.detector.processed(handed, unshed)
            self.detector.completed(latency_s, n)

    def _unshed_busy(self, busy_s: float) -> float | None:
        """The busy time the batch would have taken unshed: a detector that sheds inside
        itself did only the work it kept, so its busy time is scaled by (kept + shed) /
        kept units of work; None when it kept none (nothing to scale)."""
        if not isinstance(self.shedder, DetectorShedding):
            return busy_s
        (done0, shed0), (done1, shed1) = self._work, self.shedder.work()
        kept, shed = done1 - done0, shed1 - shed0
        if shed <= 0:
            return busy_s
        return busy_s * (kept + shed) / kept if kept > 0 else None

    @property
    def shed_total(self) -> int:
        return int(self._shed.sum())

    def counts(self) -> list[Any]:
        """What it shed over the steps taken, msgpack-ready, for the actor's checkpoint:
        events by type id, of them those the unit held, batches taken overloaded, the
        bound's violations, and what the detector or state shedder dropped (pairs by
        type name, partial matches). A restarted actor goes back to them with its
        timeline and counts the steps it takes again (:mod:`.tally`)."""
        s = self.report(None)
        return [self._shed.tolist(), s.shed_held, s.overloaded_batches, s.violations,
                s.shed_pairs, s.shed_partial_matches]

    def restore_counts(self, counts: list[Any]) -> None:
        """Go back to the :meth:`counts` of a checkpoint; the shedder's own, which a new
        process's starts from zero, are added to what it counts from now on."""
        s = self.stats
        shed, s.shed_held, s.overloaded_batches, s.violations, pairs, partial = counts
        self._shed[:len(shed)] = shed
        self._restored = ({str(t): int(n) for t, n in pairs.items()}, int(partial))

    def report(self, inbox: Inbox | None) -> InboxStats:
        """The stats so far, with the inbox's waits and high-water mark (None: without)."""
        s = self.stats
        s.shed = {self._names.get(i, "?"): int(n) for i, n in enumerate(self._shed) if n}
        pairs, partial = self._restored
        if isinstance(self.shedder, DetectorShedding):
            now = self.shedder.pairs_shed()
            s.shed_pairs = {t: pairs.get(t, 0) + now.get(t, 0) for t in {*pairs, *now}}
        if isinstance(self.shedder, StateShedder):
            s.shed_partial_matches = partial + self.shedder.partial_matches_dropped
        if inbox is not None:
            s.waits, s.max_events, s.pushed = inbox.waits, inbox.max_events, inbox.pushed
        return s
