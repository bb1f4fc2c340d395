"""The compiled event identities and folds give what their definitions in ``mix64`` say,
on every integer range the fields take (negative time stamps and producers included)."""

from __future__ import annotations

import numpy as np
import pytest

from specula.events.hashing import event_ids, fold64, mix64


def _event_ids_by_definition(rows: dict) -> np.ndarray:
    def u64(name: str) -> np.ndarray:
        return np.asarray(rows[name]).astype(np.int64).astype(np.uint64)

    return mix64(mix64(mix64(u64("ts") ^ np.uint64(0x5354)) ^ u64("producer")) ^ u64("seq"))


def _fold_by_definition(columns: np.ndarray) -> np.ndarray:
    h = np.zeros(len(columns), np.uint64)
    with np.errstate(over="ignore"):
        for c in range(columns.shape[1]):
            h = mix64(h * np.uint64(0x9E3779B97F4A7C15) ^ columns[:, c])
    return h


@pytest.mark.parametrize("seed", range(5))
def test_event_ids_and_folds_are_their_definitions(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 17, 3000):
        rows = np.zeros(n, [("ts", "i8"), ("producer", "i4"), ("seq", "i8")])
        rows["ts"] = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
        rows["producer"] = rng.integers(-2**31, 2**31 - 1, n)
        rows["seq"] = rng.integers(0, 2**63 - 1, n, dtype=np.int64)
        ids = event_ids(rows)
        assert ids.dtype == np.uint64
        assert np.array_equal(ids, _event_ids_by_definition(rows))
        as_columns = {f: rows[f][::-1] for f in rows.dtype.names}  # strided views
        assert np.array_equal(event_ids(as_columns), ids[::-1])
        for m in (0, 1, 4):
            cols = rng.integers(0, 2**64 - 1, (n, m), dtype=np.uint64)
            assert np.array_equal(fold64(cols), _fold_by_definition(cols))
            assert np.array_equal(fold64(cols[:, ::-1]), _fold_by_definition(cols[:, ::-1]))


def test_a_fold_of_a_prefix_is_the_fold_of_its_columns():
    cols = np.random.default_rng(9).integers(0, 2**64 - 1, (50, 3), dtype=np.uint64)
    assert np.array_equal(fold64(cols[:, :2]), fold64(np.ascontiguousarray(cols[:, :2])))
    assert not np.array_equal(fold64(cols[:, :2]), fold64(cols))
