"""Closures, disjunctions, conjunctions and partitions: what they mean, and how they run
as plain sequences.

A *closure* ``each B(...){n,m} as bs within W from a`` is a step that chooses ``n`` to
``m`` events instead of one (Kleene closure with a bounded length, as FlinkCEP's
``times(n, m)`` or Esper's ``B{n,m}``); a *disjunction* ``(A(...) | B(...)) as x`` is an
element that one event of any of the listed types may fill; an *unordered conjunction*
``each (A(...) as a & B(...) as b) as g within W from c`` is a step that chooses one
event per member, in any order in time (SASE's and Esper's ``AND``, written ``&`` as
``|`` is for disjunctions).

Semantics
---------
* **Items.** The events a closure chose are its *items*, ``bs[first]`` the earliest and
  ``bs[last]`` the latest. ``bs[last]`` is a candidate of the step as a plain step
  would define it (anchored at ``a``); each earlier item is a candidate with the
  previous item as anchor and, in addition, no earlier than ``a.ts - W``: every item
  lies in the step's window before ``a``. ``each`` takes every candidate at every item
  (skip-till-any-match: every subsequence of ``n`` to ``m`` candidates), ``last`` the
  latest one (for each length, the latest events, one after another back from ``a``).
  ``first`` is refused: it would choose the same earliest event for every item.
* **Unbounded closures.** ``B(...)+`` is ``B(...){1,}``, ``B(...)*`` is
  ``B(...){0,}`` (FlinkCEP's ``oneOrMore()`` and ``timesOrMore(n)`` with
  ``allowCombinations()``, SASE's ``B+``; with ``runs``, FlinkCEP's default): a
  closure with no upper bound on its length; its items lie in its window, so the window
  bounds it. One per rule, of one pattern (no ``|``), not in a consuming rule.
* **Greedy and reluctant closures** (``B(...){n,m} greedy``, ``B(...)+ reluctant``;
  FlinkCEP's ``greedy()``): of a terminator's matches (those that survive the pattern
  window, negations, filters and aggregates) that choose the same events for every
  element but the closure, a greedy closure keeps those whose items no other's items
  strictly contain, a reluctant one those whose items contain no other's. One per rule,
  not in a consuming rule; the union filters the engines' matches.
* **Optional elements.** ``B(...){0,m}`` may choose no event, ``B(...)?`` is
  ``B(...){0,1}`` (FlinkCEP's ``optional()``). With no item, the step after it follows
  the element before it (its window measured from that one), ``Count(bs)`` and
  ``Sum(bs.x)`` are 0; what would read an item (``bs[first].x``, ``Avg``, ``Min``,
  ``Max``, a window ``from bs``, ``between bs``) is refused for an optional closure.
* **Predicates of a closure** hold for every item. Bare attributes (and ``bs[i].x``)
  are the item's own; ``bs[i+1].x`` is the next item in time, and a comparison that
  reads it holds vacuously for ``bs[last]``, which has none (SASE's ``a[i+1].x``). A
  ``last`` closure may read only the item and ``bs[i+1]``.
* **Reading a closure.** Outside its pattern a closure is read through ``bs[first].x``
  and ``bs[last].x``, or folded in ``where`` and filters: ``Count(bs)``, ``Sum(bs.x)``,
  ``Avg``, ``Min``, ``Max`` (float64, summed in time order; NaN propagates). A step
  ``from bs``, an aggregate or negation window ``from bs`` and the later bound of
  ``between`` refer to ``bs[first]``; the earlier bound of ``between`` (``between bs
  and C``) to ``bs[last]``.
* **Disjunctions.** Every alternative must be of a different type and mention the same
  parameters; ``x.attr`` reads the attribute of whichever alternative matched, which
  therefore must exist in every one. A disjunction may be the terminator, a step, or the
  pattern of a closure (each item chooses its alternative). A ``last`` (``first``)
  disjunction chooses among the candidates of all its alternatives together: the
  latest (earliest) event that matches any of them; it runs as one derived type, not
  one expansion per alternative (:mod:`~specula.detectors.rules.disjunctions`, which
  says what its alternatives must share).
* **Conjunctions.** The members of ``each (A(...) as a & B(...) as b ...) as g within W
  from c`` are chain elements of their own, named by their aliases (or types) and read
  as ``a.x``; ``g`` names the conjunction only for the step that follows it (``from
  g``). A choice is one event per member, each a candidate of its own pattern with ``c``
  as anchor and window ``W`` (``c.ts - W <= e.ts < c.ts``, or ``<= c.ts`` under ``ties
  nonstrict``), all events distinct; under ``ties strict`` the members' time stamps are
  also pairwise distinct (a conjunction is a sequence in some order, and equal time
  stamps never form one), under ``ties nonstrict`` they may be equal. Each choice
  counts once. The step after the conjunction, and an aggregate or negation window
  ``from`` a member, are anchored at the earliest member (respectively that member).
  A member is one pattern (no ``{n,m}``, no ``|``); a member's predicates read only
  itself and the elements before the conjunction; a ``last``/``first`` step after it
  compares only with itself; ``not ... between`` two members is refused (their order in
  time is not fixed).
* **Last conjunctions.** ``last (A(...) as a & B(...) as b) as g within W from c`` is
  TESLA's meaning of ``and``: selections anchored at one element (TESLA's ``last A
  within W from c and last B within W from c``, a tree this language's linear chains
  cannot write otherwise), each member the latest candidate of its own pattern in
  ``c``'s window, chosen independently; no match unless every member has one. A
  conjunction's members never share a time stamp under ``ties strict`` (as for
  ``each``), so, read per order of the members in time (latest first): the first takes
  its latest candidate, each next one its latest candidate before the one before it,
  provided none of its candidates lies after that one. Without equal time stamps that is
  one choice, the independent one; where the latest candidates of two members share a
  time stamp, each of their two orders gives its own choice. It needs ``ties strict``;
  its members take literal constraints and parameters bound before it, no predicates
  (a negation excludes their later candidates, and negations read no predicates).
  ``first`` is refused: a step that follows another member cannot choose a member's
  earliest candidate in the anchor's window (it would need a predicate on the anchor,
  which a ``first`` step may not read).
* **Partition by** ``partition by player``: every element (each alternative), every
  aggregate and every negation matches only events whose ``player`` equals the
  terminator's, as if each pattern had ``player=$p``: the rule runs as one independent
  instance per value, exactly, whatever partitions the graph gives the detector. The
  attribute must exist in every type the rule reads.
* **Union.** A rule with closures, disjunctions or conjunctions means the union of its
  *expansions*: the plain rules obtained by choosing, for each ``each`` disjunction,
  one alternative, for each closure, a length ``k`` and ``k`` copies of its step, each
  anchored at the one before (the ``n``-th copy is ``bs[first]``), and for each
  conjunction an order of its members, latest first, each member after the first
  anchored at the one before it with the predicate ``ts >= c.ts - W`` (a ``last``
  conjunction: the filter, and ``not M() between`` the member before and ``c``). So that a
  choice counts once under ``ties nonstrict``, the order of a choice is the one of
  descending time stamps, equal time stamps in the order written: a member that follows
  one written after it gets the predicate ``ts < previous.ts`` (under ``ties strict``
  every step is strict already). Expansions are enumerated element by element in chain
  order: alternatives in the order written, closure lengths from ``n`` up, member
  orders as :func:`itertools.permutations` lists them (the order written first). The
  composites of one terminator come expansion by expansion in that order, and within
  one as for a plain rule.

Each expansion runs on its own engine (:class:`Union`), so every engine supports
closures, disjunctions and conjunctions with the semantics of plain rules, exactly;
the cost is one engine per expansion, bounded by :data:`MAX_EXPANSIONS` (a conjunction
of ``k`` members is ``k!`` expansions: at most 4 members alone). An unbounded closure
runs its lengths up to the most events of its type the rule's reach has held before any
terminator so far (:mod:`~specula.detectors.rules.unbounded`), within the same bound.
``until X(...)`` is a negation ``not X(...) between
bs[first] and bs[last]`` in each expansion of two items or more, ``runs`` one ``not
B(...) between`` each two consecutive items. A strictly contiguous
step (``next``) runs as negations in every expansion: ``not T() between copy and
anchor`` for every type ``T`` the rule reads, for each copy of the step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from specula.detectors.rules._cdp_columns import convert, take
from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Constraint,
    Expr,
    Fold,
    Negation,
    Param,
    Pattern,
    Rule,
    RuleError,
    Skip,
    Step,
)
from specula.detectors.rules.consumption import Consumer
from specula.detectors.rules.disjunctions import Merger, check_selected, merged, selected
from specula.detectors.rules.engine import (
    Defines,
    Matches,
    attribute_values,
    compose,
    order_key,
)
from specula.detectors.rules.skip import Skipper, marks
from specula.detectors.rules.strings import check_strings, encode
from specula.detectors.rules.unbounded import Growth
from specula.events import TypeRegistry

__all__ = ["MAX_CLOSURE", "MAX_EXPANSIONS", "Composites", "Union", "check_shapes", "expand",
           "groups", "placements"]

MAX_CLOSURE = 16
"""The longest closure: every length is one more plain sequence to run."""
MAX_EXPANSIONS = 64
"""The plain sequences one rule may expand to (one engine each)."""
_TERMINATOR = np.dtype([("ts", np.int64), ("key", np.int64), ("producer", np.int32),
                        ("seq", np.int64)])


def check_shapes(rule: Rule) -> None:
    """Raise :class:`RuleError` unless the rule's disjunctions are named, of distinct
    types and bind one set of parameters, its conjunctions are as the semantics allows,
    and its closures are bounded, and all of them expand to at most
    :data:`MAX_EXPANSIONS` plain rules."""
    count, unbounded = 1, []
    for name, start, end in groups(rule):
        _check_conjunction(rule, name, start, end)
        count *= math.factorial(end - start)
    for i, pattern in enumerate(rule.chain):
        _check_alternatives(rule, pattern)
        step = rule.steps[i - 1] if i else None
        options = len(pattern.types)
        if pattern.alternatives and step is not None and step.selection != "each":
            check_selected(rule, i)
            options = 1  # one derived type
        if step is None or step.times is None:
            count *= options
            continue
        lo, hi = step.times
        if hi is None:  # counted at its shortest; the union grows it as windows fill
            _check_unbounded(rule, pattern, lo)
            unbounded.append(pattern.name)
            hi = lo
        elif not (0 <= lo <= hi <= MAX_CLOSURE and hi >= 1):
            raise RuleError(f"rule {rule.name}: closure {pattern.name}{{{lo},{hi}}} needs "
                            f"0 <= n <= m <= {MAX_CLOSURE} and m >= 1",
                            near=(pattern.type, "{"))
        if step.selection == "first":
            raise RuleError(f"rule {rule.name}: closure {pattern.name} collects events back "
                            "from the element it follows: use 'each' (every subsequence) or "
                            "'last' (the latest events)")
        count *= sum(options ** k for k in range(lo, hi + 1))
    if len(unbounded) > 1:
        raise RuleError(f"rule {rule.name}: {' and '.join(unbounded)} are both unbounded; "
                        "a rule may have one unbounded closure, bound the others ({n,m})")
    if count > MAX_EXPANSIONS:
        raise RuleError(f"rule {rule.name}: its closures, disjunctions and conjunctions "
                        f"expand to {count} plain sequences, more than {MAX_EXPANSIONS}; "
                        "bound the closures more tightly or use fewer members")


def _check_unbounded(rule: Rule, pattern: Pattern, lo: int) -> None:
    """An unbounded closure: one pattern, a rule that does not consume."""
    if pattern.alternatives:
        raise RuleError(f"rule {rule.name}: the unbounded closure {pattern.name} is one "
                        "pattern; bound it ({n,m}) to repeat a disjunction")
    if rule.consuming:
        raise RuleError(f"rule {rule.name}: the unbounded closure {pattern.name} does not "
                        "mix with 'consuming'; bound it ({n,m})")
    if lo > MAX_CLOSURE:
        raise RuleError(f"rule {rule.name}: closure {pattern.name}{{{lo},}} needs "
                        f"n <= {MAX_CLOSURE}")


def groups(rule: Rule) -> list[tuple[str, int, int]]:
    """The conjunctions of ``rule``: name, chain index of the first member, and one past
    the last."""
    found: list[tuple[str, int, int]] = []
    for i, step in enumerate(rule.steps, start=1):
        if not step.group:
            continue
        if found and found[-1][0] == step.group and found[-1][2] == i:
            found[-1] = (step.group, found[-1][1], i + 1)
        elif any(g[0] == step.group for g in found):
            raise RuleError(f"rule {rule.name}: the members of the conjunction {step.group} "
                            "must be consecutive steps")
        else:
            found.append((step.group, i, i + 1))
    return found


def _check_conjunction(rule: Rule, name: str, start: int, end: int) -> None:
    """A conjunction: two members or more, of one event each, read by ``each`` or ``last``
    steps, and nothing that depends on the members' order in time (which the expansion
    permutes)."""
    where = f"rule {rule.name}: the conjunction {name}"
    members = range(start, end)
    step = rule.steps[start - 1]
    if name in [p.name for p in rule.chain] + [t for p in rule.chain for t in p.types]:
        raise RuleError(f"rule {rule.name}: {name!r} names more than one element of the "
                        "sequence")
    if len(members) < 2:
        raise RuleError(f"{where} has one member; list two or more: (A(...) & B(...)) as "
                        f"{name}")
    if step.selection == "first":
        raise RuleError(f"{where} can be an 'each' or a 'last' step, not 'first' (a "
                        "step that follows another member cannot choose a member's earliest "
                        "candidate in the window of the anchor); use 'each' or 'last'",
                        near=("first", "("))
    for i in members:
        if rule.steps[i - 1].times is not None or rule.chain[i].alternatives:
            raise RuleError(f"{where}: a member is one pattern, without {{n,m}} or '|'")
        for other in rule.predicate_reads(i) & set(members) - {i}:
            raise RuleError(f"rule {rule.name}: a predicate of {rule.chain[i].name} reads "
                            f"{rule.chain[other].name}, a member of the same conjunction "
                            f"{name}; compare members in where")
    if step.selection == "last":
        _check_selected_conjunction(rule, where, members)
    after = rule.steps[end - 1] if end < len(rule.chain) else None
    if after is not None and after.selection != "each" and rule.predicate_reads(end) - {end}:
        raise RuleError(f"rule {rule.name}: a predicate of {rule.chain[end].name} reads "
                        f"another element, but a '{after.selection}' step after the "
                        f"conjunction {name} may only compare with itself; use 'each', or "
                        "compare in where")
    for neg in rule.negations:
        if neg.after in members and neg.anchor in members:
            raise RuleError(f"rule {rule.name}: 'not {neg.pattern.type} between' two members "
                            f"of the conjunction {name}, whose order in time is not fixed")


def _check_selected_conjunction(rule: Rule, where: str, members: range) -> None:
    """A ``last`` conjunction: strict ties, and members whose candidates a negation can
    name (literal constraints and parameters bound before the conjunction)."""
    if rule.ties != "strict":
        raise RuleError(f"{where}: a 'last' conjunction needs 'ties strict' (its members "
                        "never share a time stamp)", near=("ties", "nonstrict"))
    for i in members:
        pattern = rule.chain[i]
        if pattern.predicates:
            raise RuleError(f"{where}: {pattern.name} has a predicate, but a member of a "
                            "'last' conjunction takes literal constraints and parameters "
                            "only (its later candidates are excluded by a negation, which "
                            "reads no predicates); compare in where",
                            near=(pattern.type, "("))
        for c in pattern.constraints:
            if isinstance(c.value, Param) and rule.binder(c.value.name) >= members.start:
                raise RuleError(f"{where}: {pattern.name} reads ${c.value.name}, which a "
                                "member binds; the members of a 'last' conjunction take "
                                "parameters bound before it", near=(pattern.type, "("))


def _check_alternatives(rule: Rule, pattern: Pattern) -> None:
    if not pattern.alternatives:
        return
    listed = " | ".join(pattern.types)
    if not pattern.alias:
        raise RuleError(f"rule {rule.name}: the disjunction {listed} needs a name: "
                        f"({listed}) as x")
    if len(set(pattern.types)) < len(pattern.types):
        raise RuleError(f"rule {rule.name}: the alternatives of {pattern.alias} must be of "
                        f"different types ({listed}); put the conditions of one type in "
                        "one pattern")
    for option in pattern.alternatives:
        if option.alias or option.alternatives:
            raise RuleError(f"rule {rule.name}: an alternative of {pattern.alias} takes no "
                            "alias and no alternatives of its own")
    if len({frozenset(p.params()) for p in pattern.options()}) > 1:
        raise RuleError(f"rule {rule.name}: every alternative of {pattern.alias} must "
                        "mention the same parameters")


# ------------------------------------------------------------------------ expansion


def expand(rule: Rule, ticks_per_second: float | None = None, longest: int = 0
           ) -> tuple[Rule, ...]:
    """The plain rules whose union ``rule`` means, in the order of the semantics, with
    string literals as their codes; ``(rule,)`` for a plain rule. ``ticks_per_second``
    converts closure windows written with a unit; an unbounded closure ``{n,}`` has
    the lengths ``n`` to ``max(n, longest)``.

    >>> from specula.detectors.rules.parser import parse_rule
    >>> rule = parse_rule('''define P(n: double) from C() and each B(){1,2} as bs
    ...     within 5 from C where n=Count(bs)''')
    >>> [len(r.chain) for r in expand(rule)]
    [2, 3]
    """
    rule = merged(rule)  # last/first disjunctions: one derived type each
    if rule.partition:
        rule = _partitioned(rule)
    rule = encode(rule)  # engines compare the codes of strings
    if rule.plain:
        return (rule,)
    return tuple(_expansion(rule, choice, ticks_per_second)
                 for choice in _choices(rule, longest))


def _partitioned(rule: Rule) -> Rule:
    """``rule`` without ``partition by attr``: every pattern binds ``attr`` to one
    parameter, named so that no rule text can spell it."""
    key = Constraint(rule.partition, "=", Param(f"partition#{rule.partition}"))

    def bind(pattern: Pattern) -> Pattern:
        return replace(pattern, constraints=(*pattern.constraints, key),
                       alternatives=tuple(bind(a) for a in pattern.alternatives))

    return replace(rule, terminator=bind(rule.terminator), partition="",
                   steps=tuple(replace(s, pattern=bind(s.pattern),
                                       until=None if s.until is None else bind(s.until))
                               for s in rule.steps),
                   aggregates=tuple(replace(a, pattern=bind(a.pattern))
                                    for a in rule.aggregates),
                   negations=tuple(replace(n, pattern=bind(n.pattern))
                                   for n in rule.negations))


Layout = list[tuple[int, tuple[Pattern, ...]]]
"""An expansion's chain: (element of the rule, the patterns of its copies) in chain order."""


