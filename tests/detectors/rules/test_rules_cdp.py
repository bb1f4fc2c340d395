"""The CDP engine on CPU: the paper's example, hand-made cases of the semantics, pruning,
snapshots and batch-split invariance, and random streams against a brute-force matcher."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specula.detectors.rules.ast import Param, Rule, RuleError
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.engine import Matches, order_key
from specula.detectors.rules.parser import parse_rule
from specula.events import TypeRegistry

R4 = ("define CE() from C(p=$x) and each B(p=$x and v>10) within 8 from C "
      "and last A(p=$x) within 3 from B")


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for name in "ABCD":
        reg.register(name, p="i8", v="i8", f="f8")
    return reg


def events(reg: TypeRegistry, rows: list[tuple]) -> np.ndarray:
    """``(type, ts, p, v[, f[, producer, seq]])`` tuples as one batch in stream order."""
    out = np.zeros(len(rows), reg.dtype())
    for i, row in enumerate(rows):
        t, ts, p, v, *rest = row
        out[i]["type"], out[i]["ts"], out[i]["p"], out[i]["v"] = reg.id(t), ts, p, v
        out[i]["f"] = rest[0] if rest else 0.0
        out[i]["producer"], out[i]["seq"] = rest[1:3] if len(rest) > 1 else (0, i)
    return out


def chosen(found: Matches) -> list[list[int]]:
    """Time stamps of the elements of every match."""
    return [[int(e["ts"][i]) for e in found.elements] for i in range(len(found))]


def fig5(reg: TypeRegistry) -> np.ndarray:
    stream = [("A", 1, 5), ("B", 2, 2), ("B", 3, 4), ("A", 4, 4), ("B", 6, 3), ("A", 7, 1),
              ("B", 8, 1), ("A", 9, 2), ("B", 11, 3), ("A", 12, 3), ("B", 13, 3),
              ("A", 14, 3), ("C", 15, 3)]
    return events(reg, [(t, ts, p, 20) for t, ts, p in stream])


def test_fig5_of_the_paper():
    reg = registry()
    engine = CDPEngine(parse_rule(R4), reg)
    found = engine.process(fig5(reg))
    assert chosen(found) == [[15, 13, 12]]
    assert found.terminator.tolist() == [12]
    b, a = engine.columns()
    assert b["ts"].tolist() == [8, 11, 13]  # deleteOldEvents: B from 15 - 8
    assert a["ts"].tolist() == [7, 9, 12, 14]  # A from 8 (first B left) - 3


def test_fig5_one_event_at_a_time_prunes_the_same():
    reg = registry()
    whole, single = CDPEngine(parse_rule(R4), reg), CDPEngine(parse_rule(R4), reg)
    stream = fig5(reg)
    whole.process(stream)
    for i in range(len(stream)):
        single.process(stream[i:i + 1])
    assert single.snapshot() == whole.snapshot()


@pytest.mark.parametrize("selection, expected", [
    ("each", [[10, 4], [10, 6], [10, 8]]),
    ("last", [[10, 8]]),
    ("first", [[10, 4]]),
])
def test_selection(selection, expected):
    reg = registry()
    rule = parse_rule(f"define X() from C(p=$x) and {selection} A(p=$x) within 7 from C")
    stream = events(reg, [("A", 2, 1, 0), ("A", 4, 1, 0), ("A", 5, 2, 0), ("A", 6, 1, 0),
                          ("A", 8, 1, 0), ("A", 10, 1, 0), ("C", 10, 1, 0)])
    assert chosen(CDPEngine(rule, reg).process(stream)) == expected


def test_equal_time_stamps_never_form_a_sequence_and_ties_go_by_position():
    reg = registry()
    last = parse_rule("define X() from C() and last A() within 5 from C")
    first = parse_rule("define X() from C() and first A() within 5 from C")
    # two A at ts 3, the second one (producer 2) is later in stream order
    stream = events(reg, [("A", 3, 0, 1, 0.0, 1, 9), ("A", 3, 0, 2, 0.0, 2, 0),
                          ("A", 7, 0, 3, 0.0, 0, 1), ("C", 7, 0, 0, 0.0, 0, 2)])
    assert CDPEngine(last, reg).process(stream).elements[1]["producer"].tolist() == [2]
    assert CDPEngine(first, reg).process(stream).elements[1]["producer"].tolist() == [1]


def test_window_bounds_are_inclusive_before_and_strict_after():
    reg = registry()
    rule = parse_rule("define X() from C() and each A() within 5 from C")
    stream = events(reg, [("A", 4, 0, 0), ("A", 5, 0, 0), ("A", 9, 0, 0), ("C", 10, 0, 0),
                          ("A", 10, 0, 0)])
    assert chosen(CDPEngine(rule, reg).process(stream)) == [[10, 5], [10, 9]]


def test_selection_is_local():
    reg = registry()
    rule = parse_rule("define X() from C(p=$x) and last B(p=$x) within 10 from C "
                      "and last A(p=$x) within 2 from B")
    # the last B (ts 8) has no A behind it; the earlier B (ts 5) would, but is not chosen
    stream = events(reg, [("A", 4, 1, 0), ("B", 5, 1, 0), ("B", 8, 1, 0), ("C", 9, 1, 0)])
    assert len(CDPEngine(rule, reg).process(stream)) == 0


def test_many_terminators_in_one_batch_see_only_their_past():
    reg = registry()
    rule = parse_rule("define X() from C() and each A() within 100 from C")
    stream = events(reg, [("A", 1, 0, 0), ("C", 2, 0, 0), ("A", 3, 0, 0), ("C", 4, 0, 0),
                          ("C", 4, 0, 0), ("A", 4, 0, 0)])
    found = CDPEngine(rule, reg).process(stream)
    assert found.terminator.tolist() == [1, 3, 3, 4, 4]
    assert chosen(found) == [[2, 1], [4, 1], [4, 3], [4, 1], [4, 3]]


def test_aggregates_and_undefined_values():
    reg = registry()
    rule = parse_rule(
        "define X(s: int, a: float, lo: float, hi: float, n: int) "
        "from C(p=$x) and last B(p=$x) within 10 from C "
        "where s=Sum(A(p=$x).v within 5 from B) and a=Avg(A(p=$x).v within 5 from B) "
        "and lo=Min(A(p=$x).v within 5 from B) and hi=Max(A(p=$x).v within 5 from B) "
        "and n=Count(A(p=$x and v>2) within 5 from B)")
    stream = events(reg, [("A", 0, 1, 9), ("A", 3, 1, 2), ("A", 4, 2, 7), ("A", 5, 1, 4),
                          ("B", 6, 1, 0), ("B", 7, 2, 0), ("C", 8, 1, 0), ("C", 9, 3, 0),
                          ("B", 20, 3, 0), ("C", 21, 3, 0)])
    found = CDPEngine(rule, reg).process(stream)
    assert chosen(found) == [[8, 6], [21, 20]]
    assert found.aggregates[0].tolist() == [6.0, 3.0, 2.0, 4.0, 1.0]
    assert found.aggregates[1, [0, 4]].tolist() == [0.0, 0.0]
    assert np.isnan(found.aggregates[1, 1:4]).all()


def test_negations_within_and_between():
    reg = registry()
    within = parse_rule("define X() from C(p=$x) and last B(p=$x) within 10 from C "
                        "and not D(p=$x) within 3 from C")
    between = parse_rule("define X() from C(p=$x) and last B(p=$x) within 10 from C "
                         "and not D(p=$x) between B and C")
    stream = events(reg, [("B", 1, 1, 0), ("D", 1, 1, 0), ("D", 2, 1, 0), ("D", 2, 2, 0),
                          ("C", 4, 1, 0), ("D", 4, 1, 0), ("C", 6, 1, 0)])
    assert CDPEngine(within, reg).process(stream).negations.tolist() == [[2], [1]]
    # D at ts 1 ties with B: not strictly between; ts 4 ties with the first C
    assert CDPEngine(between, reg).process(stream).negations.tolist() == [[1], [2]]


def test_float_parameters_compare_by_value():
    reg = registry()
    rule = parse_rule("define X() from C(f=$y) and each A(f=$y) within 10 from C")
    stream = events(reg, [("A", 1, 0, 0, -0.0), ("A", 2, 0, 0, math.nan),
                          ("A", 3, 0, 0, 0.5), ("C", 4, 0, 0, 0.0), ("C", 5, 0, 0, math.nan)])
    assert chosen(CDPEngine(rule, reg).process(stream)) == [[4, 1]]


def test_parameter_mentioned_twice_by_its_binder():
    reg = registry()
    rule = parse_rule("define X() from C(p=$x) and last A(p=$y and v=$y) within 10 from C "
                      "and last B(v=$y) within 10 from A")
    stream = events(reg, [("B", 1, 0, 3), ("A", 2, 3, 3), ("A", 3, 4, 5), ("C", 4, 0, 0)])
    # A at ts 3 has p != v: it does not match the pattern, so the last A is the one at 2
    assert chosen(CDPEngine(rule, reg).process(stream)) == [[4, 2, 1]]


def test_rules_naming_unknown_attributes_or_types_are_rejected():
    reg = registry()
    with pytest.raises(RuleError, match="no attribute 'q'"):
        CDPEngine(parse_rule("define X() from C(q=1)"), reg)
    with pytest.raises(RuleError, match="'E' is not registered"):
        CDPEngine(parse_rule("define X() from C() and last E() within 1 from C"), reg)


def test_batches_out_of_stream_order_are_rejected():
    reg = registry()
    engine = CDPEngine(parse_rule(R4), reg)
    engine.process(events(reg, [("A", 5, 0, 0)]))
    with pytest.raises(ValueError, match="stream order"):
        engine.process(events(reg, [("A", 4, 0, 0)]))
    with pytest.raises(ValueError, match="producer << 40"):
        engine.process(events(reg, [("A", 6, 0, 0, 0.0, 0, 5), ("A", 6, 0, 0, 0.0, 0, 4)]))
    assert len(engine.process(events(reg, [("D", 1, 0, 0)]))) == 0  # other types: ignored


# ----------------------------------------------------------------------- random streams

RULES = [
    R4.replace("v>10", "v>1"),
    "define X() from C(p=$x) and last B(p=$x) within 9 from C and last A(p=$x) within 9 "
    "from B where s=Sum(A(p=$x).v within 9 from B)".replace("define X()",
                                                            "define X(s: int)"),
    "define X() from C(p=$x) and each B(p=$x) within 6 from C and each A(p=$x) within 6 "
    "from B",
    "define X() from C(p=$x) and first B(v>1) within 7 from C and last A(p=$x) within 5 "
    "from B and not D(p=$x) between A and B",
    "define X(m: float, n: int) from C(v<3) and each A(p=$x) within 4 from C "
    "and first B(p=$x) within 6 from A where m=Max(D(p=$x).f within 5 from A) "
    "and n=Count(B(p=$x) within 8 from C)",
    "define X() from A(p=$x) and last A(p=$x) within 5 from A and each A(v=$y) within 5 "
    "from A",
    "define X(a: float) from C() and last B(f=$y) within 10 from C "
    "where a=Avg(A(f=$y).v within 10 from B)",
    "define X() from D(v>=2) and not C() within 3 from D",
]


def random_stream(reg: TypeRegistry, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype())
    out["type"] = rng.integers(1, 5, n)
    out["ts"] = np.cumsum(rng.integers(0, 3, n))
    out["producer"] = rng.integers(0, 3, n)
    out["seq"] = rng.permutation(n)
    out["p"] = rng.integers(0, 3, n)
    out["v"] = rng.integers(0, 4, n)
    out["f"] = rng.choice([0.0, -0.0, 1.5, math.nan], n)
    return out[np.lexsort((order_key(out), out["ts"]))]


def naive(rule: Rule, stream: np.ndarray, reg: TypeRegistry) -> list[tuple]:
    """Every match of ``rule`` over ``stream``, by enumeration: ``(terminator, element
    positions, aggregates, negation counts)`` in the order the semantics prescribes."""
    names = {t.id: t.name for t in reg.types()}
    rows = [(names[int(r["type"])], int(r["ts"]), int(order_key(stream[i:i + 1])[0]),
             {a: r[a].item() for a in ("p", "v", "f")}) for i, r in enumerate(stream)]
    ops = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}

    def fits(row, pattern, env):
        new = dict(env)
        if row[0] != pattern.type:
            return None
        for c in pattern.constraints:
            value = row[3][c.attr]
            if isinstance(c.value, Param):
                if c.value.name in new:
                    if value != new[c.value.name]:
                        return None
                else:
                    new[c.value.name] = value
            elif not ops[c.op](value, c.value):
                return None
        return new

    out = []

    def extend(t, seq, env, k):
        if k == len(rule.steps):
            aggs = []
            for agg in rule.aggregates:
                e_ts = seq[agg.anchor][1]
                vals = [r[3][agg.attr] if agg.attr else 1.0 for r in rows
                        if e_ts - agg.within.ticks() <= r[1] < e_ts
                        and fits(r, agg.pattern, env) == env]
                f = agg.function
                aggs.append(float(len(vals)) if f == "count" else sum(vals, 0.0) if f == "sum"
                            else math.nan if not vals else sum(vals) / len(vals) if f == "avg"
                            else math.nan if any(v != v for v in vals)
                            else min(vals) if f == "min" else max(vals))
            negs = []
            for neg in rule.negations:
                e_ts = seq[neg.anchor][1]
                lo = (e_ts - neg.within.ticks() if neg.within else seq[neg.after][1] + 1)
                negs.append(sum(1 for r in rows if lo <= r[1] < e_ts
                                and fits(r, neg.pattern, env) == env))
            out.append((t, [(r[1], r[2]) for r in seq], aggs, negs))
            return
        step = rule.steps[k]
        a_ts = seq[-1][1]
        cands = [(r, fits(r, step.pattern, env)) for r in rows
                 if a_ts - step.within.ticks() <= r[1] < a_ts]
        cands = sorted([c for c in cands if c[1] is not None], key=lambda c: (c[0][1], c[0][2]))
        if step.selection == "last":
            cands = cands[-1:]
        elif step.selection == "first":
            cands = cands[:1]
        for r, new in cands:
            extend(t, [*seq, r], new, k + 1)

    for i, r in enumerate(rows):
        env = fits(r, rule.terminator, {})
        if env is not None:
            extend(i, [r], env, 0)
    return out


def as_list(found: Matches, offset: int = 0) -> list[tuple]:
    out = []
    for i in range(len(found)):
        elems = [(int(e["ts"][i]), int(order_key(e[i:i + 1])[0])) for e in found.elements]
        out.append((int(found.terminator[i]) + offset, elems, found.aggregates[i].tolist(),
                    found.negations[i].tolist()))
    return out


def run(engine: CDPEngine, stream: np.ndarray, cuts: list[int]) -> list[tuple]:
    out = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += as_list(engine.process(stream[a:b]), a)
    return out


def same(a: list[tuple], b: list[tuple]) -> bool:
    def norm(x):
        return [(t, e, [None if v != v else v for v in g], n) for t, e, g, n in x]
    return norm(a) == norm(b)


@pytest.mark.parametrize("text", RULES)
def test_random_streams_agree_with_brute_force(text):
    reg = registry()
    rule = parse_rule(text)
    for seed in range(3):
        stream = random_stream(reg, 150, seed)
        expected = naive(rule, stream, reg)
        rng = np.random.default_rng(seed)
        cuts = sorted(rng.choice(np.arange(1, len(stream)), 12, replace=False).tolist())
        assert same(run(CDPEngine(rule, reg), stream, []), expected)
        assert same(run(CDPEngine(rule, reg), stream, cuts), expected)
    assert any(naive(rule, random_stream(reg, 150, s), reg) for s in range(3))


@pytest.mark.parametrize("text", RULES[:3])
def test_batch_splits_give_equal_output_and_equal_snapshots(text):
    reg = registry()
    rule = parse_rule(text)
    stream = random_stream(reg, 300, 7)
    whole = CDPEngine(rule, reg)
    expected = run(whole, stream, [])
    single = CDPEngine(rule, reg)
    assert same(run(single, stream, list(range(1, len(stream)))), expected)
    assert single.snapshot() == whole.snapshot()


def test_snapshot_and_restore_mid_stream():
    reg = registry()
    rule = parse_rule(RULES[1])
    stream = random_stream(reg, 400, 3)
    engine = CDPEngine(rule, reg)
    run(engine, stream[:200], [50, 120])
    snap = engine.snapshot()
    assert isinstance(snap, bytes)
    rest = run(engine, stream[200:], [100])
    other = CDPEngine(rule, reg)
    other.process(stream[:20])
    other.restore(snap)
    assert other.snapshot() == snap
    assert same(run(other, stream[200:], [30, 31, 150]), rest)
    assert other.snapshot() == engine.snapshot()
    with pytest.raises(ValueError, match="not a snapshot"):
        other.restore(snap[:-1])


def test_columns_stay_bounded_by_the_horizon():
    reg = registry()
    rule = parse_rule(RULES[1])  # horizon: 9 + 9 for A, 9 for B
    stream = random_stream(reg, 3000, 11)
    engine = CDPEngine(rule, reg)
    relevant = stream["type"] != reg.id("D")
    for a in range(0, len(stream), 97):
        engine.process(stream[a:a + 97])
        newest = int(stream["ts"][:a + 97][relevant[:a + 97]][-1])
        b, a_col = engine.columns()
        assert (b["ts"] >= newest - 9).all()
        assert (a_col["ts"] >= newest - 18).all()
    horizon = stream[stream["ts"] >= newest - 18]
    assert len(b) + len(a_col) <= len(horizon)


def test_a_held_terminator_is_caused_by_the_batch_row_that_completes_its_time_stamp():
    """``ties nonstrict`` holds a terminator until a later time stamp arrives; its cause
    is that row's index in the whole batch, rows of types the rule does not read
    included (they are what the runtime numbers the output after)."""
    reg = registry()
    engine = CDPEngine(parse_rule("define CE() from C() and last A() within 5 from C "
                                  "ties nonstrict"), reg)
    assert len(engine.process(events(reg, [("A", 1, 0, 0), ("C", 4, 0, 0)]))) == 0
    found = engine.process(events(reg, [("D", 4, 0, 0), ("D", 5, 0, 0), ("A", 7, 0, 0)]))
    assert chosen(found) == [[4, 1]]
    assert found.terminator.tolist() == [1]  # D@5, the first row after time stamp 4
