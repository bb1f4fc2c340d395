"""Closures ``B(...){n,m} as bs``, disjunctions ``(A(...) | B(...)) as x``, conjunctions
``(A(...) as a & B(...) as b) as g`` and ``partition by``: their syntax, the messages for
what they do not allow, their expansion into plain rules, and a detector running them.

Their answers are checked against the brute-force reference, which enumerates
closures, disjunctions and conjunctions itself, by the catalogue cases ``closure_*``,
``disjunction``, ``*_disjunction*`` (``last``/``first`` over every alternative),
``conjunction*``, ``partition_*``, ``hybrid_q2`` and ``hot_path`` in
``test_rules_differential.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from refusals import refused
from rules_reference import (
    CASES,
    abc_registry,
    difference,
    engine_output,
    random_batches,
    random_events,
    reference,
)

from specula import Graph, InProcessRuntime
from specula.detectors import Emitter
from specula.detectors.rules import RuleDetector, RuleError, parse_rule
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.ast import AttrRef, Constraint, Fold, Param
from specula.detectors.rules.builder import Ev, P, gt, lt, rule
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.expand import MAX_EXPANSIONS, Union, expand
from specula.detectors.rules.placement import cost
from specula.events import TypeRegistry

HEAD = "define K(n: double) from C() and "


def test_closure_parses_to_a_step_with_bounds_items_and_folds():
    rule = parse_rule(HEAD + """each B(v > bs[i+1].v and v < C.v){2,4} as bs within 5 from C
        and last A(v = bs[first].v) within 3 from bs
        where n = Sum(bs.v) + bs[last].v""")
    step = rule.steps[0]
    assert step.times == (2, 4) and step.pattern.alias == "bs"
    own, nxt = step.pattern.predicates[0].left, step.pattern.predicates[0].right
    assert own == AttrRef(1, "v") and nxt == AttrRef(1, "v", "next")
    assert rule.steps[1].pattern.predicates[0].right == AttrRef(1, "v", "first")
    total = rule.assignments[0][1]
    assert total.left == Fold("sum", 1, "v") and total.right == AttrRef(1, "v", "last")
    assert not rule.plain and rule.closure(1) and not rule.closure(2)


def test_expansion_copies_the_step_per_length_and_anchors_later_steps_at_the_first_item():
    rule = parse_rule(HEAD + """each B(v > bs[i+1].v){1,3} as bs within 5 from C
        and last A() within 3 from bs where n = Count(bs)""")
    plain = expand(rule)
    assert [[p.name for p in r.chain] for r in plain] == [
        ["C", "bs[0]", "A"], ["C", "bs[1]", "bs[0]", "A"], ["C", "bs[2]", "bs[1]", "bs[0]", "A"]]
    assert [r.assignments[0][1].value for r in plain] == [1.0, 2.0, 3.0]
    # the latest item has no next one; the others compare with the copy after them
    assert plain[2].chain[1].predicates == ()
    assert str(plain[2].chain[2].predicates[0]).count("element=1") == 1
    # every item after the latest stays in the window before C
    assert len(plain[0].filters) == 0 and len(plain[2].filters) == 2
    assert all(r.plain for r in plain)


def test_disjunction_expands_per_alternative_in_the_order_written():
    rule = parse_rule("""define O(n: int) from (C(p=$x) | D(p=$x)) as t
        and each (A(p=$x) | B(p=$x and v > 1)) as e within 5 from t where n = e.n""")
    assert rule.input_types == ("C", "D", "A", "B")
    assert [[p.type for p in r.chain] for r in expand(rule)] == [
        ["C", "A"], ["C", "B"], ["D", "A"], ["D", "B"]]


R = "line 1, column 1: rule K: "


@pytest.mark.parametrize("text, message", [
    ("each B()! as bs within 5 from C",
     "line 1, column 42: unexpected character '!'"),
    ("each B(){2,x} as bs within 5 from C", "line 1, column 45: expected a whole number "
     "of events, found 'x'"),
    ("each B(){0,0} as bs within 5 from C",
     "line 1, column 42: rule K: closure bs{0,0} needs 0 <= n <= m <= 16 and m >= 1"),
    ("each B(){3,2} as bs within 5 from C",
     "line 1, column 42: rule K: closure bs{3,2} needs 0 <= n <= m <= 16 and m >= 1"),
    ("first B(){1,2} as bs within 5 from C", R + "closure bs collects events back from the "
     "element it follows: use 'each' (every subsequence) or 'last' (the latest events)"),
    ("last B(v > C.v){1,2} as bs within 5 from C", R + "a predicate of bs reads C, but a "
     "'last' closure may compare each item only with itself and the next one (bs[i+1]); "
     "use 'each', or compare in where"),
    ("each B(v > bs[i+1].v) as bs within 5 from C", "line 1, column 45: bs[i] and bs[i+1] "
     "name items of the closure being declared (B(...){n,m} as bs); bs is not that closure"),
    ("each B(){1,2} as bs within 5 from C where n = bs.v", R + "bs is a closure of several "
     "events; read bs[first].v or bs[last].v, or aggregate over it (Sum(bs.v))"),
    ("each B(){1,2} as bs within 5 from C where n = bs[i+1].v", "line 1, column 83: "
     "expected 'first' or 'last' (or, in the closure's own pattern, 'i' or 'i+1'), "
     "found 'i'"),
    ("each B() within 5 from C where n = Count(B)",
     R + "Count(...) over B, which is not a closure"),
    ("each B() within 5 from C where n = B[first].v",
     R + "B is one event, not a closure; write B.v"),
    ("each B(){1,2} as bs within 5 from C and each A(v > Count(bs)) within 3 from bs",
     R + "a predicate of A uses an aggregate; aggregates are computed after matching, "
     "compare them in where"),
    ("each (A() | B()) within 5 from C",
     R + "the disjunction A | B needs a name: (A | B) as x"),
    ("each (A() | A(v > 1)) as x within 5 from C", R + "the alternatives of x must be of "
     "different types (A | A); put the conditions of one type in one pattern"),
    ("each (A(p=$y) | B()) as x within 5 from C",
     R + "every alternative of x must mention the same parameters"),
    ("last (A(p=$y) | B(v=$y)) as x within 5 from C", "line 1, column 40: rule K: the "
     "'last' disjunction x binds $y to p and to v; bind it to one attribute name in every "
     "alternative"),
    ("first (A(v < C.v) | B()) as x within 5 from C", "line 1, column 41: rule K: the "
     "'first' disjunction x: its alternatives compare with other elements (or parameters "
     "bound before it) differently; give every alternative the same such predicates, or "
     "use 'each'"),
    ("last (A() | B()) as x within 5 from C and each B() within 3 from x ties nonstrict",
     "line 1, column 40: rule K: the 'last' disjunction x shares the type B with another "
     "element of the sequence, which under 'ties nonstrict' could choose the same event; "
     "use 'ties strict' or 'each'"),
    ("last (A() | B()) as x within 5 from C consuming x", "line 1, column 40: rule K: the "
     "'last' disjunction x does not mix with 'consuming'; use 'each'"),
    ("each B(v > C.v)+ runs as bs within 5 from C", R + "'runs' takes the items of a "
     "closure that follow each other among its candidates, which its constraints decide: "
     "a closure without predicates (B(...){n,m} runs; compare in where)"),
    ("each (A() | B()){1,6} as x within 5 from C", R + "its closures, disjunctions and "
     f"conjunctions expand to 126 plain sequences, more than {MAX_EXPANSIONS}; bound the "
     "closures more tightly or use fewer members"),
])
def test_what_closures_and_disjunctions_refuse(text: str, message: str):
    assert refused(HEAD + text) == message


def test_placement_costs_a_closure_as_its_expansions():
    rule = parse_rule(HEAD + "each B(){1,3} as bs within 10 from C")
    plain = cost(parse_rule(HEAD + "each B() within 10 from C"), {"B": 1.0, "C": 1.0})
    assert cost(rule, {"B": 1.0, "C": 1.0}).per_terminator == pytest.approx(
        plain.per_terminator * (1 + 2 + 3))


@pytest.mark.parametrize("engine", ["aip", "cdp"])
@pytest.mark.parametrize("name", ["closure_last", "disjunction", "hot_path", "optional_closure",
                                  "skip_to_first", "plus_lengths", "plus_skip", "greedy_plus"])
def test_detector_runs_a_union_and_restores_it(engine: str, name: str):
    case = CASES[name]
    registry, rule = case.registry(), case.rule()
    events = random_events(registry, case.types, 240, seed=3, **case.stream)
    expected = reference(rule, registry, events, case.ticks_per_second)
    det = RuleDetector([rule], registry, engine=engine)  # type: ignore[arg-type]
    names = [t.name for t in registry.types()]
    half = len(events) // 2
    def composites(emit: Emitter) -> list[tuple[int, int]]:
        return [(int(ts), int(key)) for _, cols, _ in emit.column_batches
                for ts, key in zip(cols["ts"], cols["key"], strict=True)]

    head, tail = Emitter(), Emitter()
    det.on_batch(events[:half], names, head)
    state = det.snapshot()
    det.on_batch(events[half:], names, tail)
    det.on_end(tail)
    assert composites(head) + composites(tail) == [c[:2] for c in expected]
    det.restore(state)
    again = Emitter()
    det.on_batch(events[half:], names, again)
    det.on_end(again)
    assert composites(tail) and composites(again) == composites(tail)


def test_partition_by_binds_the_attribute_in_every_pattern():
    rule = parse_rule("""define P(n: int) from C() and each B() within 5 from C
        and not D() within 3 from C and $s=Sum(A().v within 5 from C)
        partition by p ties nonstrict where n=C.p""")
    assert rule.partition == "p" and rule.ties == "nonstrict" and not rule.plain
    (plain,) = expand(rule)
    key = Constraint("p", "=", Param("partition#p"))
    patterns = [*plain.chain, plain.aggregates[0].pattern, plain.negations[0].pattern]
    assert all(p.constraints[-1] == key for p in patterns)


def test_partition_by_an_attribute_a_type_lacks_is_refused():
    registry = TypeRegistry()
    registry.register("C", p="i8")
    registry.register("B", q="i8")
    rule = parse_rule("define P() from C() and each B() within 5 from C partition by p")
    with pytest.raises(RuleError, match="event type 'B' has no attribute 'p'"):
        RuleDetector([rule], registry)


# ------------------------------------------------------------------- conjunctions

CONJ = "define J(a: int, b: int) from C() and each (A() as a & B(v > 1) as b) as g "


def test_conjunction_parses_to_member_steps_and_expands_per_order():
    rule = parse_rule(CONJ + "within 5 from C and each D() within 3 from g "
                      "where a=a.n and b=b.n")
    assert [(s.pattern.name, s.group) for s in rule.steps] == [("a", "g"), ("b", "g"),
                                                                ("D", "")]
    assert not rule.plain
    plain = expand(rule)
    assert [[p.name for p in r.chain] for r in plain] == [["C", "a", "b", "D"],
                                                         ["C", "b", "a", "D"]]
    # the later member stays in the window before C; ties strict adds nothing more
    assert [len(r.chain[2].predicates) for r in plain] == [1, 1]
    nonstrict = expand(parse_rule(CONJ + "within 5 from C ties nonstrict"))
    assert [len(r.chain[2].predicates) for r in nonstrict] == [1, 2]


def _pairs(ties: str, *events: tuple[str, int, int]) -> list[tuple]:
    registry = abc_registry()
    rows = [{"type": t, "ts": ts, "seq": i, "v": v, "n": i} for i, (t, ts, v)
            in enumerate(events)]
    batch = registry.from_records(rows, dtype=registry.dtype())
    rule = parse_rule(CONJ + f"within 5 from C ties {ties} where a=a.n and b=b.n")
    return reference(rule, registry, batch)


def test_conjunction_members_in_any_order_and_equal_time_stamps_count_once():
    # B@2 before A@3 and A@3 before B@4: both orders match, A@3 with either B; the order
    # written (a the latest) comes first
    assert _pairs("strict", ("B", 2, 2), ("A", 3, 0), ("B", 4, 2), ("C", 6, 0)) == [
        (6, 0, 1, 0), (6, 0, 1, 2)]
    # equal time stamps: never under strict ties; once (not once per order) under nonstrict
    same = (("A", 3, 0), ("B", 3, 2), ("C", 6, 0))
    assert _pairs("strict", *same) == []
    assert _pairs("nonstrict", *same) == [(6, 0, 0, 1)]
    assert _pairs("nonstrict", ("B", 6, 2), ("C", 6, 0), ("A", 6, 0)) == [(6, 0, 2, 0)]


LAST = ("define L(a: int, b: int) from C() and last (A() as a & B(v > 1) as b) as g "
        "within 5 from C where a=a.n and b=b.n")


def _last_pairs(*events: tuple[str, int, int]) -> list[tuple]:
    """The reference's ``(a.n, b.n)`` of :data:`LAST`, which both engines give too."""
    registry = abc_registry()
    rows = [{"type": t, "ts": ts, "seq": i, "v": v, "n": i} for i, (t, ts, v)
            in enumerate(events)]
    batch = registry.from_records(rows, dtype=registry.dtype())
    rule_ = parse_rule(LAST)
    expected = reference(rule_, registry, batch)
    for engine in (AIPEngine, CDPEngine):
        assert engine_output(Union(rule_, engine, registry), [batch]) == expected
    return [(a, b) for _, _, a, b in expected]


