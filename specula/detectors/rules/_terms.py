"""The terms of the rule syntax: patterns, windows, expressions and aggregates.

These are the productions of the grammar (written out in
:mod:`~specula.detectors.rules.parser`) that occur anywhere in a rule, in its ``from``
clause as well as in its ``where`` clause: ``pattern``, ``constraint``, ``window``,
``expr``, ``term``, ``unary`` and ``aggregate``. :class:`TermParser` parses them into
nodes of :mod:`~specula.detectors.rules.ast`. It also holds :class:`RuleState`, what has
been parsed of the current rule: the terms append aggregates to it, resolve element names
against its chain, and note every ``$parameter`` they read, which the parser checks once
the rule is complete. The clauses of a rule, made of these terms, are in the parser.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specula.detectors.rules._lexer import RuleSyntaxError, Token, TokenStream, number, string
from specula.detectors.rules.ast import (
    COMPARATORS,
    FUNCTIONS,
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
    Fold,
    Function,
    Greed,
    Negation,
    Param,
    ParamRef,
    Pattern,
    RuleError,
    Step,
    Value,
    Window,
)

__all__ = ["MAX_DEPTH", "RuleState", "TermParser", "inline_aggregate_name"]

#: How deep an expression may nest operators, parentheses and unary minus.
MAX_DEPTH = 100


def inline_aggregate_name(function: str, index: int) -> str:
    """Name of an aggregate written inline, stored at ``index`` of :attr:`Rule.aggregates`.

    >>> inline_aggregate_name("sum", 0)
    'sum#0'
    """
    return f"{function}#{index}"


@dataclass
class RuleState:
    """What has been parsed of the current rule."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    chain: list[Pattern]
    steps: list[Step]
    aggregates: list[Aggregate]
    negations: list[Negation]
    filters: list[Comparison]
    assignments: list[tuple[str, Expr]]
    bindings: list[Token]  # the $t of each aggregate bound in from
    references: list[Token]  # every $x read by an expression, aggregate or negation
    unwindowed: list[tuple[int, Token]]  # steps written without 'within', with the token


