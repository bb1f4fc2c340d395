"""The rows a detector emits one by one become the same records whichever way
:meth:`DetectorDriver._records` fills them: the fast path (one type, payloads naming
the same fields) and the general one against a record-by-record reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specula.ordering.driver import DetectorDriver

DTYPE = np.dtype([("type", "i2"), ("ts", "i8"), ("key", "i8"), ("a", "i8"), ("b", "f8")])
IDS = {"G": 3, "H": 5}


def driver() -> DetectorDriver:
    return DetectorDriver(object(), None, name="d", producer=0, out_dtype=DTYPE,  # type: ignore[arg-type]
                          outputs=IDS, type_names=list(IDS), sent=None)


def reference(rows: list) -> np.ndarray:
    out = np.zeros(len(rows), DTYPE)
    for i, (name, ts, key, payload) in enumerate(rows):
        out[i]["type"], out[i]["ts"], out[i]["key"] = IDS[name], ts, key
        for f, v in payload.items():
            out[i][f] = v
    return out


payloads = st.sampled_from([(), ("a",), ("b",), ("a", "b"), ("b", "a")]).flatmap(
    lambda fields: st.fixed_dictionaries({f: st.integers(-50, 50) for f in fields}))
rows = st.lists(st.tuples(st.sampled_from(["G", "H"]), st.integers(0, 10**6),
                          st.integers(0, 9), payloads), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(rows=rows, alike=st.booleans())
def test_records_equal_the_record_by_record_reference(rows, alike):
    if alike:  # the fast path: one type, the first row's payload fields everywhere
        fields = list(rows[0][3])
        rows = [("G", ts, key, {f: i for i, f in enumerate(fields)}) for _, ts, key, _ in rows]
    assert driver()._records(rows).tobytes() == reference(rows).tobytes()


def test_an_unknown_type_or_field_is_refused():
    with pytest.raises(ValueError, match="emitted 'X'"):
        driver()._records([("X", 1, 0, {})])
    with pytest.raises(ValueError, match="emitted 'X'"):
        driver()._records([("G", 1, 0, {}), ("X", 2, 0, {})])
    with pytest.raises(ValueError):
        driver()._records([("G", 1, 0, {"nope": 1})])
