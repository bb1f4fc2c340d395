"""The speculative buffer's kernels against the one-event-at-a-time operations they replace."""

from __future__ import annotations

import bisect

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula.ordering import _kernels
from specula.ordering._records import TIEBREAK_SHIFT, fold_max

keys = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=30)


@settings(deadline=None)  # the first call loads the compiled kernel
@given(keys, keys, st.integers(0, 30))
def test_merge_positions_insert_like_bisect_right_one_by_one(buffered, arriving, n_emitted):
    buffered = sorted(buffered)
    n_emitted = min(n_emitted, len(buffered))
    merged = [(k, "old", i) for i, k in enumerate(buffered)]
    for j, k in enumerate(arriving):
        where = bisect.bisect_right([m[0] for m in merged], k)
        merged.insert(where, (k, "new", j))
    expect = {j: p for p, (_, kind, j) in enumerate(merged) if kind == "new"}

    def arr(values):
        return np.array(values, np.int64)

    ts, tb = arr([k[0] for k in arriving]), arr([k[1] for k in arriving])
    pos, inside, n_inside, at_tail = _kernels.merge_positions(
        arr([k[0] for k in buffered]), arr([k[1] for k in buffered]), n_emitted, ts, tb,
        np.lexsort((tb, ts)))
    assert pos.tolist() == [expect[j] for j in range(len(arriving))]
    last_emitted = buffered[n_emitted - 1] if n_emitted else None
    assert inside.tolist() == [last_emitted is not None and k < last_emitted for k in arriving]
    assert n_inside == int(inside.sum())
    assert at_tail == (pos.tolist() == list(range(len(buffered), len(buffered) + len(ts))))


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**40 - 1)), max_size=30))
def test_fold_max_keeps_the_largest_counter_per_producer(events):
    tb = np.array([p << TIEBREAK_SHIFT | s for p, s in events], np.int64)
    into = {1: 5}
    fold_max(into, tb)
    expect = {1: 5}
    for p, s in events:
        if p:
            expect[p] = max(expect.get(p, -1), s)
    assert into == expect
