"""Net output of a producer: its message stream with retractions and updates resolved."""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from specula import events as ev
from specula.events.batches import FEW_ROWS
from specula.ordering._records import same_event


class NetParts(NamedTuple):
    """What a :class:`NetOutput` holds: the batches applied and when, and per producer
    its live events (counter -> batch, row, first emission time), an upper bound of its
    live counters and those inserted below that bound."""

    chunks: list[np.ndarray]
    times: list[int]
    live: dict[int, dict[int, tuple[int, int, int]]]
    bound: dict[int, int]
    odd: dict[int, set[int]]


class NetReads:
    """What a net output answers about what it holds: its live events, and the batches
    applied and when. A :class:`NetOutput` answers as it applies more; a report's
    (:class:`~specula.actors.reported_net.ReportedNet`) holds the same in arrays. Each
    says which batches it applied (:meth:`applied_batches`) and where its live events
    are (:meth:`live_refs`); the reads are the same for both."""

    dtype: np.dtype
    #: rows applied (events, updates and counter messages)
    applied: int

    def applied_batches(self) -> tuple[list[np.ndarray], list[int]]:
        """The batches applied, in order, and the time each was applied at."""
        raise NotImplementedError

    def live_refs(self) -> np.ndarray:
        """The live events as rows (batch index, row in that batch, first emission
        time), int64, by producer and each producer's in the order held."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.live_refs())

    def emissions(self, since: int | None = None) -> np.ndarray:
        """Everything received, in the order applied: events, updates and retractions
        (those applied at time ``since`` or later, if given)."""
        chunks, times = self.applied_batches()
        chunks = [c for c, t in zip(chunks, times, strict=True) if since is None or t >= since]
        if not chunks:
            return np.empty(0, self.dtype)
        return ev.concat([c if c.dtype == self.dtype else ev.conform(c, self.dtype, drop=True)
                          for c in chunks], self.dtype)

    def net(self) -> np.ndarray:
        """The live events in order of (ts, producer, seq); arrival fields zeroed."""
        return net_rows(self._gather()[0])

    def timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(first emission time, latency) of every live event, in emission order."""
        rows, times = self._gather()
        order = np.argsort(times, kind="stable")
        return times[order], (times - rows["origin"])[order]

    def latencies(self) -> np.ndarray:
        """For every live event: first emission of its final version minus its origin."""
        rows, times = self._gather()
        return times - rows["origin"]

    def _gather(self) -> tuple[np.ndarray, np.ndarray]:
        """The live events' rows and first emission times, batch by batch: the batches
        that hold a live row joined once and the rows taken in one call (a ``take`` per
        batch cost ~2 µs each, and a live feed applies a batch a step)."""
        refs = self.live_refs()
        if not len(refs):
            return np.empty(0, self.dtype), np.empty(0, np.int64)
        chunks = self.applied_batches()[0]
        order = np.argsort(refs[:, 0], kind="stable")
        chunk, row = refs[order, 0], refs[order, 1]
        used = ev.distinct(chunk)
        parts = [chunks[c] for c in used.tolist()]
        parts = [p if p.dtype is self.dtype or p.dtype == self.dtype
                 else ev.conform(p, self.dtype, drop=True) for p in parts]
        starts = np.zeros(len(parts), np.int64)
        np.cumsum([len(p) for p in parts[:-1]], out=starts[1:])
        at = starts[np.searchsorted(used, chunk)] + row
        return np.take(ev.concat_records(parts), at), refs[order, 2]