def test_a_last_conjunction_takes_each_members_latest_candidate():
    """TESLA's selections anchored at one element: the latest A and the latest B of C's
    window, whichever comes first in time; none if a member has no candidate."""
    assert _last_pairs(("B", 2, 2), ("A", 3, 0), ("B", 4, 2), ("A", 5, 0), ("B", 6, 0),
                       ("C", 7, 0)) == [(3, 2)]
    assert _last_pairs(("A", 2, 0), ("B", 3, 2), ("A", 4, 0), ("C", 7, 0)) == [(2, 1)]
    assert _last_pairs(("A", 1, 0), ("B", 3, 0), ("C", 7, 0)) == []  # no B(v > 1)
    assert _last_pairs(("B", 1, 2), ("A", 3, 0), ("C", 7, 0)) == []  # B outside W
    # the latest A and B share a time stamp, which members never do under ties strict:
    # each order of the two takes the other's latest candidate before it
    assert _last_pairs(("A", 1, 0), ("B", 2, 2), ("A", 3, 0), ("B", 3, 2),
                       ("C", 6, 0)) == [(2, 1), (0, 3)]


@pytest.mark.parametrize("seed", range(6))
def test_last_conjunctions_of_random_shapes_equal_the_reference(seed: int):
    """Random shapes of a ``last`` conjunction: two or three members (one type may
    repeat) with literal constraints, a parameter bound by the anchor or none, a step
    after it of every selection or none; on both engines, over random batches of a
    random stream, against the brute-force reference."""
    rng = np.random.default_rng(seed)
    pick = lambda *options: options[int(rng.integers(len(options)))]  # noqa: E731
    types = [pick("A", "B", "D") for _ in range(int(rng.integers(2, 4)))]
    members = " & ".join(
        f"{t}({' and '.join(c for c in (pick('', 'p=$x'), pick('', 'v > 3', 'att = 1')) if c)})"
        f" as m{i}" for i, t in enumerate(types))
    after = pick("", f" and {pick('each', 'last', 'first')} N() within 3 from g")
    text = (f"define R(k: int) from C(p=$x) as c and last ({members}) as g "
            f"within {int(rng.integers(2, 6))} from c{after} where k=m0.n")
    registry, rule_ = abc_registry(), parse_rule(text)
    events = random_events(registry, tuple("ABCDN"), 200, seed=seed, max_gap=1, serial="n",
                           ranges={"p": (0, 2), "att": (0, 2), "v": (0, 8), "value": (0, 5)})
    expected = reference(rule_, registry, events)
    for engine in (AIPEngine, CDPEngine):
        got = engine_output(Union(rule_, engine, registry), random_batches(events, seed=seed))
        assert not difference(expected, got), f"{text}\n{difference(expected, got)}"


