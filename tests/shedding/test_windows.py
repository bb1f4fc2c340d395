"""The window operator against a per-window Python reference, and batch-cut independence."""

from __future__ import annotations

import numpy as np
import pytest
from shedding_streams import q1_probs, run, stream

from specula.shedding import (
    AnyOf,
    ClosedWindows,
    ESpiceShedder,
    Sequence,
    TypeUtilityShedder,
    UtilityTable,
    WindowAssigner,
)


def _naive_match(pattern, kept: list[tuple[int, int, int]]) -> list[int] | None:
    """Greedy selection over ``kept`` = [(position, type, stream index)] in position order."""
    body = [(p, t, e) for p, t, e in kept if p > 0]
    chosen: list[int] = []
    if isinstance(pattern, Sequence):
        steps = pattern.types if pattern.selection == "first" else pattern.types[::-1]
        order = body if pattern.selection == "first" else body[::-1]
        k = 0
        for t in steps:
            while k < len(order) and order[k][1] != t:
                k += 1
            if k == len(order):
                return None
            chosen.append(order[k][2])
            k += 1
    else:
        allowed = set(pattern.types)
        if pattern.per_opener:
            if not kept or kept[0][0] != 0:
                return None
            allowed = set(dict(pattern.per_opener).get(kept[0][1], pattern.types))
        used: set[int] = set()
        order = body if pattern.selection == "first" else body[::-1]
        for _, t, e in order:
            if t in allowed and t not in used and len(chosen) < pattern.n:
                used.add(t)
                chosen.append(e)
        if len(chosen) < pattern.n:
            return None
    chosen.sort()
    if pattern.with_opener:
        if not kept or kept[0][0] != 0:
            return None
        chosen.insert(0, kept[0][2])
    return chosen


def _naive(batch, size, unit, pattern, *, openers=None, slide=None, drop=None):
    """Every window built and matched on its own; ``drop(type, pos, event, window)``."""
    ts, types = batch["ts"].tolist(), batch["type"].tolist()
    found, work = set(), 0
    for i in range(len(batch)):
        if not (types[i] in openers if openers is not None else i % slide == 0):
            continue
        kept, j = [], i
        while j < len(batch) and (j - i < size if unit == "count" else ts[j] < ts[i] + size):
            if drop is None or not drop(types[j], j - i, j, i):
                kept.append((j - i, types[j], j))
            j += 1
        work += len(kept)
        hit = _naive_match(pattern, kept)
        if hit is not None:
            found.add((i, *hit))
    return found, work


PATTERNS = [
    AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True),
    AnyOf(3, (1, 2, 3, 4, 5, 6), "last", with_opener=True),
    Sequence((1, 2, 1, 3), "first"),
    Sequence((1, 2, 1, 3), "last"),
    Sequence((4, 5), "last", with_opener=True),
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=repr)
@pytest.mark.parametrize(("unit", "size"), [("count", 12), ("time", 90)])
def test_operator_equals_per_window_reference(pattern, unit, size):
    batch = stream(1500, seed=3, probs=q1_probs(striker=0.08))
    got, work = run(batch, WindowAssigner(size, openers=[0], unit=unit), pattern, step=97)
    want, want_work = _naive(batch, size, unit, pattern, openers={0})
    assert got.complex_events() == want and work == want_work
    assert len(want) >= 5  # the comparison is not vacuous


#: Q1's shape: windows opened by type 0 count types 1-3, by type 7 types 4-6.
AGAINST = ((0, (1, 2, 3)), (7, (4, 5, 6)))