def _choices(rule: Rule, longest: int) -> Iterator[Layout]:
    """Every expansion's layout, in order: one copy of a plain element, ``k`` of a closure
    of length ``k``, and the members of a conjunction in each of their orders."""
    slots: list[list[Layout]] = []
    spans = {start: end for _, start, end in groups(rule)}
    i = 0
    while i < len(rule.chain):
        if i in spans:  # a conjunction: its members in every order (latest first)
            members = range(i, spans[i])
            slots.append([[(m, (rule.chain[m],)) for m in order]
                          for order in itertools.permutations(members)])
            i = spans[i]
            continue
        times = rule.steps[i - 1].times if i else None
        lo, hi = times if times is not None else (1, 1)
        hi = max(lo, longest) if hi is None else hi
        slots.append([[(i, copies)] for k in range(lo, hi + 1)
                      for copies in itertools.product(rule.chain[i].options(), repeat=k)])
        i += 1
    for choice in itertools.product(*slots):
        yield [entry for slot in choice for entry in slot]


def placements(rule: Rule, longest: int = 0) -> list[list[list[int]]]:
    """For each expansion of ``expand(rule, ..., longest)``, in its order, the chain
    indices of each element's copies in it (a closure's latest item first)."""
    return [_placed(rule, layout) for layout in _choices(merged(rule), longest)]


