"""Who gets which part of a batch: subscriptions by event type, partitions by key."""

from __future__ import annotations

import numpy as np

from specula import events as ev
from specula.detectors.graph import Graph, Instance
from specula.events.hashing import partition_of
from specula.ordering.unit import OrderingUnit

# messages for every instance of every subscriber: they name a producer, not an event
_BROADCAST = ev.RETRACTION | ev.PROGRESS


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
        self._wanted: dict[str, np.ndarray] = {}
        for node in graph.nodes.values():
            mask = np.zeros(n_types, bool)
            mask[[reg.id(t) for t in node.inputs]] = True
            self._wanted[node.name] = mask
        published = {None: set(graph.sources),
                     **{n.name: set(n.outputs) for n in graph.nodes.values()}}
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
        """Does ``node`` subscribe to any of the raw event types ``types`` (ids)?"""
        return bool(np.take(self._wanted[node], types, mode="clip").any())

    def piece(self, instance: Instance, source: str | None, batch: np.ndarray) -> np.ndarray:
        """The part of ``batch`` (from ``source``; None: raw) that ``instance`` takes: what
        its node subscribes to, and of a partitioned node what its partition's keys."""
        part = self.select(instance.node.name, source, batch)
        return split_by_key(part, instance.node.partitions)[instance.index] if len(part) \
            else part

    def select(self, node: str, source: str | None, batch: np.ndarray) -> np.ndarray:
        """The part of ``batch`` that ``node`` subscribes to."""
        if not self.hears(node, source):
            return batch[:0]
        if source is not None and self._whole[node, source]:
            return batch
        keep = np.take(self._wanted[node], batch["type"], mode="clip")
        if source is not None:
            keep |= (batch["flags"] & _BROADCAST) > 0
        return batch if keep.all() else ev.select_records(batch, keep)


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
    part = np.where(control, -1, partition_of(batch["key"], partitions))
    return [ev.select_records(batch, (part == i) | control) for i in range(partitions)]


def punctuate(out: np.ndarray, unit: OrderingUnit, published: int | None, now: int
              ) -> tuple[np.ndarray, int | None]:
    """``out`` followed by a ``PROGRESS`` punctuation if the unit's progress moved past
    ``published`` (what it last told its subscribers); returns the batch to publish and
    the progress published."""
    progress = unit.progress
    if progress is None or (published is not None and progress <= published):
        return out, published
    mark = np.zeros(1, unit.out_dtype)
    mark["producer"] = unit.producer
    mark["ts"] = progress
    mark["flags"] = ev.PROGRESS
    mark["ats"] = now
    return (ev.concat_records([out, mark]) if len(out) else mark), progress
