"""What every rule engine returns, and how matches become composite events.

An engine (AIP, CDP on CPU, CDP on GPU) takes time-ordered batches and returns, per
batch, the :class:`Matches` it found: the chosen event of every chain element, the
aggregate values and the negation counts of each match. Turning a match into a composite
event (filters, undefined aggregates, negations, ``where``) is the same for all engines
and lives here, in :func:`compose`, so the engines differ only in how they find matches.
"""

from __future__ import annotations

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
from specula.events import TypeRegistry

ORDER_SHIFT = 40


@dataclass
class Matches:
    """The matches an engine found in one batch, one row per match.

    ``terminator[i]`` is the index, in the processed batch, of match ``i``'s terminator;
    ``elements[j]`` holds the events chosen for chain element ``j`` (structured rows with
    at least ``ts``, ``key``, ``producer``, ``seq`` and the payload fields the rule
    reads; ``elements[0]`` are the terminators); ``aggregates[i, k]`` is the value of
    ``rule.aggregates[k]`` (NaN when undefined) and ``negations[i, k]`` the number of
    events that violate ``rule.negations[k]``.
    """

    terminator: np.ndarray
    elements: tuple[np.ndarray, ...]
    aggregates: np.ndarray
    negations: np.ndarray

    def __len__(self) -> int:
        return len(self.terminator)

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


def order_key(rows: np.ndarray) -> np.ndarray:
    """Tie-breaker of equal time stamps: ``producer << 40 | seq`` (the stream position)."""
    return (rows["producer"].astype(np.int64) << ORDER_SHIFT) | rows["seq"].astype(np.int64)


def register_composite(rule: Rule, registry: TypeRegistry) -> None:
    """Register the composite type of ``rule`` with the attributes of its ``define``."""
    registry.register(rule.name, **{a: ATTRIBUTE_TYPES[k] for a, k in rule.attributes})


def compose(rule: Rule, matches: Matches) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Composite events of ``matches``: the kept match indices and the attribute columns.

    Drops matches with an undefined aggregate, a violated negation or a failed filter,
    orders the rest as the rule semantics says (terminator, then element positions),
    and evaluates ``where``. Returns ``(kept, columns)``: ``kept`` indexes ``matches``
    (so ``matches.terminator[kept]`` are the causes) and ``columns`` maps each
    attribute of ``define`` to its values.
    """
    n = len(matches)
    keep = np.ones(n, dtype=bool)
    if n:
        keep &= ~np.isnan(matches.aggregates).any(axis=1)
        keep &= (matches.negations == 0).all(axis=1)
        for comparison in rule.filters:
            keep &= _holds(rule, matches, comparison)
    kept = np.flatnonzero(keep)
    if len(kept) > 1:
        keys = [matches.terminator[kept]]
        for element in matches.elements[1:]:
            rows = element[kept]
            keys += [rows["ts"], order_key(rows)]
        kept = kept[np.lexsort(keys[::-1])]
    dtypes = {a: np.dtype(ATTRIBUTE_TYPES[k]) for a, k in rule.attributes}
    columns = {a: np.zeros(len(kept), dtype) for a, dtype in dtypes.items()}
    for attr, expr in rule.assignments:
        values = np.broadcast_to(evaluate(rule, matches, expr), (n,))
        columns[attr] = np.asarray(values[kept]).astype(dtypes[attr])
    return kept, columns


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
            return {"+": np.add, "-": np.subtract, "*": np.multiply,
                    "/": np.true_divide}[expr.op](left, right)
    raise TypeError(f"not an expression: {expr!r}")


_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


def _holds(rule: Rule, matches: Matches, comparison: Comparison) -> np.ndarray:
    left = evaluate(rule, matches, comparison.left)
    right = evaluate(rule, matches, comparison.right)
    return np.broadcast_to(_COMPARE[comparison.op](left, right), (len(matches),))
