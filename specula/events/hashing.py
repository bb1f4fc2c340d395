"""The project's one hash of 64-bit integers: SplitMix64's finaliser.

It makes random numbers functions of what they are for (:func:`uniform`): the delay
model's (:mod:`specula.pipelines.delays`) and random input shedding's
(:mod:`specula.shedding.baselines`), so that a number depends only on the reading or
event it is drawn for, never on how a stream is cut. It also spreads event keys over a
detector's partitions (:func:`partition_of`), so that keys with a common stride (all
even sensor ids, say) do not all land on one instance.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["event_ids", "fold64", "mix64", "partition_of", "uniform"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective scramble of ``uint64`` values (wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def _mix(x):  # pragma: no cover - jit
    """:func:`mix64` of one ``uint64``."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def _event_ids(ts, producer, seq):  # pragma: no cover - jit
    out = np.empty(len(ts), np.uint64)
    for i in range(len(ts)):
        h = _mix(np.uint64(ts[i]) ^ np.uint64(0x5354))
        h = _mix(h ^ np.uint64(producer[i]))
        out[i] = _mix(h ^ np.uint64(seq[i]))
    return out


@njit(cache=True, nogil=True)
def _fold(columns):  # pragma: no cover - jit
    out = np.empty(columns.shape[0], np.uint64)
    for i in range(columns.shape[0]):
        h = np.uint64(0)
        for c in range(columns.shape[1]):
            h = _mix((h * np.uint64(0x9E3779B97F4A7C15)) ^ columns[i, c])
        out[i] = h
    return out


def _int64(column: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(column).astype(np.int64, copy=False))


def event_ids(rows: np.ndarray) -> np.ndarray:
    """A 64-bit identity per event (``uint64``): a hash of its ``(ts, producer, seq)``,
    which name one event (``rows`` may be a structured array or a dict of columns).
    It is ``mix64(mix64(mix64(ts ^ 0x5354) ^ producer) ^ seq)``, in one compiled pass:
    state shedding hashes every live partial match's events."""
    return _event_ids(_int64(rows["ts"]), _int64(rows["producer"]), _int64(rows["seq"]))


def fold64(columns: np.ndarray) -> np.ndarray:
    """One hash per row of a ``(rows, m)`` ``uint64`` array, folded column by column, so
    that the first ``c`` columns of a row hash to what a row of those ``c`` alone does:
    the identity of a sequence and of each of its prefixes (state shedding's partial
    matches and their ancestors).

    >>> x = np.array([[1, 2, 3]], np.uint64)
    >>> bool(fold64(x[:, :2])[0] == fold64(np.array([[1, 2]], np.uint64))[0])
    True
    """
    return _fold(np.ascontiguousarray(columns, np.uint64))


def partition_of(keys: np.ndarray | int, partitions: int) -> np.ndarray:
    """The partition (``0 .. partitions - 1``) of each key: its hash modulo ``partitions``.

    >>> partition_of(np.arange(6), 3).tolist()
    [0, 1, 1, 2, 2, 0]
    """
    hashed = mix64(np.asarray(keys, np.int64).astype(np.uint64))
    return (hashed % np.uint64(partitions)).astype(np.int64)


def uniform(seed: int, tag: int, *keys: np.ndarray | int) -> np.ndarray:
    """Uniform numbers in [0, 1), one per element of the broadcast ``keys``: a hash of
    ``(seed, tag, *keys)``; ``tag`` keeps the numbers of different purposes independent.

    >>> a = uniform(7, 1, np.arange(4))
    >>> bool(((0 <= a) & (a < 1)).all()), bool(a[2] == uniform(7, 1, 2))
    (True, True)
    """
    with np.errstate(over="ignore"):
        h = mix64(np.asarray(seed, np.int64).astype(np.uint64) + np.uint64(tag) * _GOLDEN)
        for key in keys:
            h = mix64(h ^ (np.asarray(key, np.int64).astype(np.uint64) + _GOLDEN))
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53
