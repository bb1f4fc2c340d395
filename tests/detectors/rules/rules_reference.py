"""Brute-force reference for TESLA-style rules, random streams, and a catalogue of rules.

:func:`reference` follows the semantics written in :mod:`specula.detectors.rules.ast`
line by line with lists and loops: for every terminator it enumerates the chain choices,
scans all earlier events for aggregates and negations, and builds the composite tuples
itself. It shares no code with the engines or with :func:`~specula.detectors.rules.engine.compose`.

:func:`random_events` and :func:`random_batches` make valid, time-ordered streams with
small value ranges (so parameters match often) and equal time stamps; :data:`CASES`
holds the paper's rules R1-R5 and variants covering every selection policy in every
position, every aggregate function, parameters, negations and filters.

Run as a script it checks an engine against the reference and exits non-zero with a
diff on mismatch; the GPU engine is checked that way, in a process started with
``NUMBA_ENABLE_CUDASIM=1``::

    NUMBA_ENABLE_CUDASIM=1 python tests/detectors/rules/rules_reference.py --engine gpu --n 60

On a GPU, ``--min-gpu-work 0`` runs every step on the device (``make gpu-check``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import permutations, product
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":  # run as a script: make the package importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    AggRef,
    AttrRef,
    BinOp,
    Const,
    Expr,
    Fold,
    Param,
    ParamRef,
    Pattern,
    Rule,
)
from specula.detectors.rules.engine import compose
from specula.detectors.rules.expand import Composites, Union
from specula.detectors.rules.parser import parse_rule
from specula.events import TypeRegistry

ORDER_SHIFT = 40

# ----------------------------------------------------------------------- reference

_TESTS = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def reference(rule: Rule, registry: TypeRegistry, events: np.ndarray,
              ticks_per_second: float | None = None) -> list[tuple]:
    """The composite events of ``rule`` over ``events``, as ``(ts, key, *attributes)``.

    ``events`` may be in any order; they are taken in stream order (ascending
    ``(ts, producer << 40 | seq)``). Attribute values are in the order of ``define``,
    cast to the attribute's dtype and returned as Python scalars.
    """
    everything = _rows(registry, events)
    out: list[tuple] = []
    consumed: set[tuple] = set()  # positions of the events consumed so far
    pending: set[tuple] = set()  # consumed by the terminators of time stamp pending_ts
    pending_ts = None
    for terminator in everything:
        if pending_ts is not None and terminator["ts"] > pending_ts:
            consumed |= pending  # consumption takes effect from the next time stamp
            pending, pending_ts = set(), None
        if terminator["_pos"] in consumed:
            continue
        bound = _match(terminator, rule.terminator, {})
        if bound is None or not _predicates_hold(rule.terminator, [terminator], bound):
            continue
        rows = [r for r in everything if r["_pos"] not in consumed]
        if rule.partition:  # under partition by: the terminator's partition only
            rows = [r for r in rows if r[rule.partition] == terminator[rule.partition]]
        found = []
        for elements, params in _sequences(rule, rows, [terminator], bound, ticks_per_second):
            composite = _composite(rule, rows, elements, params, ticks_per_second)
            if composite is not None:
                positions = [e["_pos"] for x in elements
                             for e in (x if isinstance(x, tuple) else (x,))]
                found.append((_order(rule, elements), composite,
                              (min(positions), max(positions), elements)))
                for i in rule.consuming:
                    chosen = elements[i]
                    pending |= {e["_pos"] for e in (chosen if isinstance(chosen, tuple)
                                                    else (chosen,))}
                    pending_ts = terminator["ts"]
        found.sort(key=lambda item: item[0])
        found = _greedy(rule, found)
        out += [(composite, marks) for _, composite, marks in found]
    if rule.skip.strategy == "none":
        return [composite for composite, _ in out]
    return _skipped(rule, out)


def _greedy(rule: Rule, found: list[tuple]) -> list[tuple]:
    """The composites of one terminator that a greedy (reluctant) closure keeps: of those
    that choose the same events for every other element, the ones whose items no
    other's strictly contain (are strictly contained in)."""
    greed = next(((i, s.greed) for i, s in enumerate(rule.steps, start=1)
                  if s.greed != "all"), None)
    if greed is None:
        return found
    element, mode = greed

    def positions(chosen: Any) -> tuple:
        return tuple(e["_pos"] for e in (chosen if isinstance(chosen, tuple) else (chosen,)))

    def key(item: tuple) -> tuple:
        elements = item[2][2]
        return tuple(positions(x) for i, x in enumerate(elements) if i != element)

    def items(item: tuple) -> frozenset:
        return frozenset(positions(item[2][2][element]))

    return [a for a in found if not any(
        key(a) == key(b) and (items(a) < items(b) if mode == "greedy" else items(b) < items(a))
        for b in found)]


def _skipped(rule: Rule, matches: list[tuple[tuple, tuple]]) -> list[tuple]:
    """The matches (in output order, with their events) that the after-match skip
    strategy keeps, in the order FlinkCEP releases them: by start, end, output order; a
    kept match discards the later starts up to its start (to next), its end (past last
    event), or before the earliest or latest event of the named element."""
    walk = sorted(range(len(matches)), key=lambda i: (matches[i][1][0], matches[i][1][1], i))
    kept, bound = [], None
    for i in walk:
        composite, (start, end, events) = matches[i]
        if bound is not None and (start < bound or (start == bound and rule.skip.strategy in (
                "to_next", "past_last_event"))):
            continue
        kept.append(composite)
        if rule.skip.strategy == "to_next":
            point = start
        elif rule.skip.strategy == "past_last_event":
            point = end
        else:
            chosen = events[rule.skip.element]
            chosen = chosen if isinstance(chosen, tuple) else (chosen,)
            if not chosen:
                continue
            point = (chosen[0] if rule.skip.strategy == "to_first" else chosen[-1])["_pos"]
        bound = point if bound is None else max(bound, point)
    return kept


def _order(rule: Rule, elements: list) -> tuple:
    """Where a match comes among those of its terminator: its expansion (per element,
    the closure's length and each item's alternative, latest item first, but one for
    every alternative of a last/first disjunction; per
    conjunction, the rank among the permutations of its members of their order in time,
    equal time stamps in the order written), then the positions of the elements after
    the terminator in that order (a closure's items latest first)."""
    expansion, positions = [], []
    spans = _conjunctions(rule)
    i = 0
    while i < len(rule.chain):
        if i in spans:
            members = range(i, spans[i])
            order = tuple(sorted(members, key=lambda m: (-elements[m]["ts"], m)))
            expansion.append((list(permutations(members)).index(order),))
            positions += [elements[m]["_pos"] for m in order]
            i = spans[i]
            continue
        pattern, chosen = rule.chain[i], elements[i]
        items = list(reversed(chosen)) if isinstance(chosen, tuple) else [chosen]
        # a last/first disjunction is one expansion: its alternatives are not ordered
        merged = i and rule.steps[i - 1].selection != "each"
        expansion.append((len(items), *(0 if merged else pattern.types.index(e["_type"])
                                         for e in items)))
        positions += [e["_pos"] for e in items] if i else []
        i += 1
    return tuple(expansion), positions


