"""A fluent Python builder for rules; it produces the same :class:`Rule` as the text syntax.

Reading a builder chain aloud gives the rule text: :func:`rule` opens ``define``,
:meth:`RuleBuilder.when` names the terminator, :meth:`~RuleBuilder.each`,
:meth:`~RuleBuilder.last` and :meth:`~RuleBuilder.first` add steps (each anchored at the
element before it; ``as_=`` names an element, ``times=`` makes a closure or an optional
element, ``contiguity="strict"`` a ``next`` step), :meth:`~RuleBuilder.within`,
:meth:`~RuleBuilder.ties`, :meth:`~RuleBuilder.partition_by`, :meth:`~RuleBuilder.skip`
and :meth:`~RuleBuilder.consuming` are the clauses after the sequence, and
:meth:`~RuleBuilder.build` checks and returns the rule. A tuple of types is a disjunction
(``.last(("A", ("B", {"v": lt(5)})), as_="x")``); conjunctions and reading a closure's
items are written in the text syntax.
Every method returns a new builder; a builder is never changed, so a common prefix can
be shared.

Values in constraints and expressions:

* ``P.x`` is the parameter ``$x``;
* ``Ev.Smoke.area`` is the attribute ``Smoke.area`` of a chain element (by type or
  alias, ``Ev.b.open``; ``ts`` included);
* ``attr=3`` is the constraint ``attr=3``; other comparisons use :func:`gt`, :func:`ge`,
  :func:`lt`, :func:`le`, :func:`ne` (``value=gt(45)`` is ``value>45``), and a list
  gives several (``v=[gt(10), lt(20)]`` is ``v>10 and v<20``); a condition over an
  expression is a predicate (``open=gt(Ev.c.open)`` is ``open > c.open``);
* :func:`Sum`, :func:`Avg`, :func:`Min`, :func:`Max` and :func:`Count` are aggregates,
  whose ``before`` names the element the window ends at (``from`` in the text);
* expressions combine these and numbers with ``+ - * /``.

Examples
--------
Rule R5 of the paper:

>>> r5 = (rule("CE", att1="int", att2="int")
...       .when("C", att=P.x)
...       .last("B", within=100_000, att=P.x)
...       .last("A", within=100_000, att=P.x)
...       .where(att1=P.x,
...              att2=Sum("A", "value", within=100_000, before="B", att=P.x))
...       .build())
>>> from specula.detectors.rules.parser import parse_rule
>>> r5 == parse_rule('''define CE(att1: int, att2: int)
... from C(att=$x) and last B(att=$x) within 100000 from C
...   and last A(att=$x) within 100000 from B
... where att1=$x and att2=Sum(A(att=$x).value within 100000 from B)''')
True

OpenCEP's stock example (aliases, predicates, a window on the whole pattern,
non-strict ties):

>>> rising = (rule("Rising", a="double", c="double")
...           .when("AVID", as_="c")
...           .each("AMZN", as_="b", open=gt(Ev.c.open))
...           .each("AAPL", as_="a", open=gt(Ev.b.open))
...           .within("5 min").ties("nonstrict")
...           .where(a=Ev.a.open, c=Ev.c.open)
...           .build())
>>> rising == parse_rule('''define Rising(a: double, c: double)
... from AVID() as c and each AMZN(open > c.open) as b from c
...   and each AAPL(open > b.open) as a from b
... within 5 min ties nonstrict where a=a.open and c=c.open''')
True

Rule R3 binds an aggregate to ``$t`` and filters on it:

>>> r3 = (rule("Fire", area="string", measuredTemp="double")
...       .when("Smoke", area=P.a)
...       .aggregate("t", Avg("Temp", "value", within="5 min", before="Smoke", area=P.a))
...       .filter(45, "<", P.t)
...       .where(area=Ev.Smoke.area, measuredTemp=P.t)
...       .build())
>>> r3.filters
(Comparison(left=Const(value=45), op='<', right=ParamRef(name='t')),)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from specula.detectors.rules._builder_terms import (
    Agg,
    Avg,
    Cond,
    Count,
    Ev,
    Max,
    Min,
    Operand,
    P,
    Sum,
    Term,
    WindowLike,
    _Bin,
    _Field,
    _Var,
    eq,
    ge,
    gt,
    le,
    lt,
    ne,
)
from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    COMPARATORS,
    NO_SKIP,
    TIES,
    AggRef,
    Aggregate,
    Arith,
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Constraint,
    Contiguity,
    Expr,
    Greed,
    Negation,
    Param,
    ParamRef,
    Pattern,
    Rule,
    RuleError,
    Selection,
    Skip,
    Step,
    Strategy,
    Ties,
    Window,
)
from specula.detectors.rules.parser import inline_aggregate_name, parse_window

__all__ = ["Agg", "Avg", "Cond", "Count", "Ev", "Max", "Min", "P", "RuleBuilder", "Sum",
           "Term", "eq", "ge", "gt", "le", "lt", "ne", "rule"]

Element = str | tuple[str | tuple[str, Mapping[str, Any]], ...]
"""What a step names: a type, or a disjunction of types, each with its own constraints."""

# ----------------------------------------------------------------------- builder


def rule(name: str, /, **attributes: str) -> RuleBuilder:
    """Start a rule ``define name(attr: type, ...)``.

    Parameters
    ----------
    name : str
        The composite event type.
    **attributes : str
        Its attributes and their types (``int``, ``float``, ``double``, ``bool`` or
        ``string``), in order.

    Examples
    --------
    >>> r = rule("Alarm", level="int").when("Smoke", area=P.a).where(level=1).build()
    >>> r.attributes, r.assignments
    ((('level', 'int'),), (('level', Const(value=1)),))
    """
    for attr, kind in attributes.items():
        if not isinstance(kind, str) or kind.lower() not in ATTRIBUTE_TYPES:
            raise RuleError(f"rule {name}: attribute {attr!r} has unknown type {kind!r}; use "
                            f"one of {', '.join(ATTRIBUTE_TYPES)}")
    return RuleBuilder(name, tuple((a, k.lower()) for a, k in attributes.items()))


@dataclass(frozen=True)
class RuleBuilder:
    """A rule under construction; made by :func:`rule`, finished by :meth:`build`.

    Steps, aggregates, negations and element references are resolved when they are
    added, so a misspelt type fails at the call that mentions it.
    """

    name: str
    attributes: tuple[tuple[str, str], ...]
    chain: tuple[Pattern, ...] = ()
    steps: tuple[Step, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    negations: tuple[Negation, ...] = ()
    filters: tuple[Comparison, ...] = ()
    assignments: tuple[tuple[str, Expr], ...] = ()
    window: Window | None = None
    tie_policy: Ties = "strict"
    partition: str = ""
    consumed: tuple[int, ...] = ()
    skip_strategy: Skip = NO_SKIP

    # -------------------------------------------------------------------- sequence

    def when(self, type: str, /, *, as_: str = "", **constraints: Any) -> RuleBuilder:
        """The terminator: every event ``type(constraints)`` starts an evaluation
        (``as_`` names it, ``as`` in the text)."""
        if self.chain:
            raise RuleError(f"rule {self.name}: when() names the terminator and comes once, "
                            "first; add earlier events with each(), last() or first()")
        return replace(self, chain=(self._pattern(type, constraints, as_),))

    def each(self, type: Element, /, *, within: WindowLike | None = None, as_: str = "",
             times: tuple[int, int | None] | None = None, contiguity: Contiguity = "relaxed",
             until: str | None = None, greed: Greed = "all", runs: bool = False,
             **constraints: Any) -> RuleBuilder:
        """``and each type(constraints){n,m} as name within W from <previous element>``;
        without ``within=`` the step takes the pattern's window (:meth:`within`);
        ``times=(n, m)`` makes it a closure (``(0, 1)`` is ``?``, FlinkCEP's
        ``optional()``; ``(1, None)`` is ``+``, ``oneOrMore()``), ``contiguity="strict"``
        writes ``next`` for ``from``, ``until="X"`` ends the closure at an ``X()``
        (``until X()``), ``greed="greedy"`` (``"reluctant"``) keeps its maximal
        (minimal) choices of items and ``runs=True`` only items that follow each other
        among its candidates (``runs``).

        Examples
        --------
        >>> from specula.detectors.rules.parser import parse_rule
        >>> r = (rule("Q").when("C").each("B", within=5, times=(0, 1), as_="bs",
        ...                               contiguity="strict").build())
        >>> r == parse_rule("define Q() from C() and each B()? as bs within 5 next C")
        True
        """
        return self._step("each", type, within, as_, constraints, times, contiguity, until,
                          greed, runs)

    def last(self, type: Element, /, *, within: WindowLike | None = None, as_: str = "",
             times: tuple[int, int | None] | None = None, contiguity: Contiguity = "relaxed",
             until: str | None = None, greed: Greed = "all", **constraints: Any
             ) -> RuleBuilder:
        """``and last type(constraints){n,m} as name within W from <previous element>``
        (``times=``, ``contiguity=``, ``until=`` and ``greed=`` as for :meth:`each`)."""
        return self._step("last", type, within, as_, constraints, times, contiguity, until,
                          greed)

    def first(self, type: Element, /, *, within: WindowLike | None = None, as_: str = "",
              **constraints: Any) -> RuleBuilder:
        """``and first type(constraints) as name within W from <previous element>``.

        A tuple of types is a disjunction (also for :meth:`each` and :meth:`last`): an
        item is a type name or ``(type, {constraints})``, and the keyword constraints
        apply to every alternative, after its own.

        Examples
        --------
        >>> from specula.detectors.rules.parser import parse_rule
        >>> r = (rule("Q").when("C").first(("A", ("B", {"v": lt(5)})), as_="e", within=5,
        ...                                 p=P.x).build())
        >>> r == parse_rule("define Q() from C() and first (A(p=$x) | B(v < 5 and p=$x)) "
        ...                 "as e within 5 from C")
        True
        """
        return self._step("first", type, within, as_, constraints)

    def _step(self, selection: Selection, type: Element, within: WindowLike | None, alias: str,
              constraints: Mapping[str, Any], times: tuple[int, int | None] | None = None,
              contiguity: Contiguity = "relaxed", until: str | None = None,
              greed: Greed = "all", runs: bool = False) -> RuleBuilder:
        self._need_terminator(selection)
        window = None if within is None else _window(within)
        if times is not None:  # (n, None) is unbounded, B()+ for (1, None)
            times = (int(times[0]), None if times[-1] is None else int(times[-1]))
        step = Step(selection, self._pattern(type, constraints, alias), window,  # type: ignore[arg-type]
                    times, contiguity=contiguity,
                    until=None if until is None else Pattern(until), greed=greed, runs=runs)
        return replace(self, chain=(*self.chain, step.pattern), steps=(*self.steps, step))

    def within(self, window: WindowLike, /) -> RuleBuilder:
        """A window on the whole pattern (``within W`` after the sequence); steps added
        without ``within=`` take it."""
        return replace(self, window=_window(window))

    def ties(self, policy: Ties, /) -> RuleBuilder:
        """``ties strict`` (the default) or ``ties nonstrict``: whether events of equal
        time stamps may follow each other."""
        if policy not in TIES:
            raise RuleError(f"rule {self.name}: ties must be strict or nonstrict, got "
                            f"{policy!r}")
        return replace(self, tie_policy=policy)

    def partition_by(self, attr: str, /) -> RuleBuilder:
        """``partition by attr``: one independent instance of the rule per value."""
        return replace(self, partition=attr)

    def skip(self, strategy: Strategy, element: str | None = None, /) -> RuleBuilder:
        """The after-match skip strategy: ``"to_next"``, ``"past_last_event"``,
        ``"to_first"`` or ``"to_last"`` with the element's type or alias, or ``"none"``
        (``skip to next``, ``skip past last event``, ``skip to first x`` in the text).

        Examples
        --------
        >>> from specula.detectors.rules.parser import parse_rule
        >>> r = rule("S").when("C").each("B", within=5).skip("to_first", "B").build()
        >>> r == parse_rule("define S() from C() and each B() within 5 from C "
        ...                 "skip to first B")
        True
        """
        self._need_terminator("skip")
        index = None if element is None else self._element(element)
        return replace(self, skip_strategy=Skip(strategy, index))

    def consuming(self, *names: str) -> RuleBuilder:
        """``consuming a, b``: a composite event consumes the events it chose for these
        elements (types or aliases)."""
        self._need_terminator("consuming")
        found = [self._element(n) for n in names]
        if len(set(found)) < len(found):
            raise RuleError(f"rule {self.name}: consuming() names an element twice")
        return replace(self, consumed=tuple(sorted(found)))

    # ------------------------------------------------------- aggregates, negations

    def aggregate(self, name: str, agg: Agg, /) -> RuleBuilder:
        """Bind ``agg`` to the parameter ``$name`` (``$name=Func(...)`` in the text).

        Examples
        --------
        >>> r = (rule("Hot", t="double").when("Smoke", area=P.a)
        ...      .aggregate("t", Max("Temp", "value", within=300, before="Smoke", area=P.a))
        ...      .where(t=P.t).build())
        >>> r.aggregates[0].name, r.aggregates[0].function, r.assignments
        ('t', 'max', (('t', ParamRef(name='t')),))
        """
        self._need_terminator("aggregate")
        if not isinstance(agg, Agg):
            raise RuleError(f"rule {self.name}: aggregate({name!r}, ...) needs Sum(...), "
                            f"Avg(...), Min(...), Max(...) or Count(...), got {agg!r}")
        if any(a.name == name for a in self.aggregates):
            raise RuleError(f"rule {self.name}: ${name} is bound to two aggregates")
        return replace(self, aggregates=(*self.aggregates, self._aggregate(name, agg)))

    def absent(self, type: str, /, *, within: WindowLike | None = None,
               before: str | None = None, between: tuple[str, str] | None = None,
               after: str | None = None, **constraints: Any) -> RuleBuilder:
        """A negation: no ``type(constraints)`` in a window.

        ``absent(T, within=W, before=E)`` is ``not T(...) within W from E``;
        ``absent(T, between=(D, E))`` is ``not T(...) between D and E``;
        ``absent(T, within=W, after=E)`` is ``not T(...) within W after E``, absence at
        the end (``E`` the terminator), which fires when event time passes ``E.ts + W``
        (FlinkCEP's ``notFollowedBy(T).within(W)``).

        Examples
        --------
        >>> r = (rule("Quiet").when("C").last("B", within=10)
        ...      .absent("D", between=("B", "C")).build())
        >>> n = r.negations[0]
        >>> n.pattern.type, n.anchor, n.after, n.within
        ('D', 0, 1, None)
        """
        self._need_terminator("absent")
        pattern = _pattern(type, constraints)
        if after is not None and within is not None and before is None and between is None:
            negation = Negation(pattern, self._element(after), within=_window(within),
                                ahead=True)
        elif after is None and between is not None and within is None and before is None:
            earlier, anchor = self._element(between[0]), self._element(between[1])
            if earlier <= anchor:
                raise RuleError(f"rule {self.name}: between=({between[0]!r}, {between[1]!r}) "
                                "needs two elements, the earlier in time first")
            negation = Negation(pattern, anchor, after=earlier)
        elif after is None and between is None and within is not None and before is not None:
            negation = Negation(pattern, self._element(before), within=_window(within))
        else:
            raise RuleError(f"rule {self.name}: absent({type!r}) takes within= and before=, "
                            "within= and after=, or between=(earlier, later)")
        return replace(self, negations=(*self.negations, negation))

    # ------------------------------------------------------------ filters, where

    def filter(self, left: Operand, op: str, right: Operand, /) -> RuleBuilder:
        """Keep only the matches where ``left op right`` holds (``45 < $t``).

        Examples
        --------
        >>> r = rule("X").when("C", p=P.x).filter(P.x * 2, ">=", 3).build()
        >>> r.filters[0].op, r.filters[0].right
        ('>=', Const(value=3))
        """
        self._need_terminator("filter")
        if op not in COMPARATORS:
            raise RuleError(f"rule {self.name}: unknown comparator {op!r}; use one of "
                            f"{', '.join(COMPARATORS)}")
        aggregates = list(self.aggregates)
        comparison = Comparison(self._expr(left, aggregates), op,
                                self._expr(right, aggregates))
        return replace(self, aggregates=tuple(aggregates),
                       filters=(*self.filters, comparison))

    def where(self, **assignments: Operand) -> RuleBuilder:
        """Assign attributes of the composite event (``where attr=expr and ...``)."""
        self._need_terminator("where")
        declared = [a for a, _ in self.attributes]
        aggregates, assigned = list(self.aggregates), list(self.assignments)
        for attr, value in assignments.items():
            if attr not in declared:
                raise RuleError(f"rule {self.name}: where assigns {attr!r}, which rule() "
                                f"does not declare (it declares {', '.join(declared) or 'none'})")
            if any(a == attr for a, _ in assigned):
                raise RuleError(f"rule {self.name}: attribute {attr!r} is assigned twice")
            assigned.append((attr, self._expr(value, aggregates)))
        return replace(self, aggregates=tuple(aggregates), assignments=tuple(assigned))

    def build(self) -> Rule:
        """Check the rule and return it; raises :class:`RuleError` if inconsistent."""
        self._need_terminator("build")
        steps = []
        for step in self.steps:
            if step.within is None and self.window is None:
                raise RuleError(f"rule {self.name}: the step {step.pattern.name} needs "
                                "within=, or the pattern a window (.within(W))")
            steps.append(step if step.within is not None else replace(step,
                                                                      within=self.window))
        return Rule(self.name, self.attributes, self.chain[0], tuple(steps), self.aggregates,
                    self.negations, self.filters, self.assignments, within=self.window,
                    ties=self.tie_policy, partition=self.partition, consuming=self.consumed,
                    skip=self.skip_strategy)

    # ------------------------------------------------------------------ internals

    def _need_terminator(self, method: str) -> None:
        if not self.chain:
            raise RuleError(f"rule {self.name}: call when(<terminator type>, ...) before "
                            f"{method}()")

    def _element(self, type: str) -> int:
        """The chain element named ``type`` (its alias, or its type when it has none)."""
        found = [i for i, p in enumerate(self.chain) if p.name == type]
        if not found:
            raise RuleError(f"rule {self.name}: {type!r} is not an element of the sequence "
                            f"so far ({', '.join(p.name for p in self.chain)}); add its step "
                            "first")
        if len(found) > 1:
            raise RuleError(f"rule {self.name}: {type!r} names {len(found)} elements of the "
                            "sequence; refer only to types that occur once")
        return found[0]

    def _aggregate(self, name: str, agg: Agg) -> Aggregate:
        return Aggregate(name, agg.function, _pattern(agg.type, agg.constraints), agg.attr,
                         _window(agg.within), self._element(agg.before))

    def _pattern(self, type: Element, constraints: Mapping[str, Any], alias: str) -> Pattern:
        """An element's pattern: constraints, and predicates where a condition compares
        with an expression (``open=gt(Ev.c.open)`` is ``open > c.open``); a tuple of
        alternatives is a disjunction, each with its own constraints, then the shared
        ones."""
        if isinstance(type, tuple):
            options = [self._pattern(*((t, {}) if isinstance(t, str) else t), alias)
                       for t in type]
            shared = [self._pattern(o.type, constraints, alias) for o in options]
            merged = [replace(o, constraints=(*o.constraints, *x.constraints),
                              predicates=(*o.predicates, *x.predicates), alias="")
                      for o, x in zip(options, shared, strict=True)]
            return replace(merged[0], alias=alias, alternatives=tuple(merged[1:]))
        own = len(self.chain)
        pattern = _pattern(type, {a: v for a, v in constraints.items()
                                  if not _is_predicate(v)})
        predicates = []
        named = replace(self, chain=(*self.chain, replace(pattern, alias=alias)))
        for attr, spec in constraints.items():
            for cond in (spec if isinstance(spec, list | tuple) else [spec]):
                if _is_predicate(cond):
                    predicates.append(Comparison(AttrRef(own, attr), cond.op,
                                                 named._expr(cond.value, [])))
        return replace(pattern, alias=alias, predicates=tuple(predicates))

    def _expr(self, value: Operand, aggregates: list[Aggregate]) -> Expr:
        """Translate a term, appending the aggregates it holds to ``aggregates``."""
        if isinstance(value, bool | int | float):
            return Const(value)
        if isinstance(value, _Var):
            return ParamRef(value.name)
        if isinstance(value, _Field):
            return AttrRef(self._element(value.type), value.attr)
        if isinstance(value, Agg):
            index = len(aggregates)
            aggregates.append(self._aggregate(inline_aggregate_name(value.function, index),
                                              value))
            return AggRef(index)
        if isinstance(value, _Bin):
            left = self._expr(value.left, aggregates)
            right = self._expr(value.right, aggregates)
            return BinOp(cast(Arith, value.op), left, right)
        if hasattr(value, "item"):  # a NumPy scalar
            return Const(value.item())
        raise RuleError(f"rule {self.name}: {value!r} is not an expression; use numbers, "
                        "P.x, Ev.Type.attr, aggregates and + - * /")


def _pattern(type: str, constraints: Mapping[str, Any]) -> Pattern:
    out: list[Constraint] = []
    for attr, spec in constraints.items():
        specs = spec if isinstance(spec, list | tuple) else [spec]
        for item in specs:
            out.append(_constraint(type, attr, item))
    return Pattern(type, tuple(out))


def _is_predicate(spec: Any) -> bool:
    """Whether a constraint's value is a condition over an expression (a predicate)."""
    specs = spec if isinstance(spec, list | tuple) else [spec]
    return any(isinstance(s, Cond) and isinstance(s.value, Term) for s in specs)


def _constraint(type: str, attr: str, spec: Any) -> Constraint:
    if isinstance(spec, _Var):
        return Constraint(attr, "=", Param(spec.name))
    if isinstance(spec, Cond):
        if isinstance(spec.value, Term):
            raise RuleError(f"{type}({attr}...): aggregates compare after matching; use "
                            "filter()")
        return Constraint(attr, spec.op, _literal(type, attr, spec.value))
    return Constraint(attr, "=", _literal(type, attr, spec))


def _literal(type: str, attr: str, value: Any) -> int | float | bool | str:
    if hasattr(value, "item") and not isinstance(value, Term):
        value = value.item()
    if isinstance(value, bool | int | float | str):
        return value
    raise RuleError(f"{type}({attr}=...): a constraint takes a number, bool or string, a "
                    f"parameter (P.x) or a condition such as gt(45), got {value!r}")


def _window(within: WindowLike) -> Window:
    if isinstance(within, Window):
        return within
    if isinstance(within, str):
        return parse_window(within)
    if isinstance(within, bool) or not isinstance(within, int | float):
        raise RuleError(f"a window is a number of ticks, a text such as '5 min' or a Window, "
                        f"got {within!r}")
    return Window(within)

