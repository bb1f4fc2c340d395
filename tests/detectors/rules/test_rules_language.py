"""The rule text syntax, the builder, and the checks of the rule model."""

from __future__ import annotations

import doctest
import pickle

import pytest
from rules_reference import PAPER_RULES, R1, R2, R3, R4, R5

from specula.detectors.rules import (
    Avg,
    Count,
    Ev,
    Max,
    Min,
    P,
    Rule,
    RuleError,
    RuleSyntaxError,
    Sum,
    builder,
    ge,
    gt,
    le,
    lt,
    ne,
    parse_rule,
    parse_rules,
    parser,
    rule,
)
from specula.detectors.rules.ast import (
    AggRef,
    Aggregate,
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Constraint,
    Negation,
    Param,
    ParamRef,
    Pattern,
    Step,
    Window,
)
from specula.detectors.rules.parser import parse_window

A, X = Param("a"), Param("x")

# ------------------------------------------------------------------ the paper's rules


def test_r1_parses_as_printed():
    assert parse_rule(R1) == Rule(
        "Fire", (("area", "string"), ("measuredTemp", "double")),
        Pattern("Smoke", (Constraint("area", "=", A),)),
        steps=(Step("each", Pattern("Temp", (Constraint("area", "=", A),
                                             Constraint("value", ">", 45))),
                    Window(5, "min")),),
        assignments=(("area", AttrRef(0, "area")), ("measuredTemp", AttrRef(1, "value"))))


def test_r2_differs_from_r1_in_selection_only():
    r1, r2 = parse_rule(R1), parse_rule(R2)
    assert r2.steps[0].selection == "last"
    assert r2.steps[0].pattern == r1.steps[0].pattern and r2.assignments == r1.assignments


def test_r3_binds_the_aggregate_and_filters_on_it():
    r3 = parse_rule(R3)
    assert r3.steps == ()
    assert r3.aggregates == (Aggregate("t", "avg", Pattern("Temp", (Constraint("area", "=", A),)),
                                       "value", Window(5, "min"), 0),)
    assert r3.filters == (Comparison(Const(45), "<", ParamRef("t")),)
    assert r3.assignments == (("area", AttrRef(0, "area")), ("measuredTemp", ParamRef("t")))


def test_r4_has_no_attributes_and_two_steps():
    r4 = parse_rule(R4)
    assert r4.attributes == () and r4.assignments == ()
    assert [s.selection for s in r4.steps] == ["each", "last"]
    assert r4.steps[0].pattern == Pattern("B", (Constraint("p", "=", X),
                                                Constraint("v", ">", 10)))
    assert [s.within.ticks(1 / 60) for s in r4.steps] == [8, 3]


def test_r5_inline_aggregate_is_anchored_at_b():
    r5 = parse_rule(R5)
    assert r5.aggregates == (Aggregate("sum#0", "sum", Pattern("A", (Constraint("att", "=", X),)),
                                       "value", Window(100000), 1),)
    assert r5.assignments == (("att1", ParamRef("x")), ("att2", AggRef(0)))
    assert r5.input_types == ("C", "B", "A")


def test_rules_keep_their_text_and_parse_together():
    text = "\n\n".join(PAPER_RULES.values())
    rules = parse_rules(text)
    assert [r.source for r in rules] == list(PAPER_RULES.values())
    assert rules == [parse_rule(t) for t in PAPER_RULES.values()]
    assert str(rules[0]) == R1


def test_paper_line_breaks_do_not_matter():
    flat = " ".join(R5.split())
    broken = R5.replace(" and ", "\n   and ").replace("(", "(\n ")
    assert parse_rule(flat) == parse_rule(broken) == parse_rule(R5)


# ---------------------------------------------------------------------- the syntax


def test_keywords_functions_units_and_types_ignore_case():
    upper = parse_rule("DEFINE Fire(area: STRING, t: Double) FROM Smoke(area=$a) "
                       "AND 45 < $t=AVG(Temp(area=$a).value WITHIN 5 MIN. FROM Smoke) "
                       "WHERE area=Smoke.area AND t=$t")
    lower = parse_rule("define Fire(area: string, t: double) from Smoke(area=$a) "
                       "and 45 < $t=avg(Temp(area=$a).value within 5 min from Smoke) "
                       "where area=Smoke.area and t=$t")
    assert upper == lower