def _conjunctions(rule: Rule) -> dict[int, int]:
    """The conjunctions of ``rule``: chain index of the first member -> one past the last."""
    spans: dict[int, int] = {}
    for i, step in enumerate(rule.steps, start=1):
        previous = rule.steps[i - 2].group if i > 1 else ""
        if step.group and step.group == previous:
            spans[next(s for s, e in spans.items() if e == i)] = i + 1
        elif step.group:
            spans[i] = i + 1
    return spans


def _rows(registry: TypeRegistry, events: np.ndarray) -> list[dict[str, Any]]:
    """The events as dicts in stream order, string fields as their texts."""
    strings = {f for t in registry.types() for f in t.strings}
    rows = []
    for row in events:
        record = {name: registry.strings.text(row[name]) if name in strings else
                  row[name].item() for name in events.dtype.names}
        record["_type"] = registry.name(int(row["type"]))
        record["_pos"] = (record["ts"], (record["producer"] << ORDER_SHIFT) | record["seq"])
        rows.append(record)
    rows.sort(key=lambda r: r["_pos"])
    return rows


def _match(event: dict[str, Any], pattern: Pattern,
           bound: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters after ``event`` matches ``pattern`` (or, for a disjunction, the
    alternative of its type) given ``bound``; None if not."""
    pattern = next((p for p in pattern.options() if p.type == event["_type"]), None)
    if pattern is None:
        return None
    params = dict(bound)
    for c in pattern.constraints:
        value = event[c.attr]
        if isinstance(c.value, Param):
            if c.value.name not in params:
                params[c.value.name] = value
            elif value != params[c.value.name]:
                return None
        elif not _TESTS[c.op](value, c.value):
            return None
    return params


def _sequences(rule: Rule, rows: list[dict[str, Any]], elements: list[dict[str, Any]],
               params: dict[str, Any], tps: float | None) -> Iterator[tuple[list, dict]]:
    """Every chain choice extending ``elements`` (element 0 is the terminator)."""
    if len(elements) == len(rule.chain):
        yield elements, params
        return
    step = rule.steps[len(elements) - 1]
    # the step follows the earliest event chosen so far: the latest element's, a
    # closure's first item, a conjunction's earliest member
    anchor = min((e for x in elements for e in (x if isinstance(x, tuple) else (x,))),
                 key=lambda e: e["ts"])
    if step.group:
        end = _conjunctions(rule)[len(elements)]
        chooser = _latest if step.selection == "last" else _members
        for members, extended in chooser(rule, rows, elements, params, [], end, anchor,
                                         tps):
            yield from _sequences(rule, rows, [*elements, *members], extended, tps)
        return
    if step.times is None:
        for event, extended in _candidates(rule, rows, elements, params, step, anchor, tps):
            yield from _sequences(rule, rows, [*elements, event], extended, tps)
        return
    for items, extended in _closures(rule, rows, elements, params, step, (), anchor, tps):
        yield from _sequences(rule, rows, [*elements, items], extended, tps)


def _members(rule: Rule, rows: list[dict[str, Any]], elements: list,
             params: dict[str, Any], members: list, end: int, anchor: dict[str, Any],
             tps: float | None) -> Iterator[tuple[list, dict]]:
    """Every choice of a conjunction's members (chain elements ``len(elements)`` to
    ``end - 1``, in the order written) extending ``members``: each a candidate of its
    step before ``anchor`` (distinct events under ``ties nonstrict``, distinct time
    stamps under ``ties strict``), in any order in time."""
    if len(elements) + len(members) == end:
        if rule.ties == "nonstrict" or len({m["ts"] for m in members}) == len(members):
            yield members, params
        return
    step = rule.steps[len(elements) + len(members) - 1]
    for event, extended in _candidates(rule, rows, [*elements, *members], params, step,
                                       anchor, tps):
        yield from _members(rule, rows, elements, extended, [*members, event], end, anchor,
                            tps)


def _latest(rule: Rule, rows: list[dict[str, Any]], elements: list,
            params: dict[str, Any], members: list, end: int, anchor: dict[str, Any],
            tps: float | None) -> Iterator[tuple[list, dict]]:
    """The choices of a ``last`` conjunction (chain elements ``len(elements)`` to ``end -
    1``), read literally: for each order of the members in time (latest first), the
    first takes its latest candidate, each next one its latest candidate before the one
    before it, provided none of its candidates lies after that one; in the order
    written. (Its members bind no parameter: their candidates do not depend on it.)"""
    start = len(elements)
    every = {m: [e for e, _ in _candidates(rule, rows, elements, params,
                                           replace(rule.steps[m - 1], selection="each"),
                                           anchor, tps)]
             for m in range(start, end)}
    for order in permutations(range(start, end)):
        chosen: dict[int, dict[str, Any]] = {}
        previous = None
        for m in order:
            if previous is not None and any(e["ts"] > previous["ts"] for e in every[m]):
                break  # not its latest candidate
            before = [e for e in every[m] if previous is None or e["ts"] < previous["ts"]]
            if not before:
                break
            chosen[m] = previous = before[-1]
        else:
            yield [chosen[m] for m in range(start, end)], params


def _closures(rule: Rule, rows: list[dict[str, Any]], elements: list, params: dict[str, Any],
              step: Any, items: tuple, anchor: dict[str, Any], tps: float | None
              ) -> Iterator[tuple[tuple, dict]]:
    """Every closure of ``step`` extending ``items`` (in time order) back in time; the
    window is measured from ``anchor``, the element the closure follows."""
    lo, hi = step.times
    if step.until is not None and len(items) > 1 and any(  # the loop ended at an X
            items[0]["ts"] < e["ts"] < items[-1]["ts"] and _match(e, step.until, params)
            is not None for e in rows):
        return
    if step.runs and len(items) > 1 and any(  # a candidate between the first two items
            items[0]["ts"] < e["ts"] < items[1]["ts"] and _match(e, step.pattern, params)
            is not None for e in rows):
        return
    if len(items) >= lo:
        yield items, params
    if len(items) == hi:
        return
    after = items[0] if items else anchor
    for event, extended in _candidates(rule, rows, elements, params, step, after, tps,
                                       anchor=anchor, items=items):
        yield from _closures(rule, rows, elements, extended, step, (event, *items), anchor,
                             tps)


def _candidates(rule: Rule, rows: list[dict[str, Any]], elements: list,
                params: dict[str, Any], step: Any, after: dict[str, Any], tps: float | None,
                anchor: dict[str, Any] | None = None, items: tuple = ()) -> list[tuple]:
    """The events a step (or a closure's next item) chooses before ``after``: in the
    window before ``anchor`` (``after`` itself for a plain step), matching, selected."""
    anchor = after if anchor is None else anchor
    window = step.within.ticks(tps)
    chosen = [e for x in elements for e in (x if isinstance(x, tuple) else (x,))] + list(items)
    candidates = []
    for event in rows:  # rows are in stream order
        if rule.ties == "strict":
            inside = anchor["ts"] - window <= event["ts"] < after["ts"]
        else:
            inside = (anchor["ts"] - window <= event["ts"] <= after["ts"]
                      and all(event is not e for e in chosen))
        if inside:
            extended = _match(event, step.pattern, params)
            if extended is not None and _predicates_hold(
                    step.pattern, [*elements, event], extended, items[0] if items else None):
                candidates.append((event, extended))
    if step.contiguity == "strict":  # nothing the rule reads strictly between
        candidates = [(e, p) for e, p in candidates if not any(
            x["_type"] in rule.input_types and e["ts"] < x["ts"] < after["ts"] for x in rows)]
    if step.selection == "last":
        return candidates[-1:]
    if step.selection == "first":
        return candidates[:1]
    return candidates


def _earliest(element: Any) -> dict[str, Any]:
    """The event of a plain element; the first item of a closure."""
    return element[0] if isinstance(element, tuple) else element


def _predicates_hold(pattern: Pattern, elements: list, params: dict[str, Any],
                     following: dict[str, Any] | None = None) -> bool:
    """Whether the predicates of ``pattern`` (of the alternative of its type) hold for
    its event, ``elements[-1]``, computed in float64 as the semantics says; for a
    closure's item, ``following`` is the next item (None for the latest: comparisons
    that read ``bs[i+1]`` then hold)."""
    own = elements[-1]
    pattern = next(p for p in pattern.options() if p.type == own["_type"])
    for p in pattern.predicates:
        try:
            left = _real(p.left, elements, params, following)
            right = _real(p.right, elements, params, following)
        except LookupError:
            continue
        if not _TESTS[p.op](left, right):
            return False
    return True


def _real(expr: Expr, elements: list, params: dict[str, Any],
          following: dict[str, Any] | None = None) -> float | str:
    """A predicate's side: a float64, or a text (strings are compared as texts)."""
    if isinstance(expr, Const):
        return _number(expr.value)
    if isinstance(expr, ParamRef):
        return _number(params[expr.name])
    if isinstance(expr, AttrRef):
        if expr.item == "next":
            if following is None:
                raise LookupError("the latest item has no next one")
            return _number(following[expr.attr])
        return _number(_item(elements[expr.element], expr.item)[expr.attr])
    assert isinstance(expr, BinOp)
    return _arith(expr.op, _real(expr.left, elements, params, following),
                  _real(expr.right, elements, params, following))


