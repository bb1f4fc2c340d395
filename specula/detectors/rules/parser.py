"""The text syntax of rules: its grammar, and the recursive-descent parser to :class:`Rule`.

The syntax is the subset of TESLA used by Cugola & Margara (rules R1-R5 of "Low latency
complex event processing on parallel hardware"), plus negations and free filters::

    rules      := rule+
    rule       := 'define' NAME '(' [NAME ':' TYPE (',' NAME ':' TYPE)*] ')'
                  'from' element ('and' from_item)* ['within' window]
                  ['partition' 'by' NAME] ['ties' ('strict' | 'nonstrict')]
                  ['where' where_item ('and' where_item)*]
                  ['skip' ('to' ('next' | 'first' NAME | 'last' NAME)
                           | 'past' 'last' 'event' | 'none')]
                  ['consuming' NAME (',' NAME)*]
    element    := (pattern | '(' pattern ('|' pattern)+ ')') [times] ['as' NAME]
    times      := ('{' INT [',' [INT]] '}' | '?' | '+' | '*') ['greedy' | 'reluctant'] ['runs']
                  (a closure, steps only: '?' is {0,1}, '+' {1,}, '*' {0,})
    conjunction := '(' pattern ['as' NAME] ('&' pattern ['as' NAME])+ ')' 'as' NAME
    pattern    := NAME '(' [pattern_item ('and' pattern_item)*] ')'
    pattern_item := constraint | expr comparator expr      (a predicate)
    constraint := NAME comparator (NUMBER | '-' NUMBER | STRING | 'true' | 'false' | PARAM)
    from_item  := ('each' | 'last' | 'first') (element ['until' pattern] | conjunction)
                  ['within' window] ('from' | 'followedBy' | 'next') NAME
                | 'not' pattern ('within' window ('from' | 'after') NAME
                                 | 'between' NAME 'and' NAME)
                | side [comparator side]
    side       := PARAM '=' aggregate          (binds the aggregate to the parameter)
                | expr
    where_item := NAME '=' expr                (assigns an attribute of define)
                | expr comparator expr         (a filter)
    expr       := term (('+' | '-') term)*
    term       := unary (('*' | '/') unary)*
    unary      := '-' unary | NUMBER | STRING | 'true' | 'false' | PARAM | NAME '.' NAME
                | NAME '[' ('first' | 'last' | 'i' | 'i' '+' '1') ']' '.' NAME
                | aggregate | fold | '(' expr ')'
    aggregate  := FUNC '(' pattern ['.' NAME] 'within' window 'from' NAME ')'
    fold       := FUNC '(' NAME ['.' NAME] ')'   (over the items of a closure)
    window     := NUMBER [('ms' | 's' | 'min' | 'h') ['.']]
    STRING     := '"' (any character but '"', '\\' and a line end | escape)* '"'
    escape     := '\\"' | '\\\\' | '\\n' | '\\t' | '\\r' | '\\u' HEX HEX HEX HEX

Decisions the paper leaves open:

* Keywords, units, aggregate functions and attribute types are case-insensitive; type,
  attribute and parameter names are not. ``#`` starts a comment that runs to the end of
  the line.
* A step's ``from`` must name the element just before it (chains are linear).
  ``followedBy`` means the same as ``from``; ``next`` makes the step strictly contiguous
  (``each B() within 5 next C`` is FlinkCEP's ``B.next(C)``). The
  ``from`` of an aggregate or a negation, ``between`` and ``Type.attr`` may name any
  element declared *earlier in the text*, and the name must be unique in the chain.
* ``not T(...) between D and E`` needs ``D`` to come after ``E`` in the chain (``D``
  happens first): it forbids ``T`` strictly between the two.
* ``not T(...) within W after E`` (absence at the end, fired when event time passes
  ``E.ts + W``) needs ``E`` to be the terminator.
* ``$t=Func(...)`` always binds an aggregate, on either side of a comparison or alone
  (``and $t=Avg(...)``); ``$t`` may then be used in filters and ``where``. A from item
  that is not a step, a negation or a binding is a filter, as is a ``where`` item that
  does not start with ``NAME =``: ``where area=$a and $t > 3`` assigns ``area`` and
  keeps only matches with ``$t > 3``. Filters in ``from`` and in ``where`` mean the
  same thing.
* Aggregates written inline (in ``where`` or in a filter) get the name
  ``"<function>#<index>"``, which no parameter can spell, and appear in
  :attr:`Rule.aggregates` in the order of the text, after and between the bound ones.
* Unary minus on a number is a negative literal; on anything else it is ``0 - x``.
* A string literal compares (``=``, ``!=``) with string attributes and parameters; what
  strings mean is in :mod:`~specula.detectors.rules.strings`.

Errors in the text raise :class:`RuleSyntaxError`, a :class:`RuleError` carrying the
line and column, whose message says what was expected and what was found.

The parser is in three modules, one stage each: :mod:`~specula.detectors.rules._lexer`
cuts the text into tokens (and defines :class:`RuleSyntaxError`),
:mod:`~specula.detectors.rules._terms` parses the productions that occur anywhere
(patterns, windows, expressions, aggregates), and this module the rule and its clauses,
checking at the end that every parameter the rule reads is bound.

Examples
--------
>>> rule = parse_rule('''
... define Fire(area: string, measuredTemp: double)
... from Smoke(area=$a) and last Temp(area=$a and value>45) within 5 min. from Smoke
... where area=Smoke.area and measuredTemp=Temp.value''')
>>> rule.name, rule.terminator.type, rule.steps[0].selection, rule.steps[0].within
('Fire', 'Smoke', 'last', Window(value=5, unit='min'))
>>> try:
...     parse_rule("define F() from A() and last B() from A")
... except RuleSyntaxError as exc:
...     print(exc)
line 1, column 34: expected 'within' (or 'within W' after the whole sequence), found 'from'
"""

