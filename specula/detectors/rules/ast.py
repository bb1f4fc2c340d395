"""The rule model: what a parsed TESLA-style rule is, and what it means.

Both front ends (the text syntax in :mod:`~specula.detectors.rules.parser` and the
Python builder in :mod:`~specula.detectors.rules.builder`) produce a :class:`Rule`; all
engines (AIP, CDP on CPU, CDP on GPU) execute one. This module is the single place where
the semantics is written down; the engines and the brute-force reference in the tests
follow it.

Shape of a rule
---------------
::

    define CE(att1: int, att2: int)
    from   C(att=$x)                                  <- element 0, the terminator
       and last B(att=$x) within 100000 from C        <- element 1, anchored at element 0
       and last A(att=$x) within 100000 from B        <- element 2, anchored at element 1
    where  att1=$x and att2=Sum(A(att=$x).value within 100000 from B)

The *chain* is the terminator followed by the sequence steps, each anchored at the
element just before it (TESLA allows trees; the paper and this project use linear
chains, and ``from`` must name the previous element). Element ``i`` of a match is the
event chosen for ``chain[i]``.

Semantics
---------
Engines consume events in stream order: ascending ``(ts, producer << 40 | seq)``, the
order an ordering unit delivers. That order key is an event's *position*.

* **Patterns.** An event matches ``T(c1 and c2 ...)`` when its type is ``T`` and every
  constraint holds. A constraint compares a payload attribute with a literal
  (``=, !=, <, <=, >, >=``) or binds it to a parameter (``attr=$x``, equality only).
* **Parameters.** ``$x`` stands for one value per match: every element, aggregate and
  negation that mentions ``$x`` must carry that value in the named attribute. The value
  is *bound* by the first chain element that mentions it (the terminator, or the
  earliest listed step); every parameter must be mentioned in the chain. A pattern
  that names one parameter twice (``A(x=$p and y=$p)``) only matches events whose two
  attributes are equal, the terminator included. Parameters compare exactly: as int64
  when all attributes bound to one are integers or bools, otherwise as float64.
* **Terminator.** Every event matching ``chain[0]`` (type and literal constraints; its
  own parameters are free) starts one evaluation; composite events get the
  terminator's ``ts`` and ``key``. No other event produces output.
* **Aliases.** ``AMZN() as b`` names an element ``b``; an element without an alias is
  named by its type. ``from``, ``between`` and ``name.attr`` refer to elements by name,
  and a name must denote one element (an alias may not repeat or equal a type of the
  chain), so one type can occur several times and still be referred to.
* **Predicates.** Inside an element's parentheses, a comparison that is not ``attr op
  literal`` or ``attr=$x`` is a predicate: ``AMZN(open < c.open and open * 2 > ts)``.
  A bare attribute is the event's own; ``name.attr`` reads an element *before* it in the
  chain (declared earlier in the text), and ``$x`` a parameter bound by one. ``ts`` is
  addressable like an attribute, everywhere. Predicates are part of the pattern: they
  decide the candidates, so ``last`` and ``first`` select among the events that
  satisfy them. They compute in float64 (exact for integers up to 2**53). The
  predicates of a ``last``/``first`` step may read only the event itself and the
  element the step follows (which keeps the automaton engine exact without knowing the
  future); ``each`` steps may read every element before them.
* **Steps.** Given the chosen anchor ``a = element[i-1]`` and the elements ``0..i-1``
  chosen so far, the *candidates* of step ``i`` are the events ``e`` matching its
  pattern (literal constraints, parameters already bound, predicates) with ``a.ts -
  window <= e.ts < a.ts`` under ``ties strict`` (the default: equal time stamps never
  form a sequence) or ``a.ts - window <= e.ts <= a.ts`` under ``ties nonstrict``, where
  ``e`` must also differ from every event already in the match (an event with the
  anchor's time stamp may precede it, whatever their arrival order, as in OpenCEP and
  FlinkCEP on event time). ``each`` takes every candidate, ``last`` the candidate with
  the greatest position, ``first`` the one with the smallest; the candidates of a
  disjunction ``(B(...) | C(...)) as x`` are those of all its alternatives together, so
  ``last (B(...) | C(...)) as x`` is the latest event matching either. Selection is local:
  ``last`` picks the latest candidate even if no event for a later step exists behind it
  (then that partial sequence yields nothing; the engine does not fall back to an
  earlier candidate). No candidate: no match from that partial sequence. (A step may
  depend on a parameter bound by an element *before* it in the chain but *later* in time
  than its own candidates' successors; AIP then keeps the newest candidate per parameter
  value, so all engines still select the same event.)
* **Pattern window.** ``within W`` after the sequence bounds the whole match: every
  element ``e`` has ``e.ts >= T.ts - W`` (``T`` the terminator). It filters matches
  after selection, like the span limit of FlinkCEP's ``within``: for ``each`` and
  ``last`` steps that is the same as narrowing their candidates; a ``first`` step picks
  the earliest candidate of its own window and the match is dropped if that one lies
  outside ``W``. A step written without ``within`` takes ``W`` as its window.
* **Equal time stamps under ``ties nonstrict``.** A terminator can only be evaluated
  once every event with its time stamp has arrived, so engines hold the events of the
  newest time stamp until a later one arrives (or the stream ends, ``flush``).
  Aggregates and negations keep their strict windows under either policy.
* **Aggregates.** ``Sum | Avg | Min | Max (T(constraints).attr within W from E)`` and
  ``Count(T(constraints) within W from E)`` range over the events ``e`` matching the
  pattern (parameters bound by the match) with ``E.ts - W <= e.ts < E.ts`` where ``E``
  is the matched chain element named. ``Sum`` and ``Count`` of nothing are 0. ``Avg``,
  ``Min`` and ``Max`` of nothing are undefined, and a match with an undefined aggregate
  produces no composite event; so does ``Min``/``Max`` over a NaN value. Values are
  float64 (Count too); sums run in stream order on the CPU, in a tree on the GPU, so
  float sums may differ in the last bits between the two.
* **Negations** (an extension of the paper's subset). ``not T(c) within W from E``:
  no event matching ``T(c)`` with ``E.ts - W <= e.ts < E.ts``. ``not T(c) between D
  and E``: none with ``D.ts < e.ts < E.ts`` (``D`` is the later chain element, the
  earlier in time; the parser refuses the reverse order). They are Count aggregates
  that must be 0.
* **Absence at the end** (time-driven output: FlinkCEP's ``notFollowedBy(X).within(W)``
  and timed-out partial matches, Esper's ``A -> (timer:interval(W) and not X)``).
  ``not T(c) within W after E``, ``E`` the terminator: a match of the rest of the rule
  waits until event time reaches ``E.ts + W``. It is dropped if an event matching
  ``T(c)`` (parameters bound by the match) has ``E.ts < e.ts <= E.ts + W`` (a step's
  window, seen from its anchor); else it fires with time stamp ``E.ts + W`` and the
  terminator's key, caused by the first event of the rule's input types with ``ts >
  E.ts + W`` (event time is the input in stream order), by the ordering unit once it
  has handed every input up to ``E.ts + W`` (its clock: punctuations and idleness move
  it while the rule's input is quiet), or at the end of the stream.
  With several, each forbids its own window and the latest deadline stamps the output.
  Output fired by time is output like any other: a late ``T`` retracts it; the
  detector holds its unit's progress below its earliest waiting deadline
  (:meth:`~specula.detectors.Detector.time_hold`).
  Needs ``ties strict``; does not combine with ``consuming``. Under ``partition by``
  only events of the terminator's partition forbid. The timed-out partial matches of
  ``A -> B within W`` are the rule ``from A(...) and not B(...) within W after A``:
  every ``A`` either is chosen by ``from B(...) and each A(...) within W from B`` or
  times out. See :mod:`~specula.detectors.rules.absence`.
* **Filters.** ``45 < $t`` and other comparisons of expressions must all hold.
* **Where.** Each composite attribute is assigned an expression over literals,
  parameters, aggregate values, payload attributes of chain elements (``name.attr``,
  ``name`` an alias or a type that occurs once in the chain; ``ts`` included) and ``+ -
  * /``. Aggregates written inline in ``where`` are named ``<function>#<index>``
  (``sum#0``), a name no ``$x`` can spell. Attributes not assigned are 0. The
  composite's type is registered with the attributes of ``define`` (``int`` -> int64,
  ``float``/``double`` -> float64, ``bool`` -> bool, ``string`` -> a string field, int64
  codes of texts: payload columns are numeric).
* **Strings.** String attributes, literals (``"AAPL"``) and parameters bound to string
  attributes compare with ``=`` and ``!=`` only, never with numbers; see
  :mod:`~specula.detectors.rules.strings`.
* **Output order.** The composites of one terminator come in ascending order of the
  positions of elements 1, 2, ... (lexicographically); terminators in stream order.
* **Consumption** (``consuming a, b``, TESLA's clause): the events a composite event
  chose for the named elements (every item of a closure) are consumed, gone for the
  rule's later evaluations: later terminators neither choose nor aggregate nor count
  them, nor does a consumed event fire as a terminator. Terminators of equal time
  stamp are evaluated together, so consumption takes effect from the next time stamp
  on: two terminators of one time stamp may share an event (which order of equal time
  stamps would otherwise decide, and the arrival order must not). Matches dropped by a
  negation, a filter or an undefined aggregate consume nothing.
* **Contiguity.** A step whose anchor is named with ``next`` instead of ``from``
  (``each B() within 5 next C``, FlinkCEP's ``B.next(C)``) is *strictly contiguous*:
  its candidates are the events that, in addition, have no event of a type the rule
  reads with a time stamp strictly between theirs and the anchor's (for a closure: also
  between each item and the next). ``from`` and ``followedBy`` are the relaxed
  contiguity of the other steps. Only ``each`` and ``last`` steps take ``next`` (for
  them the candidate filter is the same as checking the chosen event afterwards).
* **Runs** (``each B(...)+ runs as bs``, FlinkCEP's default ``oneOrMore()`` and
  ``times(n, m)``, SASE's skip-till-next-match): a closure whose consecutive items have
  no event matching its pattern (parameters bound by the match) with a time stamp
  strictly between theirs: every run of consecutive candidates, any start, any end.
  Closures without predicates only.
* **Until** (``each B(...){n,m} as bs until X(...) within W from C``, FlinkCEP's
  ``until``): no event matching ``X(...)`` has a time stamp strictly between the
  closure's first and last items (the loop ends at an ``X``; a step after the closure
  may still follow one).
* **After-match skip** (``skip ...`` after ``where``, FlinkCEP's
  ``AfterMatchSkipStrategy``). A match *starts* at its earliest event and *ends* at
  its latest (positions). Take the matches the rule has without the clause (``skip
  none``, the default) in ascending order of start, then end, then output order; a
  match is kept unless a kept match before it discards its start: ``skip to next``
  discards the starts up to the kept match's start, ``skip past last event`` the starts
  up to its end, ``skip to first x`` / ``skip to last x`` the starts before the earliest
  / latest event of ``x`` in the kept match (none if ``x`` chose no event: an optional
  closure). This is the order in which FlinkCEP releases completed matches under a skip
  strategy, so the kept matches are FlinkCEP's. A match can be decided only when no
  match that starts before it can still end: engines hold it until the stream passes
  its start by the rule's reach (the steps' windows added up, capped by the pattern
  window), or ends. The kept composites come in the order of that walk (FlinkCEP's
  order), not in terminator order. ``skip`` and ``consuming`` do not mix.
* **Closures, disjunctions, conjunctions, partitions** (``each B(...){n,m} as bs``,
  optional ``B(...)?``, unbounded ``B(...)+``, ``greedy``/``reluctant`` closures,
  ``(A(...) | B(...)) as x``, ``each``/``last (A(...) as a & B(...) as b) as g``, ``partition by
  attr``): a rule with them means a union of plain rules; see
  :mod:`~specula.detectors.rules.expand`.

Windows are written as a number of ticks (``within 100000``) or with a unit
(``within 5 min.``, ``ms``, ``s``, ``min``, ``h``) that :meth:`Window.ticks` converts
with the graph's ticks per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace

from specula.detectors.rules._ast_exprs import (
    COMPARATORS,
    FUNCTIONS,
    AggRef,
    Arith,
    AttrRef,
    BinOp,
    Comparator,
    Comparison,
    Const,
    Expr,
    Fold,
    Function,
    Item,
    Param,
    ParamRef,
    RuleError,
    quote,
)
from specula.detectors.rules._ast_patterns import (
    CONTIGUITIES,
    GREEDS,
    SELECTIONS,
    STRATEGIES,
    TIES,
    UNIT_SECONDS,
    Aggregate,
    Constraint,
    Contiguity,
    Greed,
    Negation,
    Pattern,
    Selection,
    Skip,
    Step,
    Strategy,
    Ties,
    Value,
    Window,
)

__all__ = [
    "ATTRIBUTE_TYPES", "COMPARATORS", "CONTIGUITIES", "FUNCTIONS", "GREEDS", "NO_SKIP",
    "SELECTIONS", "STRATEGIES", "TIES", "UNIT_SECONDS", "AggRef", "Aggregate", "Arith",
    "AttrRef", "BinOp", "Comparator", "Comparison", "Const", "Constraint", "Contiguity", "Expr",
    "Fold", "Function", "Greed", "Item", "Negation", "Param", "ParamRef", "Pattern", "Rule",
    "RuleError", "Selection", "Skip", "Step", "Strategy", "Ties", "Value", "Window", "quote",
]

NO_SKIP = Skip()
"""The default after-match strategy: every match."""

ATTRIBUTE_TYPES: dict[str, str] = {
    "int": "i8", "float": "f8", "double": "f8", "bool": "?", "string": "i8",
}


@dataclass(frozen=True)
class Rule:
    """A rule: the composite type it defines and how to detect and fill it."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    terminator: Pattern
    steps: tuple[Step, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    negations: tuple[Negation, ...] = ()
    filters: tuple[Comparison, ...] = ()
    assignments: tuple[tuple[str, Expr], ...] = ()
    within: Window | None = None
    ties: Ties = "strict"
    partition: str = ""
    consuming: tuple[int, ...] = ()
    skip: Skip = NO_SKIP
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        self.check()

    @property
    def chain(self) -> tuple[Pattern, ...]:
        """Element patterns: the terminator, then the steps' patterns."""
        return (self.terminator, *(s.pattern for s in self.steps))

    @property
    def input_types(self) -> tuple[str, ...]:
        """Every event type the rule reads, in first-mention order."""
        names = [t for p in self.chain for t in p.types]
        names += [a.pattern.type for a in self.aggregates]
        names += [n.pattern.type for n in self.negations]
        names += [p.type for p in self.until_patterns]
        return tuple(dict.fromkeys(names))

    @property
    def until_patterns(self) -> tuple[Pattern, ...]:
        """The patterns of the closures' ``until`` clauses."""
        return tuple(s.until for s in self.steps if s.until is not None)

    @property
    def plain(self) -> bool:
        """Whether every element is one event of one pattern (no closure, no
        disjunction, no conjunction, no ``next``), there is no ``partition by`` and no
        string literal (the skip strategy runs after the engines).
        Engines run plain rules; others run as the union of their expansions
        (:func:`~specula.detectors.rules.expand.expand`)."""
        return (all(s.times is None and not s.group and s.contiguity == "relaxed"
                    for s in self.steps)
                and not self.partition and not any(p.alternatives for p in self.chain)
                and not self.texts())

    def texts(self) -> set[str]:
        """The string literals of the rule (which engines see as their codes)."""
        found: set[str] = set()
        stack: list[object] = [self.chain, self.aggregates, self.negations, self.filters,
                               self.assignments]
        while stack:
            node = stack.pop()
            if isinstance(node, Const | Constraint) and isinstance(node.value, str):
                found.add(node.value)
            elif isinstance(node, tuple):
                stack += node
            elif is_dataclass(node):
                stack += [getattr(node, f.name) for f in fields(node)]
        return found

    def closure(self, element: int) -> bool:
        """Whether chain ``element`` is a closure ``T(...){n,m}``."""
        return element > 0 and self.steps[element - 1].times is not None

    def unbounded(self) -> int | None:
        """The chain element of the rule's unbounded closure (``B()+``), if it has one."""
        return next((i for i, s in enumerate(self.steps, start=1)
                     if s.times is not None and s.times[1] is None), None)

    def optional(self, element: int) -> bool:
        """Whether chain ``element`` may choose no event (a closure ``T(...){0,m}``)."""
        times = self.steps[element - 1].times if element > 0 else None
        return times is not None and times[0] == 0

    def binder(self, name: str) -> int:
        """Index of the chain element that binds parameter ``name``."""
        for i, pattern in enumerate(self.chain):
            if any(p.name == name for p in pattern.params()):
                return i
        raise RuleError(f"rule {self.name}: parameter ${name} is not bound by any element "
                        "of the sequence")

    def check(self) -> None:
        """Raise :class:`RuleError` if the rule is inconsistent."""
        if not self.name.isidentifier():
            raise RuleError(f"composite type name {self.name!r} is not an identifier")
        names = [a for a, _ in self.attributes]
        if len(set(names)) != len(names):
            raise RuleError(f"rule {self.name}: duplicate attribute in define")
        for attr, kind in self.attributes:
            if kind not in ATTRIBUTE_TYPES:
                raise RuleError(f"rule {self.name}: attribute {attr!r} has unknown type "
                                f"{kind!r}; use one of {', '.join(ATTRIBUTE_TYPES)}")
        n = len(self.chain)
        for agg in self.aggregates:
            if not 0 <= agg.anchor < n:
                raise RuleError(f"rule {self.name}: aggregate {agg.name} is anchored at "
                                f"element {agg.anchor}, which does not exist")
            if (agg.attr is None) != (agg.function == "count"):
                raise RuleError(f"rule {self.name}: aggregate {agg.name}: Count takes no "
                                "attribute, the other functions need one")
        for neg in self.negations:
            if not 0 <= neg.anchor < n or (neg.after is not None and not 0 <= neg.after < n):
                raise RuleError(f"rule {self.name}: negation of {neg.pattern.type} refers to "
                                "an element that does not exist")
            if (neg.within is None) == (neg.after is None):
                raise RuleError(f"rule {self.name}: negation of {neg.pattern.type} needs "
                                "either 'within' or 'between'")
        self._check_absences()
        if self.partition and not self.partition.isidentifier():
            raise RuleError(f"rule {self.name}: partition by {self.partition!r}: not an "
                            "attribute name")
        if any(not 0 <= i < n for i in self.consuming) or list(self.consuming) != sorted(
                set(self.consuming)):
            raise RuleError(f"rule {self.name}: consuming names chain elements "
                            f"{list(self.consuming)}; each must exist and appear once")
        if self.ties not in TIES:
            raise RuleError(f"rule {self.name}: ties must be strict or nonstrict, got "
                            f"{self.ties!r}")
        self._check_patterns()
        self._check_modes()
        mentioned = {p.name for pat in self.chain for p in pat.params()}
        used = {p.name for a in self.aggregates for p in a.pattern.params()}
        used |= {p.name for g in self.negations for p in g.pattern.params()}
        used |= {p.name for g in self.until_patterns for p in g.params()}
        for name in sorted(used - mentioned):
            raise RuleError(f"rule {self.name}: parameter ${name} is used by an aggregate or "
                            "negation but not bound by any element of the sequence")
        assigned = [a for a, _ in self.assignments]
        for attr in assigned:
            if attr not in names:
                raise RuleError(f"rule {self.name}: where assigns {attr!r}, which define "
                                "does not declare")
        agg_names = {a.name for a in self.aggregates}
        for expr in [e for _, e in self.assignments] + [x for f in self.filters
                                                        for x in (f.left, f.right)]:
            _check_expr(self, expr, mentioned | agg_names)
        predicates = [c for p in self.chain for o in p.options() for c in o.predicates]
        for comparison in [*self.filters, *predicates]:
            _check_literals(self, comparison)
        for _, expr in self.assignments:
            _check_literals(self, Comparison(expr, "=", expr))

    @property
    def absences(self) -> tuple[Negation, ...]:
        """The negations ``not T within W after E``: absence at the end, decided by
        the passing of event time."""
        return tuple(n for n in self.negations if n.ahead)

    def without_absences(self) -> Rule:
        """The rule less its absences at the end: what the engines match."""
        return replace(self, negations=tuple(n for n in self.negations if not n.ahead))

    def _check_absences(self) -> None:
        """Absence at the end follows the terminator, under strict ties, alone."""
        for neg in self.absences:
            where = f"rule {self.name}: 'not {neg.pattern.type} within ... after'"
            near = ("not", neg.pattern.type)
            if neg.anchor != 0 or neg.within is None:
                raise RuleError(f"{where} names {self.chain[neg.anchor].name}; an absence "
                                "at the end follows the last event of the sequence, its "
                                f"terminator: write 'after {self.terminator.name}'", near=near)
            if self.ties != "strict":
                raise RuleError(f"{where} needs 'ties strict': under nonstrict ties an "
                                "event of the terminator's time stamp may come before it",
                                near=near)
            if self.consuming:
                raise RuleError(f"{where} does not combine with 'consuming'", near=near)

    def _check_patterns(self) -> None:
        """Aliases name one element each; predicates read only what matching knows."""
        aliases = [p.alias for p in self.chain if p.alias]
        types = [t for p in self.chain for t in p.types]
        for alias in aliases:
            if aliases.count(alias) > 1 or alias in types:
                raise RuleError(f"rule {self.name}: {alias!r} names more than one element "
                                "of the sequence")
        for pattern in [a.pattern for a in self.aggregates] + [n.pattern for n in
                                                               self.negations] + list(
                self.until_patterns):
            if pattern.alias or pattern.predicates or pattern.alternatives:
                raise RuleError(f"rule {self.name}: aliases, alternatives and predicates "
                                "over other elements belong to elements of the sequence, "
                                "not to aggregates, negations or 'until' "
                                f"({pattern.type})")
        from specula.detectors.rules.expand import check_shapes  # expand imports this

        check_shapes(self)
        for i, pattern in enumerate(self.chain):
            for comparison in pattern.predicates:
                for expr in (comparison.left, comparison.right):
                    self._check_predicate(i, expr)

    def _check_modes(self) -> None:
        """Contiguity, skip strategy and optional elements: only where they mean one
        thing."""
        for i, step in enumerate(self.steps, start=1):
            if step.greed not in GREEDS:
                raise RuleError(f"rule {self.name}: a closure is greedy, reluctant or "
                                f"neither ('all'), not {step.greed!r}")
            if step.greed != "all" and step.times is None:
                raise RuleError(f"rule {self.name}: {self.chain[i].name} is one event; "
                                f"'{step.greed}' qualifies a closure: "
                                f"{self.chain[i].type}(...){{n,m}} {step.greed}")
            if step.runs and (step.times is None or any(
                    o.predicates for o in self.chain[i].options())):
                raise RuleError(f"rule {self.name}: 'runs' takes the items of a closure that "
                                "follow each other among its candidates, which its "
                                "constraints decide: a closure without predicates "
                                f"({self.chain[i].type}(...){{n,m}} runs; compare in where)")
            if step.until is not None and step.times is None:
                raise RuleError(f"rule {self.name}: {self.chain[i].name} is one event; "
                                f"'until {step.until.type}' ends a closure: "
                                f"{self.chain[i].type}(...){{n,m}} until {step.until.type}(...)")
            if step.contiguity not in CONTIGUITIES:
                raise RuleError(f"rule {self.name}: contiguity must be relaxed or strict, "
                                f"got {step.contiguity!r}")
            if step.contiguity == "strict" and (step.selection == "first" or step.group):
                raise RuleError(f"rule {self.name}: {self.chain[i].name} is 'next' to the "
                                "element it follows, which only 'each' and 'last' steps "
                                "can be (not 'first' steps, not conjunctions)")
        if self.skip.element is not None and not 0 <= self.skip.element < len(self.chain):
            raise RuleError(f"rule {self.name}: skip names element {self.skip.element}, "
                            "which does not exist")
        qualified = [self.chain[i].name for i, s in enumerate(self.steps, start=1)
                     if s.greed != "all"]
        if len(qualified) > 1 or (qualified and self.consuming):
            raise RuleError(f"rule {self.name}: greedy and reluctant closures "
                            f"({', '.join(qualified)}): one per rule, not with 'consuming'")
        if self.skip.strategy != "none" and self.consuming:
            raise RuleError(f"rule {self.name}: 'skip' and 'consuming' are two ways of "
                            "discarding matches; use one")
        for element in (a.anchor for a in self.aggregates):
            self._check_present(element, "an aggregate window ends at")
        for neg in self.negations:
            self._check_present(neg.anchor, "a negation window ends at")
            if neg.after is not None:
                self._check_present(neg.after, "'between' starts at")

    def _check_present(self, element: int, role: str) -> None:
        if self.optional(element):
            name = self.chain[element].name
            raise RuleError(f"rule {self.name}: {role} {name}, which may choose no event "
                            f"({name}{{0,m}}); anchor it at an element that is always there")

    def _check_predicate(self, i: int, expr: Expr) -> None:
        where = f"rule {self.name}: a predicate of {self.chain[i].name}"
        if isinstance(expr, BinOp):
            self._check_predicate(i, expr.left)
            self._check_predicate(i, expr.right)
        elif isinstance(expr, AggRef | Fold):
            raise RuleError(f"{where} uses an aggregate; aggregates are computed after "
                            "matching, compare them in where")
        elif isinstance(expr, ParamRef):
            binder = self.binder(expr.name)
            if binder > i:
                raise RuleError(f"{where} reads ${expr.name}, which a later element of the "
                                f"sequence ({self.chain[binder].name}) binds")
        elif isinstance(expr, AttrRef):
            if not 0 <= expr.element <= i:
                raise RuleError(f"{where} reads an element that comes after it in the "
                                "sequence; a predicate may read the event itself and the "
                                "elements before it")
            if expr.element == i:
                if expr.item not in ("", "next") or (expr.item and not self.closure(i)):
                    raise RuleError(f"{where} reads {expr.item or 'an'} item of itself; "
                                    "only a closure's items read the next one (bs[i+1])")
                return
            _check_item(self, expr)
            selection = self.steps[i - 1].selection if i else "each"
            if selection != "each" and self.closure(i):
                raise RuleError(f"{where} reads {self.chain[expr.element].name}, but a "
                                "'last' closure may compare each item only with itself "
                                "and the next one (bs[i+1]); use 'each', or compare in where")
            if selection != "each" and (expr.element < i - 1 or expr.item == "last"):
                raise RuleError(
                    f"{where} reads {self.chain[expr.element].name}, but a '{selection}' "
                    f"step may only compare with the element it follows "
                    f"({self.chain[i - 1].name}); use 'each', or compare in where")

    def predicate_reads(self, i: int) -> set[int]:
        """The chain elements that the predicates of element ``i`` read (``i`` included
        when they read the event itself); parameters count as their binder."""
        found: set[int] = set()

        def visit(expr: Expr) -> None:
            if isinstance(expr, BinOp):
                visit(expr.left)
                visit(expr.right)
            elif isinstance(expr, AttrRef):
                found.add(expr.element)
            elif isinstance(expr, ParamRef):
                found.add(self.binder(expr.name))

        for comparison in self.chain[i].predicates:
            visit(comparison.left)
            visit(comparison.right)
        return found

    def __str__(self) -> str:
        return self.source or repr(self)


def _check_expr(rule: Rule, expr: Expr, known: set[str]) -> None:
    if isinstance(expr, BinOp):
        _check_expr(rule, expr.left, known)
        _check_expr(rule, expr.right, known)
    elif isinstance(expr, ParamRef) and expr.name not in known:
        raise RuleError(f"rule {rule.name}: ${expr.name} is neither a parameter of the "
                        "sequence nor an aggregate")
    elif isinstance(expr, AttrRef) and not 0 <= expr.element < len(rule.chain):
        raise RuleError(f"rule {rule.name}: attribute {expr.attr!r} refers to element "
                        f"{expr.element}, which does not exist")
    elif isinstance(expr, AttrRef) and expr.item == "next":
        raise RuleError(f"rule {rule.name}: {rule.chain[expr.element].name}[i+1] means "
                        "the next item only in the closure's own pattern")
    elif isinstance(expr, AttrRef):
        _check_item(rule, expr)
    elif isinstance(expr, Fold) and not rule.closure(expr.element):
        raise RuleError(f"rule {rule.name}: {expr.function.capitalize()}(...) over "
                        f"{rule.chain[expr.element].name}, which is not a closure")
    elif isinstance(expr, Fold) and (expr.attr is None) != (expr.function == "count"):
        raise RuleError(f"rule {rule.name}: Count takes no attribute, the other functions "
                        "need one")
    elif (isinstance(expr, Fold) and expr.function not in ("count", "sum")
          and rule.optional(expr.element)):
        name = rule.chain[expr.element].name
        raise RuleError(f"rule {rule.name}: {expr.function.capitalize()}({name}.{expr.attr}) "
                        f"is undefined when {name} chooses no event ({name}{{0,m}}); use "
                        f"Count({name}) or Sum({name}.{expr.attr})")
    elif isinstance(expr, AggRef) and not 0 <= expr.index < len(rule.aggregates):
        raise RuleError(f"rule {rule.name}: aggregate #{expr.index} does not exist")


def _check_literals(rule: Rule, comparison: Comparison) -> None:
    """String literals are compared (``=``, ``!=``) with strings, never computed with."""
    texts = [s.value for s in (comparison.left, comparison.right)
             if isinstance(s, Const) and isinstance(s.value, str)]
    numbers = [s.value for s in (comparison.left, comparison.right)
               if isinstance(s, Const) and not isinstance(s.value, str)]
    if texts and comparison.op not in ("=", "!="):
        raise RuleError(f"rule {rule.name}: {quote(texts[0])} is compared with "
                        f"'{comparison.op}'; strings compare only with = and !=",
                        near=(quote(texts[0]),))
    if texts and numbers:
        raise RuleError(f"rule {rule.name}: {quote(texts[0])} is compared with the number "
                        f"{numbers[0]}; a string equals only a string",
                        near=(quote(texts[0]),))
    stack = [s for s in (comparison.left, comparison.right) if isinstance(s, BinOp)]
    while stack:
        op = stack.pop()
        for side in (op.left, op.right):
            if isinstance(side, Const) and isinstance(side.value, str):
                raise RuleError(f"rule {rule.name}: {quote(side.value)} is used in "
                                f"arithmetic ('{op.op}'); a string is only compared (= or "
                                "!=) or assigned", near=(quote(side.value),))
            if isinstance(side, BinOp):
                stack.append(side)


def _check_item(rule: Rule, ref: AttrRef) -> None:
    """A closure is read through one of its items, any other element directly."""
    name = rule.chain[ref.element].name
    if rule.closure(ref.element) and not ref.item:
        raise RuleError(f"rule {rule.name}: {name} is a closure of several events; read "
                        f"{name}[first].{ref.attr} or {name}[last].{ref.attr}, or aggregate "
                        f"over it (Sum({name}.{ref.attr}))")
    if ref.item and not rule.closure(ref.element):
        raise RuleError(f"rule {rule.name}: {name} is one event, not a closure; write "
                        f"{name}.{ref.attr}")
    if ref.item in ("first", "last") and rule.optional(ref.element):
        raise RuleError(f"rule {rule.name}: {name} may choose no event ({name}{{0,m}}), so "
                        f"{name}[{ref.item}] may not exist; read it with Count({name}) or "
                        f"Sum({name}.{ref.attr})")
