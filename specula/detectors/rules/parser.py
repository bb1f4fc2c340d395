"""The text syntax of rules: a tokenizer and a recursive-descent parser to :class:`Rule`.

The syntax is the subset of TESLA used by Cugola & Margara (rules R1-R5 of "Low latency
complex event processing on parallel hardware"), plus negations and free filters::

    rules      := rule+
    rule       := 'define' NAME '(' [NAME ':' TYPE (',' NAME ':' TYPE)*] ')'
                  'from' pattern ('and' from_item)*
                  ['where' where_item ('and' where_item)*]
    pattern    := NAME '(' [constraint ('and' constraint)*] ')'
    constraint := NAME comparator (NUMBER | '-' NUMBER | 'true' | 'false' | PARAM)
    from_item  := ('each' | 'last' | 'first') pattern 'within' window 'from' NAME
                | 'not' pattern ('within' window 'from' NAME | 'between' NAME 'and' NAME)
                | side [comparator side]
    side       := PARAM '=' aggregate          (binds the aggregate to the parameter)
                | expr
    where_item := NAME '=' expr                (assigns an attribute of define)
                | expr comparator expr         (a filter)
    expr       := term (('+' | '-') term)*
    term       := unary (('*' | '/') unary)*
    unary      := '-' unary | NUMBER | 'true' | 'false' | PARAM | NAME '.' NAME
                | aggregate | '(' expr ')'
    aggregate  := FUNC '(' pattern ['.' NAME] 'within' window 'from' NAME ')'
    window     := NUMBER [('ms' | 's' | 'min' | 'h') ['.']]

Decisions the paper leaves open:

* Keywords, units, aggregate functions and attribute types are case-insensitive; type,
  attribute and parameter names are not. ``#`` starts a comment that runs to the end of
  the line.
* A step's ``from`` must name the element just before it (chains are linear). The
  ``from`` of an aggregate or a negation, ``between`` and ``Type.attr`` may name any
  element declared *earlier in the text*, and the name must be unique in the chain.
* ``not T(...) between D and E`` needs ``D`` to come after ``E`` in the chain (``D``
  happens first): it forbids ``T`` strictly between the two.
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

Errors in the text raise :class:`RuleSyntaxError`, a :class:`RuleError` carrying the
line and column, whose message says what was expected and what was found.

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
line 1, column 34: expected 'within', found 'from'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    COMPARATORS,
    FUNCTIONS,
    SELECTIONS,
    UNIT_SECONDS,
    AggRef,
    Aggregate,
    AttrRef,
    BinOp,
    Comparator,
    Comparison,
    Const,
    Constraint,
    Expr,
    Function,
    Negation,
    Param,
    ParamRef,
    Pattern,
    Rule,
    RuleError,
    Step,
    Value,
    Window,
)

__all__ = ["RuleSyntaxError", "inline_aggregate_name", "parse_rule", "parse_rules",
           "parse_window"]


class RuleSyntaxError(RuleError):
    """A rule text that does not parse, or describes an inconsistent rule.

    Parameters
    ----------
    line, column : int
        Where the problem is (both 1-based).
    reason : str
        What is wrong, e.g. ``"expected 'within', found 'from'"``.
    """

    def __init__(self, line: int, column: int, reason: str) -> None:
        self.line = line
        self.column = column
        self.reason = reason
        super().__init__(f"line {line}, column {column}: {reason}")

    def __reduce__(self) -> tuple[type[RuleSyntaxError], tuple[int, int, str]]:
        return (type(self), (self.line, self.column, self.reason))


def inline_aggregate_name(function: str, index: int) -> str:
    """Name of an aggregate written inline, stored at ``index`` of :attr:`Rule.aggregates`.

    >>> inline_aggregate_name("sum", 0)
    'sum#0'
    """
    return f"{function}#{index}"


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


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class _Token:
    kind: str  # "name", "number", "param", "op" or "end"
    text: str
    line: int
    column: int
    start: int
    end: int

    def describe(self) -> str:
        return "end of text" if self.kind == "end" else repr(self.text)


_TOKEN = re.compile(r"""
    (?P<skip>[ \t\r\f\v]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<param>\$[A-Za-z_]\w*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><=|>=|!=|[=<>(),:.+\-*/])