def _number(value: Any) -> float | str:
    return value if isinstance(value, str) else float(value)


def _item(element: Any, item: str) -> dict[str, Any]:
    """An element's event: a closure's ``first`` or ``last`` item."""
    if not isinstance(element, tuple):
        return element
    return element[-1] if item == "last" else element[0]


def _arith(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:  # IEEE division, as NumPy does it
        return math.nan if left == 0 or math.isnan(left) else math.copysign(math.inf, left)
    return left / right


def _composite(rule: Rule, rows: list[dict[str, Any]], elements: list[dict[str, Any]],
               params: dict[str, Any], tps: float | None) -> tuple | None:
    """The composite tuple of one match, or None if the pattern window, an aggregate, a
    negation or a filter drops it."""
    oldest = min(e["ts"] for x in elements for e in (x if isinstance(x, tuple) else (x,)))
    if rule.within is not None and oldest < elements[0]["ts"] - rule.within.ticks(tps):
        return None
    aggregates = []
    for agg in rule.aggregates:
        end = _earliest(elements[agg.anchor])["ts"]
        start = end - agg.within.ticks(tps)
        values = [1.0 if agg.attr is None else float(e[agg.attr]) for e in rows
                  if start <= e["ts"] < end and _match(e, agg.pattern, params) is not None]
        aggregates.append(_aggregate(agg.function, values))
    if any(math.isnan(v) for v in aggregates):
        return None
    for neg in rule.negations:
        end = _earliest(elements[neg.anchor])["ts"]
        for e in rows:
            if neg.after is not None:
                inside = _item(elements[neg.after], "last")["ts"] < e["ts"] < end
            else:
                inside = end - neg.within.ticks(tps) <= e["ts"] < end
            if inside and _match(e, neg.pattern, params) is not None:
                return None
    names = {agg.name: value for agg, value in zip(rule.aggregates, aggregates, strict=True)}

    def value(expr: Expr) -> Any:
        return _evaluate(expr, elements, params, names, aggregates)

    for f in rule.filters:
        if not _TESTS[f.op](value(f.left), value(f.right)):
            return None
    assigned = {attr: value(expr) for attr, expr in rule.assignments}
    terminator = elements[0]
    attributes = [assigned.get(attr, "") if kind == "string" else
                  np.array(assigned.get(attr, 0)).astype(ATTRIBUTE_TYPES[kind]).item()
                  for attr, kind in rule.attributes]
    return (terminator["ts"], terminator["key"], *attributes)


def _aggregate(function: str, values: list[float], fold: bool = False) -> float:
    """A window aggregate; or, with ``fold``, a fold over a closure's items (NaN
    propagates through Min and Max)."""
    if function == "count":
        return float(len(values))
    if function == "sum":
        return math.fsum(values)
    if not values:
        return math.nan
    if function == "avg":
        return math.fsum(values) / len(values)
    if fold and any(math.isnan(v) for v in values):
        return math.nan
    return min(values) if function == "min" else max(values)


def _evaluate(expr: Expr, elements: list[dict[str, Any]], params: dict[str, Any],
              names: dict[str, float], aggregates: list[float]) -> Any:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, ParamRef):
        return names[expr.name] if expr.name in names else params[expr.name]
    if isinstance(expr, AttrRef):
        return _item(elements[expr.element], expr.item)[expr.attr]
    if isinstance(expr, AggRef):
        return aggregates[expr.index]
    if isinstance(expr, Fold):
        items = elements[expr.element]
        return _aggregate(expr.function, [1.0 if expr.attr is None else float(e[expr.attr])
                                          for e in items], fold=True)
    assert isinstance(expr, BinOp)
    return _arith(expr.op, _evaluate(expr.left, elements, params, names, aggregates),
                  _evaluate(expr.right, elements, params, names, aggregates))


