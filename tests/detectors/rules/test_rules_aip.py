"""The AIP engine: the paper's examples, expiry, local selection, snapshots, batching, and
random streams against a brute-force reading of the semantics in ``rules/ast.py``."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

from specula.detectors.rules import parse_rule
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.ast import Constraint, Param, Pattern, Rule, Step, Window
from specula.events import TypeRegistry

OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for t in "ABCD":
        reg.register(t, x="i8", y="i8", v="f8")
    return reg


def stream(reg: TypeRegistry, rows: list[tuple]) -> np.ndarray:
    """Events from (type, ts, x, y, v) tuples; seq is the stream position."""
    out = np.zeros(len(rows), reg.dtype())
    for i, (t, ts, *rest) in enumerate(rows):
        x, y, v = [*rest, 0, 0, 0.0][:3]
        out[i]["type"], out[i]["ts"], out[i]["seq"] = reg.id(t), ts, i
        out[i]["x"], out[i]["y"], out[i]["v"] = x, y, v
    return out


def random_stream(reg: TypeRegistry, seed: int, n: int, types: str = "ABCD") -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype())
    out["type"] = [reg.id(t) for t in rng.choice(list(types), n)]
    out["ts"] = np.cumsum(rng.integers(0, 3, n))
    out["seq"] = np.arange(n)
    out["key"] = rng.integers(0, 5, n)
    out["x"] = rng.integers(0, 3, n)
    out["y"] = rng.integers(0, 3, n)
    out["v"] = rng.integers(0, 10, n)
    return out


def found(matches) -> list[tuple]:
    """Matches as (terminator, seq of elements 1..n-1, aggregates..., negation counts...)."""
    out = []
    for i in range(len(matches)):
        aggs = tuple("nan" if math.isnan(a) else round(float(a), 9)
                     for a in matches.aggregates[i])
        out.append((int(matches.terminator[i]),
                    *(int(e["seq"][i]) for e in matches.elements[1:]),
                    *aggs, *(int(c) for c in matches.negations[i])))
    return out


def run(rule: Rule, reg: TypeRegistry, events: np.ndarray, cuts=()) -> list[tuple]:
    """Matches of ``events`` cut into batches at ``cuts``, terminators indexing ``events``."""
    engine = AIPEngine(rule, reg)
    out, start = [], 0
    for end in [*cuts, len(events)]:
        out += [(t + start, *rest) for t, *rest in found(engine.process(events[start:end]))]
        start = end
    return out


# --------------------------------------------------------------------------- reference


def brute(rule: Rule, reg: TypeRegistry, events: np.ndarray) -> list[tuple]:
    """Every match by enumeration, read straight from the semantics in ``ast.py``."""
    rows = list(events)

    def bind(row, pattern: Pattern, bound: dict) -> dict | None:
        if row["type"] != reg.id(pattern.type):
            return None
        new = dict(bound)
        for c in pattern.constraints:
            value = row[c.attr].item()
            if isinstance(c.value, Param):
                if new.setdefault(c.value.name, value) != value:
                    return None
            elif not OPS[c.op](value, c.value):
                return None
        return new

    def extend(seq: list[int], bound: dict, k: int):
        if k == len(rule.chain):
            yield seq, bound
            return
        step, anchor = rule.steps[k - 1], rows[seq[-1]]
        w = step.within.ticks()
        cands = [(e, b) for e, row in enumerate(rows)
                 if anchor["ts"] - w <= row["ts"] < anchor["ts"]
                 and (b := bind(row, step.pattern, bound)) is not None]
        if step.selection == "last":
            cands = cands[-1:]
        elif step.selection == "first":
            cands = cands[:1]
        for e, b in cands:
            yield from extend([*seq, e], b, k + 1)

    def select(pattern, bound, lo, hi, strict_lo=False):
        return [row for row in rows if bind(row, pattern, bound) is not None
                and (row["ts"] > lo if strict_lo else row["ts"] >= lo) and row["ts"] < hi]

    out = []
    for t, row in enumerate(rows):
        start = bind(row, rule.terminator, {})
        if start is None:
            continue
        for seq, bound in extend([t], start, 1):
            aggs = []
            for a in rule.aggregates:
                end = rows[seq[a.anchor]]["ts"]
                chosen = select(a.pattern, bound, end - a.within.ticks(), end)
                values = [float(r[a.attr]) for r in chosen] if a.attr else []
                if a.function == "count":
                    aggs.append(float(len(chosen)))
                elif a.function == "sum":
                    aggs.append(float(sum(values)))
                elif not values:
                    aggs.append("nan")
                else:
                    aggs.append({"avg": np.mean, "min": min, "max": max}[a.function](values))
            negs = []
            for g in rule.negations:
                end = rows[seq[g.anchor]]["ts"]
                if g.within is not None:
                    negs.append(len(select(g.pattern, bound, end - g.within.ticks(), end)))
                else:
                    negs.append(len(select(g.pattern, bound, rows[seq[g.after]]["ts"], end,
                                           strict_lo=True)))
            aggs = ["nan" if a == "nan" else round(float(a), 9) for a in aggs]
            out.append((t, *seq[1:], *aggs, *negs))
    return out


RANDOM_RULES = [
    # R5's shape, with an aggregate
    "define R() from C(x=$p) and last B(x=$p) within 6 from C and last A(x=$p) within 6 "
    "from B where Sum(A(x=$p).v within 6 from B) > -1",
    "define R() from C(x=$p) and each B(x=$p) within 5 from C and each A(x=$p) within 5 from B",
    "define R() from C(x=$p) and last B(x=$p) within 5 from C and each A(x=$p) within 4 from B",
    "define R() from C(x=$p) and each B(x=$p) within 5 from C and last A(x=$p) within 4 from B",
    "define R() from C(x=$p) and first B(x=$p) within 6 from C and last A(y=$q) within 6 from B",
    "define R() from C(v>2) and last B(x=$p and v<7) within 5 from C "
    "and first A(x=$p) within 5 from B",
    # $p bound by C but first needed at A: B cannot decide its A alone
    "define R() from C(x=$p) and last B() within 5 from C and last A(x=$p) within 5 from B",
    "define R() from C(x=$p) and last B() within 5 from C and first A(x=$p) within 5 from B",
    "define R() from D(x=$p) and last C() within 4 from D and last B(y=$q) within 4 from C "
    "and last A(x=$p and y=$q) within 4 from B",
    "define R() from D(x=$p) and each C() within 4 from D and last B() within 4 from C "
    "and first A(x=$p) within 4 from B",
    # a parameter bound by a step
    "define R() from C() and last B(y=$q) within 5 from C and each A(y=$q) within 5 from B",
    # aggregates and negations
    "define R() from C(x=$p) and last B(x=$p) within 6 from C "
    "and $c=Count(A(x=$p) within 4 from C) and $m=Max(A(x=$p).v within 5 from B) "
    "and $n=Avg(D().v within 3 from C) "
    "and not D(y=$p) between B and C and not A(y=1) within 2 from B",
    "define R() from A(x=$p) and last B(y=$p) within 3 from A and each C(x=$p) within 3 from B "
    "and $s=Min(A(y=$p).v within 4 from C)",
]


@pytest.mark.parametrize("text", RANDOM_RULES)
def test_random_streams_match_the_brute_force_reading(text):
    reg = registry()
    rule = parse_rule(text)
    for seed in range(25):
        events = random_stream(reg, seed, 120)
        expect = sorted(brute(rule, reg, events))
        assert sorted(run(rule, reg, events)) == expect, seed
        if seed < 5:
            cuts = sorted(np.random.default_rng(seed).choice(np.arange(1, 120), 9, replace=False))
            assert sorted(run(rule, reg, events, cuts)) == expect, seed


def test_a_type_in_two_elements_of_the_chain():
    reg = registry()
    rule = Rule("R", (), Pattern("A", (Constraint("x", "=", Param("p")),)), (
        Step("last", Pattern("A", (Constraint("y", "=", Param("p")),)), Window(4)),
        Step("each", Pattern("A", (Constraint("x", "=", Param("p")),)), Window(4))))
    for seed in range(15):
        events = random_stream(reg, seed, 100, types="AB")
        assert sorted(run(rule, reg, events)) == sorted(brute(rule, reg, events))


# --------------------------------------------------------------------------- examples


R1 = ("define Fire(area: int, measuredTemp: double) from Smoke(area=$a) "
      "and each Temp(area=$a and value>45) within 5 from Smoke "
      "where area=Smoke.area and measuredTemp=Temp.value")


def test_figure_3_of_the_paper():
    """Rule R1 on Fig. 3: automata per time step, the detections of S2 and S3."""
    reg = TypeRegistry()
    reg.register("Temp", area="i8", value="f8")
    reg.register("Smoke", area="i8")
    events = reg.from_records([
        {"type": "Temp", "ts": 1, "area": 1, "value": 50, "seq": 0},  # T1
        {"type": "Temp", "ts": 2, "area": 1, "value": 55, "seq": 1},  # T2
        {"type": "Smoke", "ts": 5, "area": 2, "seq": 2},  # S1, wrong area
        {"type": "Temp", "ts": 7, "area": 1, "value": 60, "seq": 3},  # T3
        {"type": "Smoke", "ts": 8, "area": 1, "seq": 4},  # S2
        {"type": "Smoke", "ts": 9, "area": 1, "seq": 5},  # S3
    ], dtype=reg.dtype())
    engine = AIPEngine(parse_rule(R1), reg)
    automata, detected = [], []
    for i in range(len(events)):
        m = engine.process(events[i:i + 1])
        automata.append(engine.automata()[1])
        detected += [(int(m.elements[0]["seq"][j]), int(m.elements[1]["seq"][j]))
                     for j in range(len(m))]
    # t=1: A1; t=2: A1, A2; t=5: unchanged; t=7: A1 deleted, A3 created; t=8: A2 deleted
    assert automata == [1, 2, 2, 2, 1, 1]
    assert detected == [(4, 3), (5, 3)]


def test_last_blocks_earlier_candidates_even_when_it_cannot_complete():
    """C picks the latest B with its x; that B has no A before it, so C yields nothing,
    although an earlier B would complete (no fall back)."""
    reg = registry()
    rule = parse_rule("define R() from C(x=$p) and last B(x=$p) within 10 from C "
                      "and last A(x=$p) within 3 from B")
    events = stream(reg, [("A", 1, 1), ("B", 2, 1), ("B", 8, 1), ("B", 9, 2), ("C", 10, 1)])
    assert run(rule, reg, events) == []
    # without the blocking B at 8, the B at 2 completes with the A at 1
    assert run(rule, reg, events[[0, 1, 3, 4]]) == [(3, 1, 0)]
    # first picks the oldest B, which completes
    rule = parse_rule("define R() from C(x=$p) and first B(x=$p) within 10 from C "
                      "and last A(x=$p) within 3 from B")
    assert run(rule, reg, events) == [(4, 1, 0)]


def test_last_with_a_parameter_the_anchor_does_not_know():
    """B cannot choose its A alone ($p comes from C): per value of $p, the latest A."""
    reg = registry()
    rule = parse_rule("define R() from C(x=$p) and last B() within 10 from C "
                      "and last A(x=$p) within 10 from B")
    events = stream(reg, [("A", 1, 1), ("A", 2, 2), ("A", 3, 2), ("B", 4), ("C", 5, 1),
                          ("C", 6, 2), ("C", 7, 3)])
    assert run(rule, reg, events) == [(4, 3, 0), (5, 3, 2)]


def test_windows_are_strict_before_and_inclusive_at_the_far_end():
    reg = registry()
    rule = parse_rule("define R() from C() and each B() within 5 from C")
    events = stream(reg, [("B", 0), ("B", 1), ("B", 6), ("C", 6), ("B", 6)])
    assert run(rule, reg, events) == [(3, 1)]  # B@1 = 6 - 5 is in, B@0 out, B@6 not earlier


def test_expired_automata_and_events_are_purged():
    reg = registry()
    rule = parse_rule("define R() from C(x=$p) and last B(x=$p) within 100 from C "
                      "and last A(x=$p) within 100 from B "
                      "and $s=Sum(D(x=$p).v within 50 from A)")
    engine = AIPEngine(rule, reg)
    rows = [("ABD"[i % 3], i, i % 7) for i in range(1_000)]
    engine.process(stream(reg, rows))
    # state 2 (seen A) keeps A's of the last 100 ticks, state 1 B's of the last 100
    assert engine.automata()[2] == len([t for t, ts, _ in rows if t == "A" and ts >= 899])
    assert engine.automata()[1] == len([t for t, ts, _ in rows if t == "B" and ts >= 899])
    stored = engine.stored()
    assert stored["events"] <= 2 * 200 // 3 + 2  # A and B of the last 200 ticks
    assert stored["columns"] == [len([t for t, ts, _ in rows if t == "D" and ts >= 749])]


# --------------------------------------------------------------------------- state


def test_snapshot_restore_mid_stream_and_batching_invariance():
    reg = registry()
    rule = parse_rule(RANDOM_RULES[11])
    events = random_stream(reg, 7, 400)
    whole = AIPEngine(rule, reg)
    expect = found(whole.process(events))
    pieces = AIPEngine(rule, reg)
    got, snaps = [], {}
    for start in range(0, 400, 37):
        got += [(t + start, *r) for t, *r in found(pieces.process(events[start:start + 37]))]
        snaps[start + 37] = pieces.snapshot()
    assert sorted(got) == sorted(expect)
    assert pieces.snapshot() == whole.snapshot()
    # restore an old state into a used engine and a fresh one: both continue identically
    middle = 222
    for engine in (pieces, AIPEngine(rule, reg)):
        engine.restore(snaps[middle])
        assert engine.snapshot() == snaps[middle]
        rest = [(t + middle, *r) for t, *r in found(engine.process(events[middle:]))]
        assert sorted(rest) == sorted(m for m in expect if m[0] >= middle)
        assert engine.snapshot() == whole.snapshot()


def test_equal_states_give_equal_snapshots_and_different_ones_differ():
    reg = registry()
    rule = parse_rule(RANDOM_RULES[0])
    a, b = AIPEngine(rule, reg), AIPEngine(rule, reg)
    assert a.snapshot() == b.snapshot()
    events = random_stream(reg, 3, 200)
    a.process(events)
    b.process(events[:100])
    assert a.snapshot() != b.snapshot()
    b.process(events[100:])
    assert a.snapshot() == b.snapshot()


def test_batch_without_an_attribute_the_rule_reads_is_refused():
    reg = registry()
    reg.register("E", z="i8")
    rule = parse_rule("define R() from C(x=$p) and last B(x=$p) within 5 from C")
    batch = reg.from_records([{"type": "E", "ts": 1}], dtype=reg.dtype(["E"]))
    with pytest.raises(ValueError, match="lacks fields"):
        AIPEngine(rule, reg).process(batch)


def test_windows_with_a_unit_use_the_ticks_per_second():
    reg = registry()
    rule = parse_rule("define R() from C() and each B() within 5 s from C")
    events = stream(reg, [("B", 0), ("B", 1), ("C", 10)])
    engine = AIPEngine(rule, reg, ticks_per_second=0.2)  # 5 s = 1 tick
    assert found(engine.process(events)) == []
    assert found(AIPEngine(rule, reg, ticks_per_second=2.0).process(events)) == [(2, 0), (2, 1)]