@pytest.mark.parametrize(("text", "window", "ticks"), [
    ("100000", Window(100000), 100000), ("5 min.", Window(5, "min"), 300),
    ("5min", Window(5, "min"), 300), ("250 ms", Window(250, "ms"), 0),
    ("1.5 s", Window(1.5, "s"), 2), ("2 h", Window(2, "h"), 7200),
])
def test_windows(text: str, window: Window, ticks: int):
    assert parse_window(text) == window
    assert window.ticks(1.0) == ticks


def test_window_with_a_unit_needs_ticks_per_second():
    with pytest.raises(RuleError, match="ticks per second"):
        parse_window("5 min").ticks()


def test_comments_negative_literals_and_bools():
    r = parse_rule("""# a comment
        define F(x: double, b: bool)   # another
        from C(v>-3 and p!=0 and v<=2.5 and att>=1 and value<1e3 and flag=true)
        where x=-(C.v) * 2 + -1 and b=false""")
    assert [(c.attr, c.op, c.value) for c in r.terminator.constraints] == [
        ("v", ">", -3), ("p", "!=", 0), ("v", "<=", 2.5), ("att", ">=", 1),
        ("value", "<", 1000.0), ("flag", "=", True)]
    assert r.assignments == (
        ("x", BinOp("+", BinOp("*", BinOp("-", Const(0), AttrRef(0, "v")), Const(2)),
                    Const(-1))),
        ("b", Const(False)))


def test_arithmetic_precedence_and_parentheses():
    r = parse_rule("define F(y: double) from C(p=$x) where y=1 + $x * 2 - (3 - $x) / 4")
    one_plus = BinOp("+", Const(1), BinOp("*", ParamRef("x"), Const(2)))
    assert r.assignments[0][1] == BinOp("-", one_plus,
                                        BinOp("/", BinOp("-", Const(3), ParamRef("x")),
                                              Const(4)))


def test_negations_within_and_between():
    r = parse_rule("define F() from C(p=$x) and last B() within 5 from C "
                   "and not D(p=$x) within 3 from B and not N() between B and C")
    assert r.negations == (
        Negation(Pattern("D", (Constraint("p", "=", X),)), 1, within=Window(3)),
        Negation(Pattern("N"), 0, after=1))


def test_filters_in_from_and_where_are_the_same():
    in_from = parse_rule("define F(x: int) from C(p=$x) and last B() within 5 from C "
                         "and B.v > $x and $t=Count(A() within 5 from C) "
                         "where x=$x and $t != 2")
    assert in_from.filters == (Comparison(AttrRef(1, "v"), ">", ParamRef("x")),
                               Comparison(ParamRef("t"), "!=", Const(2)))
    assert in_from.aggregates[0].function == "count" and in_from.aggregates[0].attr is None


def test_inline_aggregates_are_numbered_in_text_order():
    r = parse_rule("define F(y: double) from C(p=$x) and $m=Max(A().v within 5 from C) "
                   "and Count(B() within 2 from C) > 1 "
                   "where y=Sum(A().v within 5 from C) - $m")
    assert [a.name for a in r.aggregates] == ["m", "count#1", "sum#2"]
    assert r.filters == (Comparison(AggRef(1), ">", Const(1)),)
    assert r.assignments == (("y", BinOp("-", AggRef(2), ParamRef("m"))),)


def test_a_type_may_repeat_in_the_chain():
    r = parse_rule("define F() from C() and each A() within 5 from C "
                   "and first A(v>1) within 5 from A")
    assert [p.type for p in r.chain] == ["C", "A", "A"]


