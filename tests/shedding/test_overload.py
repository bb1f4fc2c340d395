"""Overload detection against hand computations from the papers' formulas.

eSPICE sec. 3.4: l(e) = n·l(p), q_max = LB / l(p), shed when q_size > f·q_max, drop
x = δ·p_size / R per dropping interval (the share δ / R), and at least the queue's part
beyond f·q_max (ours). Hybrid shedding: shed while the smoothed latency μ(k) exceeds θ,
by the relative extent (μ - θ) / μ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specula.shedding import KEEP_ALL, OverloadDetector, Shedding
from specula.shedding.overload import (
    ArrivalRate,
    SlidingMean,
    SlidingQuantile,
    backlog_share,
    dropping_amount,
    estimated_latency,
    latency_level,
    max_queue,
    queue_overloaded,
    rate_share,
)


def test_espice_formulas_by_hand():
    # The paper's set-up: LB = 1 s, f = 0.8; an operator of th = 2,000 events/s.
    lp = 1 / 2_000
    assert estimated_latency(1, lp) == lp  # the head of the queue: its own processing
    assert estimated_latency(1_500, lp) == pytest.approx(0.75)
    q_max = max_queue(1.0, lp)
    assert q_max == pytest.approx(2_000)
    assert not queue_overloaded(1_600, q_max, 0.8)  # f·q_max = 1,600: not yet
    assert queue_overloaded(1_601, q_max, 0.8)
    assert queue_overloaded(1, q_max, 0.0)  # f = 0 sheds on any queue at all
    # Input rates 20 % and 40 % above th (the paper's R1, R2): δ = 400 and 800 events/s.
    assert rate_share(2_400, 2_000) == pytest.approx(400 / 2_400)
    assert rate_share(2_800, 2_000) == pytest.approx(800 / 2_800)
    # Partitions of p_size = 120 events (the dropping interval): x = δ·p_size / R.
    assert dropping_amount(2_400, 2_000, 120) == pytest.approx(20)
    assert dropping_amount(2_800, 2_000, 120) == pytest.approx(800 * 120 / 2_800)
    # No overload, no drop; nothing measured yet, no bound on the queue.
    assert rate_share(1_999, 2_000) == rate_share(0, 2_000) == 0
    assert dropping_amount(2_000, 2_000, 120) == 0
    assert max_queue(1.0, 0.0) == math.inf
    # Ours: of a queue beyond f·q_max keep f·q_max (1,600 events, 0.8 s of work).
    assert backlog_share(2_000, q_max, 0.8) == pytest.approx(0.2)
    assert backlog_share(1_600, q_max, 0.8) == 0


def test_hybrid_latency_level_by_hand():
    assert latency_level(0.0, 1.25, 1.0) == pytest.approx(0.2)  # 25 % over: shed a fifth
    assert latency_level(0.0, 4.0, 1.0) == pytest.approx(0.75)
    assert latency_level(0.0, 1.0, 1.0) == latency_level(0.0, 0.5, 1.0) == 0
    # shedding a fifth and still 25 % over: a fifth of the remaining 80 % more
    assert latency_level(0.2, 1.25, 1.0) == pytest.approx(0.36)
    assert latency_level(0.5, 1.0, 1.0) == pytest.approx(0.5)  # at the bound: hold
    assert latency_level(0.5, 0.8, 1.0) == pytest.approx(0.375)  # under it: shed less
    # a quarter of a window's measurements: a quarter of the correction, in log terms
    assert latency_level(0.0, 2.0, 1.0, 0.25) == pytest.approx(1 - 0.5 ** 0.25)


def test_queue_trigger_fires_above_f_qmax_with_the_rate_share():
    d = OverloadDetector(Shedding(latency_bound_s=0.5, f=0.8, smoothing=200))
    assert d.command(10**6) is KEEP_ALL  # l(p) not measured yet: q_max unknown
    d.processed(200, 0.2)  # l(p) = 1 ms: th = 1,000/s, q_max = 500, f·q_max = 400
    for i in range(20):
        d.arrived(25, i * 0.02)  # R = 1,250 events/s
    assert d.throughput == pytest.approx(1_000)
    assert d.arrivals.rate == pytest.approx(1_250)
    assert d.command(400) is KEEP_ALL
    c = d.command(401)
    assert c.share == pytest.approx(250 / 1_250)  # δ / R
    assert (c.q_size, c.q_max, c.rate_in, c.throughput) == (401, pytest.approx(500),
                                                            pytest.approx(1_250),
                                                            pytest.approx(1_000))
    # a longer queue: at least what is beyond f·q_max goes, 1 - 400 / 1,000 of it
    assert d.command(1_000).share == pytest.approx(0.6)
    for i in range(20, 60):
        d.arrived(15, i * 0.02)  # the input slows to 750/s: only the backlog is shed
    assert d.arrivals.rate == pytest.approx(750)
    assert d.command(400) is KEEP_ALL
    assert d.command(10_000).share == pytest.approx(1 - 400 / 10_000)


def test_lp_follows_a_rising_cost_within_a_tenth_of_the_smoothing():
    """A window operator's cost per event grows while windows open: l(p) is the mean of
    the last tenth of ``smoothing`` events when that is higher, so q_max shrinks with the
    rise; a falling cost is followed by the long mean."""
    d = OverloadDetector(Shedding(latency_bound_s=1.0, f=0.8, smoothing=1_000))
    d.processed(900, 0.9)   # 1 ms per event
    d.processed(100, 0.3)   # then 3 ms
    assert d.busy.mean == pytest.approx(1.2e-3) and d.lp_s == pytest.approx(3e-3)
    assert max_queue(1.0, d.lp_s) == pytest.approx(1_000 / 3)
    d.processed(100, 0.05)  # 0.5 ms: the long mean, 1.15 ms, is higher
    assert d.lp_s == pytest.approx(d.busy.mean) and d.lp_s == pytest.approx(1.15e-3)


def test_latency_trigger_uses_the_mean_of_the_last_smoothing_events():
    d = OverloadDetector(Shedding(latency_bound_s=1.0, trigger="latency", smoothing=1_000))
    d.completed(0.5, 1_000)
    assert d.mu_s == pytest.approx(0.5) and d.command(0) is KEEP_ALL
    d.completed(1.5, 500)  # window: 500 at 0.5 s, 500 at 1.5 s: μ = 1.0, not above θ
    assert d.mu_s == pytest.approx(1.0) and d.command(0) is KEEP_ALL
    d.completed(2.0, 1_000)  # a whole window at 2 s: the paper's (μ - θ) / μ
    assert d.mu_s == pytest.approx(2.0)
    assert d.command(0).share == pytest.approx(0.5)
    assert d.command(0).share == pytest.approx(0.5)  # no new measurement: no correction
    assert d.command(0).q_size == 0  # the queue plays no part
    d.completed(1.25, 1_000)  # shedding half and still 25 % over: 1 - 0.5 / 1.25
    assert d.command(0).share == pytest.approx(0.6)
    d.completed(0.9, 1_000)  # under the bound: shed less, 1 - 0.4 / 0.9
    assert d.command(0).share == pytest.approx(1 - 0.4 / 0.9)
    d.completed(5.0, 100)  # a jump: at least the violation of the moment, 1 - 1 / μ
    assert d.mu_s == pytest.approx(1.31)
    assert d.command(0).share == pytest.approx(max(1 - 1 / 1.31, 1 - (0.4 / 0.9) / 1.31 ** 0.1))
    d.completed(0.25, 1_000)  # far under the bound: stop
    assert d.command(0) is KEEP_ALL


def test_latency_trigger_holds_the_mean_at_the_bound_under_any_overload():
    # a node whose latency per event is its unshed latency times what it keeps (to the
    # power 1, 2 or 3: work growing with the partial matches), under overloads of 1.2x to
    # 20x the bound: the smoothed latency converges to the bound, not above it
    for power in (1, 2, 3):
        for over in (1.2, 2.0, 5.0, 20.0):
            d = OverloadDetector(Shedding(latency_bound_s=1.0, trigger="latency",
                                          smoothing=1_000))
            mus = []
            for _ in range(400):
                share = d.command(0).share
                d.completed(over * (1 - share) ** power, 50)
                mus.append(d.mu_s)
            assert np.mean(mus[-100:]) == pytest.approx(1.0, rel=0.02), (power, over)


@pytest.mark.parametrize("seed", range(4))
def test_latency_quantile_trigger_holds_the_95th_percentile_on_random_loads(seed):
    """With ``latency_quantile=0.95`` (the hybrid paper's Fig. 10 bound): random
    overloads (1.2x-20x the bound), latencies growing with what is kept to the power 1-3
    and noisy (each batch's latency times a log-normal factor): once settled, at most
    about 5 % of the events are over the bound (the window's 95th percentile is held
    at it: 10 % at most), and the 95th percentile of them all is within 10 % of it."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        over, power = float(rng.uniform(1.2, 20)), int(rng.integers(1, 4))
        noise = float(rng.uniform(0.05, 0.3))
        d = OverloadDetector(Shedding(latency_bound_s=1.0, trigger="latency",
                                      smoothing=1_000, latency_quantile=0.95))
        latencies = []
        for _ in range(1_500):
            share = d.command(0).share
            latency = over * (1 - share) ** power * float(rng.lognormal(0, noise))
            d.completed(latency, 50)
            latencies.append(latency)
        settled = np.array(latencies[500:])
        assert np.mean(settled > 1.0) <= 0.1, (over, power, noise)
        assert np.quantile(settled, 0.95) <= 1.1, (over, power, noise)
        assert np.quantile(settled, 0.5) >= 0.5, (over, power, noise)  # not all shed


def _quantile_detector() -> OverloadDetector:
    return OverloadDetector(Shedding(latency_bound_s=1.0, trigger="latency",
                                     smoothing=1_000, latency_quantile=0.95))


def test_quantile_trigger_does_not_ratchet_on_one_slow_batch():
    """A 95th percentile over 5 batches is their worst: one slow batch must raise the
    share once, not for each of the 5 batches it stays in the window, and a latency
    under the bound lowers the share at the next batch."""
    d = _quantile_detector()
    for _ in range(20):  # settled well under the bound, nothing shed
        d.completed(0.5, 200)
        assert d.command(0) is KEEP_ALL
    d.completed(2.0, 200)  # one slow batch
    first = d.command(0).share
    assert first == pytest.approx(0.5)  # its violation, (2 - 1) / 2
    shares = []
    for _ in range(4):  # back under the bound while the slow batch is in the window
        d.completed(0.5, 200)
        assert d.mu_s == pytest.approx(2.0)
        shares.append(d.command(0).share)
    # one correction of a fifth of a window, (0.9 / 2) ** 0.2 kept, then lowered
    assert shares[0] < 1 - 0.45 ** 0.2
    assert shares == sorted(shares, reverse=True) and shares[-1] < shares[0]


@pytest.mark.parametrize("seed", range(4))
def test_quantile_trigger_recovers_from_a_latency_floor(seed):
    """A latency with a floor that shedding cannot remove (floor + kept · variable,
    noisy, with a slow batch now and then): the trigger holds the 95th percentile near
    the bound without going to shed everything, and from a share near 1 it comes back
    within a few windows once the latency is under the bound."""
    rng = np.random.default_rng(seed)
    floor, variable = float(rng.uniform(0.2, 0.6)), float(rng.uniform(2, 8))
    d = _quantile_detector()
    latencies, shares = [], []
    for i in range(400):
        share = d.command(0).share
        latency = (floor + (1 - share) * variable) * float(rng.lognormal(0, 0.1))
        latency *= 2.0 if i % 40 == 0 else 1.0  # a shedding set's batch, say
        d.completed(latency, 200)
        latencies.append(latency)
        shares.append(share)
    need = 1 - (0.9 - floor) / variable  # the share that puts the latency at 0.9 θ
    assert np.quantile(latencies[100:], 0.95) <= 1.1
    assert np.median(shares[100:]) <= need + 0.5 * (1 - need)
    d.level = 0.999
    for _ in range(15):  # three windows at the floor
        d.completed(floor, 200)
        d.command(0)
    assert d.level <= need + 0.5 * (1 - need)


@pytest.mark.parametrize("seed", range(5))
def test_sliding_quantile_equals_the_quantile_of_the_last_events(seed):
    rng = np.random.default_rng(seed)
    size, q = int(rng.integers(1, 60)), float(rng.uniform(0.05, 1.0))
    m, per_event = SlidingQuantile(size, q), []
    for _ in range(300):
        w, v = int(rng.integers(0, 25)), float(rng.random())
        m.add(v, w)
        per_event += [v] * w
        last = per_event[-size:]
        assert m.value == (np.quantile(last, q, method="inverted_cdf") if last else 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_sliding_mean_equals_the_mean_of_the_last_events(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 60))
    m, per_event = SlidingMean(size), []
    for _ in range(300):
        w, v = int(rng.integers(0, 25)), float(rng.random())
        m.add(v * w, w)
        per_event += [v] * w
        last = per_event[-size:]
        assert m.weight == len(last)
        assert m.mean == pytest.approx(np.mean(last) if last else 0.0)
        assert len(m._chunks) <= size  # bounded memory: never more chunks than events


@pytest.mark.parametrize("seed", range(5))
def test_arrival_rate_spans_at_least_size_events(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 200))
    r, seen, t = ArrivalRate(size), [], 0.0
    for _ in range(300):
        t += float(rng.random())
        n = int(rng.integers(1, 40))
        r.add(n, t)
        seen.append((t, n))
        kept = list(r._arrivals)
        assert kept == seen[-len(kept):]
        after_first = sum(k for _, k in kept[1:])
        # enough events after the window's first arrival, and no arrival more than needed
        assert len(kept) <= 2 or after_first - kept[1][1] < size
        assert len(kept) == len(seen) or after_first >= size or len(kept) == 2
        assert r.rate == pytest.approx(after_first / (kept[-1][0] - kept[0][0])
                                       if len(kept) > 1 else 0.0)
