"""What the AIP engine computes when a terminator accepts a sequence.

:class:`~specula.detectors.rules.aip.AIPEngine` finds sequences with its automata;
once the terminator has accepted one, the whole match is known and two things are read
from its tables: the value of each aggregate or negation column for the match
(:func:`column_values`, sec. 4.3 of the paper), and whether a *deferred* ``last`` or
``first`` step chose the event the semantics chooses (:func:`chosen`; see
:class:`~specula.detectors.rules._aip_plan.Scan` for when a step is deferred).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specula.detectors.rules.ast import Comparison
from specula.detectors.rules.engine import predicates_hold

from ._aip_plan import Column, Scan
from ._aip_tables import Table

__all__ = ["chosen", "column_values"]


def column_values(column: Column, table: Table, elements: list[np.ndarray]) -> np.ndarray:
    """The aggregate (or negation count) of ``column`` for every match, ``elements``
    holding the chosen events per chain element."""
    times = table.cols["ts"][table.start:table.n]
    end = elements[column.anchor]["ts"]
    if column.window is not None:
        first = np.searchsorted(times, end - column.window)
    else:
        first = np.searchsorted(times, elements[column.after]["ts"], side="right")
    last = np.searchsorted(times, end)
    bound = [elements[binder][attr] for _, binder, attr in column.params]
    out = np.zeros(len(end))
    for m, (b, e) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
        b, e = table.start + b, table.start + e
        keep = np.ones(max(0, e - b), bool)
        for (attr, _, _), values in zip(column.params, bound, strict=True):
            keep &= table.cols[attr][b:e] == values[m]
        out[m] = _reduce(column.function, table.cols["_value"][b:e][keep]
                         if column.value else keep)
    return out


def _reduce(function: str, values: np.ndarray) -> float:
    if function == "count":
        return float(np.count_nonzero(values))
    if function == "sum":
        return float(values.sum())
    if not len(values):
        return float("nan")
    return float({"avg": np.mean, "min": np.min, "max": np.max}[function](values))


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