# -------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("text", "message"), [
    ("define F() from A()\n  and last B() from A",
     "line 2, column 16: expected 'within' (or 'within W' after the whole "
     "sequence), found 'from'"),
    ("define F() from A() and last B() within 3 from C",
     "line 1, column 48: expected 'A' (a step follows the element just before it: chains "
     "are linear), found 'C'"),
    ("define F() from A() and each B() within 3 from A and last C() within 3 from A",
     "line 1, column 77: expected 'B' (a step follows the element just before it: chains "
     "are linear), found 'A'"),
    ("F() from A()", "line 1, column 1: expected 'define', found 'F'"),
    ("define F(x int) from A()", "line 1, column 12: expected ':', found 'int'"),
    ("define F(x: integer) from A()",
     "line 1, column 13: unknown attribute type 'integer'; use one of int, float, double, "
     "bool, string"),
    ("define F(x: int, x: int) from A()",
     "line 1, column 18: attribute 'x' is declared twice"),
    ("define F() from A(p=$x", "line 1, column 23: expected 'and' or ')', found end of text"),
    ("define F() from A(p $x)",
     "line 1, column 21: expected a comparator (=, !=, <, <=, >, >=), found '$x'"),
    ("define F() from A(p>$x)",
     "line 1, column 21: $x is not bound: mention it in an element of the sequence (e.g. "
     "A(attr=$x)) or bind an aggregate to it ($x=Sum(...))"),
    ("define F() from C(p=$x) and each A() within 5 from C and $y=Sum(B(v>$x).v within 3 "
     "from C)",
     "line 1, column 68: parameter $x can only be bound with '=', found '>'; compare it in "
     "a filter instead"),
    ("define F() from A(p=-$x)", "line 1, column 22: $x is not bound: mention it in an "
     "element of the sequence (e.g. A(attr=$x)) or bind an aggregate to it ($x=Sum(...))"),
    ("define F() from A() and each B() within 5 hours from A",
     "line 1, column 43: expected 'from', 'followedBy' or 'next' (the element it follows), "
     "found 'hours'"),
    ("define F() from A() and each B() within soon from A",
     "line 1, column 41: expected a window length (a number of ticks or a number and a "
     "unit), found 'soon'"),
    ("define F() from A() and B() within 5 from A",
     "line 1, column 25: unknown aggregate function 'B'; use Sum, Avg, Min, Max or Count "
     "(a step starts with each, last or first)"),
    ("define F(y: int) from A() where y=Median(B().v within 3 from A)",
     "line 1, column 35: unknown aggregate function 'Median'; use Sum, Avg, Min, Max or "
     "Count (a step starts with each, last or first)"),
    ("define F(y: int) from A() where y=Count(B().v within 3 from A)",
     "line 1, column 44: expected 'within' (Count counts events and takes no attribute), "
     "found '.'"),
    ("define F(y: int) from A() where y=Sum(B() within 3 from A)",
     "line 1, column 43: expected '.' and the attribute to aggregate, as in "
     "Sum(B(...).value within ...), found 'within'"),
    ("define F(y: int) from A() where y=Sum(B().v within 3 from B)",
     "line 1, column 59: 'B' is not an element of the sequence declared so far (A); "
     "declare the step before using it"),
    ("define F() from C() and $n=Count(A() within 3 from B) and last B() within 3 from C",
     "line 1, column 52: 'B' is not an element of the sequence declared so far (C); "
     "declare the step before using it"),
    ("define F(y: int) from C() and each A() within 5 from C "
     "and each A() within 5 from A where y=A.v",
     "line 1, column 93: 'A' names 2 elements of the sequence; refer only to types that "
     "occur once"),
    ("define F() from C() and each A() within 5 from C and not D() between C and A",
     "line 1, column 70: 'between C and A' needs two elements, the earlier in time first: "
     "C must come after A in the sequence"),
    ("define F() from C() and not D() after C",
     "line 1, column 33: expected 'within' or 'between', found 'after'"),
    ("define F(y: int) from C(p=$x) where y=$z",
     "line 1, column 39: $z is not bound: mention it in an element of the sequence "
     "(e.g. A(attr=$z)) or bind an aggregate to it ($z=Sum(...))"),
    ("define F() from C() and $n=Count(A(p=$z) within 3 from C)",
     "line 1, column 38: $z is not bound: mention it in an element of the sequence "
     "(e.g. A(attr=$z)) or bind an aggregate to it ($z=Sum(...))"),
    ("define F() from C(p=$x) and $x=Count(A() within 3 from C)",
     "line 1, column 29: $x is a parameter of the sequence; bind the aggregate to another "
     "name, or write the filter as Func(...) = $x"),
    ("define F() from C() and $n=Count(A() within 3 from C) and $n=Count(B() within 3 "
     "from C)", "line 1, column 25: $n is bound to two aggregates"),
    ("define F(y: int) from C() where z=1",
     "line 1, column 33: 'z' is not an attribute of F (define declares y)"),
    ("define F(y: int) from C() where y=1 and y=2",
     "line 1, column 41: attribute 'y' is assigned twice"),
    ("define F(y: int) from C() where y=1 and 3",
     "line 1, column 42: expected a comparator (=, !=, <, <=, >, >=), found end of text"),
    ("define F(y: int) from C() where y=", "line 1, column 35: expected an expression (a "
     "number, \"string\", $parameter, name.attribute or aggregate), found end of text"),
    ("define F() from C() and 3", "line 1, column 26: expected a comparator (=, !=, <, <=, "
     ">, >=), found end of text"),
    ("define F() from C() or D()",
     "line 1, column 21: expected 'and', 'within', 'partition by', 'ties', 'where', "
     "'skip', 'consuming', 'define' or end of text, found 'or'"),
    ("define F() from C() & D()",
     "line 1, column 21: expected 'and', 'within', 'partition by', 'ties', 'where', "
     "'skip', 'consuming', 'define' or end of text, found '&'"),
    ("define F(y: int) from C() where y=1 or 2",
     "line 1, column 37: expected 'and', 'skip', 'consuming', 'define' or end of text, found 'or'"),
    ("define F() from C() and each B() within 5 from C consuming B, B",
     "line 1, column 63: 'B' is consumed twice"),
    ("define F() from C() and each B() within 5 from C consuming D",
     "line 1, column 60: 'D' is not an element of the sequence declared so far (C, B); "
     "declare the step before using it"),
    ("define F() from C() and each B() within 5 from C consuming B C",
     "line 1, column 62: expected ',', 'define' or end of text, found 'C'"),
    ("define F() from C() and each (A() as a & B() as b) as g within 5 from C consuming g",
     "line 1, column 83: 'g' is a conjunction of several events; name one of its members "
     "(a, b)"),
    ("define F() from C() ~ D()", "line 1, column 21: unexpected character '~'"),
    ("define F() from C(p=$)",
     "line 1, column 21: expected a parameter name after '$', found '$)'"),
    ("define F() from C()\ndefine G() from D()",
     "line 2, column 1: expected end of text (use parse_rules for several rules), found "
     "'define'"),
    ("", "line 1, column 1: expected 'define', found end of text"),
    ("define F() from C() and each A() within 1e999 from C",
     "line 1, column 41: a window must be a finite length >= 0, got inf"),
])
def test_syntax_errors_name_line_column_found_and_expected(text: str, message: str):
    with pytest.raises(RuleSyntaxError) as info:
        parse_rule(text)
    assert str(info.value) == message
    line, column = (int(part.split()[1]) for part in message.split(":")[0].split(", "))
    assert (info.value.line, info.value.column) == (line, column)


