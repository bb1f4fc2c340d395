"""Partial matches dropped as they form (the AIP engine's ``drop_new_partial_matches``,
which hybrid shedding uses while its shedding set holds): exactly the marked ones and
what only they would have made are lost, every marked one is counted, and replays after
a restore drop the same ones whatever the test says by then."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.shedding_hybrid import Q1, ds1, registry
from specula.detectors.rules.aip import AIPEngine, StateSheddingError
from specula.detectors.rules.parser import parse_rules
from specula.events.hashing import event_ids, fold64

_REG = registry()
_RULE = parse_rules(Q1.format(w=600))[0]


class Marker:
    """A test of feature rows: a random function of the values (the same rows, the same
    answer), marking about ``share`` of them; counts what it marks."""

    def __init__(self, seed: int, share: float) -> None:
        rng = np.random.default_rng(seed)
        self.weights = rng.integers(1, 1000, 8)
        self.salt = int(rng.integers(0, 1 << 30))
        self.share = share
        self.marked = 0

    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = (features.astype(np.int64) @ self.weights[:features.shape[1]] + self.salt
             ).astype(np.uint64)
        x ^= x >> np.uint64(17)  # a multiply-xorshift mix of the weighted sum
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        out = (x % np.uint64(1000)) < 1000 * self.share
        self.marked += int(out.sum())
        return out


def _keys(elements: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per match, its events' identities, element n-1 first (a block's order)."""
    return np.stack([event_ids(x) for x in elements[::-1]], axis=1)


def _run(engine: AIPEngine, events: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The matches' identities (events, element n-1 first) over ``events`` cut at ``cuts``."""
    found = [_keys(m.elements) for m in (engine.process(p) for p in np.split(events, cuts))
             if len(m)]
    return np.concatenate(found) if found else np.zeros((0, 3), np.uint64)


@pytest.mark.parametrize("seed", range(5))
def test_drops_at_creation_lose_only_what_they_count(seed):
    """Random streams, batch cuts and tests of both states: the shed engine finds the
    unshed matches none of whose partial matches was marked (their ancestors' tests
    taken on the unshed engine's record), and the tests marked exactly the partial
    matches of the unshed record whose ancestors were not marked."""
    rng = np.random.default_rng(seed)
    events = ds1(_REG, 2500, seed)
    cuts = np.sort(rng.choice(np.arange(1, len(events)), 60, replace=False))
    unshed = AIPEngine(_RULE, _REG)
    unshed.watch(True)
    expected = _run(unshed, events, cuts)
    made = unshed.watch(False)
    tests = {k: Marker(seed * 10 + k, float(rng.uniform(0.1, 0.6))) for k in (1, 2)}
    shed = AIPEngine(_RULE, _REG)
    for k, test in tests.items():
        shed.drop_new_partial_matches(k, test)
    found = _run(shed, events, np.sort(rng.choice(np.arange(1, len(events)), 40,
                                                 replace=False)))
    # what the tests mark, by definition, on the unshed record: a partial match of state
    # k is made when its ancestor (its first n-1-k events) was, and dropped when marked
    reference = {k: Marker(seed * 10 + k, tests[k].share) for k in (1, 2)}
    dropped: set[int] = set()
    for k in (2, 1):
        views = [v for v in made if v.element == k and len(v)]
        eids = np.concatenate([v.eids for v in views])
        features = np.concatenate([v.features for v in views])
        born = ~np.isin(fold64(eids[:, :-1]), list(dropped)) if k < 2 else \
            np.ones(len(eids), bool)
        marked = reference[k](features[born])
        dropped |= set(fold64(eids[born][marked]).tolist())
    assert tests[1].marked == reference[1].marked > 0
    assert tests[2].marked == reference[2].marked > 0
    kept = ~np.isin(fold64(expected[:, :1]), list(dropped)) \
        & ~np.isin(fold64(expected[:, :2]), list(dropped))
    assert set(fold64(found).tolist()) == set(fold64(expected[kept]).tolist())
    assert 0 < len(found) < len(expected)


@pytest.mark.parametrize("cut", [1, 37, 500])
def test_drops_at_creation_survive_restore_and_replay(cut):
    """A restore and a replay (batches cut otherwise) while the tests would now mark
    everything: the replay drops what the first pass dropped, no more, so it finds the
    matches and ends in the state of the run without the restore."""
    events = ds1(_REG, 2600, 4)
    a, b = AIPEngine(_RULE, _REG), AIPEngine(_RULE, _REG)
    for e in (a, b):
        for k in (1, 2):
            e.drop_new_partial_matches(k, Marker(k, 0.3))
        e.process(events[:800])
    snap = a.snapshot()
    found_a = _run(a, events[800:], np.arange(100, 1800, 100))
    b.process(events[800:1700])
    b.restore(snap)
    for k in (1, 2):  # the tests of the moment mark everything: not asked in the replay
        b.drop_new_partial_matches(k, lambda f: np.ones(len(f), bool))
    found_b = [_run(b, events[800:1700], np.arange(cut, 900, cut))]
    for k in (1, 2):
        b.drop_new_partial_matches(k, Marker(k, 0.3))
    found_b.append(_run(b, events[1700:], np.arange(cut, 900, cut)))
    assert set(fold64(np.concatenate(found_b)).tolist()) == set(fold64(found_a).tolist())
    assert b.snapshot() == a.snapshot()


def test_stopping_drops_at_creation_and_refusing_a_last_state():
    """None stops the drops: then only the matches through partial matches made before
    are missing. A state read by a ``last`` step refuses drops at creation."""
    events = ds1(_REG, 1500, 2)
    engine, unshed = AIPEngine(_RULE, _REG), AIPEngine(_RULE, _REG)
    engine.drop_new_partial_matches(2, lambda f: np.ones(len(f), bool))
    assert not len(_run(engine, events[:500], np.arange(50, 500, 50)))
    engine.drop_new_partial_matches(2, None)
    _run(unshed, events[:500], np.arange(50, 500, 50))
    found = _run(engine, events[500:], np.arange(50, 1000, 50))
    expected = _run(unshed, events[500:], np.arange(50, 1000, 50))
    later = np.isin(expected[:, 0], event_ids(events[500:]))  # the A event came after
    assert later.sum() > 0
    assert set(fold64(found).tolist()) == set(fold64(expected[later]).tolist())
    last = parse_rules(Q1.format(w=600).replace("each B", "last B"))[0]
    with pytest.raises(StateSheddingError, match="last"):
        AIPEngine(last, _REG).drop_new_partial_matches(1, lambda f: f[:, 0] > 0)