# ------------------------------------------------------------------------ streams


def random_events(registry: TypeRegistry, types: Sequence[str], n: int, *, seed: int,
                  n_values: int = 3, max_gap: int = 2,
                  ranges: dict[str, tuple[int, int]] | None = None, producers: int = 3,
                  keys: int = 2, start: int = 0, serial: str | None = None) -> np.ndarray:
    """A time-ordered batch of ``n`` random events of ``types``.

    Time stamps grow by 0..``max_gap`` (so some are equal); ``producer`` is drawn from
    ``range(producers)`` with a per-producer ``seq`` counter, so ``(producer, seq)`` are
    distinct and equal time stamps are broken by ``producer << 40 | seq``. Payload
    values are integers in ``[0, n_values)`` unless ``ranges`` gives ``(low, high)`` for
    a field (high excluded); float fields take halves of such integers, string fields
    the texts ``WORDS[low:high]``. The field named
    ``serial``, if given, numbers the events 0, 1, ... in stream order, so that a rule
    can name the events it chose. The batch has the dtype of ``types``; the rows are
    sorted in stream order.
    """
    rng = np.random.default_rng(seed)
    ranges = ranges or {}
    events = np.zeros(n, registry.dtype(types))
    kinds = rng.integers(len(types), size=n)
    events["ts"] = start + np.cumsum(rng.integers(0, max_gap + 1, size=n))
    events["key"] = rng.integers(keys, size=n)
    events["producer"] = rng.integers(producers, size=n)
    counters = np.zeros(producers, np.int64)
    for i, producer in enumerate(events["producer"]):
        events["seq"][i] = counters[producer]
        counters[producer] += 1
    for k, name in enumerate(types):
        etype = registry[name]
        rows = np.flatnonzero(kinds == k)
        events["type"][rows] = etype.id
        for attr, dtype in etype.fields:
            low, high = ranges.get(attr, (0, n_values))
            if attr in etype.strings:  # texts of WORDS[low:high]
                words = rng.integers(low, high, size=len(rows))
                values = registry.strings.codes(WORDS[w] for w in words)
            elif dtype.kind == "f":
                values = rng.integers(2 * low, 2 * high - 1, size=len(rows)) / 2
            else:
                values = rng.integers(low, high, size=len(rows))
            events[attr][rows] = values
    order_key = (events["producer"].astype(np.int64) << ORDER_SHIFT) | events["seq"]
    events = events[np.lexsort((order_key, events["ts"]))]
    if serial is not None:
        events[serial] = np.arange(n)
    return events


WORDS = ("Area1", "Area2", "AAPL", "AMZN", "", 'a"b\\c', "naïve", "AVID")
"""The texts of random string fields, among them the empty one, a quote, a backslash
and a non-ASCII letter."""


def random_batches(events: np.ndarray, *, seed: int, max_size: int = 16) -> list[np.ndarray]:
    """Split ``events`` into consecutive batches of random sizes 0..``max_size``."""
    rng = np.random.default_rng(seed)
    batches, start = [], 0
    while start < len(events):
        size = int(rng.integers(0, max_size + 1))
        batches.append(events[start:start + size])
        start += size
    return batches


# ---------------------------------------------------------------------- catalogue


def fire_registry() -> TypeRegistry:
    """Smoke, Temp and Rain sensor readings (rules R1-R3)."""
    registry = TypeRegistry()
    registry.register("Smoke", area=str)
    registry.register("Temp", area=str, value="f8")
    registry.register("Rain", area=str)
    return registry


def trips_registry() -> TypeRegistry:
    """Bike trips: the bike, the stations where a trip starts and ends."""
    registry = TypeRegistry()
    registry.register("Trip", bike="i8", start="i8", end="i8")
    return registry


def quotes_registry() -> TypeRegistry:
    """Quotes Q and trades T of a symbol on an exchange, news N about a symbol: string
    fields ``sym`` and ``ex``, a price ``px`` and a serial number ``n``."""
    registry = TypeRegistry()
    registry.register("Q", sym=str, ex=str, px="i8", n="i8")
    registry.register("T", sym=str, ex=str, px="i8", n="i8")
    registry.register("N", sym=str, n="i8")
    return registry


def abc_registry() -> TypeRegistry:
    """Types A, B, C, D and N, all with p, v, att, value and a serial number n."""
    registry = TypeRegistry()
    for name in "ABCDN":
        registry.register(name, p="i8", v="i8", att="i8", value="f8", n="i8")
    return registry


@dataclass(frozen=True)
class Case:
    """A rule text, the registry it reads, and the streams that exercise it."""

    name: str
    text: str
    registry: Callable[[], TypeRegistry]
    types: tuple[str, ...]
    ticks_per_second: float | None = None
    stream: dict[str, Any] = field(default_factory=dict)

    def rule(self) -> Rule:
        return parse_rule(self.text)

    def events(self, registry: TypeRegistry, n: int, seed: int) -> np.ndarray:
        return random_events(registry, self.types, n, seed=seed, **self.stream)


R1 = """define Fire(area: string, measuredTemp: double)
from Smoke(area=$a) and each Temp(area=$a and value>45) within 5 min. from Smoke
where area=Smoke.area and measuredTemp=Temp.value"""

R2 = """define Fire(area: string, measuredTemp: double)
from Smoke(area=$a) and last Temp(area=$a and value>45) within 5 min. from Smoke
where area=Smoke.area and measuredTemp=Temp.value"""

R3 = """define Fire(area: string, measuredTemp: double)
from Smoke(area=$a) and 45 < $t=Avg(Temp(area=$a).value within 5 min. from Smoke)
where area=Smoke.area and measuredTemp=$t"""

R4 = """define ComplexEvent()
from C(p=$x) and each B(p=$x and v>10) within 8 min. from C
  and last A(p=$x) within 3 min. from B"""

R5 = """define CE(att1: int, att2: int)
from C(att=$x) and last B(att=$x) within 100000 from C and last A(att=$x) within 100000 from B
where att1=$x and att2=Sum(A(att=$x).value within 100000 from B)"""

PAPER_RULES = {"R1": R1, "R2": R2, "R3": R3, "R4": R4, "R5": R5}

_FIRE = dict(registry=fire_registry, types=("Smoke", "Temp", "Temp", "Rain"),
             ticks_per_second=1 / 60, stream=dict(ranges={"area": (0, 2), "value": (40, 50)}))
_ABC = dict(registry=abc_registry, types=("A", "B", "C", "D", "N"),
            stream=dict(max_gap=1, serial="n", ranges={"p": (0, 2), "att": (0, 2), "v": (0, 8),
                                                       "value": (0, 5)}))
