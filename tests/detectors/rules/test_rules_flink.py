"""FlinkCEP's constructs in the rule language: optional elements (``B()?``,
``B(){0,m}``), ``until X()`` after a closure, strict contiguity (``next``) and relaxed
contiguity (``from``, ``followedBy``), and the after-match skip strategies (``skip to
next``, ``skip past last event``, ``skip to first x``, ``skip to last x``).

Their answers on random streams are checked against the brute-force reference by the
catalogue cases ``optional*``, ``until_*``, ``next_*``, ``plus_*``, ``star_each``,
``greedy_plus``, ``reluctant_each`` and ``skip_*`` in
``test_rules_differential.py`` (AIP, CDP and the GPU engine under the simulator); here:
the syntax, the builder, the messages for what they refuse (word for word), FlinkCEP's
documented examples, the README's table of FlinkCEP and Esper patterns, and the rules
behind a speculative unit on out-of-order streams.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from naive import canonical
from refusals import refused
from rules_reference import _ABC, Case, abc_registry, check_case, random_events, reference
from test_rules_detector import ident

from specula import CostModel, Graph, InProcessRuntime
from specula.detectors.rules import RuleDetector, RuleError, parse_rule
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.ast import NO_SKIP, Skip
from specula.detectors.rules.builder import rule
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.expand import Union

HEAD = "define K(n: double) from C() and "
R = "line 1, column 1: rule K: "


def _run(text: str, *events: tuple[str, int], engine: type = AIPEngine) -> list[tuple]:
    """The composites of ``text`` over ``(type, ts)`` events (field ``n`` = ts), on the
    engine and on the reference, which must agree."""
    registry = abc_registry()
    rows = [{"type": t, "ts": ts, "seq": i, "n": ts} for i, (t, ts) in enumerate(events)]
    batch = registry.from_records(rows, dtype=registry.dtype())
    parsed = parse_rule(text)
    union = Union(parsed, engine, registry)
    found = [union.process(batch), union.flush()]
    out = [(int(c.terminators["ts"][j]), *(c.columns[a][j].item() for a, _ in parsed.attributes))
           for c in found for j in range(len(c))]
    expected = reference(parsed, registry, batch)
    assert out == [(e[0], *e[2:]) for e in expected]
    return out


# ------------------------------------------------------------------------- syntax


def test_optional_next_and_skip_parse_and_the_builder_writes_the_same_rule():
    text = ("define Q(n: double) from C() and each B()? as bs within 5 next C "
            "and last A() within 3 followedBy bs where n=Count(bs) skip to first A")
    parsed = parse_rule(text)
    assert parsed.steps[0].times == (0, 1) and parsed.steps[0].contiguity == "strict"
    assert parsed.steps[1].contiguity == "relaxed" and parsed.skip == Skip("to_first", 2)
    assert parse_rule(text.replace("?", "{0,1}").replace("followedBy", "from")) == parsed
    built = (rule("Q").when("C").each("B", within=5, times=(0, 1), as_="bs",
                                      contiguity="strict")
             .last("A", within=3).skip("to_first", "A").build())
    assert built == parse_rule(text.replace(" where n=Count(bs)", "").replace(
        "define Q(n: double)", "define Q()"))
    until = parse_rule(HEAD + "last B(){1,3} as bs until D(v > 2) within 5 from C")
    assert until.steps[0].until is not None and until.steps[0].until.type == "D"
    assert until.input_types == ("C", "B", "D")
    assert rule("K", n="double").when("C").last("B", within=5, times=(1, 3), as_="bs",
                                                 until="D").build() == parse_rule(
        HEAD + "last B(){1,3} as bs until D() within 5 from C")
    assert [parse_rule(HEAD + f"each B(){t} as bs within 5 from C").steps[0].times
            for t in ("+", "*", "{2,}", "{3}", "?")] == [(1, None), (0, None), (2, None),
                                                           (3, 3), (0, 1)]
    assert rule("K").when("C").each("B", within=5, times=(1, None), as_="bs").build() == \
        parse_rule("define K() from C() and each B()+ as bs within 5 from C")
    greedy = parse_rule(HEAD + "each B()+ greedy as bs within 5 from C")
    assert greedy.steps[0].greed == "greedy" and greedy == rule("K", n="double").when(
        "C").each("B", within=5, times=(1, None), as_="bs", greed="greedy").build()
    assert parse_rule(HEAD + "last B(){2,} RELUCTANT as bs within 5 from C").steps[0].greed \
        == "reluctant"
    assert parse_rule(HEAD + "each B() within 5 from C").skip == NO_SKIP
    assert parse_rule(HEAD + "each B() within 5 from C skip none").skip == NO_SKIP
    assert [parse_rule(HEAD + f"each B() within 5 from C skip {s}").skip for s in (
        "to next", "past last event", "to last B", "TO FIRST C")] == [
        Skip("to_next"), Skip("past_last_event"), Skip("to_last", 1), Skip("to_first", 0)]


@pytest.mark.parametrize("text, message", [
    ("each B() within 5 from C skip", "line 1, column 63: expected 'to next', 'past last "
     "event', 'to first NAME', 'to last NAME' or 'none', found end of text"),
    ("each B() within 5 from C skip to B", "line 1, column 67: expected 'next', 'first "
     "NAME' or 'last NAME', found 'B'"),
    ("each B() within 5 from C skip past last", "line 1, column 73: expected 'event', "
     "found end of text"),
    ("each B() within 5 from C skip to first X", "line 1, column 73: 'X' is not an "
     "element of the sequence declared so far (C, B); declare the step before using it"),
    ("each B() within 5 from C skip to next where n=1", "line 1, column 72: expected "
     "'consuming', 'define' or end of text, found 'where'"),
    ("each B() within 5 from C skip to next skip none", "line 1, column 72: expected "
     "'consuming', 'define' or end of text, found 'skip'"),
    ("each B() within 5 C", "line 1, column 52: expected 'from', 'followedBy' or 'next' "
     "(the element it follows), found 'C'"),
    ("each B() next X", "line 1, column 48: expected 'C' (a step follows the element just "
     "before it: chains are linear), found 'X'"),
    ("each B()+ as bs within 5 from C and each A()* as b2 within 3 from bs", R + "bs and "
     "b2 are both unbounded; a rule may have one unbounded closure, bound the others "
     "({n,m})"),
    ("each (A() | B())+ as x within 5 from C", R + "the unbounded closure x is one "
     "pattern; bound it ({n,m}) to repeat a disjunction"),
    ("each B()+ as bs within 5 from C consuming bs", R + "the unbounded closure bs does "
     "not mix with 'consuming'; bound it ({n,m})"),
    ("each B(){17,} as bs within 5 from C", R + "closure bs{17,} needs n <= 16"),
    ("each B() until D() within 5 from C", "line 1, column 43: expected 'within', 'from', "
     "'followedBy' or 'next' ('until X(...)' ends a closure: B(...){n,m} as bs until "
     "X(...)), found 'until'"),
    ("each B(){1,2} as bs until D() as d within 5 from C", "line 1, column 64: expected "
     "'within', 'from', 'followedBy' or 'next', found 'as'"),
    ("each B(){1,2} as bs until D(p=$y) within 5 from C", "line 1, column 64: $y is not "
     "bound: mention it in an element of the sequence (e.g. A(attr=$y)) or bind an "
     "aggregate to it ($y=Sum(...))"),
    ("each B() greedy within 5 from C", "line 1, column 43: expected 'within', 'from', "
     "'followedBy' or 'next', found 'greedy'"),
    ("each B(){1,2} greedy as bs within 5 from C and last A()+ reluctant as as2 within 3 "
     "from bs", R + "greedy and reluctant closures (bs, as2): one per rule, not with "
     "'consuming'"),
    ("each B(){0,3} greedy as bs within 5 from C consuming C", R + "greedy and reluctant "
     "closures (bs): one per rule, not with 'consuming'"),
    ("each B(){0,0} as bs within 5 from C",
     "line 1, column 42: rule K: closure bs{0,0} needs 0 <= n <= m <= 16 and m >= 1"),
    ("first B() within 5 next C", R + "B is 'next' to the element it follows, which only "
     "'each' and 'last' steps can be (not 'first' steps, not conjunctions)"),
    ("each (A() as a & B() as b) as g within 5 next C", R + "a is 'next' to the element it "
     "follows, which only 'each' and 'last' steps can be (not 'first' steps, not "
     "conjunctions)"),
    ("each B()? as bs within 5 from C where n = bs[first].v", R + "bs may choose no event "
     "(bs{0,m}), so bs[first] may not exist; read it with Count(bs) or Sum(bs.v)"),
    ("each B(){0,2} as bs within 5 from C where n = Avg(bs.v)", R + "Avg(bs.v) is "
     "undefined when bs chooses no event (bs{0,m}); use Count(bs) or Sum(bs.v)"),
    ("each B()? as bs within 5 from C and $s=Sum(A().v within 3 from bs)", R + "an "
     "aggregate window ends at bs, which may choose no event (bs{0,m}); anchor it at an "
     "element that is always there"),
    ("each B()? as bs within 5 from C and not D() between bs and C", R + "'between' "
     "starts at bs, which may choose no event (bs{0,m}); anchor it at an element that is "
     "always there"),
    ("each B() within 5 from C skip to next consuming B", R + "'skip' and 'consuming' "
     "are two ways of discarding matches; use one"),
])
def test_what_the_flink_constructs_refuse(text: str, message: str):
    assert refused(HEAD + text) == message


def test_the_builder_refuses_an_unknown_strategy_and_element():
    with pytest.raises(RuleError, match="unknown skip strategy 'past_last'; use one of "
                       "none, to_next, past_last_event, to_first, to_last"):
        rule("S").when("C").skip("past_last").build()  # type: ignore[arg-type]
    with pytest.raises(RuleError, match="'X' is not an element of the sequence so far"):
        rule("S").when("C").skip("to_last", "X")
    with pytest.raises(RuleError, match="an element is named by 'to first' and 'to last' "
                       "only, and they need one"):
        rule("S").when("C").skip("to_last")


# --------------------------------------------------------------------- semantics


def test_optional_element_matches_with_and_without_it():
    # FlinkCEP: a, b, c with begin(a).followedBy(b).optional().followedBy(c) gives
    # {a b c} and {a c}
    text = ("define O(a: int, c: double) from C() and each B()? as bs within 5 from C "
            "and each A() within 5 from bs where a=A.n and c=Count(bs)")
    assert _run(text, ("A", 1), ("B", 2), ("C", 3)) == [(3, 1, 0.0), (3, 1, 1.0)]
    assert _run(text, ("A", 1), ("C", 3), engine=CDPEngine) == [(3, 1, 0.0)]


def test_a_greedy_closure_keeps_the_longest_and_a_reluctant_one_the_shortest():
    # FlinkCEP's a b+ c on a1 b1 b2 c: every run of b's, or with greedy() only b1 b2
    text = ("define G(a: int, f: int, l: int) from C() and each B()+ {} as bs within 5 "
            "from C and last A() within 5 from bs where a=A.n and f=bs[first].n and "
            "l=bs[last].n")
    stream = (("A", 1), ("B", 2), ("B", 3), ("C", 4))
    assert sorted(_run(text.format(""), *stream)) == [(4, 1, 2, 2), (4, 1, 2, 3),
                                                      (4, 1, 3, 3)]
    assert _run(text.format("greedy"), *stream, engine=CDPEngine) == [(4, 1, 2, 3)]
    assert sorted(_run(text.format("reluctant"), *stream)) == [(4, 1, 2, 2), (4, 1, 3, 3)]
    # a2 between b1 and b2: the run b2 follows a2, b1 b2 follows a1, both maximal
    assert sorted(_run(text.format("greedy"), ("A", 1), ("B", 2), ("A", 3), ("B", 4),
                       ("C", 5))) == [(5, 1, 2, 4), (5, 3, 4, 4)]


def test_until_ends_the_closure_at_the_first_match():
    # b1 b2 d b3 c: the closure stops at d, so no item set spans it
    text = ("define U(f: int, l: int) from C() and each B(){1,3} as bs until D() "
            "within 9 from C where f=bs[first].n and l=bs[last].n")
    found = _run(text, ("B", 1), ("B", 2), ("D", 3), ("B", 4), ("C", 5))
    assert sorted(found) == [(5, 1, 1), (5, 1, 2), (5, 2, 2), (5, 4, 4)]
    assert len(_run(text.replace(" until D()", ""), ("B", 1), ("B", 2), ("D", 3),
                    ("B", 4), ("C", 5), engine=CDPEngine)) == 7


@pytest.mark.parametrize("engine", [AIPEngine, CDPEngine])
def test_an_unbounded_closure_grows_with_the_window_and_says_when_it_cannot(engine: type):
    text = ("define G(c: double) from C() and last B()+ as bs within 100 from C "
            "where c=Count(bs)")
    union = Union(parse_rule(text), engine, abc_registry())
    assert len(union.engines) == 1
    assert _run(text, *[("B", t) for t in range(1, 9)], ("C", 9), engine=engine) == [
        (9, float(k)) for k in range(1, 9)]  # one match per length, up to all eight
    registry = abc_registry()
    rows = [{"type": "B", "ts": t, "seq": t} for t in range(70)] + [
        {"type": "C", "ts": 70, "seq": 70}]
    batch = registry.from_records(rows, dtype=registry.dtype())
    union = Union(parse_rule(text), engine, registry)
    union.process(batch[:40])
    assert len(union.engines) == 40
    with pytest.raises(RuleError) as info:
        union.process(batch[40:])
    assert str(info.value) == (
        "rule G: its unbounded closure would need 70 items (70 plain sequences, more than "
        "64): a window holds too many of its events; shorten the window or bound the "
        "closure")


def test_next_needs_nothing_the_rule_reads_in_between():
    text = "define N(b: int) from C() and each B() within 9 next C where b=B.n"
    assert _run(text, ("B", 1), ("B", 2), ("C", 3)) == [(3, 2)]
    # the rule reads no A, so A does not break the contiguity...
    assert _run(text, ("B", 1), ("A", 2), ("C", 3)) == [(3, 1)]
    # ...unless the rule reads A (here through a negation that no A matches)
    assert _run(text.replace("where", "and not A(v > 100) within 9 from C where"),
                ("B", 1), ("A", 2), ("C", 3), engine=CDPEngine) == []
    assert _run(text.replace("next", "followedBy"), ("B", 1), ("B", 2), ("C", 3)) == [
        (3, 1), (3, 2)]


# FlinkCEP's documentation, "After Match Skip Strategy": pattern b+ c on b1 b2 b3 c.
# A 'last' closure gives the same three matches as FlinkCEP's b+ c without skip.
_B_PLUS_C = ("define M(f: int, l: int) from C() and last B()+ as bs within 9 from C "
             "where f=bs[first].n and l=bs[last].n")
_B123C = (("B", 1), ("B", 2), ("B", 3), ("C", 4))


@pytest.mark.parametrize("engine", [AIPEngine, CDPEngine])
@pytest.mark.parametrize("clause, expected", [
    ("", [(4, 3, 3), (4, 2, 3), (4, 1, 3)]),  # no skip: in output order
    ("skip none", [(4, 3, 3), (4, 2, 3), (4, 1, 3)]),
    ("skip to next", [(4, 1, 3), (4, 2, 3), (4, 3, 3)]),  # b1 b2 b3 c, b2 b3 c, b3 c
    ("skip past last event", [(4, 1, 3)]),  # b1 b2 b3 c
    ("skip to first bs", [(4, 1, 3), (4, 2, 3), (4, 3, 3)]),  # nothing starts before b1
    ("skip to last bs", [(4, 1, 3), (4, 3, 3)]),  # b2 b3 c starts before b3
])
def test_skip_strategies_give_flinks_documented_answers(engine: type, clause: str,
                                                        expected: list[tuple]):
    assert _run(f"{_B_PLUS_C} {clause}", *_B123C, engine=engine) == expected


def test_skip_holds_a_match_until_no_earlier_start_can_end():
    # a1 ... c(2) ... c(5): 'a c' under skip past last event. The match (a3, c5) must wait:
    # (a1, c5) starts earlier and ends later, and keeps only itself.
    text = ("define P(a: int, c: int) from C() and each A() within 5 from C "
            "where a=A.n and c=C.n skip past last event")
    registry = abc_registry()
    events = [("A", 1), ("C", 2), ("A", 3), ("C", 5), ("A", 6), ("C", 10)]
    rows = [{"type": t, "ts": ts, "seq": i, "n": ts} for i, (t, ts) in enumerate(events)]
    batch = registry.from_records(rows, dtype=registry.dtype())
    union = Union(parse_rule(text), AIPEngine, registry)
    released = [[(int(a), int(c)) for a, c in zip(found.columns["a"], found.columns["c"],
                                                  strict=True)]
                for found in (union.process(batch[:4]), union.process(batch[4:]),
                              union.flush())]
    # (a1, c2) is kept; it discards starts up to c2, so (a1, c5) goes, and (a3, c5) is
    # decided once the stream passes 3 + 5; then (a6, c10) at the end
    assert released == [[], [(1, 2), (3, 5)], [(6, 10)]]
    assert [r for part in released for r in part] == [
        (e[2], e[3]) for e in reference(parse_rule(text), registry, batch)]


# ----------------------------------------------- the README's FlinkCEP / Esper table

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_patterns() -> list[tuple[str, str]]:
    """The rows of the README's table of FlinkCEP and Esper patterns that have a rule:
    (the FlinkCEP cell, the rule text with ``define`` added: every attribute assigned in
    ``where`` as a double)."""
    rows = []
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or not cells[2].startswith("`from "):
            continue
        text = cells[2].strip("`").replace("\\|", "|")
        where = text.split(" where ", 1)[1] if " where " in text else ""
        names = re.findall(r"(?:^| and )(\w+)=(?!=)", where)
        rows.append((cells[0], f"define P({', '.join(f'{n}: double' for n in names)}) "
                               f"{text}"))
    return rows


PATTERNS = readme_patterns()


def test_the_readme_table_has_its_rows():
    assert len(PATTERNS) == 19
    assert all(parse_rule(text) for _, text in PATTERNS)


@pytest.mark.parametrize("engine", [AIPEngine, CDPEngine])
@pytest.mark.parametrize("flink, text", PATTERNS, ids=[f for f, _ in PATTERNS])
def test_readme_pattern_equals_the_reference(engine: type, flink: str, text: str):
    """In order, in random batches, on two random streams."""
    case = Case(flink, text, **_ABC)  # type: ignore[arg-type]
    problems = [check_case(engine, case, seed=seed, n=120) for seed in range(2)]
    assert not any(problems), "\n".join(problems)


@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_readme_patterns_behind_a_speculative_unit_equal_the_reference(engine: str):
    """Out of order through a graph, every pattern of the table in one detector: the net
    output is the reference's on the ordered stream without the events declared late."""
    reg = abc_registry()
    rules = [parse_rule(text.replace("define P(", f"define P{i}(", 1))
             for i, (_, text) in enumerate(PATTERNS)]
    det = RuleDetector(rules, reg, engine=engine)  # type: ignore[arg-type]
    events = random_events(reg, ("A", "B", "C", "D"), 240, seed=5, **_ABC["stream"])
    events["producer"], events["seq"] = 0, np.arange(len(events))  # raw input: producer 0
    rng = np.random.default_rng(6)
    events["ats"] = events["ts"] + rng.integers(0, 6, len(events))
    raw = events[np.argsort(events["ats"], kind="stable")]
    g = Graph(reg, sources=("A", "B", "C", "D"))
    g.add("rules", det, alpha=0.0, retraction="on-demand")
    result = InProcessRuntime(g, cost_model=CostModel(per_event=0.02)).run(raw, step_ticks=2)
    late = {ident(r) for r in result.late("rules")}
    ordered = raw[[ident(r) not in late for r in raw]]
    net = canonical(result.net("rules"))
    assert result.stats("rules").replayed > 0
    for parsed in rules:
        mine = net[net["type"] == reg.id(parsed.name)]
        got = sorted((int(r["ts"]), int(r["key"]), *(r[a].item() for a, _ in parsed.attributes))
                     for r in mine)
        assert got == sorted(reference(parsed, reg, ordered)), parsed.name
