"""The Numba kernel of the AIP engine: one automaton state scanned for many anchors.

:class:`~specula.detectors.rules.aip.AIPEngine` processes a batch one chain element at a
time, the deepest first (see its module): the events of element ``k - 1`` (the
*anchors*, in stream order) each scan the instances of state ``k`` and make new
instances of state ``k - 1``. The anchors of one pass do not read what the others
make, so :func:`scan` takes them all at once. It is private; the engine packs the
scan's plan into the arrays it takes (:class:`~specula.detectors.rules._aip_plan.ScanCode`)
and appends what it returns.

Arrays
------
* State ``k``, live rows ``[start, stop)`` in time order: ``times`` (int64, the time
  stamp of each instance's event of element ``k``), ``ids`` (``(n - k, capacity)``: the
  store ids of its events of elements ``k, k+1, ..., n-1``; a dead end holds -1 after
  its own event) and, copied from its event of element ``k`` so that a scan reads
  contiguous rows, ``keys`` (the parameter keys the scan checks, then those it chooses
  per value of, as in the CDP engine: int64 values, or the bits of float64 values with
  NaN as :data:`~specula.detectors.rules._cdp_kernels.NAN_KEY`) and ``values`` (the
  float64 attributes its predicates read).
* The event store: ``skey``, rows of parameter keys of the stored events (those the
  ``deeper`` checks read), store id ``i`` in column ``i - sbase``.
* Anchor ``a``: ``anchor_ts[a]``, its store id ``anchor_eid[a]`` (-1 when it is not
  stored), its parameter keys ``anchor_key[a, :]`` (first those the ``keys`` of state
  ``k`` are checked against) and the values its predicates read, ``anchor_ctx[a, :]``.

The parameter checks run as in the CDP engine (:func:`~specula.detectors.rules.
_cdp_kernels.next_fit`: a block search on the first key row), and the predicates are
the CDP engine's predicate programs (:func:`~specula.detectors.rules._cdp_kernels.holds`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specula.detectors.rules._cdp_kernels import (
    LAST,
    NAN_KEY,
    blocked,
    holds,
    lower,
    next_fit,
    pair,
)

__all__ = ["CFG", "scan"]

CFG = ("window", "selection", "inclusive", "every", "per_value", "unknown", "own0",
       "dead_ends", "out_dead")
"""The entries of a scan's ``cfg`` array, in order: its step's window; the selection
(:data:`~specula.detectors.rules._cdp_kernels.EACH`, ``LAST``, ``FIRST``); whether rows
of the anchor's time stamp are candidates (``ties nonstrict``); whether every candidate
is kept (``each``, deferred, or choice per value); whether the choice is per value of
the ``unknown`` parameters (their number: the key rows after the checked ones); whether
the anchor itself is no candidate; whether state ``k`` keeps dead ends (to be dropped);
whether an anchor that advances nothing leaves a dead end."""


@njit(cache=True, nogil=True)
def _consistent(r, a, ids, anchor_eid, anchor_key, skey, sbase, dead_ends, own, deeper
                ):  # pragma: no cover - jit
    """Whether instance ``r`` may advance with anchor ``a``: not a dead end, not holding
    the anchor already, deeper events agreeing with its parameters (rows of ``deeper``:
    instance column, store key row, anchor key column, float)."""
    if dead_ends and ids[1, r] < 0:
        return False
    eid = anchor_eid[a]
    if eid >= 0:
        for c in range(own.shape[0]):
            if ids[own[c], r] == eid:
                return False
    for d in range(deeper.shape[0]):
        key = skey[deeper[d, 1], ids[deeper[d, 0], r] - sbase]
        if key != anchor_key[a, deeper[d, 2]] or (deeper[d, 3] and key == NAN_KEY):
            return False
    return True


@njit(cache=True, nogil=True)
def _per_value(rows, q, ids, keys, first, count, last):  # pragma: no cover - jit
    """Keep, among the candidate instances ``rows[:q]`` (ascending), those of the newest
    (``last``) or oldest candidate event per value of key rows ``first`` to ``first +
    count``; return how many, compacted in place in ascending order.

    The values are looked up in an open-addressing hash table of the candidates that
    first had them, visiting the candidates newest first (``last``) or oldest first."""
    size = 16
    while size < 2 * q:
        size *= 2
    group = np.full(size, -1, np.int64)  # a slot's first candidate, or -1
    keep = np.zeros(q, np.bool_)
    for i in range(q):
        c = q - 1 - i if last else i
        h = np.uint64(0)
        for v in range(first, first + count):
            h = (h ^ np.uint64(keys[v, rows[c]])) * np.uint64(0x9E3779B97F4A7C15)
        slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(size - 1))
        while group[slot] >= 0 and not _same(keys, first, count, rows[group[slot]], rows[c]):
            slot = (slot + 1) & (size - 1)
        if group[slot] < 0:
            group[slot] = c
        keep[c] = ids[0, rows[c]] == ids[0, rows[group[slot]]]
    kept = 0
    for c in range(q):
        if keep[c]:
            rows[kept] = rows[c]
            kept += 1
    return kept


@njit(cache=True, nogil=True)
def _same(keys, first, count, x, y):  # pragma: no cover - jit
    for v in range(first, first + count):  # noqa: SIM110 - loops compile best in Numba
        if keys[v, x] != keys[v, y]:
            return False
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def scan(times, ids, keys, values, start, stop, anchor_ts, anchor_eid, anchor_key,
         anchor_ctx, skey, sbase, cfg, checks, nan, deeper, own, ops,
         consts):  # pragma: no cover - jit
    """Alg. 1 of the paper for every anchor: the instances of state ``k`` it advances.

    The candidates of anchor ``a`` are the instances with ``anchor_ts[a] - window <=
    ts < anchor_ts[a]`` (``<=`` when ``inclusive``) whose key rows ``checks`` equal the
    anchor's keys ``checks`` (``nan[c]``: a float parameter, whose NaN equals nothing),
    that pass the predicate program ``ops``/``consts`` (the instance's ``values`` and
    time stamp for its event, ``anchor_ctx[a]`` for the anchor) and, with ``own0``,
    whose event is not the anchor. A single selection takes the newest (``LAST``) or
    oldest candidate and the instances that share its event; ``every`` takes all
    candidates, or with ``per_value`` those of the newest/oldest event per value of the
    unknown parameters. The instances taken are then checked: no dead end, no column
    ``own`` holding the anchor, and the ``deeper`` checks.

    Returns ``owner`` (the anchor of each new instance, ascending), the new instances'
    ids (``(n - k + 1, count)``: the anchor's store id, then the ids of the instance it
    advanced, or -1 for the dead end that an anchor advancing nothing leaves when
    ``out_dead``), the first row inside the window of the last anchor (the expired
    rows before it are deleted, Alg. 1 line 4) and the number of candidate instances
    that passed the key checks (the scan's work, which load shedding measures).
    """
    window, selection, inclusive, every, per_value, unknown, own0, dead_ends, out_dead = (
        cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], cfg[7], cfg[8])
    m = anchor_ts.shape[0]
    owner = np.empty(max(16, m), np.int64)
    taken = np.empty(max(16, m), np.int64)
    stack = np.empty(max(1, ops.shape[0]), np.float64)
    rows = np.empty(stop - start if per_value else 0, np.int64)
    inc = -1 if selection == LAST and not every else 1
    count = 0
    visits = 0  # candidates that passed the key checks: the scan's work
    lo = start
    for a in range(m):
        lo = lower(times, lo, stop, anchor_ts[a] - window)
        hi = lower(times, lo, stop, anchor_ts[a] + 1 if inclusive else anchor_ts[a])
        before = count
        q = 0
        j, end = (hi - 1, lo - 1) if inc < 0 else (lo, hi)
        if hi <= lo or blocked(anchor_key, a, checks, nan):
            j = end
        while True:  # the candidates, in scan order
            j = next_fit(keys, j, end, inc, anchor_key, a, checks, checks)
            if j == end:
                break
            visits += 1
            if ((ops.shape[0] == 0 or holds(ops, consts, ops.shape[0], stack, times, values, j,
                                            anchor_ctx, a))
                    and not (own0 and ids[0, j] == anchor_eid[a])):
                if not every:  # every instance of the chosen event: a contiguous group
                    event = ids[0, j]
                    while j > lo and ids[0, j - 1] == event:
                        j -= 1
                    while j < hi and ids[0, j] == event:
                        if _consistent(j, a, ids, anchor_eid, anchor_key, skey, sbase,
                                       dead_ends, own, deeper):
                            owner, taken, count = pair(owner, taken, count, a, j)
                        j += 1
                    break
                if per_value:
                    rows[q] = j
                    q += 1
                elif _consistent(j, a, ids, anchor_eid, anchor_key, skey, sbase, dead_ends,
                                 own, deeper):
                    owner, taken, count = pair(owner, taken, count, a, j)
            j += inc
        if q:
            q = _per_value(rows, q, ids, keys, checks.shape[0], unknown, selection == LAST)
            for c in range(q):
                if _consistent(rows[c], a, ids, anchor_eid, anchor_key, skey, sbase,
                               dead_ends, own, deeper):
                    owner, taken, count = pair(owner, taken, count, a, rows[c])
        if count == before and out_dead:
            owner, taken, count = pair(owner, taken, count, a, -1)
    width = ids.shape[0]
    made = np.empty((width + 1, count), np.int64)
    for i in range(count):
        made[0, i] = anchor_eid[owner[i]]
        r = taken[i]
        for c in range(width):
            made[c + 1, i] = ids[c, r] if r >= 0 else -1
    return owner[:count].copy(), made, lo, visits