_QUOTES = dict(registry=quotes_registry, types=("Q", "T", "N"),
               stream=dict(max_gap=1, serial="n", ranges={"sym": (2, 5), "ex": (4, 7),
                                                          "px": (0, 4)}))
# Serial numbers identify the chosen events, so a wrong choice cannot hide behind equal
# attribute values.
_IDS = "b=B.n and a=A.n"
_ID_ATTRS = "b: int, a: int"


def _cases() -> dict[str, Case]:
    cases = [
        Case("R1", R1, **_FIRE), Case("R2", R2, **_FIRE), Case("R3", R3, **_FIRE),
        Case("R4", R4, abc_registry, ("A", "B", "C", "N"), 1 / 60,
             dict(max_gap=1, ranges={"p": (0, 2), "v": (5, 15)})),
        Case("R5", R5, abc_registry, ("A", "B", "C"), None, dict(ranges={"value": (0, 9)})),
        Case("first_temp", R2.replace("last", "first"), **_FIRE),
    ]
    for s1, s2 in product(("each", "last", "first"), repeat=2):
        cases.append(Case(f"{s1}_{s2}", f"""define S(x: int, {_ID_ATTRS})
            from C(p=$x) and {s1} B(p=$x and v>2) within 6 from C
              and {s2} A(p=$x) within 4 from B
            where x=$x and {_IDS}""", **_ABC))
    cases += [
        Case("late_binding", f"""define L(x: int, {_ID_ATTRS})
            from C() and last B(p=$x) within 5 from C and each A(p=$x and v<=5) within 5 from B
            where x=$x and {_IDS}""", **_ABC),
        Case("no_params", f"""define N0({_ID_ATTRS})
            from C(v>=3) and first B(v!=2) within 5 from C and each A(v<6) within 4 from B
            where {_IDS}""", **_ABC),
        Case("two_params", """define T(x: int, y: int, a: int)
            from C(p=$x and att=$y) and each A(p=$x and att=$y) within 8 from C
            where x=$x and y=$y and a=A.n""", **_ABC),
        Case("param_twice", """define PT(x: int, a: int)
            from C(p=$x and att=$x) and each A(p=$x and v=$x) within 5 from C
            where x=$x and a=A.n""", **_ABC),
        Case("four_elements", """define F4(x: int, d: int, a: int)
            from D(p=$x) and each C(p=$x) within 4 from D and last B() within 3 from C
              and each A(p=$x) within 4 from B
            where x=$x and d=D.n and a=A.n""", **_ABC),
        Case("repeated_type", """define RT(x: int, n: int)
            from C(p=$x) and each A(p=$x) within 5 from C and first A(v>1) within 5 from A
              and each B() within 2 from A
            where x=$x and n=B.n""", **_ABC),
        Case("literal_ops", f"""define LO({_ID_ATTRS})
            from C(v<5 and v>=1 and p!=0) and last B(v<=4 and att=1) within 6 from C
              and each A(v>0 and value<3.5) within 4 from B
            where {_IDS}""", **_ABC),
        Case("seconds", """define Sec(x: int, s: int)
            from C(p=$x) and each A(p=$x) within 4 s from C where x=$x and s=A.n""",
             ticks_per_second=1.0, **_ABC),
    ]
    cases += [
        # aliases, predicates inside the pattern, a window on the whole pattern, ties
        Case("stock", """define ST(c: int, b: int, a: int)
            from C() as c and each B(v < c.v) as b from c and each A(v < b.v) as a from b
            within 6 ties nonstrict
            where c=c.n and b=b.n and a=a.n""", **_ABC),
        Case("stock_strict", """define ST(c: int, b: int, a: int)
            from C() as c and each B(v < c.v) as b from c and each A(v < b.v) as a from b
            within 6
            where c=c.n and b=b.n and a=a.n""", **_ABC),
        Case("alias_same_type", """define AA(early: int, late: int)
            from A() as a2 and each A(v < a2.v) as a1 within 5 from a2
            where early=a1.n and late=a2.n""", **_ABC),
        Case("pred_single", """define PS(b: int, a: int)
            from C(v > 1) as c and last B(v > c.v - 3) as b within 6 from c
              and first A(v * 2 >= b.v + 1 and ts > b.ts - 3) as a within 4 from b
            where b=b.n and a=a.n""", **_ABC),
        Case("pred_params", """define PP(x: int, b: int, a: int)
            from C(p=$x) and last B(p=$x and v != $x + 1) within 6 from C
              and each A(v <= $x * 3 and att=$x) within 4 from B
            where x=$x and b=B.n and a=A.n""", **_ABC),
        Case("pred_terminator", """define PT(c: int, b: int)
            from C(v * 2 > p + 3 and v != att) and each B() within 3 from C
            where c=C.n and b=B.n""", **_ABC),
        Case("pred_far_each", """define PF(b: int, a: int)
            from C() as c and last B(v > 2) within 4 from c and each A(v < c.v) within 4 from B
            where b=B.n and a=A.n""", **_ABC),
        Case("window_first", """define WF(b: int, a: int)
            from C() as c and first B() as b from c and last A(v > 1) as a from b
            within 5
            where b=b.n and a=a.n""", **_ABC),
        Case("window_mixed", """define WM(b: int, a: int, span: int)
            from C(p=$x) as c and each B(p=$x) as b within 4 from c
              and first A() as a from b and not D(p=$x) between a and c
            within 6
            where b=b.n and a=a.n and span=c.ts - a.ts""", **_ABC),
        Case("nonstrict_same_type", """define NS(x: int, y: int, z: int)
            from A() as x and last A() as y within 3 from x
              and each A(v >= y.v) as z within 3 from y
            ties nonstrict
            where x=x.n and y=y.n and z=z.n""", **_ABC),
        Case("nonstrict_first_params", """define NF(x: int, b: int, a: int)
            from C(p=$x) and first B(p=$x) within 3 from C and last A(p=$x) within 2 from B
              and $s=Sum(A(p=$x).v within 3 from C)
            ties nonstrict
            where x=$x and b=B.n and a=A.n""", **_ABC),
    ]
    for function in ("Sum", "Avg", "Min", "Max"):
        cases.append(Case(f"agg_{function.lower()}", f"""define G(x: int, y: double, b: int)
            from C(p=$x) and last B(p=$x) within 5 from C
              and $y={function}(A(p=$x).value within 3 from B)
            where x=$x and y=$y and b=B.n""", **_ABC))
    cases += [
        Case("agg_count", """define G(x: int, n: int, b: int)
            from C(p=$x) and each B(p=$x) within 5 from C
              and $n=count(B(p=$x and v>3) within 4 from B)
            where x=$x and n=$n and b=B.n""", **_ABC),
        Case("agg_filter", """define G(x: int, t: double)
            from C(p=$x) and 2 <= $t=AVG(A(p=$x).v within 6 from C)
            where x=$x and t=$t and $t != 3""", **_ABC),
        Case("agg_inline", """define G(x: int, z: double, m: double)
            from C(p=$x) and last B(v>1) within 4 from C
            where x=$x and z=(Sum(A(p=$x).value within 6 from C) + $x) * 2
                            - Count(B(v>3) within 4 from B) / 4
              and m=Max(A().v within 4 from B) - -1""", **_ABC),
        Case("agg_two_bound", """define G(x: int, lo: double, hi: double)
            from C(p=$x) and $lo=Min(A(p=$x).v within 6 from C)
              and $hi=Max(B(p=$x).v within 6 from C) and $lo < $hi
            where x=$x and lo=$lo and hi=$hi""", **_ABC),
        Case("neg_within", f"""define NW(x: int, {_ID_ATTRS})
            from C(p=$x) and last B(p=$x) within 5 from C and each A() within 4 from B
              and not D(p=$x) within 3 from C
            where x=$x and {_IDS}""", **_ABC),
        Case("neg_between", f"""define NB(x: int, {_ID_ATTRS})
            from C(p=$x) and each B() within 5 from C and last A(p=$x) within 4 from B
              and not D(p=$x) between A and C and not N(v<2) between B and C
            where x=$x and {_IDS}""", **_ABC),
        Case("filters", f"""define FI(x: int, {_ID_ATTRS})
            from C(p=$x) and each B(p=$x) within 5 from C and each A() within 5 from B
              and B.v > A.v and $x != 1
            where x=$x and {_IDS} and A.value * 2 >= C.v""", **_ABC),
    ]
    cases.append(  # a predicate reads the event a step without predicates chose
        Case("pred_after_plain_step", f"""define PP({_ID_ATTRS})
            from C() and last B() within 6 from C and last A(v != B.v) within 6 from B
            where {_IDS}""", **_ABC))
    _KLEENE = "x: int, c: double, f: int, l: int, s: double"
    cases += [
        # closures and disjunctions (expanded into plain rules by the engines)
        Case("closure_each", f"""define K1({_KLEENE})
            from C(p=$x) and each B(p=$x){{1,3}} as bs within 5 from C
              and last A(p=$x) within 3 from bs
            where x=$x and c=Count(bs) and f=bs[first].n and l=bs[last].n
              and s=Sum(bs.value)""", **_ABC),
        Case("closure_next", f"""define K2({_KLEENE}, m: double)
            from C() and each B(v >= bs[i+1].v and v < C.v + 4){{2,3}} as bs within 6 from C
              and each A(v < bs[first].v) within 3 from bs
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and s=Avg(bs.value)
              and m=Max(bs.value) - Min(bs.v)""", **_ABC),
        Case("closure_last", f"""define K3({_KLEENE})
            from C(p=$x) and last B(v != bs[i+1].v and p=$x){{1,3}} as bs within 6 from C
              and each A() within 4 from bs
            where x=$x and c=Count(bs) and f=bs[first].n and l=bs[last].n
              and s=Sum(bs.v) * 2""", **_ABC),
        Case("closure_anchors", f"""define K4({_KLEENE})
            from C(p=$x) and each B(){{1,2}} as bs within 5 from C
              and not D(p=$x) between bs and C and $t=Sum(A(p=$x).value within 3 from bs)
              and Count(bs) + $t > 1
            where x=$x and f=bs[first].n and l=bs[last].n and s=$t""", **_ABC),
        Case("closure_nonstrict", f"""define K5({_KLEENE})
            from C(p=$x) and each B(p=$x and v > bs[i+1].v){{1,3}} as bs within 3 from C
              and last A(p=$x) within 2 from bs
            within 4 ties nonstrict
            where x=$x and c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("disjunction", """define OR(x: int, t: int, e: int, k: int)
            from (C(p=$x) | D(p=$x and v > 2)) as t and each (A(v>2 and p=$x) | B(p=$x)) as e
              within 5 from t and last N() within 3 from e
            where x=$x and t=t.n and e=e.n and k=N.n""", **_ABC),
        Case("closure_of_disjunction", """define KO(c: double, f: int, l: int)
            from C() and each (A(v < 4) | B(v > 3)){1,2} as bs within 4 from C
            where c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        # last/first over the union of a disjunction's candidates (one derived type)
        Case("last_disjunction", """define LD(x: int, e: int, d: int)
            from C(p=$x) and last (A(v > 2 and p=$x) | B(v < 5 and p=$x)) as e within 5 from C
              and each D(p=$x) within 3 from e
            where x=$x and e=e.n and d=D.n""", **_ABC),
        Case("first_disjunction", """define FD(e: int, d: int, v: int)
            from C() as c and first (A(v < c.v) | B(v < c.v and att = 1)) as e within 5 from c
              and last D(v * 2 > att) within 3 from e
            within 6
            where e=e.n and d=D.n and v=e.v""", **_ABC),
        Case("last_closure_of_disjunction", """define LK(c: double, f: int, l: int)
            from C() and last (A(v < 4) | B(v > 3 and v * 2 > att + ts - ts)){1,2} as bs
              within 4 from C
            where c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("first_disjunction_nonstrict", """define FN(e: int, d: int, x: int)
            from C(att=$y) and first (A(att=$y) | B(v > 4 and att=$y)) as e within 3 from C
              and each D() within 2 from e
              and not N() between e and C
            partition by p ties nonstrict
            where e=e.n and d=D.n and x=$y""", **_ABC),
        Case("unbounded_then_last_disjunction", """define UL(c: double, e: int)
            from C(p=$x) and each B(p=$x)+ as bs within 4 from C
              and last (A(p=$x) | D(v > 2 and p=$x)) as e within 3 from bs
            where c=Count(bs) and e=e.n""", **_ABC),
        # runs: the items follow each other among the closure's candidates
        Case("closure_runs", """define KR(c: double, f: int, l: int)
            from C(p=$x) and each B(p=$x and v > 1)+ runs as bs within 5 from C
            where c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("closure_runs_of_disjunction", """define KD(c: double, f: int, l: int, a: int)
            from C() and each (A(v < 5) | B(v > 2)){1,3} runs as bs within 5 from C
              and last A() within 3 from bs
            partition by p
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and a=A.n""", **_ABC),
        Case("partition_by", f"""define PB(x: int, {_ID_ATTRS}, s: double)
            from C() and last B(v > 1) within 6 from C and each A() within 4 from B
              and not D() between A and C and $s=Sum(N().value within 5 from C)
            partition by p
            where x=C.p and {_IDS} and s=$s""", **_ABC),
        Case("partition_union", """define PU(x: int, c: double, f: int)
            from (C() | D(v > 3)) as t and each B(att=$y){1,2} as bs within 5 from t
            partition by p
            where x=t.p + $y * 10 and c=Count(bs) and f=bs[first].n""", **_ABC),
        # unordered conjunctions (expanded into one plain rule per order of the members)
        Case("conjunction", """define CJ(x: int, a: int, b: int, d: int)
            from C(p=$x) as c and each (A(p=$x and v < c.v) as a & B(v > 1) as b) as g
              within 4 from c and last D() within 3 from g
            where x=$x and a=a.n and b=b.n and d=D.n""", **_ABC),
        # a last conjunction: each member's latest candidate (TESLA's selections
        # anchored at one element), three members, a step after the earliest
        Case("conjunction_last", """define CL(x: int, a: int, b: int, e: int, d: int)
            from C(p=$x) as c and last (A(p=$x) as a & B(v > 1) as b & D(att=1) as e) as g
              within 4 from c and each N() within 3 from g
            where x=$x and a=a.n and b=b.n and e=e.n and d=N.n""", **_ABC),
        Case("conjunction_nonstrict", """define CN(a: int, e: int, b: int, s: double)
            from C() as c and each (A() as a & A(v > 2) as e & B(v < c.v) as b) as g
              within 3 from c
              and not D() between b and c and $s=Sum(N().value within 3 from a)
            within 4 ties nonstrict
            where a=a.n and e=e.n and b=b.n and s=$s""", **_ABC),
        # string attributes, literals (with escapes) and parameters
        Case("strings", """define SS(sym: string, ex: string, t: int, q: int, tag: string)
            from Q(sym = $s and ex != "naïve") as q
              and each T(sym = $s and ex != q.ex) as t within 4 from q
              and last Q(ex = "a\\"b\\\\c") as p within 3 from t
            where q.sym != "AMZN" and sym = $s and ex = t.ex and tag = "AAPL"
              and t = t.n and q = q.n""", **_QUOTES),
        Case("strings_partition", """define SP(sym: string, n: double, x: int, e: string)
            from T(ex = "") as t and each Q(px > 1 and sym != "AMZN") as q within 5 from t
              and not N(sym = "AVID") within 3 from t and $n=Count(N() within 4 from t)
            partition by sym
            where sym = t.sym and n = $n and x = q.n""", **_QUOTES),
        # consumption: the events a match chose for the named elements are gone for the
        # rule's later time stamps
        Case("consume_each", f"""define CE(x: int, {_ID_ATTRS})
            from C(p=$x) and each B(p=$x) within 6 from C and last A(v>1) within 4 from B
            where x=$x and {_IDS}
            consuming B""", **_ABC),
        Case("consume_last_first", f"""define CL({_ID_ATTRS}, s: double)
            from C() and last B(v>2) within 6 from C and first A() within 4 from B
              and $s=Sum(A().value within 5 from C)
            where {_IDS} and s=$s
            consuming A, B""", **_ABC),
        Case("consume_terminator_type", """define CT(x: int, s: int, f: int)
            from A(p=$x) as s and each A(p=$x and v >= s.v - 2) as f within 5 from s
              and not D(p=$x) between f and s
            ties nonstrict
            where x=$x and s=s.n and f=f.n
            consuming s, f""", **_ABC),
        Case("consume_closure", """define CK(c: double, f: int, l: int, n: double)
            from C() and each B(v > 1){1,2} as bs within 5 from C
              and $n=Count(B() within 5 from C)
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and n=$n and Count(bs) < 2
              + C.v
            consuming bs""", **_ABC),
        Case("consume_conjunction", """define CJC(a: int, b: int, c: int)
            from C() as c and each (A(v < c.v) as a & B() as b) as g within 4 from c
            within 4 ties nonstrict
            where a=a.n and b=b.n and c=c.n
            consuming a""", **_ABC),
        Case("consume_partition_strings", """define CPS(sym: string, q: int, t: int)
            from T(ex != "") as t and each Q(px > 1) as q within 5 from t
            partition by sym
            where sym = t.sym and q = q.n and t = t.n
            consuming q""", **_QUOTES),
        # optional elements ({0,m} and ?), strict contiguity (next), after-match skip
        Case("optional", f"""define OP({_KLEENE})
            from C(p=$x) and each B(p=$x and v > 2)? as bs within 4 from C
              and last A(p=$x) within 3 followedBy bs
            where x=$x and c=Count(bs) and s=Sum(bs.value) and l=A.n""", **_ABC),
        Case("optional_closure", f"""define OC({_KLEENE})
            from C() and last B(v != bs[i+1].v){{0,2}} as bs within 5 from C
              and each A(v < C.v) within 3 from bs and not D() between A and C
            within 6 ties nonstrict
            where c=Count(bs) and s=Sum(bs.v) and f=A.n""", **_ABC),
        Case("next_last_partition", f"""define NL(x: int, {_ID_ATTRS})
            from C() and last B(v > 2) within 5 next C and each A() within 4 from B
            partition by p
            where x=C.p and {_IDS}""", **_ABC),
        Case("next_closure", f"""define NK({_KLEENE})
            from C(p=$x) and each B(p=$x and v >= bs[i+1].v){{1,3}} as bs within 5 next C
              and last A() within 3 next bs
            within 6 ties nonstrict
            where x=$x and c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("until_last_partition", f"""define UL({_KLEENE})
            from C() and last B(v != bs[i+1].v){{2,4}} as bs until D() within 8 from C
            partition by p
            where x=C.p and c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("plus_lengths", f"""define PN({_KLEENE})
            from C(v > 4) and last B(v > 1)+ as bs within 6 from C
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and s=Avg(bs.value)""",
             **_ABC),
        Case("star_each", f"""define SE({_KLEENE})
            from C() and each B(v > bs[i+1].v and v > 3)* as bs within 3 from C
              and last A(v < 3) within 2 from bs
            where c=Count(bs) and s=Sum(bs.v) and l=A.n""", **_ABC),
        Case("plus_skip", f"""define PS({_KLEENE})
            from C() and last B(){{2,}} as bs within 5 from C
            within 5
            where c=Count(bs) and f=bs[first].n and l=bs[last].n
            skip past last event""", **_ABC),
        Case("greedy_plus", f"""define GP({_KLEENE})
            from C(v > 3) and last B()+ greedy as bs within 6 from C
              and each A(v < 4) within 3 from bs
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and x=A.n""", **_ABC),
        Case("reluctant_each", f"""define RE({_KLEENE})
            from C() and each B(v >= bs[i+1].v){{2,}} reluctant as bs within 4 from C
              and not D() between bs and C
            within 6 ties nonstrict
            where c=Count(bs) and f=bs[first].n and l=bs[last].n""", **_ABC),
        Case("skip_past_last", f"""define SL(x: int, {_ID_ATTRS})
            from C(p=$x) and each B(p=$x) within 5 from C and each A(p=$x) within 4 from B
            where x=$x and {_IDS}
            skip past last event""", **_ABC),
        Case("skip_to_next", """define SN(c: double, f: int, l: int, t: int)
            from C() and each B(v > bs[i+1].v){1,3} as bs within 5 from C
            where c=Count(bs) and f=bs[first].n and l=bs[last].n and t=C.n
            skip to next""", **_ABC),
        Case("skip_to_first", f"""define SF(x: int, {_ID_ATTRS}, c: double)
            from C(p=$x) and each B(p=$x)? as bs within 4 from C
              and each A(p=$x) within 4 from bs and last B() as b within 3 from A
            ties nonstrict
            where x=$x and a=A.n and b=b.n and c=Count(bs)
            skip to first bs""", **_ABC),
        # the hybrid-shedding paper's Q2: SEQ(A a, A+ b[], B c, C d), b[i].V = a.V, same
        # ID, a.V + c.V = d.V
        Case("hybrid_q2", """define Q2(x: int, c: double, a: int)
            from C(p=$x) as d and each B(p=$x) as c within 8 from d
              and each A(p=$x and v = bs[i+1].v){1,3} as bs within 8 from c
              and each A(p=$x and v = bs[first].v and v + c.v = d.v) as a within 8 from bs
            within 12
            where x=$x and c=Count(bs) and a=a.n""", abc_registry, ("A", "A", "B", "C"),
             stream=dict(max_gap=1, serial="n", ranges={"p": (0, 2), "v": (0, 3)})),
        # 'hot path' (SASE): a bike's trips, each starting where the one before ended,
        # before a trip that ends at station 7, 8 or 9
        Case("hot_path", """define HotPath(bike: int, trips: double, start: int)
            from Trip(end >= 7 and bike=$b) as t
              and each Trip(bike=$b and end = ps[i+1].start){2,4} as ps within 20 from t
            within 20
            where bike=$b and trips=Count(ps) + 1 and start=ps[first].start""",
             trips_registry, ("Trip",),
             stream=dict(max_gap=2, ranges={"bike": (0, 2), "start": (0, 9), "end": (0, 9)})),
    ]
    return {case.name: case for case in cases}


CASES: dict[str, Case] = _cases()
"""Every rule of the catalogue by name."""


# ------------------------------------------------------------------------ harness


def engine_output(engine: Any, batches: Sequence[np.ndarray]) -> list[tuple]:
    """Feed ``batches`` to ``engine``, then end the stream (``flush``); its composites
    as :func:`reference` lists them."""
    rule: Rule = engine.rule
    texts = engine.registry.strings.text if isinstance(engine, Union) else None
    out: list[tuple] = []
    for found in [*(engine.process(batch) for batch in batches), engine.flush()]:
        if isinstance(found, Composites):  # a Union of engines
            terminators, columns = found.terminators, found.columns
        else:
            kept, columns = compose(rule, found)
            terminators = found.elements[0][kept]
        for j in range(len(terminators)):
            values = [texts(columns[attr][j]) if kind == "string" and texts else
                      columns[attr][j].item() for attr, kind in rule.attributes]
            out.append((int(terminators["ts"][j]), int(terminators["key"][j]), *values))
    return out


def difference(expected: list[tuple], actual: list[tuple], limit: int = 30) -> str:
    """Empty if the lists agree (floats to 1e-9 relative); else a readable diff."""
    if len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual, strict=True)):
        return ""
    lines = list(difflib.unified_diff([repr(t) for t in expected], [repr(t) for t in actual],
                                      "reference", "engine", lineterm="", n=2))
    shown = lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit
                             else [])
    return (f"{len(expected)} composites expected, {len(actual)} produced\n"
            + "\n".join(shown))


