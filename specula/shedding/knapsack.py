"""The shedding set of the hybrid paper (sec. IV-B, V-C): a knapsack problem.

Choose a set D of items (classes of partial matches) that minimises the contribution
lost, sum of ``values[D]``, subject to saving at least the consumption asked for, sum
of ``weights[D]`` >= ``need`` (eq. 8; the paper writes ``>``, which with rounded weights
is ``>=`` one unit more). It is a knapsack on the complement: keep the items of most
value whose weights fit in ``total - need``.

* :func:`min_cover_dp`: exact dynamic programming over integer weights (Pferschy 1999),
  O(items x need), compiled; the paper uses it for tens of classes (tens of µs here
  for 80 items at 1,000 units).
* :func:`min_cover_greedy`: beyond that, the paper's greedy order: items by the ratio of
  contribution to consumption, lowest first, until the need is covered.
* :func:`shedding_set`: either, on real-valued weights scaled to ``resolution`` units.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["min_cover_dp", "min_cover_greedy", "shedding_set"]


def min_cover_dp(values: np.ndarray, weights: np.ndarray, need: int) -> np.ndarray:
    """The exact minimum-value set of items with integer ``weights`` summing to at
    least ``need``: a boolean mask (every item when even all of them fall short).

    >>> min_cover_dp(np.array([3.0, 1.0, 1.0]), np.array([5, 3, 3]), 5).tolist()
    [False, True, True]
    """
    values = np.asarray(values, np.float64)
    weights = np.maximum(np.asarray(weights, np.int64), 0)
    if need <= 0:
        return np.zeros(len(values), bool)
    if weights.sum() < need:
        return np.ones(len(values), bool)
    return _min_cover(values, weights, int(need))


@njit(cache=True, nogil=True)
def _min_cover(values, weights, need):  # pragma: no cover - jit
    """The DP of :func:`min_cover_dp` (``0 < need <= weights.sum()``, weights >= 0)."""
    m = len(values)
    # best[j]: the least value of a set covering at least j units (capped at need)
    best = np.full(need + 1, np.inf)
    best[0] = 0.0
    took = np.zeros((m, need + 1), np.bool_)
    for i in range(m):
        w = weights[i]
        for j in range(need, -1, -1):  # downwards: best[j - w] is still the row before
            with_i = best[max(j - w, 0)] + values[i]
            if with_i < best[j]:
                took[i, j] = True
                best[j] = with_i
    chosen = np.zeros(m, np.bool_)
    left = need
    for i in range(m - 1, -1, -1):  # walk the table back from the full need
        if left > 0 and took[i, left]:
            chosen[i] = True
            left = max(left - weights[i], 0)
    return chosen


def min_cover_greedy(values: np.ndarray, weights: np.ndarray, need: float) -> np.ndarray:
    """Items by value per weight, lowest first (ties: heavier first, then index), until
    their weights reach ``need``: a boolean mask.

    >>> min_cover_greedy(np.array([3.0, 1.0, 0.0]), np.array([5.0, 3.0, 1.0]), 4).tolist()
    [False, True, True]
    """
    values = np.asarray(values, np.float64)
    weights = np.asarray(weights, np.float64)
    chosen = np.zeros(len(values), bool)
    if need <= 0:
        return chosen
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(weights > 0, values / np.where(weights > 0, weights, 1), np.inf)
    order = np.lexsort((np.arange(len(values)), -weights, ratio))
    # the weight covered before each item, summed in that order: take items until it
    # reaches ``need``
    before = np.concatenate([[0.0], np.cumsum(weights[order])[:-1]])
    reached = before >= need
    chosen[order[:int(np.argmax(reached)) if reached.any() else len(order)]] = True
    return chosen


def shedding_set(values: np.ndarray, weights: np.ndarray, need: float, *,
                 dp_limit: int = 128, resolution: int = 1000) -> np.ndarray:
    """The shedding set for real-valued ``weights`` (relative consumption, summing to 1)
    and ``values`` (relative contribution): exact on weights rounded to
    ``1 / resolution`` of the total up to ``dp_limit`` items, greedy beyond.

    >>> shedding_set(np.array([0.5, 0.0, 0.5]), np.array([0.2, 0.3, 0.5]), 0.25).tolist()
    [False, True, False]
    """
    values = np.asarray(values, np.float64)
    weights = np.asarray(weights, np.float64)
    total = weights.sum()
    if need <= 0 or total <= 0:
        return np.zeros(len(values), bool)
    if len(values) > dp_limit:
        return min_cover_greedy(values, weights, need * total)
    units = np.floor(weights / total * resolution).astype(np.int64)
    return min_cover_dp(values, units, min(resolution, math.ceil(need * resolution)))
