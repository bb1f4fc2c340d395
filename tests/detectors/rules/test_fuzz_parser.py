"""Fuzzing the rule parser: any text parses or raises :class:`RuleSyntaxError` naming a
line and column inside the text; never another exception, never a hang.

Three generators: arbitrary text, soups of the grammar's own tokens (which get past the
first keyword), and catalogue rules with a few tokens deleted, repeated or replaced
(which get deep into every clause). A rule that parses reparses from its ``source`` to
an equal rule (the parser's round trip: the AST has no printer; ``str(rule)`` is its
source).
"""

from __future__ import annotations

import re

import pytest
from fuzzing import budget, no_hang
from hypothesis import given
from hypothesis import strategies as st
from rules_reference import CASES, abc_registry

from specula.detectors.rules import parse_rule, parse_rules
from specula.detectors.rules._lexer import tokenize
from specula.detectors.rules.ast import RuleError
from specula.detectors.rules.detector import check_rule
from specula.detectors.rules.parser import RuleSyntaxError, parse_window

pytestmark = pytest.mark.fuzz

REGISTRY = abc_registry()

VOCABULARY = [
    "define", "from", "and", "each", "last", "first", "within", "not", "between", "as",
    "where", "partition", "by", "ties", "strict", "nonstrict", "true", "false", "i", "ms",
    "s", "min", "h", "int", "double", "bool", "string", "Sum", "Avg", "Count", "Min", "Max",
    "A", "B", "C", "X", "v", "p", "bs", "ts", "$x", "$t", "0", "1", "2.5", "1e3", "10",
    "(", ")", "{", "}", "[", "]", ",", ":", ".", "=", "!=", "<", "<=", ">", ">=", "+", "-",
    "*", "/", "|", "#", "\n", "$", "@",
]
token_soup = st.lists(st.sampled_from(VOCABULARY), max_size=40).map(" ".join)
catalogue = st.sampled_from(sorted({case.text for case in CASES.values()}))


@st.composite
def mutated_rules(draw: st.DrawFn) -> str:
    """A catalogue rule with one to four tokens deleted, repeated or replaced."""
    words = [t.text for t in tokenize(draw(catalogue))[:-1]]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(words) - 1))
        edit = draw(st.sampled_from(["delete", "repeat", "replace", "insert"]))
        if edit == "delete":
            del words[at]
        elif edit == "repeat":
            words.insert(at, words[at])
        else:
            words[at:at + (edit == "replace")] = [draw(st.sampled_from(VOCABULARY))]
    return " ".join(words)


def check_parse(text: str) -> None:
    """The contract of the parser on ``text`` (see the module docstring)."""
    with no_hang():
        try:
            rules = parse_rules(text)
        except RuleSyntaxError as exc:
            check_position(text, exc)
            return
    for rule in rules:
        assert rule.source and rule.source in text
        assert str(rule) == rule.source
        assert parse_rule(rule.source) == rule
        # what a detector checks before it runs a rule: its types, attributes, windows
        for ticks_per_second in (None, 1e12):
            try:
                check_rule(rule, REGISTRY, ticks_per_second)
            except RuleError as exc:
                assert str(exc).startswith(f"rule {rule.name}: ")


def check_position(text: str, exc: RuleSyntaxError) -> None:
    """The error names a line and column of ``text`` (the column may be one past the
    end of its line, where the text ended too early) and says what is wrong."""
    lines = text.split("\n")
    assert 1 <= exc.line <= len(lines), exc
    assert 1 <= exc.column <= len(lines[exc.line - 1]) + 1, exc
    assert re.fullmatch(r"line \d+, column \d+: .+", str(exc), re.DOTALL), exc
    assert exc.reason.strip()


@budget(300)
@given(st.text(max_size=120))
def test_fuzz_any_text(text):
    check_parse(text)
    check_parse("define R() from " + text)


@budget(400)
@given(token_soup)
def test_fuzz_token_soup(text):
    check_parse(text)
    check_parse("define R(a: int) from A(p=$x) " + text)


@budget(500)
@given(mutated_rules())
def test_fuzz_mutated_catalogue_rules(text):
    check_parse(text)


@budget(150)
@given(st.one_of(st.text(max_size=20), token_soup))
def test_fuzz_windows(text):
    with no_hang():
        try:
            window = parse_window(text)
        except RuleSyntaxError as exc:
            check_position(text, exc)
            return
    assert window.value >= 0


def test_catalogue_rules_round_trip():
    for case in CASES.values():
        check_parse(case.text)


# Sizes no token soup reaches: deep nesting, long chains of operators, long numbers.
FRAGMENTS = [("(", ")"), ("-", ""), ("1 + ", ""), ("1 * ", ""), ("(1 - ", ")"),
             ("9", ""), ("0.", ""), ("A.v + ", "")]
TEMPLATES = ["define R(a: int) from A(v > {}1) as q", "define R(a: double) from A() where a = {}1",
             "define R() from A() within {}1", "define R() from A() and 1 < {}2",
             "define R() from A() and each B() within {}1 h from A"]


@budget(60)
@given(st.sampled_from(FRAGMENTS), st.integers(1, 6000), st.sampled_from(TEMPLATES))
def test_fuzz_deep_and_long_terms(fragment, times, template):
    opening, closing = fragment
    check_parse(template.replace("{}", opening * times).replace("1", "1" + closing * times, 1))


# ------------------------------------------------------------------ found by fuzzing


def test_deeply_nested_expression_is_a_syntax_error_not_a_recursion_error():
    """661 parentheses (or unary minus) overflowed the stack while parsing."""
    for opening, closing in [("(", ")"), ("-", "")]:
        text = f"define R() from A(v > {opening * 700}1{closing * 700})"
        with pytest.raises(RuleSyntaxError, match="column 123: the expression nests more "
                                                  "than 100 levels"):
            parse_rule(text)


def test_long_operator_chain_is_a_syntax_error_not_a_recursion_error():
    """A sum of 2,000 terms parsed, then overflowed the stack in the rule's checks."""
    text = "define R(a: int) from A() where a = " + " + ".join(["A.v"] * 2000)
    with pytest.raises(RuleSyntaxError, match="line 1, column 635: the expression nests"):
        parse_rule(text)
    assert parse_rule("define R(a: int) from A() where a = " + " + ".join(["A.v"] * 100))


def test_number_of_thousands_of_digits_is_a_syntax_error():
    """int() refused a 5,000-digit number with a bare ValueError and no position."""
    with pytest.raises(RuleSyntaxError, match="column 23: a number of 5000 characters"):
        parse_rule("define R() from A(v > " + "9" * 5000 + ")")


def test_window_beyond_any_float_is_a_syntax_error():
    """A window of 309 digits raised OverflowError (math.isinf of a huge int)."""
    with pytest.raises(RuleSyntaxError, match="column 28: a window must be a finite length "
                                              ">= 0, got 9999"):
        parse_rule("define R() from A() within " + "9" * 309)


def test_window_of_more_ticks_than_a_float_holds_is_a_rule_error():
    """'within 1e308 h' parsed, then round() raised OverflowError converting it to ticks."""
    rule = parse_rule("define R() from A() and each B() within 1e308 h from A")
    with pytest.raises(RuleError, match=r"^rule R: window '1e\+308 h' is more ticks than any "
                                        r"number holds at 1e\+12 ticks per second$"):
        check_rule(rule, REGISTRY, ticks_per_second=1e12)
