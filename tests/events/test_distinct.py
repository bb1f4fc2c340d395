"""``events.distinct`` answers as ``np.unique`` does, for integer arrays of any shape of
values: empty, one value, repeats, negatives, the int64 limits, any order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from specula.actors.sources import present, union
from specula.events import distinct

_INT64 = np.iinfo(np.int64)


@settings(max_examples=80, deadline=None)
@given(values=arrays(np.int64, st.integers(0, 300),
                     elements=st.one_of(st.integers(-5, 5),
                                        st.integers(int(_INT64.min), int(_INT64.max)))),
       dtype=st.sampled_from([np.int64, np.int32, np.uint8]))
def test_distinct_is_np_unique(values, dtype):
    values = values.astype(dtype)  # wraps: any pattern of the narrower type
    got = distinct(values)
    assert got.dtype == values.dtype
    assert got.tolist() == np.unique(values).tolist()


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(arrays(np.int64, st.integers(0, 50), elements=st.integers(0, 10_000)),
                      max_size=6))
def test_union_and_present_are_np_unique(parts):
    joined = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    assert union(parts).tolist() == np.unique(joined).tolist()
    assert present(joined).tolist() == np.unique(joined).tolist()
