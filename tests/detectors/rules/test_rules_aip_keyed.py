"""The AIP engine's keyed equalities: a late ``L = R`` predicate decided by an ``each``
scan as a key (:func:`~specula.detectors.rules._aip_plan.plan_keyed`) gives the
reference's matches on random streams of every shape it takes (sums on either side,
parameters and a pattern window, a ``last`` step whose dead ends the keyed scan makes,
float values with -0.0 and NaN, equal time stamps), in random batches, across a
snapshot and restore and a pickled engine; the shapes it must leave late stay late."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from rules_reference import abc_registry, difference, engine_output, random_batches, reference
from rules_reference import random_events as events_of

from specula.detectors.rules._aip_plan import plan_keyed, plan_predicates, plan_scans
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.engine import float_params
from specula.detectors.rules.expand import Union
from specula.detectors.rules.parser import parse_rule

_IDS = "where c=c.n and b=b.n and a=a.n"
#: rule text -> the scans (k) that decide a keyed equality
SHAPES = {
    # DS1/Q1's shape: the instance's sum against the terminator's value
    f"""define K(c: int, b: int, a: int)
        from C() as c and each B() as b within 4 from c
          and each A(v + b.v = c.v) as a within 4 from b {_IDS}""": (1,),
    # the anchor's side written first, products and floats, a parameter, a pattern window
    f"""define K(c: int, b: int, a: int)
        from C(p=$x) as c and each B(p=$x) as b within 4 from c
          and each A(c.value * 2 = value - b.value and p=$x) as a within 4 from b
        within 6 {_IDS}""": (1,),
    # a last step before the keyed scan: its anchors without a key leave dead ends
    """define K(d: int, c: int, b: int, a: int)
        from D() as d and last C() as c within 3 from d and each B() as b within 4 from c
          and each A(v + b.v = c.v) as a within 4 from b
        where d=d.n and c=c.n and b=b.n and a=a.n""": (2,),
    # two keyed equalities on one scan, one on the deeper scan
    """define K(d: int, c: int, b: int, a: int)
        from D() as d and each C() as c within 3 from d and each B() as b within 4 from c
          and each A(v + b.v = c.v and att - b.att = d.att)
          as a within 4 from b
        where d=d.n and c=c.n and b=b.n and a=a.n""": (1, 2),
    # equal time stamps may be in any order
    f"""define K(c: int, b: int, a: int)
        from C() as c and each B() as b within 4 from c
          and each A(value + b.value = c.value) as a within 4 from b
        ties nonstrict {_IDS}""": (1,),
    # left late: an inequality; the scan of a last step; a side reading two earlier elements
    f"""define K(c: int, b: int, a: int)
        from C() as c and each B() as b within 4 from c
          and each A(v + b.v < c.v) as a within 4 from b {_IDS}""": (),
    f"""define K(c: int, b: int, a: int)
        from C() as c and last B() as b within 4 from c
          and each A(v + b.v = c.v) as a within 4 from b {_IDS}""": (),
    """define K(d: int, c: int, b: int, a: int)
        from D() as d and each C() as c within 3 from d and each B() as b within 4 from c
          and each A(v = c.v + d.v) as a within 4 from b
        where d=d.n and c=c.n and b=b.n and a=a.n""": (),
}
TEXTS = list(SHAPES)


def stream(seed: int, n: int = 150) -> np.ndarray:
    """Random A-D events; ``value`` (halves) holds some -0.0 and NaN."""
    events = events_of(abc_registry(), ("A", "B", "C", "D"), n, seed=seed, max_gap=1,
                       serial="n", ranges={"p": (0, 2), "att": (0, 3), "v": (0, 5),
                                           "value": (-1, 2)})
    rng = np.random.default_rng(seed + 100)
    zero = np.flatnonzero(events["value"] == 0)
    events["value"][zero[rng.random(len(zero)) < 0.5]] = -0.0
    events["value"][rng.random(n) < 0.05] = np.nan
    return events


@pytest.mark.parametrize("text", TEXTS)
def test_keyed_scans_are_planned_where_they_can_decide(text):
    rule, registry = parse_rule(text), abc_registry()
    mentions = tuple({} for _ in rule.chain)  # parameters do not change where keys go
    predicates = plan_predicates(rule)
    scans = plan_scans(rule, mentions, (0, *(4 for _ in rule.steps)), predicates,
                       float_params(rule, registry))
    scans, kept = plan_keyed(rule, predicates, scans)
    assert tuple(s.k for s in scans if s is not None and s.keyed) == SHAPES[text]
    moved = sum(len(s.keyed) for s in scans if s is not None)
    assert sum(map(len, kept.late)) == sum(map(len, predicates.late)) - moved


@pytest.mark.parametrize("text", TEXTS)
def test_keyed_equalities_give_the_references_matches(text):
    rule, registry = parse_rule(text), abc_registry()
    for seed in range(6):
        events = stream(seed)
        expected = reference(rule, registry, events)
        engine = Union(rule, AIPEngine, registry)
        actual = engine_output(engine, random_batches(events, seed=seed + 1, max_size=12))
        assert not difference(expected, actual), (seed, difference(expected, actual))


@pytest.mark.parametrize("text", TEXTS[:4])
def test_a_restored_or_pickled_engine_continues_as_the_whole_stream(text):
    rule, registry = parse_rule(text), abc_registry()
    events = stream(7, 200)
    whole = AIPEngine(rule, registry)
    expect = [int(t) for t in whole.process(events).terminator]
    first = AIPEngine(rule, registry)
    got = [int(t) for t in first.process(events[:100]).terminator]
    state = first.snapshot()
    restored = AIPEngine(rule, registry)
    restored.restore(state)
    for engine in (restored, pickle.loads(pickle.dumps(first))):
        rest = [int(t) + 100 for t in engine.process(events[100:]).terminator]
        assert got + rest == expect
        assert engine.snapshot() == whole.snapshot()