def test_syntax_errors_are_rule_errors_and_pickle():
    with pytest.raises(RuleError) as info:
        parse_rule("define F() from")
    error = pickle.loads(pickle.dumps(info.value))
    assert isinstance(error, RuleSyntaxError)
    assert (error.line, error.column, str(error)) == (
        info.value.line, info.value.column, str(info.value))


# ---------------------------------------------------------------- the rule model


def agg(**changes) -> Aggregate:
    fields = dict(name="s", function="sum", pattern=Pattern("A"), attr="v", within=Window(3),
                  anchor=0)
    return Aggregate(**{**fields, **changes})


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(name="F-1"), "composite type name 'F-1' is not an identifier"),
    (dict(attributes=(("x", "int"), ("x", "int"))), "duplicate attribute"),
    (dict(attributes=(("x", "long"),)), "attribute 'x' has unknown type 'long'"),
    (dict(aggregates=(agg(anchor=1),)), "anchored at element 1, which does not exist"),
    (dict(aggregates=(agg(function="count"),)), "Count takes no attribute"),
    (dict(aggregates=(agg(attr=None),)), "the other functions need one"),
    (dict(negations=(Negation(Pattern("D"), 2, within=Window(1)),)),
     "refers to an element that does not exist"),
    (dict(negations=(Negation(Pattern("D"), 0),)), "needs either 'within' or 'between'"),
    (dict(negations=(Negation(Pattern("D"), 0, within=Window(1), after=0),)),
     "needs either 'within' or 'between'"),
    (dict(aggregates=(agg(pattern=Pattern("A", (Constraint("p", "=", Param("y")),))),)),
     r"parameter \$y is used by an aggregate or negation but not bound"),
    (dict(assignments=(("z", Const(1)),)), "where assigns 'z', which define does not"),
    (dict(attributes=(("z", "int"),), assignments=(("z", ParamRef("q")),)),
     r"\$q is neither a parameter of the sequence nor an aggregate"),
    (dict(filters=(Comparison(AttrRef(3, "v"), "<", Const(1)),)),
     "refers to element 3, which does not exist"),
    (dict(filters=(Comparison(AggRef(0), "<", Const(1)),)), "aggregate #0 does not exist"),
])
def test_rule_check(kwargs: dict, message: str):
    fields = dict(name="F", attributes=(), terminator=Pattern("C", (Constraint("p", "=", X),)))
    with pytest.raises(RuleError, match=message):
        Rule(**{**fields, **kwargs})


