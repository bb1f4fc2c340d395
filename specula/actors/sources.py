"""Where raw events enter a graph: the feeding of raw batches to the level-1 actors,
from the driver or from several source actors at once.

A :class:`Feeder` does what every source does with a raw batch: read its type ids in the
graph's registry, stamp its arrival (and origin) with the wall clock, and push it whole
(put once into Ray's object store if large) to every instance of a node that reads one
of its types; each instance takes what its node reads and, of a partitioned node, its
keys.
The Ray runtime's driver runs one for a stream it is given (an array, or an iterable of
batches: a live watch); with :class:`Sources`, each part of the stream (a Parquet file
of the arrival table, say) is read and fed by a source actor of its own
(:mod:`.source_worker`), so no single process reads, copies and routes every event.

Independent sources run at their own pace, and a level-1 unit's clock is the largest
time stamp it has seen from any of them: a source ahead of the others would make their
events look delayed by the gap, and late beyond K. So the driver moves the sources
through arrival time in steps (``run(step_ticks=...)``, 0.1 s by default): each source
sends the events that arrived before the step's end, and the next step starts when
every source's pushes of this one are in their consumers' inboxes (a push still on its
way could be overtaken by another source's of the next step). Sources are then at most
a step apart, a disorder the units' K absorbs like any other. A source cuts its pushes
at every multiple of the step in arrival time (and every ``batch_rows`` events),
whatever steps the driver asks for, so a restarted source regenerates exactly the
pushes its consumers numbered.

Both runtimes cut a stream they hold in memory (an array) alike, with the arguments of
``run()`` in :data:`~specula.options.RUNTIME_OPTIONS`: into steps of the events that
arrived within ``step_ticks`` of the step's first, of at most ``batch_rows`` events
(:func:`arrival_steps`), paced to ``speed`` times real time (:class:`Pace`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from specula import events as ev
from specula.actors.channels import Publisher, Route
from specula.actors.routing import Router
from specula.options import OptionError, runtime_options

#: Sender ids of source actors: ``SOURCE_SENDERS + j`` for the j-th (the driver, as a
#: source, is :data:`DRIVER`; instances of the graph count from 1).
SOURCE_SENDERS = 1 << 40

#: The driver's sender id. It never restarts within a run and resends a push as the very
#: batch it kept (:class:`~.channels.Publisher`), so a duplicate of its pushes cannot
#: differ from the one held: consumers keep no digests of them (a source actor, which
#: restarts and regenerates its part, is checked as any producer).
DRIVER = 0


@runtime_checkable
class RawPart(Protocol):
    """One part of a stream of raw events, read by one source actor: picklable (it
    travels to the actor) and yielding its events in arrival order (by ``ats``)."""

    def batches(self, batch_size: int) -> Iterator[np.ndarray]:
        """The part's events, in arrival order, in batches of at most ``batch_size``."""
        ...


@dataclass(frozen=True)
class ArrayPart:
    """A part held in memory: raw events sorted by ``ats`` (annotations, tests)."""

    events: np.ndarray

    def batches(self, batch_size: int) -> Iterator[np.ndarray]:
        for i in range(0, len(self.events), batch_size):
            yield self.events[i:i + batch_size]


@dataclass(frozen=True)
class StoredPart:
    """A part that the driver has put into Ray's object store (``ref``) and holds until
    the run ends, so that its source actor, restarted, can read it again
    (:func:`restartable`)."""

    ref: Any

    def batches(self, batch_size: int) -> Iterator[np.ndarray]:
        import ray

        part: RawPart = ray.get(self.ref)
        return part.batches(batch_size)


@dataclass(frozen=True)
class Sources:
    """A stream of raw events in parts, each fed by a source actor of its own.

    Every event of the stream is in exactly one part, and each part is in arrival
    order; events of one key should be in one part (parts cut by key), or the key's
    own order across parts is only as good as a step (``run(step_ticks=...)``: how far,
    in ticks of arrival time, the sources may run apart; see the module's docstring).
    """

    parts: Sequence[RawPart]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("Sources needs at least one part")
        for part in self.parts:
            if not isinstance(part, RawPart):
                raise TypeError(f"a source part must have batches(batch_size); got "
                                f"{type(part).__name__}")

    def merged(self, batch_size: int = 10_000) -> Iterator[np.ndarray]:
        """The whole stream in arrival order (then ``seq``): the parts merged, for a
        runtime that reads it in one process."""
        return merge_by_arrival([p.batches(batch_size) for p in self.parts])


