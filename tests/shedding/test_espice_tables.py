"""eSPICE's tables against their definitions: CDT (Alg. 1), thresholds (Alg. 2), UT, scaling.

Brute-force references are written from the paper's definitions, not from the code: the
cumulative utility occurrences O(u) summed cell by cell, the threshold found by trying every
utility. Shares are multiples of 1/64 so that every sum is exact in floating point and the
comparisons with ``x`` have one answer.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from specula.shedding import (
    UtilityModel,
    UtilityTable,
    compute_cdt,
    dropping_amount,
    partition_count,
    reference_range,
    threshold_fractions,
    utility_levels,
    utility_thresholds,
)

# ------------------------------------------------------------------ the paper's example


def test_table_1_gives_the_cdt_of_figure_2_and_threshold_10_for_x_2():
    """Sec. 3.3: UT of Table 1 with the position shares of Figure 2 (read off its steps:
    A holds positions 1..5 with 0.8, 0.5, 0.1, 0.2, 0.5) gives CDT 1.2, 1.4, 2.3, 2.8, 3.7,
    4.2, 5 at u = 0, 5, 10, 15, 30, 60, 70, and x = 2 gives u_th = 10."""
    ut = np.array([[70, 15, 10, 5, 0], [0, 60, 30, 10, 0]])
    a = np.array([0.8, 0.5, 0.1, 0.2, 0.5])
    cdt = compute_cdt(ut, np.stack([a, 1 - a]), 1)[0]
    steps = [0, 5, 10, 15, 30, 60, 70, 100]
    assert np.allclose(cdt[steps], [1.2, 1.4, 2.3, 2.8, 3.7, 4.2, 5.0, 5.0])
    assert utility_thresholds(cdt[None], 2.0).tolist() == [10]
    # Between the steps the CDT is flat: O(u) counts utilities <= u.
    assert np.allclose(cdt[10:15], 2.3)


# ------------------------------------------------------------------ Alg. 1 and Alg. 2


def _random_table(rng: np.random.Generator, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    # Few distinct utilities, so that ties and empty levels both occur.
    levels = rng.choice(101, size=rng.integers(1, 8), replace=False)
    ut = rng.choice(levels, size=(m, n))
    shares = rng.integers(0, 17, size=(m, n)) / 64.0
    return ut, shares


def _brute_cdt(ut: np.ndarray, shares: np.ndarray, rho: int) -> np.ndarray:
    m, n = ut.shape
    out = np.zeros((rho, 101))
    for part in range(rho):
        for u in range(101):
            out[part, u] = sum(shares[t, p] for t in range(m) for p in range(n)
                               if Fraction(p) // Fraction(n, rho) == part and ut[t, p] <= u)
    return out


def _brute_threshold(ut: np.ndarray, shares: np.ndarray, rho: int, part: int,
                     x: float) -> int:
    """Exhaustive search: the smallest u whose drops (utility <= u) reach x in ``part``."""
    if x <= 0:
        return -1
    n = ut.shape[1]
    cells = [(t, p) for t in range(ut.shape[0]) for p in range(n)
             if Fraction(p) // Fraction(n, rho) == part]
    for u in range(101):
        if sum(shares[t, p] for t, p in cells if ut[t, p] <= u) >= x:
            return u
    return 100


@pytest.mark.parametrize("seed", range(12))
def test_cdt_per_partition_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 5)), int(rng.integers(1, 23))
    rho = int(rng.integers(1, n + 1))
    ut, shares = _random_table(rng, m, n)
    assert np.array_equal(compute_cdt(ut, shares, rho), _brute_cdt(ut, shares, rho))


@pytest.mark.parametrize("seed", range(12))
def test_thresholds_are_the_smallest_utility_that_drops_at_least_x(seed):
    rng = np.random.default_rng(100 + seed)
    m, n = int(rng.integers(1, 5)), int(rng.integers(1, 23))
    rho = int(rng.integers(1, n + 1))
    ut, shares = _random_table(rng, m, n)
    cdt = compute_cdt(ut, shares, rho)
    # Amounts on the CDT's own steps (ties), between them, beyond the total, and zero.
    amounts = [0.0, -1.0, *np.unique(cdt).tolist(), *(rng.integers(1, 400, 6) / 64.0).tolist(),
               float(cdt[:, -1].max() + 1)]
    for x in amounts:
        got = utility_thresholds(cdt, x)
        want = [_brute_threshold(ut, shares, rho, part, x) for part in range(rho)]
        assert got.tolist() == want, x
        for part, u in enumerate(got):
            if u >= 0 and cdt[part, -1] >= x:  # reachable: u drops >= x, u - 1 does not
                assert cdt[part, u] >= x and (u == 0 or cdt[part, u - 1] < x)


@pytest.mark.parametrize("seed", range(12))
def test_below_the_threshold_and_a_fraction_at_it_drop_exactly_x(seed):
    """The expected drop per partition, every event below ``u_th`` and the fraction of
    those at it, is ``x`` (all of the partition when ``x`` exceeds it, none for
    ``x <= 0``), for tables of any shape, including levels most of a window shares."""
    rng = np.random.default_rng(200 + seed)
    m, n = int(rng.integers(1, 5)), int(rng.integers(1, 23))
    rho = int(rng.integers(1, n + 1))
    ut, shares = _random_table(rng, m, n)
    if seed % 2:  # one level holds most of the window (a sparse query's zeros)
        ut = np.where(rng.random(ut.shape) < 0.8, 0, ut)
    cdt = compute_cdt(ut, shares, rho)
    amounts = [0.0, -1.0, *np.unique(cdt).tolist(), *(rng.integers(1, 400, 6) / 64.0).tolist(),
               float(cdt[:, -1].max() + 1)]
    part = np.arange(n) * rho // n
    for x in amounts:
        thresholds = utility_thresholds(cdt, x)
        fractions = threshold_fractions(cdt, x, thresholds)
        assert ((fractions >= 0) & (fractions <= 1)).all()
        probability = np.where(ut < thresholds[part], 1.0,
                               np.where(ut == thresholds[part], fractions[part], 0.0))
        dropped = np.bincount(np.broadcast_to(part, ut.shape).ravel(),
                              weights=(probability * shares).ravel(), minlength=rho)
        want = np.clip(x, 0.0, cdt[:, -1])
        assert np.allclose(dropped, want, rtol=1e-9, atol=1e-9), x


def test_threshold_per_partition_amounts_and_the_open_cases():
    cdt = compute_cdt(np.array([[0, 50, 100, 100]]), np.full((1, 4), 1.0), 2)
    # Partition 0 holds utilities 0 and 50, partition 1 two of 100.
    assert utility_thresholds(cdt, [1.0, 1.0]).tolist() == [0, 100]
    assert utility_thresholds(cdt, [2.0, 0.0]).tolist() == [50, -1]  # x <= 0: nothing
    assert utility_thresholds(cdt, 3.0).tolist() == [100, 100]  # more than it holds: all


def test_threshold_search_tolerates_rounding_below_x():
    """Shares 0.1 x 3 sum to 0.30000000000000004 or 0.29999999999999993 depending on order;
    x = 0.3 is reached at the utility that holds the third share."""
    cdt = compute_cdt(np.array([[0, 1, 2]]), np.array([[0.1, 0.1, 0.1]]), 1)
    assert utility_thresholds(cdt, 0.3).tolist() == [2]
    assert utility_thresholds(cdt, 0.3 + 1e-6).tolist() == [100]


def test_cdt_refuses_utilities_outside_0_100_and_bad_partitions():
    with pytest.raises(ValueError, match=r"0\.\.100"):
        compute_cdt(np.array([[101]]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="partitions"):
        compute_cdt(np.array([[1, 2]]), np.array([[1.0, 1.0]]), 3)


# ------------------------------------------------------------------ rho and x


def test_partition_count_is_the_ceiling_of_ws_over_the_buffer():
    # q_max = LB / l(p); buffer = q_max - f q_max.
    assert partition_count(100, 500, 0.8) == 1  # ws == buffer: one partition
    assert partition_count(101, 500, 0.8) == 2
    assert partition_count(700, 1000, 0.8) == 4  # 700 / 200 = 3.5
    assert partition_count(600, 1000, 0.8) == 3  # 600 / 200.00000000000006: still 3
    assert partition_count(10, 1000, 0.0) == 1
    assert partition_count(10, 1000, 1.0) == 10  # empty buffer: one position each
    assert partition_count(10, 1.0, 0.5) == 10  # capped at one position per partition
    with pytest.raises(ValueError):
        partition_count(10, 100, 1.5)


def test_dropping_amount_is_the_excess_that_arrives_during_a_partition():
    # R = 1.2 th: a sixth of every partition; R = 1.4 th: two sevenths.
    assert dropping_amount(120.0, 100.0, 60.0) == pytest.approx(10.0)
    assert dropping_amount(140.0, 100.0, 70.0) == pytest.approx(20.0)
    assert dropping_amount(90.0, 100.0, 60.0) == 0.0
    assert dropping_amount(0.0, 100.0, 60.0) == 0.0


# ------------------------------------------------------------------ UT from statistics


@pytest.mark.parametrize("normalization", ["conditional", "type"])
@pytest.mark.parametrize("seed", range(5))
def test_levels_are_integers_in_0_100_in_the_order_of_the_utilities(normalization, seed):
    rng = np.random.default_rng(seed)
    m, n, bs = 4, 17, int(rng.integers(1, 6))
    model = UtilityModel(m, n, bs, normalization=normalization)
    pairs = 3000
    types = rng.integers(-1, m + 1, pairs)  # out-of-range types are ignored
    positions = rng.integers(0, n, pairs)
    matched = rng.random(pairs) < rng.random()
    model.observe(types, positions, n, matched, windows=100)
    table = model.build()
    assert table.ut.dtype == np.int16 and table.ut.shape == (m, -(-n // bs))
    assert table.ut.min() >= 0 and table.ut.max() <= 100
    shares = table.shares.sum(axis=0)
    assert np.allclose(shares[shares > 0], 1.0)  # a distribution over types per bin
    # a higher utility never gets a lower level, equal utilities get one level
    prob, ut = model.probabilities().ravel(), table.ut.ravel()
    order = np.argsort(prob, kind="stable")
    assert np.all(np.diff(ut[order]) >= 0)
    for value in np.unique(prob):
        assert len(np.unique(ut[prob == value])) == 1
    if normalization == "type":  # rows of matched types sum to 1
        rows = model.probabilities().sum(axis=1)
        assert np.allclose(rows[rows > 0], 1.0)


def test_conditional_utility_is_the_share_of_events_that_took_part():
    # Type 0 at position 1: seen 4 times, matched 3; position 2 seen 3 times, matched 0;
    # type 1 at position 0 always matched; 1 of 3 at position 2.
    types = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    positions = np.array([1, 1, 1, 1, 2, 2, 2, 0, 0, 2, 2, 2])
    matched = np.array([1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0], bool)
    model = UtilityModel(2, 3, prior_matches=0)
    model.observe(types, positions, 3, matched, windows=4)
    assert np.allclose(model.probabilities(), [[0, 3 / 4, 0], [1, 0, 1 / 3]])
    table = model.build()
    # 12 events, by utility: 0 (3 of them), 1/3 (3), 3/4 (4), 1 (2): the share below each
    assert table.ut.tolist() == [[0, 50, 0], [83, 0, 25]]
    assert table.shares.tolist() == [[0.0, 1.0, 0.5], [1.0, 0.0, 0.5]]
    typed = UtilityModel(2, 3, normalization="type")
    typed.observe(types, positions, 3, matched, windows=4)
    assert np.allclose(typed.probabilities(), [[0, 1, 0], [2 / 3, 0, 1 / 3]])


def test_the_prior_ranks_cells_without_matches_by_their_type_and_position():
    """Type 0 matches at early positions only, type 2 at late ones, type 1 never. A late
    cell of type 0, without a match of its own, ranks above every cell of type 1 (it
    would tie with them at 0 on plain rates); a cell with 1,000 events keeps nearly its
    own rate."""
    model = UtilityModel(3, 4, prior_matches=5)
    rng = np.random.default_rng(0)
    positions = np.repeat(np.arange(4), 20)
    rows = {0: positions < 2, 1: np.zeros(80, bool), 2: positions >= 2}
    for _ in range(50):
        for t, where in rows.items():
            model.observe(np.full(80, t), positions, 4, where & (rng.random(80) < 0.05),
                          windows=1)
    prob, plain = model.probabilities(), model.matched / model.seen
    assert plain[0, 2:].max() == 0 and (prob[0, 2:] > 0).all()
    assert prob[1].max() == 0
    assert np.allclose(prob[0, :2], plain[0, :2], rtol=0.1)
    table = model.build()
    assert table.ut[0].min() > table.ut[1].max()


def test_levels_split_the_weight_evenly():
    """A level is the whole percent of the weight below the utility: ties share one."""
    prob = np.array([[0.0, 0.2, 0.2, 0.9], [0.0, 0.1, 0.5, 1.0]])
    weight = np.array([[25, 5, 5, 5], [25, 10, 15, 10]])
    assert utility_levels(prob, weight).tolist() == [[0, 60, 60, 85], [0, 50, 70, 90]]
    assert utility_levels(prob, np.zeros_like(weight)).max() == 0  # nothing seen yet


def test_bins_pool_neighbouring_positions():
    model = UtilityModel(1, 5, bin_size=2, prior_matches=0)
    model.observe(np.zeros(5, int), np.arange(5), 5, np.array([1, 0, 1, 1, 0], bool), 1)
    assert model.probabilities().tolist() == [[0.5, 1.0, 0.0]]
    table = model.build()
    assert table.ut.tolist() == [[20, 60, 0]]  # weights 2, 2, 1 of 5
    ut, shares = table.by_position()
    assert ut.tolist() == [[20, 20, 60, 60, 0]] and shares.shape == (1, 5)


def test_periodic_retraining_and_forgetting():
    """Every ``retrain_every`` windows a new table; with ``forget`` it sees that period only."""
    for forget, want in ((False, 2 / 3), (True, 0.0)):
        model = UtilityModel(1, 1, retrain_every=2, forget=forget, prior_matches=0)
        assert model.observe([0], [0], 1, [True], windows=1) is None
        first = model.observe([0], [0], 1, [True], windows=1)
        assert first is not None and first is model.table
        model.observe([0], [0], 1, [False], windows=1)
        assert model.probabilities().tolist() == [[want]]  # 2 of 3 matched, or 0 of 1
        second = model.observe([0], [0], 1, [False], windows=1)
        assert second is model.table and second is not first


# ------------------------------------------------------------------ variable window sizes


def _naive_range(p: int, ws: int, n: int) -> list[int]:
    """Reference positions whose unit interval meets [p N / ws, (p + 1) N / ws)."""
    if p >= ws:
        return [n - 1]
    start, stop = Fraction(p * n, ws), Fraction((p + 1) * n, ws)
    return [j for j in range(n) if j < stop and j + 1 > start]


@pytest.mark.parametrize(("ws", "n"), [(5, 5), (4, 8), (8, 4), (3, 7), (7, 3), (10, 1), (1, 6)])
def test_reference_range_covers_the_scaled_span(ws, n):
    positions = np.arange(ws + 2)  # two beyond the window: the last position
    lo, hi = reference_range(positions, ws, n)
    for p in positions:
        assert list(range(lo[p], hi[p])) == _naive_range(int(p), ws, n)


def test_windows_of_other_sizes_train_the_same_relative_positions():
    """Events at relative positions [1/4, 1/2) take part, nothing else: windows of size N/2,
    N and 2N all teach UT(., [N/4, N/2)) = 100 and 0 elsewhere."""
    n = 8
    model = UtilityModel(1, n)
    for ws in (4, 8, 16):
        p = np.arange(ws)
        matched = (p * 4 >= ws) & (p * 2 < ws)
        model.observe(np.zeros(ws, int), p, ws, matched, windows=1)
    assert model.probabilities().tolist() == [[0, 0, 1, 1, 0, 0, 0, 0]]
    table = model.build()
    assert table.ut.tolist() == [[0, 0, 75, 75, 0, 0, 0, 0]]  # 3/4 of the events below
    # Looking up: position 2 of a window of 4 spans reference 4..5 (0, 0); position 1
    # spans 2..3 (75); of a window of 16, position 5 maps to reference 2 alone.
    total, cells, lo = table.utility_sums(np.zeros(3, int), np.array([2, 1, 5]),
                                          np.array([4, 4, 16]))
    assert (total / cells).tolist() == [0, 75, 75] and lo.tolist() == [4, 2, 2]


def test_scaling_up_averages_the_cells():
    table = UtilityTable(np.array([[10, 21, 30, 40]], np.int16), np.ones((1, 4)), 4)
    total, cells, _ = table.utility_sums(np.array([0, 0]), np.array([0, 1]), 2)
    assert total.tolist() == [31, 70] and cells.tolist() == [2, 2]  # means 15.5 and 35
    unknown, _, _ = table.utility_sums(np.array([-1, 7]), np.array([0, 0]), 4)
    assert unknown.tolist() == [0, 0]


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_decision_is_the_numpy_one(seed):
    """UtilityTable.below (one compiled pass, what the shedder runs) against the
    definition in NumPy steps (utility_sums, partition of the first reference position,
    integer comparison), on pairs of every shape: unknown types, positions beyond the
    window, windows smaller and larger than the reference, size 0, no-drop thresholds."""
    rng = np.random.default_rng(seed)
    n_types, n, bins = int(rng.integers(1, 5)), int(rng.integers(1, 40)), int(rng.integers(1, 4))
    cells = -(-n // bins)
    table = UtilityTable(rng.integers(0, 101, (n_types, cells)).astype(np.int16),
                         np.ones((n_types, cells)), n, bins)
    pairs = 500
    types = rng.integers(-2, n_types + 2, pairs)
    sizes = rng.integers(0, 3 * n + 2, pairs)
    positions = rng.integers(0, 3 * n + 4, pairs)
    rho = int(rng.integers(1, 5))
    thresholds = rng.integers(-1, 101, rho)
    total, width, lo = table.utility_sums(types, positions, sizes)
    want = total <= thresholds[lo * rho // n] * width
    assert np.array_equal(table.below(types, positions, sizes, thresholds), want)
    scalar = int(sizes[0])
    total, width, lo = table.utility_sums(types, positions, scalar)
    want = total <= thresholds[lo * rho // n] * width
    assert np.array_equal(table.below(types, positions, scalar, thresholds), want)
