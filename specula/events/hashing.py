"""The project's one hash of 64-bit integers: SplitMix64's finaliser.

It makes the delay model's random numbers functions of what they are for (see
:mod:`specula.pipelines.delays`) and spreads event keys over a detector's partitions
(:func:`partition_of`), so that keys with a common stride (all even sensor ids, say)
do not all land on one instance.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mix64", "partition_of"]


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective scramble of ``uint64`` values (wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def partition_of(keys: np.ndarray | int, partitions: int) -> np.ndarray:
    """The partition (``0 .. partitions - 1``) of each key: its hash modulo ``partitions``.

    >>> partition_of(np.arange(6), 3).tolist()
    [0, 1, 1, 2, 2, 0]
    """
    hashed = mix64(np.asarray(keys, np.int64).astype(np.uint64))
    return (hashed % np.uint64(partitions)).astype(np.int64)