def merge_by_arrival(streams: Sequence[Iterator[np.ndarray]]) -> Iterator[np.ndarray]:
    """Merge streams of batches, each in arrival order, into one in arrival order (equal
    arrivals by ``seq``): each output batch holds every event that arrived before the
    earliest end of the open streams' current batches, so memory stays at about one
    batch per stream."""
    rows = [next_batch(s) for s in streams]
    ended = [h is None for h in rows]
    while not all(ended):
        # a stream whose batch ends at `cut` may go on with more events at `cut`
        cut = min(int(h["ats"][-1]) for h, e in zip(rows, ended, strict=True)
                  if h is not None and not e)
        out = []
        for i, h in enumerate(rows):
            if h is None:
                continue
            n = int(np.searchsorted(h["ats"], cut, side="left"))
            out.append(h[:n])
            rows[i] = h[n:]
            if not ended[i] and int(h["ats"][-1]) == cut:
                more = next_batch(streams[i])
                if more is None:
                    ended[i] = True
                else:
                    rows[i] = np.concatenate([rows[i], more])
        yield from _in_order(out)
    yield from _in_order([h for h in rows if h is not None])


def _in_order(batches: list[np.ndarray]) -> Iterator[np.ndarray]:
    """The events of ``batches`` as one batch sorted by (``ats``, ``seq``), if any."""
    batch = np.concatenate(batches) if batches else None
    if batch is not None and len(batch):
        yield batch[np.lexsort((batch["seq"], batch["ats"]))]


def next_batch(stream: Iterator[np.ndarray]) -> np.ndarray | None:
    """The stream's next non-empty batch, or None at its end."""
    for batch in stream:
        if len(batch):
            return batch
    return None


def raw_sender(sender: int) -> bool:
    """Is ``sender`` a feeder of raw batches (the driver, 0, or a source actor)? Their
    pushes hold a whole raw batch, of which each consumer takes its part."""
    return sender == DRIVER or sender >= SOURCE_SENDERS


#: Ray passes an argument up to this size inline with a call and puts a larger one into
#: its object store (``max_direct_call_object_size``, 100 KiB). A raw batch that would go
#: there anyway is put once for every consumer; a smaller one goes inline, which takes
#: ~5 ms less per batch than a put (10 consumers, this machine).
SHARE_BYTES = 100 * 1024


def shared(batch: np.ndarray) -> Any:
    """``batch`` for every consumer: put once into Ray's object store (its reference)
    when larger than :data:`SHARE_BYTES`, else itself (as without Ray)."""
    if batch.nbytes <= SHARE_BYTES:
        return batch
    import ray

    return ray.put(batch) if ray.is_initialized() else batch


#: The driver puts a stream it feeds into Ray's object store in slabs, each put when the
#: feeding reaches it and freed once no push kept for resending names it: a slab holds
#: the rows of this many pushes the size of the one that reaches it (at most
#: :data:`SLAB_BYTES`). A consumer on another node fetches a whole slab with its first
#: push from it, and a push kept for resending holds its whole slab in the store, so
#: both stay within a few pushes' rows; each slab is a put of its own (a few ms), and
#: 16 pushes of 20,000 rows make a 1M-event stream 4 puts (docs/measurements.md).
SLAB_PUSHES = 16

#: The most bytes a slab holds (unless one push is larger).
SLAB_BYTES = 64 << 20

#: Slabs a process keeps resolved (:func:`_slab`): the one being fed and the one before.
SLABS_HELD = 2


@dataclass(frozen=True)
class RawSlice:
    """What a raw push of the driver carries instead of its rows, when they would go
    through Ray's object store anyway: rows ``start:end`` of ``slab`` (Ray's reference
    to a run of the driver's stream, put once, :class:`PreparedStream`), and
    the time they arrived at, ``stamp`` (ns; each consumer stamps its piece). A batch put
    into the object store per push cost the driver a put of ~1.2 MB and Ray a new object
    to track and free for each. The slice is a few numbers: a resend is the same push,
    byte for byte."""

    slab: Any
    start: int
    end: int
    stamp: int

    def __len__(self) -> int:
        return self.end - self.start

    def take(self, cut: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, int | None]:
        """The consumer's part, ``cut`` of the rows (read-only, unstamped), and the
        arrival still to stamp it with: a part cut into rows of its own is stamped here
        (None); one ``cut`` kept as the rows lie in the slab stays there, read-only, and
        the consumer's ordering unit stamps it where it copies it
        (:meth:`~specula.ordering.unit.OrderingUnit.push`): a copy here to stamp it
        would copy every row twice."""
        piece = cut(_slab(self.slab)[self.start:self.end])
        if not piece.flags.writeable:
            return piece, self.stamp
        ev.stamp_arrival(piece, self.stamp)
        return piece, None