@pytest.mark.parametrize("selection", ["first", "last"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_any_of_per_opener_equals_per_window_reference(n, selection):
    """Two opener types, each window counting only its opener's types (and a third
    opener type, 8, that counts them all)."""
    pattern = AnyOf(n, (1, 2, 3, 4, 5, 6), selection, with_opener=True, per_opener=AGAINST)
    batch = stream(1500, seed=7, probs=q1_probs(striker=0.08))
    for unit, size in (("count", 12), ("time", 90)):
        got, work = run(batch, WindowAssigner(size, openers=[0, 7, 8], unit=unit), pattern,
                        step=89)
        want, want_work = _naive(batch, size, unit, pattern, openers={0, 7, 8})
        assert got.complex_events() == want and work == want_work
        found = got.complex_events()
        opened = {w: int(batch["type"][w]) for w, *_ in found}
        for w, _, *body in found:
            allowed = dict(AGAINST).get(opened[w], (1, 2, 3, 4, 5, 6))
            assert {int(batch["type"][e]) for e in body} <= set(allowed)
        assert {0, 7, 8} <= set(opened.values())  # every kind of window matched


@pytest.mark.parametrize("pattern", PATTERNS[:3], ids=repr)
def test_operator_with_a_shedder_equals_per_window_reference(pattern):
    """A shedder decides per (event, window) pair: the reference asks it one pair at a time."""
    batch = stream(1500, seed=4, probs=q1_probs(striker=0.08))
    bl = TypeUtilityShedder(np.arange(10.0), np.full(10, 0.1), 12, seed=5)
    bl.set_fraction(0.35)

    def drop(t, p, e, w):
        return bool(bl.drop_pairs(np.array([t]), np.array([p]), 12, np.array([e]),
                                  np.array([w]))[0])

    got, work = run(batch, WindowAssigner(12, slide=5), pattern, bl, step=61)
    want, want_work = _naive(batch, 12, "count", pattern, slide=5, drop=drop)
    assert got.complex_events() == want and work == want_work


@pytest.mark.parametrize("shed", [False, True])
@pytest.mark.parametrize("unit", ["count", "time"])
def test_closed_windows_do_not_depend_on_batch_cuts(unit, shed):
    """Also under eSPICE on time windows, whose lookups use the predicted window size."""
    batch = stream(2000, seed=5, probs=q1_probs(striker=0.05))
    pattern = AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True)
    shedder = None
    if shed:
        rng = np.random.default_rng(0)
        shedder = ESpiceShedder(UtilityTable(rng.integers(0, 101, (10, 30)).astype(np.int16),
                                             np.full((10, 30), 0.1), 30), 2)
        shedder.set_amount(4.0)
    runs = [run(batch, WindowAssigner(40 if unit == "count" else 300, openers=[0], unit=unit,
                                      expected_size=30), pattern, shedder, step=step)[0]
            for step in (1, 7, 500, 2000)]
    assert not shed or not runs[0].kept.all()
    for other in runs[1:]:
        for name in ClosedWindows.__dataclass_fields__:
            assert np.array_equal(getattr(runs[0], name), getattr(other, name)), name


def test_time_based_size_estimate_follows_closed_windows():
    assigner = WindowAssigner(100, openers=[0], unit="time", expected_size=7)
    ts = np.arange(0, 1000, 10)  # 10 events per window
    assert assigner.estimate() == 7
    pairs, closed, sizes = assigner.assign(ts, np.zeros(len(ts), int))
    assert assigner.estimate() == 10
    assert sizes.tolist() == [10] * 90 and len(closed) == 90
    # Until the first window closes (at event 10) events assume 7, then the mean: 10.
    assert set(pairs.expected[pairs.event < 10].tolist()) == {7}
    assert set(pairs.expected[pairs.event >= 10].tolist()) == {10}


def test_patterns_are_checked():
    with pytest.raises(ValueError, match="selection"):
        Sequence((1,), "each")
    with pytest.raises(ValueError, match="distinct"):
        AnyOf(3, (1, 1, 2))
    with pytest.raises(ValueError, match="with_opener"):
        AnyOf(1, (1, 2), per_opener=((0, (1,)),))
    with pytest.raises(ValueError, match="opener 0"):
        AnyOf(2, (1, 2, 3), with_opener=True, per_opener=((0, (1, 4)),))
    with pytest.raises(ValueError, match="exactly one"):
        WindowAssigner(5)


@pytest.mark.parametrize("seed", range(4))
def test_training_counts_only_the_windows_received_whole(seed):
    """Any kept masks: the model learns exactly what it would from the whole windows
    alone, and the whole windows are those without a dropped pair."""
    from specula.shedding import UtilityModel

    rng = np.random.default_rng(seed)
    batch = stream(3000, seed, q1_probs(striker=0.08))
    pattern = AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True)
    closed, _ = run(batch, WindowAssigner(12, openers=[0]), pattern)
    kept = rng.random(len(closed.kept)) > rng.choice([0.0, 0.01, 0.1, 0.5])
    shed = ClosedWindows(**{**{k: getattr(closed, k) for k in ClosedWindows.__dataclass_fields__},
                            "kept": kept})
    whole = np.array([kept[closed.row == r].all() for r in range(len(closed.window))])
    assert np.array_equal(shed.whole(), whole)
    got, want = UtilityModel(10, 12), UtilityModel(10, 12)
    shed.observe_into(got)
    pick = whole[closed.row]
    want.observe(closed.type[pick], closed.position[pick], closed.size[closed.row[pick]],
                 closed.matched[pick], windows=int(whole.sum()))
    assert np.array_equal(got.seen, want.seen) and np.array_equal(got.matched, want.matched)
    assert got.windows == want.windows


class _CellDropper:
    """Drops the pairs of types 1 and 2 at positions 1..10 with probability ``share``
    (a hashed draw): a shedder that keeps dropping from cells that matter."""

    def __init__(self, share: float) -> None:
        self.share = share

    def drop_pairs(self, types, positions, expected, events, windows):
        from specula.events.hashing import uniform

        cell = np.isin(types, (1, 2)) & (positions >= 1) & (positions <= 10)
        return cell & (uniform(7, 0x7465, events, windows) < self.share)


@pytest.mark.parametrize("share", [0.3, 0.6])
def test_retraining_under_shedding_does_not_lower_the_utility_of_dropped_cells(share):
    """Q1-like stream, model trained unshed; then a shedder keeps dropping pairs from a
    few cells and the model goes on learning from what the operator closes. Over the
    cells pairs were dropped from, the learned utility holds (within noise). Counting
    every pair, as training did before, lowers it by more than a third of the share
    (measured: to 0.87 and 0.68 of it; counting whole windows: 1.01): the test bites."""
    import copy

    from specula.shedding import UtilityModel

    probs = q1_probs(striker=0.05)
    pattern = AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True)
    model = UtilityModel(10, 40, 4, prior_matches=0.0)
    run(stream(30_000, 1, probs), WindowAssigner(40, openers=[0]), pattern)[0] \
        .observe_into(model)
    before = model.probabilities()
    closed, _ = run(stream(60_000, 2, probs), WindowAssigner(40, openers=[0]), pattern,
                    _CellDropper(share))
    assert 0 < closed.whole().sum() < len(closed.window)
    dropped = np.zeros_like(before)
    np.add.at(dropped, (closed.type[~closed.kept], closed.position[~closed.kept] // 4), 1)
    after, every_pair = copy.deepcopy(model), copy.deepcopy(model)
    closed.observe_into(after)
    every_pair.observe(closed.type, closed.position, closed.size[closed.row],
                       closed.matched, windows=len(closed.window))

    def mean_utility(prob: np.ndarray) -> float:
        return float((prob * dropped).sum() / dropped.sum())

    was = mean_utility(before)
    assert was > 0.05
    assert mean_utility(after.probabilities()) >= 0.95 * was
    assert mean_utility(every_pair.probabilities()) < (1 - share / 3) * was