def _placed(rule: Rule, layout: Layout) -> list[list[int]]:
    new: list[list[int]] = [[] for _ in rule.chain]
    position = 0
    for element, copies in layout:
        new[element] = list(range(position, position + len(copies)))
        position += len(copies)
    return new


def _expansion(rule: Rule, layout: Layout, tps: float | None) -> Rule:
    new = _placed(rule, layout)  # new[i]: the chain indices of element i's copies

    def ref(expr: Expr, own: int | None = None, copy: int = 0) -> Expr | None:
        """``expr`` in the expansion; None when it reads ``bs[i+1]`` of ``bs[last]``."""
        if isinstance(expr, BinOp):
            left, right = ref(expr.left, own, copy), ref(expr.right, own, copy)
            return None if left is None or right is None else BinOp(expr.op, left, right)
        if isinstance(expr, Fold):
            return _fold(expr, new[expr.element])
        if not isinstance(expr, AttrRef):
            return expr
        copies = new[expr.element]
        if expr.element == own:
            if expr.item == "next":
                return AttrRef(copies[copy - 1], expr.attr) if copy else None
            return AttrRef(copies[copy], expr.attr)
        return AttrRef(copies[-1] if expr.item == "first" else copies[0], expr.attr)

    def comparisons(items: tuple[Comparison, ...], own: int | None = None,
                    copy: int = 0) -> tuple[Comparison, ...]:
        out = []
        for c in items:
            left, right = ref(c.left, own, copy), ref(c.right, own, copy)
            if left is not None and right is not None:
                out.append(Comparison(left, c.op, right))
        return tuple(out)

    chain: list[Pattern] = []
    steps: list[Step] = []
    filters: list[Comparison] = []
    spans = [range(start, end) for _, start, end in groups(rule)]
    for i, copies in layout:
        step = rule.steps[i - 1] if i else None
        for j, option in enumerate(copies):
            pattern = replace(option, predicates=comparisons(option.predicates, i, j))
            if step is not None and step.times is not None:  # names the item: bs[0] first
                pattern = replace(pattern, alias=f"{option.name}[{len(copies) - 1 - j}]")
            if step is not None and step.group:
                span = next(r for r in spans if i in r)
                pattern = _member(rule, pattern, i, span, new, tps)
            chain.append(pattern)
            if step is None:
                continue
            steps.append(Step(step.selection, pattern, step.within))
            if j:  # every item in the window before the closure's anchor
                anchor = new[i][0] - 1
                window = Const(step.within.ticks(tps))
                filters.append(Comparison(AttrRef(new[i][j], "ts"), ">=",
                                          BinOp("-", AttrRef(anchor, "ts"), window)))
    aggregates = tuple(replace(a, anchor=new[a.anchor][-1]) for a in rule.aggregates)
    negations = tuple(replace(n, anchor=new[n.anchor][-1],
                              after=None if n.after is None else new[n.after][0])
                      for n in rule.negations) + _contiguity(rule, new) + tuple(
        Negation(step.until, new[i][0], after=new[i][-1])
        for i, step in enumerate(rule.steps, start=1)
        if step.until is not None and len(new[i]) > 1) + _runs(rule, new)
    latest, skipped = _latest_members(rule, new, tps)
    negations += skipped
    filters += latest
    filters += comparisons(rule.filters)
    assignments = tuple((attr, ref(expr)) for attr, expr in rule.assignments)
    consuming = tuple(sorted(j for element in rule.consuming for j in new[element]))
    return Rule(rule.name, rule.attributes, chain[0], tuple(steps), aggregates, negations,
                tuple(filters), assignments, within=rule.within,  # type: ignore[arg-type]
                ties=rule.ties, consuming=consuming, skip=_skip(rule.skip, new),
                source=rule.source)


