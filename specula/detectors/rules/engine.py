"""What every rule engine returns, and how matches become composite events.

An engine (AIP, CDP on CPU, CDP on GPU) takes time-ordered batches and returns, per
batch, the :class:`Matches` it found: the chosen event of every chain element, the
aggregate values and the negation counts of each match. Turning a match into a composite
event (filters, undefined aggregates, negations, ``where``) is the same for all engines
and lives here, in :func:`compose`, so the engines differ only in how they find matches.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    AggRef,
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Expr,
    Param,
    ParamRef,
    Rule,
)
from specula.events import TypeRegistry, concat_records

ORDER_SHIFT = 40


@dataclass
class Matches:
    """The matches an engine found in one batch, one row per match.

    ``terminator[i]`` is the index, in the processed batch, of match ``i``'s terminator;
    ``elements[j]`` holds the events chosen for chain element ``j`` (structured rows with
    at least ``ts``, ``key``, ``producer``, ``seq`` and the payload fields the rule
    reads; ``elements[0]`` are the terminators); ``aggregates[i, k]`` is the value of
    ``rule.aggregates[k]`` (NaN when undefined) and ``negations[i, k]`` the number of
    events that violate ``rule.negations[k]``. ``ordered`` says the engine found them in
    the order the rule semantics lists composites (terminator, then element positions,
    see :func:`compose`), so composing them needs no sort.
    """

    terminator: np.ndarray
    elements: tuple[np.ndarray, ...]
    aggregates: np.ndarray
    negations: np.ndarray
    ordered: bool = False

    def __len__(self) -> int:
        return len(self.terminator)

    def select(self, keep: np.ndarray) -> Matches:
        """The matches where ``keep`` (a mask or indices) holds; a mask keeps their
        order."""
        return Matches(self.terminator[keep], tuple(e[keep] for e in self.elements),
                       self.aggregates[keep], self.negations[keep],
                       self.ordered and keep.dtype == np.bool_)

    def within(self, rule: Rule, ticks_per_second: float | None) -> Matches:
        """The matches inside the rule's pattern window (all of them if it has none):
        the oldest element no earlier than the terminator's ``ts`` minus the window."""
        if rule.within is None or not len(self):
            return self
        oldest = self.elements[-1]["ts"]
        inside = oldest >= self.elements[0]["ts"] - rule.within.ticks(ticks_per_second)
        return self if np.count_nonzero(inside) == len(inside) else self.select(inside)

    @classmethod
    def empty(cls, rule: Rule, dtype: np.dtype) -> Matches:
        return cls(np.zeros(0, np.int64), tuple(np.zeros(0, dtype) for _ in rule.chain),
                   np.zeros((0, len(rule.aggregates))), np.zeros((0, len(rule.negations)),
                                                                   np.int64))


class Engine(Protocol):
    """The interface of AIP, CDP-CPU and CDP-GPU engines.

    Constructed as ``Engine(rule, registry, ticks_per_second=None)``.
    """

    rule: Rule

    def process(self, events: np.ndarray) -> Matches:
        """Consume a batch in stream order (other types are ignored); return its matches."""
        ...

    def snapshot(self) -> Any:
        """The engine's state as bytes (or anything whose ``==`` is a bool): equal
        snapshots stand for equal states, whatever the batching of the stream."""
        ...

    def restore(self, state: Any) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        ...

    def flush(self) -> Matches:
        """End of stream: the matches of terminators still held (``ties nonstrict``
        holds the newest time stamp's); ``terminator`` is 0 for each."""
        ...


def predicate_value(expr: Expr, values: Callable[[int, str], np.ndarray | float]
                    ) -> np.ndarray | float:
    """Value, in float64, of an expression of a predicate; ``values(element, attr)``
    gives the values of ``element.attr`` (parameters are resolved to their binder's
    attribute first, see :func:`resolve_params`)."""
    if isinstance(expr, Const):
        return float(expr.value)
    if isinstance(expr, AttrRef):
        return np.asarray(values(expr.element, expr.attr), np.float64)
    if isinstance(expr, BinOp):
        left = predicate_value(expr.left, values)
        right = predicate_value(expr.right, values)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _ARITH[expr.op](left, right)
    raise TypeError(f"not an expression of a predicate: {expr!r}")