@pytest.mark.parametrize("engine", ["aip", "cdp"])
@pytest.mark.parametrize("alpha, max_delay", [(1.0, 0), (0.5, 6)])
def test_a_last_conjunction_through_a_graph_equals_the_reference(engine, alpha, max_delay):
    """In order (pure K-slack, no delay) and out of order (speculative, K above every
    delay): the net output is the reference's."""
    case = CASES["conjunction_last"]
    registry = case.registry()
    raw = random_events(registry, case.types, 200, seed=3, producers=1, **case.stream)
    rng = np.random.default_rng(4)
    arriving = raw.copy()
    arriving["ats"] = raw["ts"] + rng.integers(0, max_delay + 1, len(raw))
    arriving = arriving[np.argsort(arriving["ats"], kind="stable")]
    g = Graph(registry, sources=case.types)
    det = RuleDetector(case.text, registry, engine=engine)
    g.add("rules", det, alpha=alpha, k0=max_delay + 1)
    result = InProcessRuntime(g).run(arriving, step_ticks=2)
    assert len(result.late("rules")) == 0
    names = [a for a, _ in det.rules[0].attributes]
    got = [(int(r["ts"]), int(r["key"]), *(r[a].item() for a in names))
           for r in result.net("rules")]
    expected = reference(case.rule(), registry, raw)
    assert sorted(got) == sorted(expected) and len(expected) >= 5
    assert (result.stats("rules").replayed > 0) == (alpha < 1)


