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
        used: set[int] = set()
        order = body if pattern.selection == "first" else body[::-1]
        for _, t, e in order:
            if t in pattern.types and t not in used and len(chosen) < pattern.n:
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
    with pytest.raises(ValueError, match="exactly one"):
        WindowAssigner(5)