def predicates_hold(comparisons: Sequence[Comparison],
                    values: Callable[[int, str], np.ndarray | float]) -> np.ndarray | bool:
    """Whether every comparison holds (elementwise), in float64."""
    ok: np.ndarray | bool = True
    for c in comparisons:
        ok = ok & _COMPARE[c.op](predicate_value(c.left, values),
                                 predicate_value(c.right, values))
    return ok


def resolve_params(rule: Rule, expr: Expr) -> Expr:
    """``expr`` with every ``$x`` replaced by the attribute of the element that binds it."""
    if isinstance(expr, ParamRef):
        element = rule.binder(expr.name)
        attr = next(c.attr for c in rule.chain[element].constraints
                    if c.value == Param(expr.name))
        return AttrRef(element, attr)
    if isinstance(expr, BinOp):
        return BinOp(expr.op, resolve_params(rule, expr.left), resolve_params(rule, expr.right))
    return expr


def resolved_predicates(rule: Rule, element: int) -> tuple[Comparison, ...]:
    """The predicates of chain ``element`` with parameters resolved to attributes."""
    return tuple(Comparison(resolve_params(rule, c.left), c.op, resolve_params(rule, c.right))
                 for c in rule.chain[element].predicates)


class TieHold:
    """Rows of the newest time stamp, held back until a later time stamp arrives.

    Under ``ties nonstrict`` an event may precede another of equal time stamp whatever
    their arrival order, so whatever needs *every* event up to a time stamp (a
    terminator's evaluation) waits until a later one arrives, or the stream ends.
    :meth:`take` returns the rows whose time stamp is complete, the held ones first,
    and for each the index, in the new batch, of its cause: its own index, or for a row
    held from an earlier batch the first row of the new batch with a later time stamp.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.held = np.zeros(0, dtype)

    def take(self, rows: np.ndarray, index: np.ndarray, batch_ts: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        """Hold ``rows`` (at ``index`` of a batch whose time stamps are ``batch_ts``);
        return the complete rows and their causes."""
        if not len(batch_ts):
            return self.held[:0], _NO_CAUSES
        newest = int(batch_ts[-1])
        causes = np.asarray(index, np.int64)  # indices are int64 already: no copy then
        held = self.held
        # the usual steps need no concatenation: every new row waits (its time stamp is
        # the batch's newest) and every held one is complete, or no row is held and the
        # new ones are all complete or all waiting
        low, high = _span(rows["ts"], newest)
        if not len(held):
            if low >= newest or high < newest:
                self.held = rows[len(rows):] if high < newest else rows
                return (rows, causes) if high < newest else (rows[:0], causes[:0])
        elif low >= newest and int((held_ts := held["ts"])[-1]) < newest:  # a live feed's
            self.held = rows  # step (held rows are in stream order: the last is the newest)
            cause = int(batch_ts.searchsorted(int(held_ts[0]), side="right"))
            return held, np.array([cause] * len(held), np.int64)
        if len(held):
            rows = concat_records([held, rows])
            held_cause = int(np.searchsorted(batch_ts, int(held["ts"][0]), side="right"))
            causes = np.concatenate([np.full(len(held), held_cause, np.int64), causes])
        done = rows["ts"] < newest
        n_done = np.count_nonzero(done)
        if np.count_nonzero(done[:n_done]) == n_done:  # the complete ones come first
            self.held = rows[n_done:]
            return rows[:n_done], causes[:n_done]
        self.held = np.take(rows, np.flatnonzero(~done))  # rows whole, not field by field
        return np.take(rows, np.flatnonzero(done)), causes[done]

    def take_few(self, rows: np.ndarray, ts: list[int], index: list[int],
                 batch_ts: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`take` of a few ``rows``, their time stamps ``ts``, their positions
        ``index`` and the time stamps of the batch (not empty) given as Python ints: a
        live feed's usual steps, every new row waiting and every held one complete, or
        nothing held and the new rows all waiting or all complete, are decided without
        NumPy's calls on a row or two."""
        newest = batch_ts[-1]
        held = self.held
        waiting = all(t >= newest for t in ts)
        if not len(held):
            if waiting:
                self.held = rows
                return rows[:0], _NO_CAUSES
            if all(t < newest for t in ts):
                return rows, np.array(index, np.int64)
        elif waiting:
            held_ts = held["ts"].tolist()
            if held_ts[-1] < newest:  # held rows are in stream order: the last is the newest
                self.held = rows
                cause = bisect_right(batch_ts, held_ts[0])  # the batch is in stream order
                return held, np.array([cause] * len(held_ts), np.int64)
        return self.take(rows, np.array(index, np.int64), np.array(batch_ts, np.int64))

    def flush(self) -> np.ndarray:
        """Everything held; the stream has ended."""
        rows, self.held = self.held, self.held[:0]
        return rows


