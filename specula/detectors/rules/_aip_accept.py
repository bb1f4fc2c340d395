"""What the AIP engine computes when a terminator accepts a sequence.

:class:`~specula.detectors.rules.aip.AIPEngine` finds sequences with its automata;
once the terminator has accepted one, the whole match is known and two things are read
from its tables: the value of each aggregate or negation column for the match
(:func:`column_values`, sec. 4.3 of the paper, on the reduction kernel of the CDP
engine), and whether a *deferred* ``last`` or ``first`` step chose the event the
semantics chooses (:func:`chosen`; see :class:`~specula.detectors.rules._aip_plan.Scan`
for when a step is deferred).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specula.detectors.rules._aip_plan import Column, Scan
from specula.detectors.rules._aip_tables import Table
from specula.detectors.rules._cdp_columns import NO_INDEX, encode
from specula.detectors.rules._cdp_kernels import MAX, MIN, SUM, reduce
from specula.detectors.rules.ast import Comparison
from specula.detectors.rules.engine import aggregate_value, predicates_hold

__all__ = ["chosen", "column_values"]


def column_values(column: Column, table: Table, elements: list[np.ndarray]) -> np.ndarray:
    """The aggregate (or negation count) of ``column`` for every match, ``elements``
    holding the chosen events per chain element: the CDP kernel ``reduce`` over the
    column's events in ``[anchor.ts - window, anchor.ts)``, or after element ``after``,
    whose parameters agree with the match (values summed in stream order)."""
    stop = elements[column.anchor]["ts"].astype(np.int64)
    if column.window is not None:
        start = stop - column.window
    else:
        assert column.after is not None  # Rule checks: a window or an element after
        start = elements[column.after]["ts"].astype(np.int64) + 1
    count = len(column.params)
    bound = np.zeros((len(stop), max(1, count)), np.int64)
    for c, (_, binder, attr, is_float) in enumerate(column.params):
        bound[:, c] = encode(elements[binder][attr], is_float)
    checks = np.arange(count, dtype=np.int64)
    live = slice(table.start, table.n)
    value, found = reduce(table.cols["ts"][live], table.cols["_key"][:, live],
                          table.cols["_num"][:, live], 0 if column.value else -1, start, stop,
                          bound, checks, checks,
                          np.array([p[3] for p in column.params], np.bool_),
                          _OP[column.function], *NO_INDEX)
    return aggregate_value(column.function, value, found)


_OP = {"sum": SUM, "avg": SUM, "count": SUM, "min": MIN, "max": MAX}


def chosen(scan: Scan, store: Table, bound: tuple[tuple[str, int, str], ...],
           predicates: tuple[Comparison, ...], elements: list[np.ndarray],
           ids: np.ndarray) -> np.ndarray:
    """Whether element ``scan.k`` of each match is the event its (deferred) step chooses.

    With the whole match known, the candidates are read from the event store: events
    that matched element ``k`` (the store's ``_roles`` bits) inside the window of the
    anchor ``elements[k - 1]``, agreeing with the parameters ``bound`` by earlier
    elements (attribute here, binder, binder's attribute), satisfying ``predicates``
    and, under ``ties nonstrict``, none of the match's earlier elements (``ids[:, :k]``,
    store ids, -1 for a terminator that is not stored). ``ids[:, k]`` must be the
    latest (``last``) or earliest (``first``) of them.
    """
    k = scan.k
    times = store.cols["ts"][store.start:store.n]
    anchor = elements[k - 1]["ts"]
    lo = store.start + np.searchsorted(times, anchor - scan.window)
    hi = store.start + np.searchsorted(times, anchor, side="right" if scan.inclusive
                                       else "left")
    ok = np.zeros(len(anchor), bool)
    for m, (b, e) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        hit = (store.cols["_roles"][b:e] >> k & 1).astype(bool)
        for attr, binder, theirs in bound:
            hit &= store.cols[attr][b:e] == elements[binder][theirs][m]
        if predicates:
            hit &= predicates_hold(predicates, _values(store, k, b, e, elements, m))
        sid = store.base + np.arange(b, e)
        hit &= ~np.isin(sid, ids[m, :k])
        hits = np.flatnonzero(hit)
        if len(hits):
            ok[m] = sid[hits[-1] if scan.selection == "last" else hits[0]] == ids[m, k]
    return ok


def _values(store: Table, k: int, b: int, e: int, elements: list[np.ndarray],
            m: int) -> Callable[[int, str], np.ndarray | float]:
    """Values of a predicate: stored rows ``b:e`` for element ``k``, match ``m`` else."""

    def values(element: int, attr: str) -> np.ndarray | float:
        if element == k:
            return store.cols[attr][b:e]
        return float(elements[element][attr][m])

    return values