def _same(expected: tuple, actual: tuple) -> bool:
    return len(expected) == len(actual) and all(
        e == a or (isinstance(e, float) and math.isclose(e, a, rel_tol=1e-9, abs_tol=1e-9))
        for e, a in zip(expected, actual, strict=True))


ENGINES = {
    "aip": "specula.detectors.rules.aip:AIPEngine",
    "cdp": "specula.detectors.rules.cdp:CDPEngine",
    "gpu": "specula.detectors.rules.cdp_gpu:GPUCDPEngine",
}


def check_case(engine_class: Any, case: Case, *, seed: int, n: int,
               max_batch: int = 16) -> str:
    """Run ``case`` on a fresh engine over a random stream; the difference to the reference."""
    registry = case.registry()
    rule = case.rule()
    events = case.events(registry, n, seed)
    expected = reference(rule, registry, events, case.ticks_per_second)
    engine = Union(rule, engine_class, registry, ticks_per_second=case.ticks_per_second)
    actual = engine_output(engine, random_batches(events, seed=seed + 1, max_size=max_batch))
    found = difference(expected, actual)
    return f"case {case.name}, seed {seed}, {n} events:\n{found}" if found else ""


def main(argv: Sequence[str] | None = None) -> int:
    """Check one engine against the reference; print diffs; 1 on any mismatch."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=sorted(ENGINES), required=True)
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated case names (default: all)")
    parser.add_argument("--seeds", type=int, default=1, help="streams per case")
    parser.add_argument("--n", type=int, default=60, help="events per stream")
    parser.add_argument("--max-batch", type=int, default=16, help="largest batch fed")
    parser.add_argument("--json", help="also write {case: diff or ''} to this file")
    parser.add_argument("--min-gpu-work", type=int, default=None,
                        help="the GPU engine's min_gpu_work (0: every step on the device; "
                             "default: its bars, which keep these small streams on the CPU copy)")
    args = parser.parse_args(argv)
    module, name = ENGINES[args.engine].split(":")
    engine_class = getattr(importlib.import_module(module), name)
    if args.min_gpu_work is not None:
        if args.engine != "gpu":
            parser.error("--min-gpu-work is an option of the GPU engine")
        engine_class = partial(engine_class, min_gpu_work=args.min_gpu_work)
    results = {}
    for case_name in args.cases.split(","):
        diffs = [check_case(engine_class, CASES[case_name], seed=seed, n=args.n,
                            max_batch=args.max_batch) for seed in range(args.seeds)]
        results[case_name] = "\n".join(d for d in diffs if d)
        print(f"{case_name}: {'MISMATCH' if results[case_name] else 'ok'}", flush=True)
        if results[case_name]:
            print(results[case_name], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    return 1 if any(results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