_NO_CAUSES = np.zeros(0, np.int64)
_NO_CAUSES.flags.writeable = False


def _span(ts: np.ndarray, empty: int) -> tuple[int, int]:
    """The smallest and the largest of ``ts`` (``(empty, empty - 1)`` when there are
    none: both "all at least ``empty``" and "all below it" hold); a few values through
    Python ints, which cost less than NumPy's reductions on a few values."""
    if len(ts) <= 8:
        values = ts.tolist()
        return (min(values), max(values)) if values else (empty, empty - 1)
    return int(ts.min()), int(ts.max())


def aggregate_value(function: str, value: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Values of an aggregate ``function`` from what the kernels' ``reduce`` gives per
    match: the sum (or minimum, maximum) of the events' values and their ``count``.
    NaN where undefined (``Avg``, ``Min`` and ``Max`` of nothing)."""
    if function == "count":
        return count.astype(np.float64)
    if function == "sum":
        return value
    empty = count == 0
    if function == "avg":
        with np.errstate(invalid="ignore", divide="ignore"):
            value = value / count
    return np.where(empty, np.nan, value)


def float_params(rule: Rule, registry: TypeRegistry) -> set[str]:
    """The parameters of ``rule`` bound to a float attribute somewhere (chain elements,
    aggregates, negations): their values compare as float64, the others as int64."""
    patterns = [*rule.chain, *(a.pattern for a in rule.aggregates),
                *(n.pattern for n in rule.negations)]
    return {c.value.name for p in patterns for c in p.constraints
            if isinstance(c.value, Param)
            and dict(registry[p.type].fields)[c.attr].kind == "f"}


def order_key(rows: np.ndarray) -> np.ndarray:
    """Tie-breaker of equal time stamps: ``producer << 40 | seq`` (the stream position)."""
    if len(rows) <= _FEW_KEYS:  # Python ints: casting a field of a few rows costs more
        try:
            return np.array([(p << ORDER_SHIFT) | s for p, s in zip(
                rows["producer"].tolist(), rows["seq"].tolist(), strict=True)], np.int64)
        except OverflowError:  # a producer id of 2**23 or more: wrap as the arrays do
            pass
    key = rows["producer"].astype(np.int64)
    key <<= _SHIFT  # in place, by an int64: a Python int costs a type resolution per call
    key |= rows["seq"]
    return key


_SHIFT = np.int64(ORDER_SHIFT)
_FEW_KEYS = 8


def _order_key_at(rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """:func:`order_key` of the rows ``at`` (field by field: a structured array indexed
    by positions would be copied whole)."""
    return (rows["producer"][at].astype(np.int64) << ORDER_SHIFT) | rows["seq"][at]


def register_composite(rule: Rule, registry: TypeRegistry) -> None:
    """Register the composite type of ``rule`` with the attributes of its ``define``
    (``string`` ones as string fields)."""
    registry.register(rule.name, **{a: str if k == "string" else ATTRIBUTE_TYPES[k]
                                    for a, k in rule.attributes})


class Defines:
    """The attributes of a rule's ``define`` as :func:`compose` evaluates them, worked
    out once per rule: each attribute's name, dtype and expression (None: not assigned,
    zeros)."""

    __slots__ = ("attributes",)

    def __init__(self, rule: Rule) -> None:
        assigned = dict(rule.assignments)
        self.attributes = tuple((a, dtype, assigned.get(a))
                                for a, dtype in _attribute_dtypes(rule).items())


def compose(rule: Rule, matches: Matches, defines: Defines | None = None
            ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Composite events of ``matches``: the kept match indices and the attribute columns.

    Drops matches with an undefined aggregate, a violated negation or a failed filter,
    orders the rest as the rule semantics says (terminator, then element positions),
    and evaluates ``where``. Returns ``(kept, columns)``: ``kept`` indexes ``matches``
    (so ``matches.terminator[kept]`` are the causes) and ``columns`` maps each
    attribute of ``define`` to its values. ``defines``: the rule's, when the caller
    keeps them (made here otherwise).
    """
    n = len(matches)
    if n and (matches.aggregates.shape[1] or matches.negations.shape[1] or rule.filters):
        keep = ~np.isnan(matches.aggregates).any(axis=1)
        keep &= (matches.negations == 0).all(axis=1)
        for comparison in rule.filters:
            keep &= _holds(rule, matches, comparison)
        kept = np.flatnonzero(keep)
        every = len(kept) == n
    else:  # nothing to check: every match is kept
        kept, every = np.arange(n), True
    if len(kept) > 1 and not matches.ordered:
        keys = []
        for element in matches.elements:  # the terminator's position first
            keys += ([element["ts"], order_key(element)] if every
                     else [element["ts"][kept], _order_key_at(element, kept)])
        kept = kept[np.lexsort(keys[::-1])]
    attributes = (defines or Defines(rule)).attributes
    if every and matches.ordered:  # kept is every match in order: no indexing
        return kept, {a: _column(rule, matches, expr, dtype) for a, dtype, expr in attributes}
    columns = {a: (_per_match(evaluate(rule, matches, expr), n)[kept].astype(
                       dtype, copy=False)  # indexing made a copy already
                   if expr is not None else np.zeros(len(kept), dtype))
               for a, dtype, expr in attributes}
    return kept, columns