@pytest.mark.parametrize("text, message", [
    ("each (A() as a & B() as b) within 5 from C",
     "line 1, column 39: the conjunction a & b needs a name: (a & b) as g"),
    ("first (A() as a & B() as b) as g within 5 from C",
     "line 1, column 40: rule K: the conjunction g can be an 'each' or a 'last' step, not "
     "'first' (a step that follows another member cannot choose a member's earliest "
     "candidate in the window of the anchor); use 'each' or 'last'"),
    ("last (A() as a & B() as b) as g within 5 from C ties nonstrict",
     "line 1, column 87: rule K: the conjunction g: a 'last' conjunction needs 'ties "
     "strict' (its members never share a time stamp)"),
    ("last (A() as a & B(v > 1 and v < C.v) as b) as g within 5 from C",
     "line 1, column 52: rule K: the conjunction g: b has a predicate, but a member of a "
     "'last' conjunction takes literal constraints and parameters only (its later "
     "candidates are excluded by a negation, which reads no predicates); compare in where"),
    ("last (A(att=$y) as a & B(att=$y) as b) as g within 5 from C",
     "line 1, column 41: rule K: the conjunction g: a reads $y, which a member binds; the "
     "members of a 'last' conjunction take parameters bound before it"),
    ("each (A() as a) as g within 5 from C", R + "the conjunction g has one member; list "
     "two or more: (A(...) & B(...)) as g"),
    ("each (A() as a & B() | D()) as g within 5 from C", "line 1, column 55: expected '&' "
     "or ')' (a conjunction lists its members with '&'; '|' and closures do not mix with "
     "it), found '|'"),
    ("each (A() as a & B() as b){1,2} as g within 5 from C", "line 1, column 60: expected "
     "'as' (a conjunction is one event per member; it takes no {n,m}), found '{'"),
    ("each (A() as a & B(v > bs[i+1].v) as b) as g within 5 from C", "line 1, column 57: "
     "bs[i] and bs[i+1] name items of a closure; a member of a conjunction is one event"),
    ("each (A() as a & B(v > a.v) as b) as g within 5 from C", R + "a predicate of b reads "
     "a, a member of the same conjunction g; compare members in where"),
    ("each (A() as a & B() as b) as g within 5 from C where n = g.v", "line 1, column 92: "
     "'g' is a conjunction of several events; name one of its members (a, b)"),
    ("each (A() as a & B() as b) as g within 5 from a", "line 1, column 80: expected 'C' "
     "(a step follows the element just before it: chains are linear), found 'a'"),
    ("each (A() as a & B() as b) as g within 5 from C and last D(v > a.v) within 3 from g",
     R + "a predicate of D reads another element, but a 'last' step after the conjunction "
     "g may only compare with itself; use 'each', or compare in where"),
    ("each (A() as a & B() as b) as g within 5 from C and not N() between b and a",
     R + "'not N between' two members of the conjunction g, whose order in time is not "
     "fixed"),
    ("each (A() & B() & D() & N() & A(v>1) as a) as g within 5 from C", R + "its closures, "
     f"disjunctions and conjunctions expand to 120 plain sequences, more than "
     f"{MAX_EXPANSIONS}; bound the closures more tightly or use fewer members"),
])
def test_what_conjunctions_refuse(text: str, message: str):
    assert refused(HEAD + text) == message


