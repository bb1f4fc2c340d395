"""Partial matches kept with their class (the AIP engine's ``classify_partial_matches``):
counts per (class, time slice) and drops by class equal what a listing, classified row
by row, gives; drops by class repeat in a replay after a restore."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.shedding_hybrid import Q1, ds1, registry
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.parser import parse_rules

_REG = registry()
_RULE = parse_rules(Q1.format(w=600))[0]
CLASSES, SLICES, SLICE_LEN = 4, 3, 200.0


def _classify(features: np.ndarray) -> np.ndarray:
    """A class from the first and the newest event's values."""
    return (features[:, 0] * 3 + features[:, -1]).astype(np.int64) % CLASSES


def _listed(engine: AIPEngine, now: int) -> dict[int, dict[int, tuple[int, int]]]:
    """Per state, per partial match (its identity): its (class, slice), from a listing."""
    out = {}
    for v in engine.partial_matches():
        s = np.clip((now - v.first_ts) // SLICE_LEN, 0, SLICES - 1).astype(int)
        out[v.state] = dict(zip(v.keys.tolist(), zip(_classify(v.features).tolist(),
                                                      s.tolist(), strict=True), strict=True))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_counts_and_drops_by_class_equal_the_listings(seed):
    """Under random batches, drops by class, snapshots and restores, the counts per
    (class, slice) are those of the listing classified row by row, and a drop by class
    removes exactly the listed partial matches of the marked cells."""
    rng = np.random.default_rng(seed)
    ev = ds1(_REG, 2500, seed)
    engine = AIPEngine(_RULE, _REG)
    engine.process(ev[:300])  # partial matches made before the classifier: classified at once
    for k in (1, 2):
        engine.classify_partial_matches(k, _classify)
    at, snaps, drops = 300, [], 0
    while at < len(ev):
        hi = min(len(ev), at + int(rng.integers(1, 90)))
        engine.process(ev[at:hi])
        at, now = hi, int(ev["ts"][hi - 1])
        listed = _listed(engine, now)
        for k in (1, 2):
            want = np.zeros((CLASSES, SLICES), np.int64)
            for c, s in listed[k].values():
                want[c, s] += 1
            assert np.array_equal(engine.class_counts(k, CLASSES, SLICES, SLICE_LEN), want)
        if rng.random() < 0.3:
            k = int(rng.integers(1, 3))
            shed = rng.random((CLASSES, SLICES)) < 0.4
            gone = {key for key, cell in listed[k].items() if shed[cell]}
            assert engine.drop_classes(k, shed, SLICE_LEN) == len(gone)
            drops += len(gone)
            assert set(_listed(engine, now)[k]) == set(listed[k]) - gone
        if rng.random() < 0.1:
            snaps.append((engine.snapshot(), at))
        elif snaps and rng.random() < 0.05:
            state, at = snaps[int(rng.integers(len(snaps)))]
            engine.restore(state)
    assert drops > 0


@pytest.mark.parametrize("cut", [1, 53, 400])
def test_drops_by_class_repeat_in_a_replay(cut):
    """A restore to before a drop by class and a replay (batches cut otherwise) give the
    run without the restore: the same matches and the same final state."""
    ev = ds1(_REG, 2400, 5)
    shed = np.zeros((CLASSES, SLICES), bool)
    shed[1:3, :] = True
    a, b = AIPEngine(_RULE, _REG), AIPEngine(_RULE, _REG)
    for e in (a, b):
        e.process(ev[:700])
    snap = a.snapshot()  # before the classifier: a restore classifies what it brings
    for e in (a, b):
        for k in (1, 2):
            e.classify_partial_matches(k, _classify)
    found_a = _matches(a.process(ev[700:1300]))
    dropped = sum(a.drop_classes(k, shed, SLICE_LEN) for k in (1, 2))
    assert dropped > 0
    found_a |= _matches(a.process(ev[1300:]))
    b.process(ev[700:1300])
    assert sum(b.drop_classes(k, shed, SLICE_LEN) for k in (1, 2)) == dropped
    b.process(ev[1300:1800])
    b.restore(snap)
    found_b = set()
    for lo in range(700, len(ev), cut):
        found_b |= _matches(b.process(ev[lo:lo + cut]))
    assert found_b == found_a
    assert b.snapshot() == a.snapshot()


def _matches(found) -> set[tuple[int, ...]]:
    return {tuple(int(e["seq"][i]) for e in found.elements) for i in range(len(found))}