class NetOutput(NetReads):
    """Apply a stream of generated events, updates and counter messages; keep the net events.

    This is what a sink sees: an event is live from its emission until a counter message
    revokes it (``RETRACTION``: every event of that producer with ``seq >=`` the message's
    counter; ``REVOKE``: that one event) or an update with a different content replaces
    it. An update equal to the live event changes nothing, not even its emission time, so
    the detection latency of an event is measured from the first emission of its final
    version.

    Batches are kept as they come; the live set maps ``(producer, seq)`` to a row of a
    kept batch and its first emission time.

    A ``RETRACTION`` costs what it removes, not what is live: a producer numbers its
    events in order, so its live counters are kept in insertion order, and those
    inserted above every counter present (almost all) are in ascending order. Walking
    the producer's counters from the newest, the retraction stops at the first such
    counter below its own; the few inserted below a larger one (a revoked event sent
    again) are kept aside and checked one by one, and the producer's counters are sorted
    again when they become many.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self._chunks: list[np.ndarray] = []
        self._times: list[int] = []  # when each chunk was applied
        self._live: dict[int, dict[int, tuple[int, int, int]]] = {}
        # per producer: an upper bound of its live counters, and the counters inserted
        # at or below the bound then (out of ascending insertion order)
        self._bound: dict[int, int] = {}
        self._odd: dict[int, set[int]] = {}
        self.applied = 0

    def apply(self, batch: np.ndarray, now: int) -> None:
        """Apply ``batch`` (in order) as received at virtual or wall time ``now``."""
        if not len(batch):
            return
        ci = len(self._chunks)
        self._chunks.append(batch)
        self._times.append(now)
        self.applied += len(batch)
        seqs = batch["seq"].tolist()
        if len(seqs) <= FEW_ROWS:  # a live step's few rows: Python ints cost less
            producers, flags = batch["producer"].tolist(), batch["flags"].tolist()
            plain = not any(flags) and producers.count(producers[0]) == len(producers)
        else:
            pa = batch["producer"]
            plain = not np.count_nonzero(batch["flags"]) and not np.count_nonzero(pa != pa[0])
            producers, flags = [int(pa[0])], []  # the rest read below, if needed
        if plain:
            p = producers[0]
            live = self._live.setdefault(p, {})
            if seqs[0] > self._bound.get(p, -1) and _ascending(seqs, batch):  # common
                if len(seqs) <= FEW_ROWS:  # an item at a time: zip's iterators cost more
                    for i, s in enumerate(seqs):
                        live[s] = (ci, i, now)
                else:
                    live.update(zip(seqs, zip(itertools.repeat(ci), range(len(seqs)),
                                              itertools.repeat(now)), strict=True))
                self._bound[p] = seqs[-1]
                return
            for i, s in enumerate(seqs):
                self._put(p, live, s, (ci, i, now))
            return
        if len(seqs) > FEW_ROWS:
            producers, flags = batch["producer"].tolist(), batch["flags"].tolist()
        for i, (p, s, f) in enumerate(zip(producers, seqs, flags, strict=True)):
            live = self._live.setdefault(p, {})
            if f & ev.RETRACTION:
                self._retract(p, live, s)
                continue
            if f & ev.REVOKE:
                if live.pop(s, None) is not None and p in self._odd:
                    self._odd[p].discard(s)
                continue
            held = live.get(s)
            if held is not None and f & ev.UPDATE and same_event(
                    self._chunks[held[0]][held[1]], batch[i]):
                continue
            self._put(p, live, s, (ci, i, now))

    def _put(self, p: int, live: dict[int, tuple[int, int, int]], s: int,
             ref: tuple[int, int, int]) -> None:
        """Make ``ref`` the live version of counter ``s`` of producer ``p``."""
        if s in live:  # replaced in place: its place in the order stays
            live[s] = ref
            return
        bound = self._bound.get(p, -1)
        if s <= bound:
            self._odd.setdefault(p, set()).add(s)
        else:
            self._bound[p] = s
        live[s] = ref

    def _retract(self, p: int, live: dict[int, tuple[int, int, int]], s: int) -> None:
        """Remove every live counter of producer ``p`` from ``s`` on."""
        odd = self._odd.get(p, set())
        gone = [x for x in odd if x >= s]
        for x in reversed(live):
            if x >= s:
                gone.append(x)
            elif x not in odd:
                break  # the ascending counters before it are all below s
        for x in gone:
            live.pop(x, None)
        odd.difference_update(gone)
        if p in self._bound:
            self._bound[p] = min(self._bound[p], s - 1)
        if len(odd) > max(64, len(live) // 8):  # sort again: the odd ones become plain
            self._live[p] = dict(sorted(live.items()))
            odd.clear()
            self._bound[p] = max(self._live[p], default=-1)

    def parts(self) -> NetParts:
        """What this net output holds, for another one to take over (:meth:`absorb`):
        its batches, their times and its live events (read, not to be changed)."""
        return NetParts(self._chunks, self._times, self._live, self._bound, self._odd)

    def absorb(self, other: NetOutput) -> None:
        """Take over the live events of another producer's (or instance's) NetOutput."""
        theirs = other.parts()
        base = len(self._chunks)
        self._chunks.extend(theirs.chunks)
        self._times.extend(theirs.times)
        for producer, events in theirs.live.items():
            if producer not in self._live:  # the common case: producers are disjoint
                self._live[producer] = {s: (c + base, r, t) for s, (c, r, t) in events.items()}
                if producer in theirs.bound:
                    self._bound[producer] = theirs.bound[producer]
                if producer in theirs.odd:
                    self._odd[producer] = set(theirs.odd[producer])
                continue
            mine = self._live[producer]
            for s, (c, r, t) in events.items():
                self._put(producer, mine, s, (c + base, r, t))
        self.applied += other.applied

    @property
    def batches(self) -> int:
        """Batches applied so far."""
        return len(self._chunks)

    def log(self, start: int = 0) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """What was applied from the ``start``-th batch on, to apply again elsewhere
        (:meth:`reapply`, given the batches' rows one after the other): the batches
        (of this output's dtype; not concatenated, a writer stores them one by one),
        each batch's length and each batch's time."""
        chunks = [c if c.dtype == self.dtype else ev.conform(c, self.dtype)
                  for c in self._chunks[start:]]
        return (chunks, np.array([len(c) for c in chunks], np.int64),
                np.array(self._times[start:], np.int64))

    def reapply(self, rows: np.ndarray, lengths: np.ndarray, times: np.ndarray) -> None:
        """Apply again the batches :meth:`log` returned, in order, at their times."""
        ends = np.cumsum(lengths).tolist()
        for start, end, now in zip([0, *ends][:-1], ends, times.tolist(), strict=True):
            self.apply(rows[start:end], now)

    def split_at(self, seq: int) -> tuple[np.ndarray, np.ndarray, NetOutput]:
        """The live events with counters below ``seq`` and their first emission times,
        and a net output holding only the others, as one batch per first emission time
        (their times kept): for a holder that hands on, for good, the events below
        ``seq``."""
        rows, times = self._gather()
        keep = rows["seq"] >= seq
        order = np.argsort(times[keep], kind="stable")
        kept_rows, kept_times = rows[keep][order].copy(), times[keep][order]
        kept_rows["flags"] = 0  # each is the live version of its event
        kept = NetOutput(self.dtype)
        cuts = np.flatnonzero(np.diff(kept_times)) + 1
        for part, at in zip(np.split(kept_rows, cuts), np.split(kept_times, cuts),
                            strict=True):
            if len(part):
                kept.apply(part, int(at[0]))  # one batch per first-emission time
        return rows[~keep], times[~keep], kept

    def __len__(self) -> int:
        return sum(len(e) for e in self._live.values())

    def applied_batches(self) -> tuple[list[np.ndarray], list[int]]:
        return self._chunks, self._times

    def live_refs(self) -> np.ndarray:
        flat = itertools.chain.from_iterable(
            itertools.chain.from_iterable(live.values() for live in self._live.values()))
        return np.fromiter(flat, np.int64, 3 * len(self)).reshape(-1, 3)


def _ascending(values: list[int], batch: np.ndarray) -> bool:
    """Is every value (the list of ``batch``'s counters) above the one before it? A
    few are compared in Python, which costs less than NumPy's calls."""
    if len(values) <= 16:
        return all(a < b for a, b in itertools.pairwise(values))
    return bool(np.count_nonzero(np.diff(batch["seq"]) <= 0) == 0)


def ranked(rows: np.ndarray) -> np.ndarray:
    """Net rows (as :meth:`NetOutput.net` returns them) with each producer's counters
    replaced by their ranks, 0, 1, 2, ...; raw events (producer 0) as they are. Two runs
    of one graph are compared this way: a unit with on-demand retraction names its
    outputs by labels (:mod:`specula.ordering._sent`), which keep the order of the
    in-order counters but depend on how the input arrived."""
    rows = rows.copy()
    seq = rows["seq"]
    for p in ev.distinct(rows["producer"]).tolist():
        if p:
            mine = np.flatnonzero(rows["producer"] == p)
            seq[mine[np.argsort(seq[mine], kind="stable")]] = np.arange(len(mine))
    return rows


def net_rows(rows: np.ndarray) -> np.ndarray:
    """Net events as a sink keeps them: in order of (ts, producer, seq), with the
    fields of their arrival and emission (flags, ats, kplus, origin) zeroed; a copy."""
    rows = rows.copy()
    for f in ("flags", "ats", "kplus", "origin"):
        rows[f] = 0
    return rows[np.lexsort((rows["seq"], rows["producer"], rows["ts"]))]