def test_model_value_checks():
    with pytest.raises(RuleError, match="must use '='"):
        Constraint("p", "<", X)
    with pytest.raises(RuleError, match="unknown comparator"):
        Constraint("p", "==", 1)  # type: ignore[arg-type]
    with pytest.raises(RuleError, match="unknown time unit 'd'"):
        Window(1, "d")
    with pytest.raises(RuleError, match="finite length >= 0"):
        Window(-1)


# -------------------------------------------------------------------------- builder


def paper_rules_built() -> dict[str, Rule]:
    fire = rule("Fire", area="string", measuredTemp="double").when("Smoke", area=P.a)
    temp = dict(within="5 min.", area=P.a, value=gt(45))
    readings = dict(area=Ev.Smoke.area, measuredTemp=Ev.Temp.value)
    return {
        "R1": fire.each("Temp", **temp).where(**readings).build(),
        "R2": fire.last("Temp", **temp).where(**readings).build(),
        "R3": (fire.aggregate("t", Avg("Temp", "value", within="5 min", before="Smoke",
                                       area=P.a))
               .filter(45, "<", P.t).where(area=Ev.Smoke.area, measuredTemp=P.t).build()),
        "R4": (rule("ComplexEvent").when("C", p=P.x)
               .each("B", within="8 min", p=P.x, v=gt(10))
               .last("A", within="3 min", p=P.x).build()),
        "R5": (rule("CE", att1="int", att2="int").when("C", att=P.x)
               .last("B", within=100_000, att=P.x).last("A", within=100_000, att=P.x)
               .where(att1=P.x, att2=Sum("A", "value", within=100_000, before="B", att=P.x))
               .build()),
    }


@pytest.mark.parametrize("name", sorted(PAPER_RULES))
def test_builder_and_parser_give_equal_rules(name: str):
    assert paper_rules_built()[name] == parse_rule(PAPER_RULES[name])


def test_builder_covers_the_whole_language():
    built = (rule("G", x="int", y="double")
             .when("C", p=P.x, v=[gt(0), lt(9)])
             .first("B", within=6, v=le(4))
             .each("A", within=Window(4), p=P.x, att=ne(2), flag=True)
             .aggregate("m", Min("A", "value", within=3, before="B", p=P.x))
             .absent("D", within=3, before="C", p=P.x)
             .absent("N", between=("A", "B"))
             .filter(P.m, "<", Ev.B.v)
             .filter(Count("D", within=9, before="C"), ">=", 0)
             .where(x=P.x, y=(Max("A", "v", within=2, before="A") + P.x) * 2 - -P.m / 4)
             .build())
    parsed = parse_rule("""define G(x: int, y: double)
        from C(p=$x and v>0 and v<9) and first B(v<=4) within 6 from C
          and each A(p=$x and att!=2 and flag=true) within 4 from B
          and $m=Min(A(p=$x).value within 3 from B)
          and not D(p=$x) within 3 from C and not N() between A and B
          and $m < B.v and Count(D() within 9 from C) >= 0
        where x=$x and y=(Max(A().v within 2 from A) + $x) * 2 - -$m / 4""")
    assert built == parsed


