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
        _check_chains(store, rng.choice(values, 8), ts0, rng)
    assert store.index_of(0)[0].size == 0  # a row without an index: the kernels scan


def _check_chains(store: Store, keys: np.ndarray, ts0: int, rng: np.random.Generator) -> None:
    """Each key's chain over a random time range gives exactly the live events holding
    it, newest first."""
    live = store.live_enc[1]
    slot_key, slot_pos, link, off = store.index_of(1)
    buf = np.empty(4, np.int64)
    ts = store.live_ts
    for key in keys:
        first = int(ts[0]) if len(ts) else ts0
        low, high = sorted(rng.integers(first - 1, ts0 + 2, 2).tolist())
        buf, c = _k.chain(slot_key, slot_pos, link, off, key, ts, low, high, buf)
        want = np.flatnonzero((live == key) & (ts >= low) & (ts < high))[::-1]
        assert buf[:c].tolist() == want.tolist()


@pytest.mark.parametrize("universe", [None, 300])
@pytest.mark.parametrize("seed", range(3))
def test_dropped_keys_give_their_slots_to_new_ones(universe, seed):
    """A sliding window over ever new keys (``universe`` None) or over a bounded set of
    keys keeps the table as small as its live part needs: keys whose events were all
    dropped give their slots up, and rebuilds drop them. Chains stay exact for live,
    dropped and unseen keys."""
    rng = np.random.default_rng(seed)
    store = _store()
    ts0, next_key, sizes = 0, 0, []
    for _ in range(400):
        r = int(rng.integers(1, 40))
        ts = ts0 + np.cumsum(rng.integers(0, 3, r))
        ts0 = int(ts[-1])
        if universe is None:
            keys = next_key + rng.integers(0, 2 * r, r)  # mostly new, some repeated
            next_key += 2 * r
        else:
            keys = rng.integers(0, universe, r)
        _append(store, ts, keys)
        store.drop_before(ts0 - 60)  # about 40 live events
        sizes.append(len(store.tables[0][0]))
        probe = np.concatenate([store.live_enc[1][:3], rng.integers(0, max(next_key, 400), 3)])
        _check_chains(store, probe, ts0, rng)
    assert max(sizes) <= 1024, sizes[-20:]
    assert sizes[-1] == sizes[len(sizes) // 2]  # it stopped growing