def _skip(skip: Skip, new: list[list[int]]) -> Skip:
    """The skip strategy in an expansion: ``to_first``/``to_last`` name the copy of the
    element's earliest/latest event, and skip nothing where it chose none."""
    if skip.element is None:
        return skip
    copies = new[skip.element]
    if not copies:
        return Skip()
    return replace(skip, element=copies[-1] if skip.strategy == "to_first" else copies[0])


def _member(rule: Rule, pattern: Pattern, element: int, span: range, new: list[list[int]],
            tps: float | None) -> Pattern:
    """Member ``element`` of the conjunction ``span`` in an expansion: unless it is the
    latest, it lies in the conjunction's window before the conjunction's anchor and,
    under ``ties nonstrict``, strictly before the member it follows if that one comes
    later in the text (so each set of events fits one order only)."""
    here = new[element][0]
    first = min(new[m][0] for m in span)
    if here == first or rule.steps[element - 1].selection != "each":
        return pattern
    own = AttrRef(here, "ts")
    window = Const(rule.steps[element - 1].within.ticks(tps))
    extra = [Comparison(own, ">=", BinOp("-", AttrRef(first - 1, "ts"), window))]
    previous = next(m for m in span if new[m][0] == here - 1)
    if rule.ties == "nonstrict" and previous > element:
        extra.append(Comparison(own, "<", AttrRef(here - 1, "ts")))
    return replace(pattern, predicates=(*pattern.predicates, *extra))