from __future__ import annotations

from dataclasses import replace

from specula.detectors.rules._lexer import RuleSyntaxError, located
from specula.detectors.rules._terms import RuleState, TermParser, inline_aggregate_name
from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    COMPARATORS,
    SELECTIONS,
    TIES,
    Comparison,
    Contiguity,
    Expr,
    Greed,
    Negation,
    ParamRef,
    Pattern,
    Rule,
    RuleError,
    Skip,
    Step,
    Window,
)

__all__ = ["RuleSyntaxError", "inline_aggregate_name", "parse_rule", "parse_rules",
           "parse_window"]


def parse_rule(text: str) -> Rule:
    """Parse the text of exactly one rule.

    Parameters
    ----------
    text : str
        ``define ... from ... [where ...]``.

    Returns
    -------
    Rule
        The rule, with ``source`` set to its text.

    Raises
    ------
    RuleSyntaxError
        If the text is not exactly one well-formed rule.

    Examples
    --------
    >>> r = parse_rule("define CE(n: int) from C(att=$x) where n=$x * 2")
    >>> r.assignments
    (('n', BinOp(op='*', left=ParamRef(name='x'), right=Const(value=2))),)
    >>> r.source
    'define CE(n: int) from C(att=$x) where n=$x * 2'
    """
    parser = _Parser(text)
    rule = parser.rule()
    parser.expect_end("end of text (use parse_rules for several rules)")
    return rule


def parse_rules(text: str) -> list[Rule]:
    """Parse a text of one or more rules, each starting with ``define``.

    Examples
    --------
    >>> rules = parse_rules('''
    ... define X() from A()
    ... DEFINE Y() FROM B() AND EACH A() WITHIN 10 FROM B
    ... ''')
    >>> [(r.name, r.source) for r in rules]
    [('X', 'define X() from A()'), ('Y', 'DEFINE Y() FROM B() AND EACH A() WITHIN 10 FROM B')]
    """
    parser = _Parser(text)
    rules = [parser.rule()]
    while not parser.at_end():
        rules.append(parser.rule())
    return rules