def _column(rule: Rule, matches: Matches, expr: Expr | None, dtype: np.dtype) -> np.ndarray:
    """The values of ``expr`` (None: not assigned, zeros) for every match, as a new
    array of ``dtype``; an attribute copied in one ``astype``."""
    if expr is None:
        return np.zeros(len(matches), dtype)
    return attribute_values(rule, matches, expr).astype(dtype)


def attribute_values(rule: Rule, matches: Matches, expr: Expr) -> np.ndarray:
    """The values of the ``define`` expression ``expr`` for every match, one per match,
    in the type the expression gives (an attribute: the element's field itself, not a
    copy); the composite's attribute is these cast to its type."""
    if isinstance(expr, AttrRef):
        return matches.elements[expr.element][expr.attr]
    return _per_match(evaluate(rule, matches, expr), len(matches))


_DTYPES: dict[str, np.dtype] = {}


def _attribute_dtypes(rule: Rule) -> dict[str, np.dtype]:
    """The dtype of each attribute of ``rule``'s ``define``, in order."""
    return {a: _DTYPES.get(k) or _DTYPES.setdefault(k, np.dtype(ATTRIBUTE_TYPES[k]))
            for a, k in rule.attributes}


def evaluate(rule: Rule, matches: Matches, expr: Expr) -> np.ndarray:
    """Value of ``expr`` for every match (a scalar array for constants)."""
    if isinstance(expr, Const):
        return np.asarray(expr.value)
    if isinstance(expr, AttrRef):
        return matches.elements[expr.element][expr.attr]
    if isinstance(expr, AggRef):
        return matches.aggregates[:, expr.index]
    if isinstance(expr, ParamRef):
        for k, agg in enumerate(rule.aggregates):
            if agg.name == expr.name:
                return matches.aggregates[:, k]
        element = rule.binder(expr.name)
        attr = next(c.attr for c in rule.chain[element].constraints
                    if c.value == Param(expr.name))
        return matches.elements[element][attr]
    if isinstance(expr, BinOp):
        left = evaluate(rule, matches, expr.left)
        right = evaluate(rule, matches, expr.right)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _ARITH[expr.op](left, right)
    raise TypeError(f"not an expression: {expr!r}")


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "min": np.minimum, "max": np.maximum}
_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


def _holds(rule: Rule, matches: Matches, comparison: Comparison) -> np.ndarray:
    """Whether a filter of ``where`` holds, per match."""
    left = evaluate(rule, matches, comparison.left)
    right = evaluate(rule, matches, comparison.right)
    return _per_match(_COMPARE[comparison.op](left, right), len(matches))


def _per_match(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` as one per match (a constant repeated)."""
    values = np.asarray(values)
    return values if values.shape == (n,) else np.broadcast_to(values, (n,))