def _latest_members(rule: Rule, new: list[list[int]], tps: float | None
                    ) -> tuple[list[Comparison], tuple[Negation, ...]]:
    """A ``last`` conjunction in an expansion (its members latest first): each member
    after the latest is the latest candidate of its pattern before the one it follows;
    no candidate of its pattern lies between that one and the conjunction's anchor (a
    negation: else it is not the latest), and it lies in the conjunction's window (a
    filter after the selection, which reads no further)."""
    filters: list[Comparison] = []
    negations: list[Negation] = []
    for _, start, end in groups(rule):
        step = rule.steps[start - 1]
        if step.selection != "last":
            continue
        first = min(new[m][0] for m in range(start, end))
        window = Const(step.within.ticks(tps))
        for m in range(start, end):
            here = new[m][0]
            if here == first:
                continue
            negations.append(Negation(replace(rule.chain[m], alias=""), first - 1,
                                      after=here - 1))
            filters.append(Comparison(AttrRef(here, "ts"), ">=",
                                      BinOp("-", AttrRef(first - 1, "ts"), window)))
    return filters, tuple(negations)


def _contiguity(rule: Rule, new: list[list[int]]) -> tuple[Negation, ...]:
    """``next`` as negations in an expansion: for each copy of a strictly contiguous
    step, no event of a type the rule reads strictly between it and the element it
    follows (the partition's key bound as in every other pattern)."""
    key = tuple(c for c in rule.terminator.constraints
                if isinstance(c.value, Param) and c.value.name.startswith("partition#"))
    found = []
    for i, step in enumerate(rule.steps, start=1):
        if step.contiguity == "strict":
            found += [Negation(Pattern(t, key), copy - 1, after=copy)
                      for copy in new[i] for t in rule.input_types]
    return tuple(found)


