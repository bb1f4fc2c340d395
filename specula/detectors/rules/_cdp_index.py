"""Equality index of a CDP column: each event linked to the previous one with its key.

A step ``B(att=$x)`` looks, for every partial sequence, for the events of its window
whose ``att`` equals the sequence's ``x``. Scanning the window costs its length for each
sequence, however few events hold ``x``; with many distinct values (R5 of Cugola &
Margara: 50,000 values, windows of 100,000 ticks) almost every scan finds nothing. The
index makes the lookup cost the number of events with the key instead:

* ``link[j]``: the position of the previous event of the column with the same key as
  event ``j`` (-1 if none);
* a hash table (open addressing, linear probing; ``slot_key``, ``slot_pos``, with
  ``slot_pos == -1`` for an empty slot) from each key to the position of the newest
  event holding it.

Positions are *absolute*: the column's ``n``-th event ever appended has position ``n``,
so dropping old events and compacting the arrays change no link. A chain is followed
until it falls below the first live position. A slot whose newest position is below the
first live position holds a *dead* key (all its events were dropped): a new key takes
the first dead slot on its probe path, so a stream over a bounded set of keys never
fills the table. When the table is half full anyway, the column rebuilds it from the
live keys (:func:`rebuild`), at most a quarter full: their number is that of the live
events whose link falls below the first live position (the oldest live event of each
key). No key is ever removed, so probing stays correct.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["append", "head", "rebuild"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def _slot(slot_key, key):  # pragma: no cover - jit
    """Slot of ``key`` in a table of ``len(slot_key)`` (a power of two) slots."""
    mask = slot_key.shape[0] - 1
    h = np.uint64(key) * _GOLDEN
    return np.int64(h >> np.uint64(32)) & mask


@njit(cache=True, nogil=True)
def _find(slot_key, slot_pos, key):  # pragma: no cover - jit
    """Slot holding ``key``, or the empty slot where it would go."""
    mask = slot_key.shape[0] - 1
    h = _slot(slot_key, key)
    while slot_pos[h] != -1 and slot_key[h] != key:
        h = (h + 1) & mask
    return h


@njit(cache=True, nogil=True)
def append(keys, first, live, link, slot_key, slot_pos, used):  # pragma: no cover - jit
    """Index events of absolute positions ``first, first + 1, ...`` with ``keys``:
    fill ``link`` (one entry per key) and point the table at them. ``live`` is the
    first live position: a new key takes the first dead slot on its probe path, else an
    empty one. Returns the number of non-empty slots, or -1 as soon as the table is
    half full (the caller rebuilds it and appends again)."""
    mask = slot_key.shape[0] - 1
    half = slot_key.shape[0] >> 1
    for i in range(keys.shape[0]):
        key = keys[i]
        h = _slot(slot_key, key)
        dead = -1
        while slot_pos[h] != -1 and slot_key[h] != key:
            if dead < 0 and slot_pos[h] < live:
                dead = h
            h = (h + 1) & mask
        if slot_pos[h] == -1:  # a new key
            if dead >= 0:
                h = dead
            elif used >= half:
                return -1
            else:
                used += 1
            slot_key[h] = key
            slot_pos[h] = -1
        link[i] = slot_pos[h]
        slot_pos[h] = first + i
    return used


def rebuild(keys: np.ndarray, first: int, capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A table of ``capacity`` slots (a power of two, at least twice the distinct
    ``keys``) for the live events ``keys`` (absolute positions from ``first``), and the
    number of slots it uses. Their links stand: only the table is made anew."""
    slot_key = np.zeros(capacity, np.int64)
    slot_pos = np.full(capacity, -1, np.int64)
    used = append(keys, first, first, np.empty(len(keys), np.int64), slot_key, slot_pos, 0)
    return slot_key, slot_pos, used


@njit(cache=True, nogil=True)
def head(slot_key, slot_pos, link, off, key, ts, high):  # pragma: no cover - jit
    """Live index (absolute position minus ``off``) of the newest event with ``key`` and
    a time stamp below ``high``; negative if there is none among the live events.

    ``link`` and ``ts`` are the live parts of the column's links (absolute positions)
    and time stamps."""
    if slot_key.shape[0] == 0:
        return -1
    p = slot_pos[_find(slot_key, slot_pos, key)]
    if p < 0:
        return -1
    j = p - off
    while j >= 0 and ts[j] >= high:
        j = link[j] - off
    return j