class TermParser(TokenStream):
    """The productions shared by every clause; ``state`` is the rule being parsed."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.state: RuleState | None = None
        self.own: int | None = None  # the chain element whose pattern is being parsed
        self.self_refs: list[Token] = []  # bs[i] / bs[i+1] read by the element being parsed
        self.nesting = 0  # parentheses and unary minus open around the current term

    # --------------------------------------------------------------------- patterns

    def element_pattern(self, element: int, closure: bool
                        ) -> tuple[Pattern, tuple[int, int | None] | None, Greed, bool]:
        """An element of the sequence: ``Type(items)`` or ``(P1 | P2 ...)``, then, for a
        step (``closure``), an optional length ``{n,m}`` (with ``greedy``/``reluctant``
        and ``runs``), then ``as alias``; returns the pattern, the length (None when it
        is one event), the greed and whether the closure takes runs."""
        self.self_refs = []
        if self.at_op("("):
            self.advance()
            options = [self.pattern(element)]
            while self.at_op("|"):
                self.advance()
                options.append(self.pattern(element))
            self.expect_op(")")
            pattern = Pattern(options[0].type, options[0].constraints, options[0].predicates,
                              alternatives=tuple(options[1:]))
        else:
            pattern = self.pattern(element)
        times = self.times() if closure and self.at_op("{", "+", "*", "?") else None
        greed: Greed = "all"
        if times is not None and self.at_keyword("greedy", "reluctant"):
            greed = "greedy" if self.advance().text.lower() == "greedy" else "reluctant"
        runs = times is not None and self.at_keyword("runs")
        if runs:
            self.advance()
        alias = self.alias()
        for token in self.self_refs:
            if times is None or token.text != (alias or pattern.type):
                raise RuleSyntaxError(token.line, token.column,
                                      f"{token.text}[i] and {token.text}[i+1] name items of "
                                      "the closure being declared (B(...){n,m} as "
                                      f"{token.text}); {token.text} is not that closure")
        return replace(pattern, alias=alias), times, greed, runs

    def alias(self) -> str:
        """``as NAME`` if it comes next (the name must be new to the rule), else ``""``."""
        if not self.at_keyword("as"):
            return ""
        self.advance()
        token = self.expect_name("an alias for the element")
        state = self.current()
        chain = state.chain
        taken = [p.name for p in chain] + [t for p in chain for t in p.types]
        if token.text in taken + [s.group for s in state.steps]:
            raise RuleSyntaxError(token.line, token.column,
                                  f"{token.text!r} already names an element of the sequence")
        return token.text

    def at_conjunction(self) -> bool:
        """Whether the next tokens open a conjunction: ``(`` ``Type(...)`` then ``&`` or
        ``as`` (a disjunction goes on with ``|``)."""
        if not (self.at_op("(") and self.peek(1).kind == "name" and self.at_op("(", ahead=2)):
            return False
        depth, ahead = 0, 2
        while self.peek(ahead).kind != "end":
            depth += self.at_op("(", ahead=ahead) - self.at_op(")", ahead=ahead)
            if depth == 0:
                return self.at_op("&", ahead=ahead + 1) or self.at_keyword("as", ahead=ahead + 1)
            ahead += 1
        return False

    def times(self) -> tuple[int, int | None]:
        """A closure's length ``{n,m}``, ``{n}`` or ``{n,}``; ``?`` is ``{0,1}``, ``+``
        ``{1,}`` and ``*`` ``{0,}`` (None: no upper bound)."""
        shorthand = {"?": (0, 1), "+": (1, None), "*": (0, None)}
        if self.at_op(*shorthand):
            return shorthand[self.advance().text]
        self.expect_op("{")
        lower = self.count()
        upper: int | None = lower
        if self.at_op(","):
            self.advance()
            upper = None if self.at_op("}") else self.count()
        self.expect_op("}")
        return lower, upper

    def count(self) -> int:
        token = self.peek()
        if token.kind != "number" or not isinstance(number(token.text), int):
            raise self.fail("a whole number of events")
        self.advance()
        return int(token.text)

    def pattern(self, element: int | None = None) -> Pattern:
        """``Type(items)``; ``element`` is the pattern's index in the chain, or None for
        the patterns of aggregates and negations (which take no predicates)."""
        type_name = self.expect_name("an event type").text
        self.expect_op("(")
        constraints: list[Constraint] = []
        predicates: list[Comparison] = []
        self.own = element
        try:
            if not self.at_op(")"):
                self.pattern_item(constraints, predicates)
                while self.at_keyword("and"):
                    self.advance()
                    self.pattern_item(constraints, predicates)
        finally:
            self.own = None
        if not self.at_op(")"):
            raise self.fail("'and' or ')'")
        self.advance()
        return Pattern(type_name, tuple(constraints), tuple(predicates))

    def pattern_item(self, constraints: list[Constraint],
                     predicates: list[Comparison]) -> None:
        """A constraint ``attr op literal`` / ``attr=$x``, else a predicate."""
        if self.at_constraint():
            constraints.append(self.constraint())
            return
        token = self.peek()
        if self.own is None:
            raise RuleSyntaxError(token.line, token.column,
                                  "an aggregate or negation pattern takes constraints "
                                  "'attr op literal' and 'attr=$param' only; predicates over "
                                  "expressions belong to elements of the sequence")
        left = self.expr()
        op = self.comparator()
        predicates.append(Comparison(left, op, self.expr()))

    def at_constraint(self) -> bool:
        """Whether the next tokens are ``attr op value`` followed by ``and`` or ``)``:
        a literal, a negative literal, or ``=$param``."""
        if (self.peek().kind != "name" or self.peek().text == "ts"
                or not self.at_op(*COMPARATORS, ahead=1)):
            return False
        value = self.peek(2)
        if value.kind == "param":
            if self.peek(1).text != "=" and self.own is not None:
                return False
            end = 3
        elif value.kind in ("number", "string") or self.at_keyword("true", "false", ahead=2):
            end = 3
        elif self.at_op("-", ahead=2) and self.peek(3).kind == "number":
            end = 4
        else:
            return False
        return self.at_keyword("and", ahead=end) or self.at_op(")", ahead=end)

    def constraint(self) -> Constraint:
        attr = self.expect_name("an attribute name").text
        op_token = self.peek()
        op = self.comparator()
        value = self.constraint_value()
        if isinstance(value, Param) and op != "=":
            raise RuleSyntaxError(op_token.line, op_token.column,
                                  f"parameter {value} can only be bound with '=', found "
                                  f"{op!r}; compare it in a filter instead")
        if isinstance(value, str) and op not in ("=", "!="):
            raise RuleSyntaxError(op_token.line, op_token.column,
                                  f"strings compare only with = and !=, found {op!r}")
        return Constraint(attr, op, value)

    def comparator(self) -> Comparator:
        if not self.at_op(*COMPARATORS):
            raise self.fail("a comparator (=, !=, <, <=, >, >=)")
        op = self.advance().text
        assert op in COMPARATORS  # at_op checked it
        return op

    def constraint_value(self) -> Value:
        token = self.peek()
        if token.kind == "param":
            self.advance()
            return Param(token.text[1:])
        if self.at_keyword("true", "false"):
            return self.advance().text.lower() == "true"
        if token.kind == "string":
            return string(self.advance())
        negative = self.at_op("-")
        if negative:
            self.advance()
        if self.peek().kind != "number":
            raise self.fail("a number" if negative else
                            "a number, a string, true, false or a parameter")
        value = number(self.advance().text)
        return -value if negative else value

    def window(self) -> Window:
        token = self.peek()
        if token.kind != "number":
            raise self.fail("a window length (a number of ticks or a number and a unit)")
        value = number(self.advance().text)
        unit = ""
        if self.at_keyword(*UNIT_SECONDS):
            unit = self.advance().text.lower()
            if self.at_op("."):
                self.advance()
        try:
            return Window(value, unit)
        except RuleError as exc:
            raise RuleSyntaxError(token.line, token.column, str(exc)) from None

    # ---------------------------------------------------------------- expressions

    # Each expression is parsed with its depth: the levels of operators, parentheses and
    # unary minus it nests. Parsing recurses per parenthesis and minus, and every check
    # and engine walks the tree recursively, so a depth beyond MAX_DEPTH is a syntax
    # error at the operator that reaches it, not a RecursionError.

    def expr(self) -> Expr:
        return self._sum()[0]

    def _sum(self) -> tuple[Expr, int]:
        left, depth = self._product()
        while self.at_op("+", "-"):
            op = self.advance()
            right, right_depth = self._product()
            left = BinOp(op.text, left, right)  # type: ignore[arg-type]
            depth = self._deeper(op, max(depth, right_depth))
        return left, depth

    def _product(self) -> tuple[Expr, int]:
        left, depth = self._unary()
        while self.at_op("*", "/"):
            op = self.advance()
            right, right_depth = self._unary()
            left = BinOp(op.text, left, right)  # type: ignore[arg-type]
            depth = self._deeper(op, max(depth, right_depth))
        return left, depth

    def _deeper(self, token: Token, depth: int) -> int:
        """``depth + 1``, or a syntax error at ``token`` if that is beyond MAX_DEPTH."""
        if depth >= MAX_DEPTH:
            raise RuleSyntaxError(token.line, token.column,
                                  f"the expression nests more than {MAX_DEPTH} levels of "
                                  "operators and parentheses; split it")
        return depth + 1

    def _unary(self) -> tuple[Expr, int]:
        token = self.peek()
        if self.at_op("-"):
            self.advance()
            self._deeper(token, self.nesting)  # before recursing, not after
            self.nesting += 1
            try:
                operand, depth = self._unary()
            finally:
                self.nesting -= 1
            # a number's sign is folded; a string or bool is left to the type check,
            # which refuses arithmetic on them with the line and column
            if isinstance(operand, Const) and isinstance(operand.value, int | float) \
                    and not isinstance(operand.value, bool):
                return Const(-operand.value), depth
            return BinOp("-", Const(0), operand), self._deeper(token, depth)
        if self.at_op("("):
            self.advance()
            self._deeper(token, self.nesting)
            self.nesting += 1
            try:
                inner, depth = self._sum()
            finally:
                self.nesting -= 1
            self.expect_op(")")
            return inner, self._deeper(token, depth)
        return self.operand(), 1

    def operand(self) -> Expr:
        """A term without operators: a literal, parameter, attribute, fold or aggregate."""
        token = self.peek()
        if token.kind == "number":
            return Const(number(self.advance().text))
        if token.kind == "string":
            return Const(string(self.advance()))
        if self.at_keyword("true", "false"):
            return Const(self.advance().text.lower() == "true")
        if token.kind == "param":
            self.current().references.append(self.advance())
            return ParamRef(token.text[1:])
        if token.kind == "name" and self.at_op("(", ahead=1) and self.at_fold():
            return self.fold()
        if token.kind == "name" and self.at_op("(", ahead=1):
            return AggRef(self.aggregate(name=None))
        if token.kind == "name" and self.at_op("[", ahead=1):
            return self.item()
        if token.kind == "name" and self.at_op(".", ahead=1):
            element = self.element(unique=True)
            self.advance()
            return AttrRef(element, self.expect_name("an attribute name").text)
        if token.kind == "name" and self.own is not None:
            self.advance()
            return AttrRef(self.own, token.text)
        raise self.fail("an expression (a number, \"string\", $parameter, name.attribute or "
                        "aggregate)")

    def item(self) -> AttrRef:
        """``bs[first].x`` / ``bs[last].x`` of a closure declared before, or ``bs[i].x``
        / ``bs[i+1].x`` in the closure's own pattern (checked once its name is known)."""
        token = self.peek()
        known = any(p.name == token.text for p in self.current().chain)
        element: int | None
        if known:
            element = self.element()
        else:
            self.advance()
            element = self.own
        self.expect_op("[")
        if self.at_keyword("first", "last") and known:
            item = self.advance().text.lower()
        elif self.at_keyword("i") and not known and element is not None:
            self.advance()
            item = ""
            if self.at_op("+"):
                self.advance()
                if self.peek().text != "1":
                    raise self.fail("'1' (bs[i+1] is the next item)")
                self.advance()
                item = "next"
            self.self_refs.append(token)
        else:
            raise self.fail("'first' or 'last' (or, in the closure's own pattern, 'i' or "
                            "'i+1')" if known or self.own is not None else
                            f"'first' or 'last' of a closure declared before {token.text!r}")
        self.expect_op("]")
        self.expect_op(".")
        attr = self.expect_name("an attribute name").text
        return AttrRef(element, attr, item)  # type: ignore[arg-type]

    def at_fold(self) -> bool:
        """Whether the next tokens are ``Func(name)`` or ``Func(name.attr)``."""
        return self.peek(2).kind == "name" and (
            self.at_op(")", ahead=3) or (self.at_op(".", ahead=3) and self.at_op(")", ahead=5)))

    def fold(self) -> Fold:
        """``Count(bs)`` or ``Func(bs.attr)`` over the items of a closure."""
        function = self.function()
        self.expect_op("(")
        element = self.element()
        attr = None
        if self.at_op("."):
            self.advance()
            attr = self.expect_name("an attribute name").text
        self.expect_op(")")
        return Fold(function, element, attr)

    def function(self, hint: str = "") -> Function:
        """An aggregate function's name (case-insensitive)."""
        token = self.advance()
        function = token.text.lower()
        if function not in FUNCTIONS:
            raise RuleSyntaxError(token.line, token.column,
                                  f"unknown aggregate function {token.text!r}; use Sum, Avg, "
                                  f"Min, Max or Count{hint}")
        return function

    def aggregate(self, name: str | None) -> int:
        """Parse ``Func(...)``, append it to the rule's aggregates, return its index."""
        state = self.current()
        token = self.peek()
        function = self.function(" (a step starts with each, last or first)")
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
        state.aggregates.append(Aggregate(name, function, pattern, attr, within, anchor))
        return index

    # ----------------------------------------------------------------- resolution

    def current(self) -> RuleState:
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
        found = [i for i, p in enumerate(chain) if p.name == token.text]
        members = [p.name for p, s in zip(chain[1:], self.current().steps, strict=False)
                   if s.group == token.text]
        if members:
            raise RuleSyntaxError(token.line, token.column,
                                  f"{token.text!r} is a conjunction of several events; name "
                                  f"one of its members ({', '.join(members)})")
        if not found:
            raise RuleSyntaxError(
                token.line, token.column,
                f"{token.text!r} is not an element of the sequence declared so far "
                f"({', '.join(p.name for p in chain)}); declare the step before using it")
        if unique and len(found) > 1:
            raise RuleSyntaxError(token.line, token.column,
                                  f"{token.text!r} names {len(found)} elements of the "
                                  "sequence; refer only to types that occur once")
        return found[0]
