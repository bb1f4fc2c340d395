"""The equality index of CDP columns against a scan of the live keys: random keys
(few or many distinct values, float keys and NaN included), random batch sizes, drops
of every size and the table rebuilds they cause."""

from __future__ import annotations

import numpy as np
import pytest

from specula.detectors.rules import _cdp_kernels as _k
from specula.detectors.rules._cdp_columns import Store


def _store() -> Store:
    dtype = np.dtype([("ts", np.int64)])
    return Store(dtype, n_enc=2, n_num=0, capacity=8, indexed=(1,))


def _append(store: Store, ts: np.ndarray, keys: np.ndarray) -> None:
    rows = np.zeros(len(ts), store.rows.dtype)
    rows["ts"] = ts
    enc = np.stack([np.zeros(len(ts), np.int64), keys])
    store.append(rows, enc, np.zeros((0, len(ts))))


@pytest.mark.parametrize("distinct", [1, 3, 50, 10_000])
@pytest.mark.parametrize("seed", range(3))
def test_chains_give_exactly_the_events_holding_a_key(distinct, seed):
    rng = np.random.default_rng(seed)
    store = _store()
    ts0 = 0
    values = rng.integers(-5, distinct, 2 * distinct + 5)
    values[0] = _k.NAN_KEY
    for _ in range(60):
        r = int(rng.choice([1, 2, 7, 64, 500]))
        ts = ts0 + np.cumsum(rng.integers(0, 3, r))
        ts0 = int(ts[-1])
        _append(store, ts, rng.choice(values, r))
        if rng.random() < 0.4:
            store.drop_before(int(rng.integers(int(store.live_ts[0]), ts0 + 2)))
        keys = store.live_enc[1]
        slot_key, slot_pos, link, off = store.index_of(1)
        buf = np.empty(4, np.int64)
        ts = store.live_ts
        for key in rng.choice(values, 8):
            first = int(ts[0]) if len(ts) else ts0
            low, high = sorted(rng.integers(first - 1, ts0 + 2, 2).tolist())
            buf, c = _k.chain(slot_key, slot_pos, link, off, key, ts, low, high, buf)
            want = np.flatnonzero((keys == key) & (ts >= low) & (ts < high))[::-1]
            assert buf[:c].tolist() == want.tolist()
    assert store.index_of(0)[0].size == 0  # a row without an index: the kernels scan