def _runs(rule: Rule, new: list[list[int]]) -> tuple[Negation, ...]:
    """``runs`` as negations in an expansion: for each pair of consecutive copies of
    such a closure, no event of any of its alternatives strictly between them."""
    found = []
    for i, step in enumerate(rule.steps, start=1):
        if step.runs:
            found += [Negation(Pattern(o.type, o.constraints), later, after=earlier)
                      for later, earlier in itertools.pairwise(new[i])
                      for o in rule.chain[i].options()]
    return tuple(found)


def _fold(fold: Fold, copies: list[int]) -> Expr:
    """A fold over a closure's items as arithmetic over its copies, in time order
    (the Count and Sum of an optional closure that chose nothing are 0)."""
    k = float(len(copies))
    if fold.function == "count" or not copies:
        return Const(k)
    assert fold.attr is not None
    op = {"sum": "+", "avg": "+", "min": "min", "max": "max"}[fold.function]
    value: Expr = AttrRef(copies[-1], fold.attr)
    for element in reversed(copies[:-1]):
        value = BinOp(op, value, AttrRef(element, fold.attr))  # type: ignore[arg-type]
    return BinOp("/", value, Const(k)) if fold.function == "avg" else value


# -------------------------------------------------------------------------- union


@dataclass
class Composites:
    """Composite events of one rule: for each, its terminator (``ts``, ``key`` and the
    stream position), the index of its cause in the processed batch, and the values of
    the attributes of ``define``."""

    terminators: np.ndarray
    causes: np.ndarray
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.causes)


def as_events(composites: Composites, dtype: np.dtype) -> np.ndarray:
    """``composites`` as events of ``dtype`` (their rule's composite type): each one's
    terminator's ``ts`` and ``key`` and the attributes of ``define``; the other core
    fields zero, for the ordering unit to stamp."""
    rows = np.zeros(len(composites), dtype)
    rows["ts"] = composites.terminators["ts"]
    rows["key"] = composites.terminators["key"]
    for attr, values in composites.columns.items():
        rows[attr] = values
    return rows


