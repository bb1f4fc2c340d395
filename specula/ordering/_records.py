"""Small helpers on event records shared by the ordering unit and its buffers: the ordering
key's tie-break, event equality, counters per producer and set slots of object arrays."""

from __future__ import annotations

import numpy as np

from specula import events as ev
from specula.events.batches import FEW_ROWS
from specula.ordering import _kernels

TIEBREAK_SHIFT = 40


def tiebreak(producer: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The second half of the ordering key: producer and counter packed in one int64."""
    return (producer.astype(np.int64) << TIEBREAK_SHIFT) | seq.astype(np.int64)


def same_event(a: np.void, b: np.void) -> bool:
    """Equality of two versions of an event: every field but flags, arrival and K+."""
    names = [n for n in a.dtype.names or () if n not in ("flags", "ats", "kplus", "origin")]
    return all(a[n] == b[n] for n in names)


def is_set(slots: np.ndarray) -> np.ndarray:
    """Which entries of an object array are not None (elementwise)."""
    # numpy's stubs take no None operand, though on object arrays it compares elementwise
    return np.not_equal(slots, None)  # type: ignore[call-overload]


def fold_max(into: dict[int, int], tb: np.ndarray) -> None:
    """Fold the counters packed in tie-breaks ``tb`` into ``into[producer]`` (a maximum per
    producer); external events (producer 0) have none."""
    producers, largest = _kernels.max_seq_per_producer(tb, TIEBREAK_SHIFT)
    for p, m in zip(producers.tolist(), largest.tolist(), strict=True):
        if m > into.get(p, -1):
            into[p] = m




def max_per_producer(rows: np.ndarray, into: dict[int, int]) -> None:
    """Fold ``max(seq)`` per generated-event producer of ``rows`` into ``into``."""
    if len(rows) <= FEW_ROWS and not any(rows["producer"].tolist()):  # a few raw events: none
        return
    gen = rows["producer"] != 0
    if not np.count_nonzero(gen):
        return
    prod = rows["producer"][gen]
    seq = rows["seq"][gen]
    for p in ev.distinct(prod).tolist():
        m = int(seq[prod == p].max())
        if m > into.get(p, -1):
            into[p] = m


def layout(dtype: np.dtype, fields: tuple[tuple[str, type[np.generic]], ...]) -> np.ndarray:
    """The row width of ``dtype`` and the byte offsets of ``fields`` in it, for kernels
    that read or write rows as bytes; each field must have its little-endian type."""
    found = dtype.fields
    offsets = [dtype.itemsize]
    for name, kind in fields:
        little = np.dtype(kind).newbyteorder("<")
        if found is None or name not in found or found[name][0] != little:
            raise TypeError(f"rows read as bytes need the core field {name!r} as "
                            f"little-endian {np.dtype(kind)}, got {dtype}")
        offsets.append(found[name][1])
    return np.array(offsets, np.int64)