def take_raw(batch: np.ndarray | RawSlice, cut: Callable[[np.ndarray], np.ndarray]
             ) -> tuple[np.ndarray, int | None]:
    """The part ``cut`` gives of a raw push's ``batch``, rows or a :class:`RawSlice`, and
    the arrival still to stamp it with (None: it carries its own)."""
    return batch.take(cut) if isinstance(batch, RawSlice) else (cut(batch), None)


_slabs: dict[bytes, np.ndarray] = {}  # this process's slabs resolved, oldest first
_slabs_lock = threading.Lock()


def _slab(ref: Any) -> np.ndarray:
    """The rows of a slab (read-only, in the object store's shared memory), got from Ray
    once per process and kept while it is one of the last :data:`SLABS_HELD`."""
    key = ref.binary()
    with _slabs_lock:
        found = _slabs.get(key)
    if found is None:
        import ray

        found = ray.get(ref)
        with _slabs_lock:
            _slabs[key] = found
            while len(_slabs) > SLABS_HELD:
                del _slabs[next(iter(_slabs))]
    return found


def forget_slabs() -> None:
    """Let go of the slabs this process resolved (its run ended): the object store may
    free them once the driver does."""
    with _slabs_lock:
        _slabs.clear()


class PreparedStream:
    """The driver's stream in memory, in arrival order, its type ids the graph's and
    checked (the caller's array, or :func:`~.inprocess.prepare_raw`'s copy of it; never
    written to), fed by ranges of rows (:meth:`Feeder.feed_range`). A range
    larger than :data:`SHARE_BYTES` goes as a :class:`RawSlice` of a slab put into Ray's
    object store once; a smaller one (a live step's rows) goes inline, stamped."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self._slab: Any = None
        self._first = self._end = 0  # the rows the slab holds

    def share(self, start: int, end: int, stamp: int) -> np.ndarray | RawSlice:
        """Rows ``start:end`` arrived at ``stamp``, as a push carries them."""
        rows = self.rows[start:end]
        import ray

        if rows.nbytes <= SHARE_BYTES or not ray.is_initialized():
            rows = rows.copy()
            ev.stamp_arrival(rows, stamp)
            return rows
        if not self._first <= start < end <= self._end:
            per = max(min(SLAB_BYTES // self.rows.itemsize, SLAB_PUSHES * (end - start)),
                      end - start)
            self._first, self._end = start, min(len(self.rows), start + per)
            self._slab = ray.put(self.rows[start:self._end])
        return RawSlice(self._slab, start - self._first, end - self._first, stamp)


#: A part whose pickle is at most this size goes to its source actor by value: inline in
#: the actor's creation task, which Ray keeps for the actor's restarts (a Parquet file's
#: path, a few events). Ray puts a larger argument (over :data:`SHARE_BYTES`) into its
#: object store and frees it once the first process has started, so a restart could not
#: read it (ray-project/ray#53727); a quarter of that limit leaves room for Ray's framing.
INLINE_PART_BYTES = SHARE_BYTES // 4


def restartable(part: RawPart) -> RawPart:
    """``part`` as its source actor's constructor argument, readable again by every
    restart: itself if its pickle is small (:data:`INLINE_PART_BYTES`), else a
    :class:`StoredPart` (events held in memory), which the driver must hold until the
    run ends."""
    import ray

    buffers: list[Any] = []  # large arrays, counted without a copy
    head = ray.cloudpickle.dumps(part, protocol=5, buffer_callback=buffers.append)
    size = len(head) + sum(b.raw().nbytes for b in buffers)
    return part if size <= INLINE_PART_BYTES else StoredPart(ray.put(part))


class Feeder:
    """Routes raw batches to the level-1 actors through a :class:`~.channels.Publisher`:
    type ids read through ``table``, arrival and origin stamped on the driver's clock
    (this host's minus ``clock_offset`` ns). Each batch goes whole (:func:`shared`: put
    once into Ray's object store if large; a range of the driver's stream, a
    :class:`RawSlice` of it put once for many batches) to every instance of every node that
    subscribes to one of its types, in one call per chain actor
    (:meth:`~.channels.Publisher.send_all`); the instance takes its part on arrival
    (:meth:`~.routing.Router.piece`): a piece cut here per instance would be serialised
    and copied once per subscriber. Counts the events and the whole seconds of event
    time that hold one (:attr:`played_seconds`)."""

    def __init__(self, router: Router, routes: Sequence[Route], publisher: Publisher,
                 table: np.ndarray | None, ticks_per_second: float,
                 actor: Any = None) -> None:
        self.router = router
        self.routes = routes
        self.publisher = publisher
        self.table = table
        self.ticks_per_second = int(ticks_per_second)
        self.clock_offset = 0
        self.events = 0
        self._actor = actor if actor is not None else (lambda ref: ref)
        self._seconds: list[np.ndarray] = []  # per batch, its events' seconds
        self._pending = 0  # seconds added since the last union

    def feed(self, batch: np.ndarray) -> None:
        """Push ``batch`` (raw events in arrival order, the caller's: copied, its type ids
        read through :attr:`table` and checked, then stamped) to its subscribers."""
        if not len(batch):
            return
        batch = ev.translate_types(batch, self.table)  # a copy
        ev.check_raw(batch)
        ev.stamp_arrival(batch, self._now())
        self._route(batch, lambda: shared(batch))

    def feed_range(self, stream: PreparedStream, start: int, end: int) -> None:
        """Push rows ``start:end`` of ``stream`` (prepared once: no copy here, no
        check again) to their subscribers, stamped with their arrival
        (:meth:`PreparedStream.share`)."""
        if end > start:
            stamp = self._now()
            self._route(stream.rows[start:end], lambda: stream.share(start, end, stamp))

    def _now(self) -> int:
        """The driver's clock, ns (this host's less :attr:`clock_offset`)."""
        return time.time_ns() - self.clock_offset

    def _route(self, rows: np.ndarray, push: Callable[[], Any]) -> None:
        """Count ``rows`` and send what ``push`` makes of them to every instance of the
        nodes that take one of their types."""
        self.events += len(rows)
        self._add_seconds(rows["ts"] // self.ticks_per_second)
        types = present(rows["type"])
        chs = [self.publisher.channel(consumer, self._actor(actor))
               for route in self.routes if self.router.takes_any(route.node, types)
               for consumer, actor in zip(route.consumers, route.actors, strict=True)]
        if chs:
            self.publisher.send_all(chs, push())

    def _add_seconds(self, seconds: np.ndarray) -> None:
        """Keep a batch's ``seconds`` of event time, made distinct later, once for many
        batches (:data:`SECONDS_PENDING`): a stream whose clock ticks a second per event
        has as many distinct seconds as events, and sorting each batch's cost the driver
        ~1 ms a batch of 20,000 (benchmarks/ray_graph.py) where the union counts them.
        A union comes after at least as many new seconds as it holds: linear in all."""
        self._seconds.append(seconds)
        self._pending += len(seconds)
        if self._pending > max(SECONDS_PENDING, len(self._seconds[0])):
            self._union()

    def _union(self) -> np.ndarray:
        """The seconds kept, made distinct, kept as one array."""
        self._seconds, self._pending = [union(self._seconds)], 0
        return self._seconds[0]

    @property
    def played_seconds(self) -> np.ndarray:
        """The whole seconds of event time that hold at least one fed event, ascending."""
        return self._union()


#: Seconds of fed events a :class:`Feeder` holds before it makes them distinct (8 MB).
SECONDS_PENDING = 1 << 20


def played_seconds(raw: np.ndarray | Iterable[np.ndarray], ticks_per_second: float
                   ) -> np.ndarray:
    """The whole seconds of event time that hold at least one event of ``raw``,
    ascending (an array: a stream of ticks of a second holds a second per event).

    >>> played_seconds(np.array([(5,), (1,), (1_500,)], [("ts", "i8")]), 1_000).tolist()
    [0, 1]
    """
    batches = [raw] if isinstance(raw, np.ndarray) else raw
    return union(present(b["ts"] // int(ticks_per_second)) for b in batches if len(b))


def union(parts: Iterable[np.ndarray]) -> np.ndarray:
    """The distinct integers of several arrays of them, ascending."""
    found = list(parts)
    return present(np.concatenate(found)) if found else np.zeros(0, np.int64)


def present(values: np.ndarray) -> np.ndarray:
    """The distinct integers of ``values``, ascending: counted over their range where it
    is short (a batch's type ids, the seconds a batch spans), which is several times
    faster than sorting them; else sorted (:func:`~specula.events.distinct`).

    >>> present(np.array([7, 3, 7, 5])).tolist()
    [3, 5, 7]
    """
    if not len(values):
        return values[:0]
    low, high = int(values.min()), int(values.max())
    if high - low > 4 * len(values) + 64:
        return ev.distinct(values)
    return np.flatnonzero(np.bincount(values - low)) + low


def step_cuts(ats: np.ndarray, step_ticks: int, batch_rows: int) -> list[tuple[int, int]]:
    """Where a source cuts the events ``ats`` (arrival times, ascending) into pushes:
    at every multiple of ``step_ticks`` and every ``batch_rows`` events after one.

    >>> step_cuts(np.array([1, 2, 3, 10, 11, 25]), 10, 2)
    [(0, 2), (2, 3), (3, 5), (5, 6)]
    """
    cells = ats // step_ticks
    edges = np.flatnonzero(np.diff(cells)) + 1
    cuts = []
    for start, end in zip(np.r_[0, edges], np.r_[edges, len(ats)], strict=True):
        cuts += [(int(i), int(min(i + batch_rows, end)))
                 for i in range(int(start), int(end), batch_rows)]
    return cuts


#: Seconds of arrival time the source actors of a Ray run may run apart when ``run()``
#: gives no ``step_ticks``.
DEFAULT_SOURCE_STEP_SECONDS = 0.1


def check_batching(raw: Any, step_ticks: int | None, batch_rows: int | None,
                   speed: float | None) -> None:
    """Check the batching and pacing arguments of ``run()`` (the same in both runtimes,
    :data:`~specula.options.RUNTIME_OPTIONS`) for the stream ``raw``: ``step_ticks``
    and ``batch_rows`` cut a stream held in memory; the batches of an iterable are its
    steps, as they come."""
    runtime_options("run", step_ticks=step_ticks, batch_rows=batch_rows, speed=speed)
    if not isinstance(raw, np.ndarray | Sources) and (step_ticks, batch_rows) != (None, None):
        raise OptionError("run: step_ticks and batch_rows cut a stream held in memory (an "
                          "array of raw events, or Sources); the batches of an iterable "
                          "are delivered as they come, a step each")


def arrival_steps(ats: np.ndarray, step_ticks: int | None, batch_rows: int | None
                  ) -> list[tuple[int, int]]:
    """Where a stream in arrival order (``ats`` ascending) is cut into steps, as
    (start, end) rows: a step holds the events that arrived within ``step_ticks`` of its
    first (None: no bound), at most ``batch_rows`` of them (None: no bound).

    >>> arrival_steps(np.array([1, 2, 3, 10, 11, 25]), 5, 2)
    [(0, 2), (2, 3), (3, 5), (5, 6)]
    >>> arrival_steps(np.array([1, 1, 2]), 0, None), arrival_steps(np.array([1, 1, 2]), None, 2)
    ([(0, 2), (2, 3)], [(0, 2), (2, 3)])
    """
    n, cuts, i = len(ats), [], 0
    found = _window_ends(ats, step_ticks)
    ends = None if found is None else found.tolist()  # Python ints: read one by one
    while i < n:
        j = n if ends is None else ends[i]
        if batch_rows is not None:
            j = min(j, i + batch_rows)
        cuts.append((i, j))
        i = j
    return cuts


def _window_ends(ats: np.ndarray, step_ticks: int | None) -> np.ndarray | None:
    """For every event, the end of the rows that arrived within ``step_ticks`` of it
    (None: no bound), found for all events in one search rather than one per step."""
    if step_ticks is None or not len(ats):
        return None
    ends = np.full(len(ats), len(ats), np.int64)
    limit = int(ats[-1]) - step_ticks  # the events from it on reach the end
    if limit > int(ats[0]):  # (and it is an int64 then)
        inner = ats < limit
        ends[inner] = np.searchsorted(ats, ats[inner] + step_ticks, side="right")
    return ends


class Pace:
    """Plays a stream at ``speed`` times real time: :meth:`wait` returns once the stream
    time it is given has come, counted from the first call (None: at once, always)."""

    def __init__(self, speed: float | None, ticks_per_second: float) -> None:
        self.speed = speed
        self.ticks_per_second = ticks_per_second
        self._start: tuple[float, int] | None = None  # wall clock and stream time

    def wait(self, ticks: int) -> None:
        """Wait until ``ticks`` of stream time is due (the first call sets the start)."""
        if self.speed is None:
            return
        if self._start is None:
            self._start = (time.perf_counter(), ticks)
        start, first = self._start
        due = (ticks - first) / self.ticks_per_second / self.speed
        time.sleep(max(0.0, start + due - time.perf_counter()))