class Union:
    """One rule run as the union of its expansions, each on its own engine.

    Parameters
    ----------
    rule : Rule
        Any rule; a plain one runs on one engine.
    engine_class : type
        The engine of every expansion (AIP, CDP or GPU CDP).
    registry, ticks_per_second
        As the engines take them.
    """

    def __init__(self, rule: Rule, engine_class: type, registry: TypeRegistry,
                 ticks_per_second: float | None = None) -> None:
        check_strings(rule, registry)
        self.rule = rule
        self.registry = registry
        self.engine_class = engine_class
        self.ticks_per_second = ticks_per_second
        self.growth = Growth(rule, registry, ticks_per_second) if rule.unbounded() else None
        element = rule.unbounded()  # the unbounded closure's longest expansion so far:
        self.longest = 0 if element is None else rule.steps[element - 1].times[0]  # type: ignore[index]
        # last/first disjunctions run over derived types, declared in a registry of their own
        self.merger = Merger(rule, registry) if selected(rule) else None
        self._origin: np.ndarray | None = None  # per row the engines read: the batch's row
        self.expansions = expand(rule, ticks_per_second)
        self._defines = [Defines(r) for r in self.expansions]
        self.engines = [engine_class(r, self._engine_registry, ticks_per_second=ticks_per_second)
                        for r in self.expansions]
        self.greed = next(((i, s.greed) for i, s in enumerate(rule.steps, start=1)
                           if s.greed != "all"), None)
        self._placed = placements(rule, self.longest) if self.greed else []
        self.consumer = (Consumer(rule, self.expansions, self.engines, registry,
                                  ticks_per_second) if rule.consuming else None)
        self.skipper = (Skipper(rule, _TERMINATOR, ticks_per_second)
                        if rule.skip.strategy != "none" else None)
        self._none = Composites(np.zeros(0, _TERMINATOR), np.zeros(0, np.int64), {
            a: np.zeros(0, ATTRIBUTE_TYPES[k]) for a, k in rule.attributes})
        self._direct_dtype: np.dtype | None = None  # see events
        self._direct: tuple[tuple[str, Expr], ...] | None = None
        self._no_rows = np.zeros(0, _TERMINATOR)

    def process(self, events: np.ndarray) -> Composites:
        """The composites whose terminators are complete after ``events``."""
        if self.growth is not None:
            self._grow(self.growth.needed(events))
            self.growth.add(events)
        if self.merger is not None:  # never with consuming: Rule checks
            batch_ts = events["ts"]
            events, self._origin = self.merger.add(events)
            try:
                composites = self._union([e.process(events) for e in self.engines])[0]
            finally:
                self._origin = None
            return composites if self.skipper is None else self._released(batch_ts)
        if self.skipper is not None:
            self._union([e.process(events) for e in self.engines])
            return self._released(events["ts"])
        if self.consumer is None:
            found = [e.process(events) for e in self.engines]
            if not any(map(len, found)):  # the usual live step: nothing to compose
                return self._none
            return self._union(found)[0]
        rows = self.consumer.relevant(events)
        events = events[rows]
        parts = []
        for start, stop in self.consumer.segments(events):
            part = events[start:stop]
            self.consumer.before(part)
            found = [e.process(part) for e in self.engines]
            composites, kept = self._union(found)
            self.consumer.after(found, kept)
            parts.append(Composites(composites.terminators, rows[composites.causes + start],
                                    composites.columns))
        return _concatenated(parts, self._none)

    def events(self, events: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`process` with the composites as events of ``dtype`` (see
        :func:`as_events`), and their causes.

        A plain rule (one engine; between its matches and the composites only
        composing, which keeps every match) whose engine found the matches in the
        order composites are listed writes the attributes straight into the events,
        with no columns in between: a live feed's usual step."""
        if dtype is not self._direct_dtype:
            self._direct_dtype, self._direct = dtype, self._direct_of(dtype)
            self._no_rows = np.zeros(0, dtype)
        if self._direct is None:
            composites = self.process(events)
            return as_events(composites, dtype), composites.causes
        found = self.engines[0].process(events)
        if not len(found):  # most live steps
            return self._no_rows, found.terminator
        if not found.ordered:
            composites = self._union([found])[0]
            return as_events(composites, dtype), composites.causes
        rows = np.zeros(len(found), dtype)
        first = found.elements[0]
        rows["ts"] = first["ts"]
        rows["key"] = first["key"]
        for attr, expr in self._direct:
            rows[attr] = attribute_values(self.expansions[0], found, expr)
        return rows, found.terminator

    def _direct_of(self, dtype: np.dtype) -> tuple[tuple[str, Expr], ...] | None:
        """The attributes :meth:`events` writes straight into events of ``dtype``, with
        the expression of each (those not assigned stay zero), or None when it cannot:
        the rule is not plain, composing it checks matches (aggregates, negations,
        filters), or an attribute of ``dtype`` is not of the type composing gives."""
        if (self.growth is not None or self.merger is not None or self.skipper is not None
                or self.consumer is not None or self.greed is not None
                or len(self.engines) != 1):
            return None
        rule = self.expansions[0]
        if rule.aggregates or rule.negations or rule.filters:
            return None
        names = dtype.names or ()
        attributes = self._defines[0].attributes
        if any(a not in names or dtype[a] != kind for a, kind, _ in attributes):
            return None
        return tuple((a, expr) for a, _, expr in attributes if expr is not None)

    def flush(self) -> Composites:
        """End of stream: the composites of terminators the engines still hold."""
        composites = self._union([e.flush() for e in self.engines])[0]
        return composites if self.skipper is None else self._released(None)

    def snapshot(self) -> list[Any]:
        """One snapshot per engine, then the consumption's history (if it consumes) or
        the skip strategy's held matches (if it skips); with an unbounded closure, whose
        engines come and go, all of that and the history in one item."""
        state = [e.snapshot() for e in self.engines]
        extra = self.consumer or self.skipper
        state = state if extra is None else [*state, extra.snapshot()]
        if self.growth is None:
            return state
        return [(self.longest, self.growth.snapshot(), tuple(state))]

    def restore(self, state: list[Any]) -> None:
        """Return every engine (and the consumption or skip) to its state in ``state``."""
        state = list(state)
        if self.growth is not None:
            longest, history, parts = state[0]
            self.growth.restore(history)
            self.longest = -1
            self._grow(longest, replay=False)
            state = list(parts)
        extra = self.consumer or self.skipper
        if extra is not None:
            extra.restore(state.pop())
        for engine, s in zip(self.engines, state, strict=True):
            engine.restore(s)

    @property
    def _engine_registry(self) -> TypeRegistry:
        """The registry the engines read: the graph's, or the merger's with the derived
        types of last/first disjunctions."""
        return self.registry if self.merger is None else self.merger.registry

    @property
    def parts(self) -> int:
        """How many items :meth:`snapshot` returns."""
        if self.growth is not None:
            return 1
        return len(self.engines) + (self.consumer is not None or self.skipper is not None)

    def _grow(self, needed: int, replay: bool = True) -> None:
        """Run the unbounded closure's expansions up to length ``needed`` (at most
        :data:`MAX_EXPANSIONS` engines), new engines started on the history."""
        if needed <= self.longest:
            return
        expansions = expand(self.rule, self.ticks_per_second, needed)
        if len(expansions) > MAX_EXPANSIONS:
            raise RuleError(f"rule {self.rule.name}: its unbounded closure would need "
                            f"{needed} items ({len(expansions)} plain sequences, more than "
                            f"{MAX_EXPANSIONS}): a window holds too many of its events; "
                            "shorten the window or bound the closure")
        old = dict(zip(self.expansions, self.engines, strict=True)) if replay else {}
        engines = []
        for plain in expansions:
            engine = old.get(plain)
            if engine is None:
                engine = self.engine_class(plain, self._engine_registry,
                                           ticks_per_second=self.ticks_per_second)
                assert self.growth is not None
                if replay and len(self.growth.history):
                    history = self.growth.history
                    if self.merger is not None:
                        history = self.merger.add(history)[0]
                    engine.process(history)  # its old matches are not new
            engines.append(engine)
        self.expansions, self.engines, self.longest = expansions, engines, needed
        self._defines = [Defines(r) for r in expansions]
        self._placed = placements(self.rule, needed) if self.greed else []

    def _released(self, batch_ts: np.ndarray | None) -> Composites:
        """The composites the skip strategy decided and kept."""
        assert self.skipper is not None
        terminators, columns, causes = self.skipper.release(batch_ts)
        return Composites(terminators, causes, columns)

    def _union(self, found: list[Matches]) -> tuple[Composites, list[np.ndarray]]:
        """The composites of the engines' matches, and per expansion the matches kept;
        under a skip strategy they go to the skipper (with their marks)."""
        parts, kept_all, found_marks = [], [], []
        composed = [compose(rule, m, d) if len(m) else (np.zeros(0, np.int64), {})
                    for rule, m, d in zip(self.expansions, found, self._defines, strict=True)]
        if self.greed is not None:
            composed = self._greedy(found, composed)
        for rule, matches, (kept, columns) in zip(self.expansions, found, composed,
                                                  strict=True):
            if not len(kept):
                kept_all.append(np.zeros(0, np.int64))
                continue
            kept_all.append(kept)
            if len(kept) == len(matches) and matches.ordered:  # every match, in order
                first = matches.elements[0]
                terminators = (first.copy() if first.dtype == _TERMINATOR
                               else convert(first, _TERMINATOR))
                causes = matches.terminator
            else:
                terminators = take(matches.elements[0], kept, _TERMINATOR)
                causes = matches.terminator[kept]
            if self._origin is not None:  # a row of the batch with the merger's copies
                causes = self._origin[causes]
            parts.append(Composites(terminators, causes, columns))
            if self.skipper is not None:
                found_marks.append(marks(rule, matches, kept))
        composites = _concatenated(parts, self._none, ordered=True)
        if self.skipper is not None and parts:
            order = _terminator_order(parts)
            self.skipper.hold(composites.terminators, composites.columns,
                              np.concatenate(found_marks)[order])
        return composites, kept_all


    def _greedy(self, found: list[Matches],
                composed: list[tuple[np.ndarray, dict[str, np.ndarray]]]
                ) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Of the composed matches of each terminator that choose the same events for
        every element but the greedy (reluctant) closure, those whose items no other's
        items strictly contain (are strictly contained in)."""
        assert self.greed is not None
        element, mode = self.greed
        groups: dict[tuple, list[tuple[int, int, frozenset]]] = {}
        for x, (matches, (kept, _)) in enumerate(zip(found, composed, strict=True)):
            if not len(kept):
                continue
            at = [list(zip(m["ts"][kept].tolist(), order_key(m[kept]).tolist(), strict=True))
                  for m in matches.elements]
            new = self._placed[x]
            for j in range(len(kept)):
                others = tuple(tuple(at[c][j] for c in copies)
                               for e, copies in enumerate(new) if e != element)
                items = frozenset(at[c][j] for c in new[element])
                groups.setdefault(others, []).append((x, j, items))
        drop: set[tuple[int, int]] = set()
        for members in groups.values():
            for x, j, items in members:
                if any(items < other if mode == "greedy" else other < items
                       for _, _, other in members):
                    drop.add((x, j))
        out = []
        for x, (kept, columns) in enumerate(composed):
            keep = np.array([(x, j) not in drop for j in range(len(kept))], bool)
            out.append((kept[keep], {a: c[keep] for a, c in columns.items()}))
        return out


def _terminator_order(parts: list[Composites]) -> np.ndarray:
    """The order that sorts the concatenated ``parts`` by terminator (stable)."""
    terminators = np.concatenate([p.terminators for p in parts])
    return np.lexsort((order_key(terminators), terminators["ts"]))


def _concatenated(parts: list[Composites], none: Composites, ordered: bool = False
                  ) -> Composites:
    """``parts`` as one; ``ordered``: sorted by terminator (stable), as parts of one
    batch from several expansions must be."""
    if len(parts) < 2:
        return parts[0] if parts else none
    terminators = np.concatenate([p.terminators for p in parts])
    order = _terminator_order(parts) if ordered else np.arange(len(terminators))
    return Composites(terminators[order], np.concatenate([p.causes for p in parts])[order],
                      {a: np.concatenate([p.columns[a] for p in parts])[order]
                       for a in none.columns})
