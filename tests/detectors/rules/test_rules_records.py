"""A RuleDetector emits its composites as events built whole (``Emitter.records``): a
plain rule whose engine finds its matches in order writes the attributes of ``define``
straight into the events, any other rule composes columns first, and the ordering unit
stamps events of its output dtype in place. Random streams in batches of 0..8 rows,
with the detector pickled, copied, and rewound to a snapshot between batches, must
emit what its union composes; a detector of two rules (whose output dtype is neither
rule's, so the unit copies the events) must publish what one detector per rule does,
with quotes out of order through the in-process runtime."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from rules_reference import CASES, random_batches
from stock import STOCK_RULE, SYMBOLS, quotes, stock_registry

from specula import InProcessRuntime
from specula.detectors import Emitter
from specula.detectors.graph import Graph
from specula.detectors.rules import RuleDetector
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.expand import Union
from specula.events import CORE_FIELDS
from specula.ordering.emitter import Records

# plain rules (written straight into the events: selections, predicates, strings, ties)
# and rules composed first (aggregates, negations, filters, several expansions,
# consumption, skipping, closures)
_CASES = ["stock", "stock_strict", "each_each", "last_first", "first_last", "no_params",
          "pred_params", "strings", "nonstrict_first_params", "four_elements",
          "agg_sum", "neg_between", "filters", "optional", "consume_each", "skip_to_next",
          "closure_each", "disjunction", "greedy_plus"]
_STAMPED = {name for name, _ in CORE_FIELDS} - {"ts", "key"}


def emitted(emit: Emitter, dtype: np.dtype) -> list[tuple]:
    """What ``emit`` holds, each event as (type, ts, key, attributes..., cause); every
    batch built whole in ``dtype``, the fields the unit stamps left zero."""
    out = []
    for name, columns, cause in emit.column_batches:
        assert isinstance(columns, Records)
        rows = columns.rows
        assert rows.dtype == dtype
        for field in _STAMPED:
            assert not np.count_nonzero(rows[field]), field
        payload = [n for n in dtype.names if n not in _STAMPED]
        out += [(name, *values, int(c)) for values, c in zip(
            rows[payload].tolist(), cause.tolist(), strict=True)]
    return out


def composed(union: Union, found, dtype: np.dtype) -> list[tuple]:
    """The union's composites as :func:`emitted` lists them (each attribute cast to the
    type of its field, as the unit's copy of a column casts it)."""
    out = []
    for j in range(len(found)):
        values = [int(found.terminators["ts"][j]), int(found.terminators["key"][j])]
        values += [np.asarray(found.columns[a][j]).astype(dtype[a]).item()
                   for a in dtype.names if a not in _STAMPED and a not in ("ts", "key")]
        out.append((union.rule.name, *values, int(found.causes[j])))
    return out


@pytest.mark.parametrize("case", _CASES)
def test_records_are_what_the_union_composes(case: str):
    spec = CASES[case]
    registry = spec.registry()
    rule = spec.rule()
    detector = RuleDetector([rule], registry, engine="cdp")
    reference = Union(rule, CDPEngine, registry, detector.ticks_per_second)
    dtype = registry.dtype([rule.name])
    names = [""] + [t.name for t in registry.types()]
    rng = np.random.default_rng(len(case))
    batches = random_batches(spec.events(registry, 300, seed=len(case)), seed=1, max_size=8)
    saved: tuple | None = None
    rewinds = found = 0
    i = 0
    while i < len(batches):
        emit = Emitter()
        detector.on_batch(batches[i], names, emit)
        want = composed(reference, reference.process(batches[i]), dtype)
        assert emitted(emit, dtype) == want, f"batch {i}"
        found += len(want)
        i += 1
        roll = rng.random()
        if roll < 0.15:
            detector = pickle.loads(pickle.dumps(detector))
        elif roll < 0.3:
            detector = copy.deepcopy(detector)
        elif roll < 0.4:  # a fresh detector from a snapshot
            state = detector.snapshot()
            detector = RuleDetector([rule], registry, engine="cdp")
            detector.restore(state)
        elif roll < 0.45 and saved is None:
            saved = (detector.snapshot(), reference.snapshot(), i)
        elif roll < 0.5 and saved is not None and rewinds < 2:  # back to it, and on again
            detector.restore(saved[0])
            reference.restore(saved[1])
            i, saved, rewinds = saved[2], None, rewinds + 1
    emit = Emitter()
    detector.on_end(emit)
    want = composed(reference, reference.flush(), dtype)
    assert emitted(emit, dtype) == want
    assert found + len(want) > 0, "the stream matched nothing: the case tests nothing"


FALLING = """define Falling(c_open: double, b_ts: int)
from AVID() as c
 and each AMZN(open < c.open) as b from c
within 3 min
ties nonstrict
where c_open=c.open and b_ts=b.ts"""


def test_two_rules_in_one_detector_publish_what_one_detector_each_does():
    registry = stock_registry()
    events = quotes(registry, 120, seed=3)
    rng = np.random.default_rng(3)
    events["ats"] = events["ts"] + rng.integers(0, 121, len(events))
    raw = events[np.argsort(events["ats"], kind="stable")]
    rising = STOCK_RULE.format(minutes=5)
    both = Graph(registry, sources=SYMBOLS).add(
        "both", RuleDetector(f"{rising}\n\n{FALLING}", registry, engine="cdp"), k0=120)
    apart = (Graph(registry, sources=SYMBOLS)
             .add("rising", RuleDetector(rising, registry, engine="cdp"), k0=120)
             .add("falling", RuleDetector(FALLING, registry, engine="cdp"), k0=120))
    together = InProcessRuntime(both).run(raw, step_ticks=0).net("both")
    alone = InProcessRuntime(apart).run(raw, step_ticks=0)
    for name in ("Rising", "Falling"):
        fields = ["ts", "key", *registry[name].field_names]
        mine = together[together["type"] == registry.id(name)]
        want = alone.net(name.lower())
        assert len(want) > 10
        assert sorted(mine[fields].tolist()) == sorted(want[fields].tolist())