def test_builder_writes_aliases_predicates_and_the_clauses_after_the_sequence():
    built = (rule("H", n="int", s="int")
             .when("C", as_="c", p=P.x)
             .each("A", as_="a", v=[gt(Ev.c.v), le(P.x * 2)], ts=ge(Ev.c.ts - 3))
             .last("A", as_="e", within=2, v=ne(Ev.a.v + 1))
             .within(6).ties("nonstrict").partition_by("att").consuming("e", "a")
             .where(n=Ev.a.n, s=Ev.e.ts)
             .build())
    parsed = parse_rule("""define H(n: int, s: int)
        from C(p=$x) as c and each A(v > c.v and v <= $x * 2 and ts >= c.ts - 3) as a
          from c and last A(v != a.v + 1) as e within 2 from a
        within 6 partition by att ties nonstrict
        where n=a.n and s=e.ts
        consuming a, e""")
    assert built == parsed


def test_builders_are_immutable_and_share_prefixes():
    base = rule("F").when("C")
    one, two = base.last("A", within=1), base.each("B", within=2)
    assert base.steps == () and one.steps[0].pattern.type == "A"
    assert two.steps[0].pattern.type == "B"


@pytest.mark.parametrize(("make", "message"), [
    (lambda: rule("F").last("A", within=1), r"call when\(<terminator type>, ...\) before "
                                            r"last\(\)"),
    (lambda: rule("F").when("C").when("D"), "when() names the terminator".replace("(", r"\(")
     .replace(")", r"\)")),
    (lambda: rule("F", x="long"), "attribute 'x' has unknown type 'long'"),
    (lambda: rule("F").when("C").each("A", within="5 days"), "expected end of the window"),
    (lambda: rule("F").when("C").each("A", within=[5]), "a window is a number of ticks"),
    (lambda: rule("F").when("C").each("A", within=1, v=None),
     "a constraint takes a number, bool or string"),
    (lambda: rule("F").when("C").each("A", within=1, v=gt(Sum("A", "v", within=1,
                                                                before="C"))).build(),
     "aggregates are computed after matching"),
    (lambda: rule("F").when("C").each("A").build(), "the step A needs within="),
    (lambda: rule("F").when("C").ties("loose"), "ties must be strict or nonstrict"),
    (lambda: rule("F").when("C").each("A", within=1).consuming("A", "A"),
     r"consuming\(\) names an element twice"),
    (lambda: rule("F").when("C").consuming("a"), r"'a' is not an element of the sequence"),
    (lambda: rule("F").when("C").aggregate("t", Sum("A", "v", within=1, before="B")),
     r"'B' is not an element of the sequence so far \(C\)"),
    (lambda: rule("F").when("C").aggregate("t", 3), "needs Sum"),
    (lambda: rule("F").when("C").aggregate("t", Count("A", within=1, before="C"))
     .aggregate("t", Count("B", within=1, before="C")), r"\$t is bound to two aggregates"),
    (lambda: rule("F").when("C").each("A", within=1).each("A", within=1, v=1)
     .filter(Ev.A.v, ">", 1), "'A' names 2 elements"),
    (lambda: rule("F").when("C").filter(1, "=>", 2), "unknown comparator '=>'"),
    (lambda: rule("F", x="int").when("C").where(y=1), "where assigns 'y'"),
    (lambda: rule("F", x="int").when("C").where(x=1).where(x=2), "'x' is assigned twice"),
    (lambda: rule("F", x="int").when("C").where(x="one"), "'one' is not an expression"),
    (lambda: rule("F").when("C").absent("D", within=1), "takes within= and before="),
    (lambda: rule("F").when("C").each("A", within=1).absent("D", between=("C", "A")),
     "the earlier in time first"),
    (lambda: rule("F", x="int").when("C").where(x=P.y).build(),
     r"\$y is neither a parameter"),
])
def test_builder_errors(make, message: str):
    with pytest.raises(RuleError, match=message):
        make()



@pytest.mark.parametrize("module", [parser, builder])
def test_docstring_examples_run(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