""", re.VERBOSE)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        column = pos - line_start + 1
        if match is None:
            reason = (f"expected a parameter name after '$', found {text[pos:pos + 2]!r}"
                      if text[pos] == "$" else f"unexpected character {text[pos]!r}")
            raise RuleSyntaxError(line, column, reason)
        kind = match.lastgroup
        if kind == "newline":
            line, line_start = line + 1, match.end()
        elif kind != "skip":
            tokens.append(_Token(kind, match.group(), line, column, pos, match.end()))
        pos = match.end()
    tokens.append(_Token("end", "", line, pos - line_start + 1, pos, pos))
    return tokens


# --------------------------------------------------------------------------- parser

_SELECTIONS = frozenset(SELECTIONS)


@dataclass
class _RuleState:
    """What has been parsed of the current rule."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    chain: list[Pattern]
    steps: list[Step]
    aggregates: list[Aggregate]
    negations: list[Negation]
    filters: list[Comparison]
    assignments: list[tuple[str, Expr]]
    bindings: list[_Token]  # the $t of each aggregate bound in from
    references: list[_Token]  # every $x read by an expression, aggregate or negation


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0
        self.state: _RuleState | None = None

    # ------------------------------------------------------------------ token access

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.peek()
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at_end(self) -> bool:
        return self.peek().kind == "end"

    def at_keyword(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "name" and token.text.lower() in words

    def at_op(self, *ops: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "op" and token.text in ops

    def fail(self, expected: str, token: _Token | None = None) -> RuleSyntaxError:
        token = token or self.peek()
        return RuleSyntaxError(token.line, token.column,
                               f"expected {expected}, found {token.describe()}")

    def expect_keyword(self, word: str) -> _Token:
        if not self.at_keyword(word):
            raise self.fail(repr(word))
        return self.advance()

    def expect_op(self, op: str) -> _Token:
        if not self.at_op(op):
            raise self.fail(repr(op))
        return self.advance()

    def expect_name(self, what: str) -> _Token:
        if self.peek().kind != "name":
            raise self.fail(what)
        return self.advance()

    def expect_end(self, expected: str) -> None:
        if not self.at_end():
            raise self.fail(expected)

    # ------------------------------------------------------------------------ rule

    def rule(self) -> Rule:
        define = self.expect_keyword("define")
        name = self.expect_name("the name of the composite event type").text
        self.state = state = _RuleState(name, self.attributes(), [], [], [], [], [], [], [],
                                        [])
        self.expect_keyword("from")
        state.chain.append(self.pattern())
        while self.at_keyword("and"):
            self.advance()
            self.from_item()
        if self.at_keyword("where"):
            self.advance()
            self.where_item()
            while self.at_keyword("and"):
                self.advance()
                self.where_item()
        if not (self.at_end() or self.at_keyword("define")):
            raise self.fail("'and', 'where', 'define' or end of text")
        self.check_parameters()
        source = self.text[define.start:self.tokens[self.pos - 1].end]
        try:
            return Rule(name, state.attributes, state.chain[0], tuple(state.steps),
                        tuple(state.aggregates), tuple(state.negations),
                        tuple(state.filters), tuple(state.assignments), source=source)
        except RuleError as exc:
            raise RuleSyntaxError(define.line, define.column, str(exc)) from None

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

    # --------------------------------------------------------------------- patterns

    def pattern(self) -> Pattern:
        type_name = self.expect_name("an event type").text
        self.expect_op("(")
        constraints = []
        if not self.at_op(")"):
            constraints.append(self.constraint())
            while self.at_keyword("and"):
                self.advance()
                constraints.append(self.constraint())
        if not self.at_op(")"):
            raise self.fail("'and' or ')'")
        self.advance()
        return Pattern(type_name, tuple(constraints))

    def constraint(self) -> Constraint:
        attr = self.expect_name("an attribute name").text
        op_token = self.peek()
        op = self.comparator()
        value = self.constraint_value()
        if isinstance(value, Param) and op != "=":
            raise RuleSyntaxError(op_token.line, op_token.column,
                                  f"parameter {value} can only be bound with '=', found "
                                  f"{op!r}; compare it in a filter instead")
        return Constraint(attr, op, value)

    def comparator(self) -> Comparator:
        if not self.at_op(*COMPARATORS):
            raise self.fail("a comparator (=, !=, <, <=, >, >=)")
        return self.advance().text  # type: ignore[return-value]

    def constraint_value(self) -> Value:
        token = self.peek()
        if token.kind == "param":
            self.advance()
            return Param(token.text[1:])
        if self.at_keyword("true", "false"):
            return self.advance().text.lower() == "true"
        negative = self.at_op("-")
        if negative:
            self.advance()
        if self.peek().kind != "number":
            raise self.fail("a number" if negative else "a number, true, false or a parameter")
        value = _number(self.advance().text)
        return -value if negative else value

    def window(self) -> Window:
        token = self.peek()
        if token.kind != "number":
            raise self.fail("a window length (a number of ticks or a number and a unit)")
        value = _number(self.advance().text)
        unit = ""
        if self.at_keyword(*UNIT_SECONDS):
            unit = self.advance().text.lower()
            if self.at_op("."):
                self.advance()
        try:
            return Window(value, unit)
        except RuleError as exc:
            raise RuleSyntaxError(token.line, token.column, str(exc)) from None

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
        pattern = self.pattern()
        self.expect_keyword("within")
        within = self.window()
        self.expect_keyword("from")
        previous = state.chain[-1].type
        anchor = self.peek()
        if anchor.kind != "name" or anchor.text != previous:
            raise self.fail(f"{previous!r} (a step follows the element just before it: "
                            "chains are linear)", anchor)
        self.advance()
        state.chain.append(pattern)
        state.steps.append(Step(selection, pattern, within))  # type: ignore[arg-type]

    def negation(self) -> None:
        state = self.current()
        self.advance()
        pattern = self.guarded_pattern()
        if self.at_keyword("within"):
            self.advance()
            within = self.window()
            self.expect_keyword("from")
            state.negations.append(Negation(pattern, self.element(), within=within))
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

    # ---------------------------------------------------------------- expressions

    def expr(self) -> Expr:
        left = self.term()
        while self.at_op("+", "-"):
            op = self.advance().text
            left = BinOp(op, left, self.term())  # type: ignore[arg-type]
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.at_op("*", "/"):
            op = self.advance().text
            left = BinOp(op, left, self.unary())  # type: ignore[arg-type]
        return left

    def unary(self) -> Expr:
        token = self.peek()
        if self.at_op("-"):
            self.advance()
            operand = self.unary()
            if isinstance(operand, Const) and not isinstance(operand.value, bool):
                return Const(-operand.value)
            return BinOp("-", Const(0), operand)
        if token.kind == "number":
            return Const(_number(self.advance().text))
        if self.at_keyword("true", "false"):
            return Const(self.advance().text.lower() == "true")
        if token.kind == "param":
            self.current().references.append(self.advance())
            return ParamRef(token.text[1:])
        if self.at_op("("):
            self.advance()
            inner = self.expr()
            self.expect_op(")")
            return inner
        if token.kind == "name" and self.at_op("(", ahead=1):
            return AggRef(self.aggregate(name=None))
        if token.kind == "name" and self.at_op(".", ahead=1):
            element = self.element(unique=True)
            self.advance()
            return AttrRef(element, self.expect_name("an attribute name").text)
        raise self.fail("an expression (a number, $parameter, Type.attribute or aggregate)")

    def aggregate(self, name: str | None) -> int:
        """Parse ``Func(...)``, append it to the rule's aggregates, return its index."""
        state = self.current()
        token = self.advance()
        function = token.text.lower()
        if function not in FUNCTIONS:
            raise RuleSyntaxError(token.line, token.column,
                                  f"unknown aggregate function {token.text!r}; use Sum, Avg, "
                                  "Min, Max or Count (a step starts with each, last or first)")
        self.expect_op("(")
        pattern = self.guarded_pattern()
        attr = None
        if function == "count" and self.at_op("."):
            raise self.fail("'within' (Count counts events and takes no attribute)")
        if function != "count":
            if not self.at_op("."):
                raise self.fail(f"'.' and the attribute to aggregate, as in "
                                f"{token.text}({pattern.type}(...).value within ...)")
            self.advance()
            attr = self.expect_name("an attribute name").text
        self.expect_keyword("within")
        within = self.window()
        self.expect_keyword("from")
        anchor = self.element()
        self.expect_op(")")
        index = len(state.aggregates)
        name = name if name is not None else inline_aggregate_name(function, index)
        function_ = cast(Function, function)
        state.aggregates.append(Aggregate(name, function_, pattern, attr, within, anchor))
        return index

    # ----------------------------------------------------------------- resolution

    def current(self) -> _RuleState:
        assert self.state is not None
        return self.state

    def guarded_pattern(self) -> Pattern:
        """A pattern whose parameters are read, not bound (aggregates, negations)."""
        start = self.pos
        pattern = self.pattern()
        refs = [t for t in self.tokens[start:self.pos] if t.kind == "param"]
        self.current().references.extend(refs)
        return pattern

    def element(self, unique: bool = True) -> int:
        """Consume an element name; return its index in the chain declared so far."""
        token = self.expect_name("the name of an element of the sequence")
        chain = self.current().chain
        found = [i for i, p in enumerate(chain) if p.type == token.text]
        if not found:
            raise RuleSyntaxError(
                token.line, token.column,
                f"{token.text!r} is not an element of the sequence declared so far "
                f"({', '.join(p.type for p in chain)}); declare the step before using it")
        if unique and len(found) > 1:
            raise RuleSyntaxError(token.line, token.column,
                                  f"{token.text!r} names {len(found)} elements of the "
                                  "sequence; refer only to types that occur once")
        return found[0]

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


def _number(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eE") else int(text)
