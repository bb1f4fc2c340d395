"""An event clock's proposals for a few arrivals (Python scalars) against the NumPy
formula they stand in for, on random batches of every shape: data and control rows,
punctuations of the raw stream and of producers, type ids beyond the clock mask."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import events as ev
from specula.ordering.clock import NO_CLOCK, EventClock, proposals

_FLAGS = (0, ev.PROGRESS, ev.CONTROL, ev.RETRACTION, ev.CONTROL | ev.PROGRESS)
_DTYPE = np.dtype([("ts", np.int64), ("type", np.int32), ("producer", np.int32),
                   ("flags", np.uint8)])

_row = st.tuples(st.integers(-5, 40), st.integers(-2, 9), st.sampled_from((0, 0, 1, 3)),
                 st.sampled_from(_FLAGS))


def _reference(mask: np.ndarray, batch: np.ndarray, is_data: np.ndarray) -> np.ndarray:
    """The formula: a data row of a clock type proposes its time stamp (type ids clipped
    into the mask), so does a ``PROGRESS`` of producer 0; nothing else does."""
    clock = mask[np.clip(batch["type"], 0, len(mask) - 1)] & is_data
    clock |= ~is_data & ((batch["flags"] & ev.PROGRESS) > 0) & (batch["producer"] == 0)
    return np.where(clock, batch["ts"], NO_CLOCK)


@settings(deadline=None, max_examples=150)
@given(rows=st.lists(_row, max_size=12), mask=st.lists(st.booleans(), min_size=1, max_size=8))
def test_few_arrivals_propose_as_the_formula(rows, mask):
    clock_types = np.array(mask, np.bool_)
    batch = np.array(rows, _DTYPE)
    is_data = (batch["flags"] & (ev.CONTROL | ev.PROGRESS)) == 0
    expected = _reference(clock_types, batch, is_data)
    source = EventClock(clock_types)
    for got in (proposals(source, batch, batch["flags"]), source.proposals(batch, is_data)):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