def test_the_builder_writes_last_and_first_disjunctions_as_the_text():
    """A tuple of types is a disjunction: each alternative's own constraints, then the
    shared ones (a predicate among them)."""
    last = (rule("LD", x="int", e="int", d="int").when("C", p=P.x)
            .last((("A", {"v": gt(2)}), ("B", {"v": lt(5)})), as_="e", within=5, p=P.x)
            .each("D", within=3, p=P.x)
            .where(x=P.x, e=Ev.e.n, d=Ev.D.n).build())
    assert last == CASES["last_disjunction"].rule()
    first = (rule("FD", e="int", d="int", v="int").when("C", as_="c")
             .first(("A", ("B", {"att": 1})), as_="e", within=5, v=lt(Ev.c.v))
             .last("D", within=3, v=gt(Ev.D.att / 2))
             .within(6).where(e=Ev.e.n, d=Ev.D.n, v=Ev.e.v).build())
    assert first.steps[0] == CASES["first_disjunction"].rule().steps[0]


@pytest.mark.parametrize("seed", range(6))
def test_last_and_first_disjunctions_of_random_shapes_equal_the_reference(seed: int):
    """Random shapes of a ``last``/``first`` disjunction: two or three alternatives with
    literal constraints, own predicates or none, a shared predicate on the anchor or none,
    a step behind it of every selection, either tie policy; on both engines, over random
    batches of a random stream, against the brute-force reference."""
    rng = np.random.default_rng(seed)
    pick = lambda *options: options[int(rng.integers(len(options)))]  # noqa: E731
    types = list(rng.permutation(["A", "B", "D"])[:int(rng.integers(2, 4))])
    shared = pick("", " and v < c.v + 2")
    own = [pick("", "v > 3", "att = 1", "v * 2 > value + 1") for _ in types]
    options = " | ".join(f"{t}(p=$x{' and ' + o if o else ''}{shared})"
                         for t, o in zip(types, own, strict=True))
    ties = pick("strict", "nonstrict")
    text = (f"define R(e: int, k: int) from C(p=$x) as c and {pick('last', 'first')} "
            f"({options}) as e within {int(rng.integers(2, 6))} from c "
            f"and {pick('each', 'last', 'first')} N() within 3 from e ties {ties} "
            "where e=e.n and k=N.n")
    registry, rule_ = abc_registry(), parse_rule(text)
    events = random_events(registry, tuple("ABCDN"), 200, seed=seed, max_gap=1, serial="n",
                           ranges={"p": (0, 2), "att": (0, 2), "v": (0, 8), "value": (0, 5)})
    expected = reference(rule_, registry, events)
    for engine in (AIPEngine, CDPEngine):
        union = Union(rule_, engine, registry)
        got = engine_output(union, random_batches(events, seed=seed))
        assert not difference(expected, got), f"{text}\n{difference(expected, got)}"


def test_the_builder_writes_runs_as_the_text():
    built = (rule("K", f="int").when("C")
             .each("B", times=(1, None), runs=True, as_="bs", within=5, p=P.x)
             .where(f=P.x).build())
    assert built == parse_rule("define K(f: int) from C() and each B(p=$x)+ runs as bs "
                               "within 5 from C where f=$x")