def parse_window(text: str) -> Window:
    """Parse a window such as ``"100000"``, ``"5 min."`` or ``"250ms"``.

    >>> parse_window("5 min."), parse_window("100000")
    (Window(value=5, unit='min'), Window(value=100000, unit=''))
    """
    parser = _Parser(text)
    window = parser.window()
    parser.expect_end("end of the window")
    return window


# --------------------------------------------------------------------------- parser

_SELECTIONS = frozenset(SELECTIONS)
_CLAUSES = ("within", "partition by", "ties", "where", "skip", "consuming")
"""The clauses after the sequence, in the order they are written."""
_ANCHORS = ("from", "followedby", "next")


class _Parser(TermParser):
    """The rule and its clauses; the terms they are made of come from :class:`TermParser`."""

    # ------------------------------------------------------------------------ rule

    def rule(self) -> Rule:
        define = self.expect_keyword("define")
        name = self.expect_name("the name of the composite event type").text
        self.state = state = RuleState(name, self.attributes(), [], [], [], [], [], [], [],
                                       [], [])
        self.expect_keyword("from")
        state.chain.append(self.element_pattern(0, closure=False)[0])
        while self.at_keyword("and"):
            self.advance()
            self.from_item()
        reached = 0  # how many of _CLAUSES are behind: one clause cannot come twice
        within = None
        if self.at_keyword("within"):
            self.advance()
            within = self.window()
            reached = 1
        self.fill_windows(within)
        partition = ""
        if self.at_keyword("partition"):
            self.advance()
            self.expect_keyword("by")
            partition = self.expect_name("the attribute to partition by").text
            reached = 2
        ties = "strict"
        if self.at_keyword("ties"):
            self.advance()
            if not self.at_keyword(*TIES):
                raise self.fail("'strict' or 'nonstrict' (how equal time stamps follow "
                                "each other)")
            ties = self.advance().text.lower()
            reached = 3
        if self.at_keyword("where"):
            self.advance()
            self.where_item()
            while self.at_keyword("and"):
                self.advance()
                self.where_item()
            reached = 4
        skip = Skip()
        if self.at_keyword("skip"):
            skip, reached = self.skip(), 5
        consuming = self.consuming() if self.at_keyword("consuming") else ()
        if not (self.at_end() or self.at_keyword("define")):
            if consuming:
                raise self.fail("',', 'define' or end of text")
            more = ["'and'"] if reached in (0, 4) else []
            more += [f"'{c}'" for c in _CLAUSES[reached:]]
            raise self.fail(f"{', '.join(more)}, 'define' or end of text")
        self.check_parameters()
        source = self.text[define.start:self.tokens[self.pos - 1].end]
        try:
            return Rule(name, state.attributes, state.chain[0], tuple(state.steps),
                        tuple(state.aggregates), tuple(state.negations),
                        tuple(state.filters), tuple(state.assignments), within=within,
                        ties=ties, partition=partition, consuming=consuming,  # type: ignore[arg-type]
                        skip=skip, source=source)
        except RuleError as exc:
            raise located(exc, self.text, define.start, self.tokens[self.pos - 1].end) from None

    def skip(self) -> Skip:
        """``skip to next | past last event | to first NAME | to last NAME | none``: the
        after-match skip strategy."""
        self.advance()
        if self.at_keyword("none"):
            self.advance()
            return Skip()
        if self.at_keyword("past"):
            self.advance()
            self.expect_keyword("last")
            self.expect_keyword("event")
            return Skip("past_last_event")
        if not self.at_keyword("to"):
            raise self.fail("'to next', 'past last event', 'to first NAME', 'to last NAME' "
                            "or 'none'")
        self.advance()
        if self.at_keyword("next"):
            self.advance()
            return Skip("to_next")
        if not self.at_keyword("first", "last"):
            raise self.fail("'next', 'first NAME' or 'last NAME'")
        strategy = "to_first" if self.advance().text.lower() == "first" else "to_last"
        return Skip(strategy, self.element())  # type: ignore[arg-type]

    def consuming(self) -> tuple[int, ...]:
        """``consuming a, b``: the chain elements whose events a match consumes."""
        self.advance()
        found: list[int] = []
        while True:
            token = self.peek()
            element = self.element()
            if element in found:
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text!r} is consumed twice")
            found.append(element)
            if not self.at_op(","):
                return tuple(sorted(found))
            self.advance()

    def attributes(self) -> tuple[tuple[str, str], ...]:
        self.expect_op("(")
        attributes: list[tuple[str, str]] = []
        while not self.at_op(")"):
            if attributes:
                if not self.at_op(","):
                    raise self.fail("',' or ')'")
                self.advance()
            attr = self.expect_name("an attribute name")
            if any(attr.text == a for a, _ in attributes):
                raise RuleSyntaxError(attr.line, attr.column,
                                      f"attribute {attr.text!r} is declared twice")
            self.expect_op(":")
            kind = self.expect_name("an attribute type")
            if kind.text.lower() not in ATTRIBUTE_TYPES:
                raise RuleSyntaxError(kind.line, kind.column,
                                      f"unknown attribute type {kind.text!r}; use one of "
                                      f"{', '.join(ATTRIBUTE_TYPES)}")
            attributes.append((attr.text, kind.text.lower()))
        self.advance()
        return tuple(attributes)

    # ---------------------------------------------------------------- from clause

    def from_item(self) -> None:
        if self.at_keyword(*_SELECTIONS):
            self.step()
        elif self.at_keyword("not"):
            self.negation()
        else:
            self.from_filter()

    def step(self) -> None:
        state = self.current()
        selection = self.advance().text.lower()
        greed: Greed = "all"
        runs = False
        if self.at_conjunction():
            members, group = self.conjunction()
            times = None
        else:
            pattern, times, greed, runs = self.element_pattern(len(state.chain), closure=True)
            members, group = [pattern], ""
        until = None
        if self.at_keyword("until"):
            if times is None:
                raise self.fail("'within', 'from', 'followedBy' or 'next' ('until X(...)' "
                                "ends a closure: B(...){n,m} as bs until X(...))")
            self.advance()
            until = self.guarded_pattern()
        within = None
        if self.at_keyword("within"):
            self.advance()
            within = self.window()
        elif self.at_keyword(*_ANCHORS):
            state.unwindowed += [(len(state.steps) + k, self.peek())
                                 for k in range(len(members))]
        else:
            raise self.fail("'within', 'from', 'followedBy' or 'next'")
        if not self.at_keyword(*_ANCHORS):
            raise self.fail("'from', 'followedBy' or 'next' (the element it follows)")
        contiguity: Contiguity = ("strict" if self.advance().text.lower() == "next"
                                  else "relaxed")
        before = len(state.chain) - 1 - (len(members) if group else 0)
        previous = (state.steps[-1].group if state.steps and state.steps[-1].group
                    else state.chain[before].name)
        anchor = self.peek()
        if anchor.kind != "name" or anchor.text != previous:
            raise self.fail(f"{previous!r} (a step follows the element just before it: "
                            "chains are linear)", anchor)
        self.advance()
        if not group:
            state.chain.append(members[0])
        state.steps += [Step(selection, member, within, times, group,  # type: ignore[arg-type]
                             contiguity, until, greed, runs) for member in members]

    def conjunction(self) -> tuple[list[Pattern], str]:
        """``(A(...) as a & B(...) as b ...) as g``: the members, already appended to the
        chain (a member's predicates may name the members before it; the rule refuses
        that with a reason), and the conjunction's name."""
        state = self.current()
        start = self.expect_op("(")
        members: list[Pattern] = []
        while True:
            self.self_refs = []
            member = self.pattern(len(state.chain))
            for token in self.self_refs:
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text}[i] and {token.text}[i+1] name items of a "
                                      "closure; a member of a conjunction is one event")
            member = replace(member, alias=self.alias())
            members.append(member)
            state.chain.append(member)
            if self.at_op(")"):
                break
            if not self.at_op("&"):
                raise self.fail("'&' or ')' (a conjunction lists its members with '&'; "
                                "'|' and closures do not mix with it)")
            self.advance()
        self.advance()
        if self.at_op("{", "+", "*", "?"):
            raise self.fail("'as' (a conjunction is one event per member; it takes no "
                            "{n,m})")
        group = self.alias()
        if not group:
            listed = " & ".join(m.name for m in members)
            raise RuleSyntaxError(start.line, start.column,
                                  f"the conjunction {listed} needs a name: ({listed}) as g")
        return members, group

    def fill_windows(self, within: Window | None) -> None:
        """Give the steps written without 'within' the window of the whole sequence."""
        state = self.current()
        for index, token in state.unwindowed:
            if within is None:
                raise self.fail("'within' (or 'within W' after the whole sequence)", token)
            step = state.steps[index]
            state.steps[index] = replace(step, within=within)

    def negation(self) -> None:
        state = self.current()
        self.advance()
        pattern = self.guarded_pattern()
        if self.at_keyword("within"):
            self.advance()
            within = self.window()
            if not self.at_keyword("from", "after"):
                raise self.fail("'from' (none in the window before an element) or 'after' "
                                "(none in the window after the terminator)")
            ahead = self.advance().text.lower() == "after"
            state.negations.append(Negation(pattern, self.element(), within=within,
                                            ahead=ahead))
        elif self.at_keyword("between"):
            self.advance()
            first = self.peek()
            after = self.element()
            self.expect_keyword("and")
            anchor = self.element()
            if after <= anchor:
                later = state.chain[anchor].type
                raise RuleSyntaxError(
                    first.line, first.column,
                    f"'between {first.text} and {later}' needs two elements, the earlier in "
                    f"time first: {first.text} must come after {later} in the sequence")
            state.negations.append(Negation(pattern, anchor, after=after))
        else:
            raise self.fail("'within' or 'between'")

    def from_filter(self) -> None:
        left, bound = self.side()
        if not self.at_op(*COMPARATORS):
            if bound:
                return
            raise self.fail("a comparator (=, !=, <, <=, >, >=)")
        op = self.comparator()
        right, _ = self.side()
        self.current().filters.append(Comparison(left, op, right))

    def side(self) -> tuple[Expr, bool]:
        """An expression, or a binding ``$t=Func(...)``; says whether it was a binding."""
        if (self.peek().kind == "param" and self.at_op("=", ahead=1)
                and self.peek(2).kind == "name" and self.at_op("(", ahead=3)):
            token = self.advance()
            self.advance()
            self.aggregate(name=token.text[1:])
            self.current().bindings.append(token)
            return ParamRef(token.text[1:]), True
        return self.expr(), False

    # --------------------------------------------------------------- where clause

    def where_item(self) -> None:
        state = self.current()
        if self.peek().kind == "name" and self.at_op("=", ahead=1):
            attr = self.advance()
            self.advance()
            declared = [a for a, _ in state.attributes]
            if attr.text not in declared:
                raise RuleSyntaxError(attr.line, attr.column,
                                      f"{attr.text!r} is not an attribute of {state.name} "
                                      f"(define declares {', '.join(declared) or 'none'})")
            if any(a == attr.text for a, _ in state.assignments):
                raise RuleSyntaxError(attr.line, attr.column,
                                      f"attribute {attr.text!r} is assigned twice")
            state.assignments.append((attr.text, self.expr()))
            return
        left = self.expr()
        op = self.comparator()
        state.filters.append(Comparison(left, op, self.expr()))

    # ----------------------------------------------------------------- parameters

    def check_parameters(self) -> None:
        state = self.current()
        chain_params = {p.name for pattern in state.chain for p in pattern.params()}
        bound = {a.name for a in state.aggregates}
        for token in state.bindings:
            name = token.text[1:]
            if name in chain_params:
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text} is a parameter of the sequence; bind "
                                      "the aggregate to another name, or write the filter "
                                      f"as Func(...) = {token.text}")
            if sum(a.name == name for a in state.aggregates) > 1:
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text} is bound to two aggregates")
        for token in state.references:
            if token.text[1:] not in chain_params | bound:
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text} is not bound: mention it in an element "
                                      f"of the sequence (e.g. A(attr={token.text})) or bind "
                                      f"an aggregate to it ({token.text}=Sum(...))")
