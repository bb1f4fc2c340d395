"""Who gets which part of a batch: subscriptions by event type, partitions by key."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import numpy as np

from specula import events as ev
from specula.detectors.graph import Graph, Instance, Node
from specula.events import fields_of
from specula.events.batches import FEW_ROWS
from specula.events.hashing import partition_of
from specula.ordering.unit import OrderingUnit

# messages for every instance of every subscriber: they name a producer, not an event
_BROADCAST = ev.RETRACTION | ev.PROGRESS
# no time stamp: below every real one
_NO_TS = -(2**62)


class Router:
    """Routes the output of a detector (or the raw source, ``None``) to its subscribers.

    A subscriber gets the events of its input types; a ``RETRACTION`` (a range of a
    producer's counters) goes to every instance of every node that subscribes to any of
    that producer's types, and so does a ``PROGRESS`` punctuation. Updates and ``REVOKE``
    messages carry an event's type and key and travel like data: the producer makes sure
    they reach the consumer that holds the version they revise
    (:mod:`specula.ordering._sent`).
    """

    def __init__(self, graph: Graph) -> None:
        reg = graph.registry
        # one slot past the last id, never wanted: ids beyond the registry clip to it
        n_types = max(t.id for t in reg.types()) + 2

        def mask(types: Iterable[str]) -> np.ndarray:
            out = np.zeros(n_types, bool)
            out[[reg.id(t) for t in types]] = True
            return out

        self._wanted = {n.name: mask(n.inputs) for n in graph.nodes.values()}
        self._wanted_ids = {n.name: frozenset(reg.id(t) for t in n.inputs)
                            for n in graph.nodes.values()}
        self._sources = mask(graph.sources)
        # of each node clocked by raw events that is partitioned or has idle_after: its
        # raw clock types; and the idle_after of those that have one
        self._clocks = {n.name: mask(set(n.clock) & set(graph.sources))
                        for n in graph.nodes.values() if set(n.clock) & set(graph.sources)
                        and (n.partitions > 1 or n.idle_after is not None)}
        self._idle = {n.name: n.idle_after for n in graph.nodes.values()
                      if n.name in self._clocks and n.idle_after is not None}
        published: dict[str | None, set[str]] = {
            None: set(graph.sources), **{n.name: set(n.outputs) for n in graph.nodes.values()}}
        self._hears = {(n.name, source): bool(set(n.inputs) & types)
                       for n in graph.nodes.values() for source, types in published.items()}
        # a detector publishes only its outputs and control messages: a node that takes
        # all of them takes every batch whole (raw events may carry any type: checked)
        self._whole = {(n.name, source): types <= set(n.inputs)
                       for n in graph.nodes.values() for source, types in published.items()
                       if source is not None}

    def hears(self, node: str, source: str | None) -> bool:
        """Does ``node`` subscribe to anything ``source`` (None: raw) publishes?"""
        return self._hears[node, source]

    def takes_any(self, node: str, types: np.ndarray) -> bool:
        """Does ``node`` take anything of a raw batch of the types ``types`` (ids): one of
        its input types, or (with ``idle_after``) the raw stream's clock?"""
        return node in self._idle or bool(np.count_nonzero(
            self._wanted[node].take(types, mode="clip")))

    def piece(self, instance: Instance, source: str | None, batch: np.ndarray) -> np.ndarray:
        """The part of ``batch`` (from ``source``; None: raw) that ``instance`` takes: what
        its node subscribes to, and of a partitioned node what its partition's keys.

        Of a raw batch an instance clocked by raw events may also take the raw stream's
        clock, ``PROGRESS(0, ts)``, after its part (:mod:`specula.ordering.clock`), where
        that clock is ahead of the instance's own clock events in the batch:

        * a partition, the newest clock event of its node's part: a partition then has
          the clock its node would have unpartitioned, also when no key reaches it, and
          publishes progress; else its consumers' low watermark would wait for it for
          good;
        * a node with ``idle_after``, the newest time stamp of the batch less
          ``idle_after``: when its clock types go quiet, its clock runs on that far
          behind the stream's, and so does its progress.
        """
        node = instance.node
        part = self.select(node.name, source, batch)
        own = part
        if len(part) and node.partitions > 1:
            mine = _partitions(part, node.partitions) == instance.index
            mine |= (part["flags"] & _BROADCAST) > 0
            own = part if np.count_nonzero(mine) == len(mine) else ev.select_records(part, mine)
        if source is not None or node.name not in self._clocks:
            return own
        return self._with_raw_clock(node, batch, part, own)

    def _with_raw_clock(self, node: Node, batch: np.ndarray, part: np.ndarray,
                        own: np.ndarray) -> np.ndarray:
        """``own`` (the instance's rows of ``part``, its node's part of the raw ``batch``)
        followed by ``PROGRESS(0, clock)`` if the clock :meth:`piece` describes is ahead
        of the newest clock event of ``own``."""
        clocks = self._clocks[node.name]
        newest = _NO_TS
        if node.partitions > 1 and len(part):
            newest = _newest(part, clocks)
        idle = self._idle.get(node.name)
        if idle is not None:
            stream = _newest(batch, self._sources)
            newest = max(newest, stream - idle)
        if newest <= _NO_TS or (len(own) and _newest(own, clocks) >= newest):
            return own
        ats = batch["ats"]
        arrival = int(ats[0]) if len(ats) == 1 else int(ats.max())
        return _mark(own.dtype, 0, newest, arrival, own, origin=arrival)

    def select(self, node: str, source: str | None, batch: np.ndarray) -> np.ndarray:
        """The part of ``batch`` that ``node`` subscribes to."""
        if not self.hears(node, source):
            return batch[:0]
        if source is not None and self._whole[node, source]:
            return batch
        if len(batch) <= FEW_ROWS:  # a live step's few rows: Python ints cost less
            types, wanted = batch["type"].tolist(), self._wanted_ids[node]
            if wanted.issuperset(types):  # the usual case
                return batch
            if source is None and wanted.isdisjoint(types):  # raw rows carry no flags
                return batch[:0]
        keep = self._wanted[node].take(batch["type"], mode="clip")
        if source is not None:
            keep |= (batch["flags"] & _BROADCAST) > 0
        kept = np.count_nonzero(keep)
        if kept == len(keep):
            return batch
        return ev.select_records(batch, keep) if kept else batch[:0]


def raw_type_table(graph: Graph, registry: ev.TypeRegistry | None) -> np.ndarray | None:
    """How raw events made with ``registry`` read in ``graph``'s (None: they were made
    with the graph's), from :func:`specula.events.type_table`: None when their ids
    already mean the same, else the id translation by name.

    Raises :class:`~specula.events.RegistryMismatchError` naming the source type of the
    graph that the events cannot carry, or carry with other fields or another time unit.
    """
    if registry is None:
        return None
    for name in graph.sources:
        if name not in registry:
            raise ev.RegistryMismatchError(
                f"the graph takes {name!r} events from outside (a source), but the raw events "
                f"were made with a registry that has no type {name!r} "
                f"({', '.join(t.name for t in registry.types())}), so none can arrive; take "
                f"{name!r} out of the graph's sources, or feed events made with a registry "
                "that has it")
    try:
        return ev.type_table(registry, graph.registry, needed=graph.sources)
    except ev.RegistryMismatchError as exc:
        raise ev.RegistryMismatchError(
            f"the raw events do not fit the graph's registry: {exc}") from None


def split_by_key(batch: np.ndarray, partitions: int) -> list[np.ndarray]:
    """Partition ``i`` gets the events whose key hashes to ``i``
    (:func:`~specula.events.hashing.partition_of`); ``RETRACTION`` messages and
    ``PROGRESS`` punctuations (which carry no key) go to every partition."""
    if partitions == 1:
        return [batch]
    control = (batch["flags"] & _BROADCAST) > 0
    part = _partitions(batch, partitions)
    return [ev.select_records(batch, (part == i) | control) for i in range(partitions)]


def _partitions(batch: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of each row by its key; -1 for the messages every partition gets."""
    return np.where((batch["flags"] & _BROADCAST) > 0, -1,
                    partition_of(batch["key"], partitions))


def punctuate(out: np.ndarray, unit: OrderingUnit, published: int | None, now: int
              ) -> tuple[np.ndarray, int | None]:
    """``out`` followed by a ``PROGRESS`` punctuation if the unit's progress moved past
    ``published`` (what it last told its subscribers); returns the batch to publish and
    the progress published."""
    progress = unit.progress
    if progress is None or (published is not None and progress <= published):
        return out, published
    return _mark(unit.out_dtype, unit.producer, progress, now, out), progress


def _mark(dtype: np.dtype, producer: int, ts: int, ats: int,
          before: np.ndarray | None = None, origin: int = 0) -> np.ndarray:
    """A ``PROGRESS`` punctuation of ``producer`` up to ``ts``, sent at ``ats`` (with
    ``origin``), behind the rows ``before`` (of ``dtype``; copied as bytes, which costs
    half of concatenating them with the punctuation)."""
    n = 0 if before is None else len(before)
    if before is not None and n and before.dtype != dtype:
        return ev.concat_records([before, _mark(dtype, producer, ts, ats, origin=origin)])
    out = np.zeros(n + 1, dtype)
    if before is not None and n:
        raw = np.dtype((np.void, dtype.itemsize))
        out.view(raw)[:n] = before.view(raw)
    # the row in one assignment of all its values: a field at a time costs twice as much
    empty, (p, t, f, a, o) = _progress_template(dtype)
    row = list(empty)
    row[p], row[t], row[f], row[a], row[o] = producer, ts, ev.PROGRESS, ats, origin
    out[n] = tuple(row)
    return out


@functools.lru_cache(maxsize=64)
def _progress_template(dtype: np.dtype) -> tuple[tuple, tuple[int, int, int, int, int]]:
    """The values of an empty row of ``dtype`` and the places of ``producer``, ``ts``,
    ``flags``, ``ats`` and ``origin`` among them."""
    at = list(fields_of(dtype)).index
    return (np.zeros(1, dtype)[0].item(),
            (at("producer"), at("ts"), at("flags"), at("ats"), at("origin")))


def _newest(rows: np.ndarray, types: np.ndarray) -> int:
    """The newest time stamp of the plain events of ``rows`` whose type ``types`` marks
    (a mask over type ids; ids beyond it clipped into it); else ``_NO_TS``."""
    if len(rows) <= FEW_ROWS:  # a few rows: Python ints cost less than NumPy's calls
        last, newest = len(types) - 1, _NO_TS
        for t, f, ts in zip(rows["type"].tolist(), rows["flags"].tolist(),
                            rows["ts"].tolist(), strict=True):
            if not f and ts > newest and types[min(max(t, 0), last)]:
                newest = ts
        return newest
    clock = types.take(rows["type"], mode="clip") & (rows["flags"] == 0)
    return int(rows["ts"][clock].max()) if np.count_nonzero(clock) else _NO_TS
