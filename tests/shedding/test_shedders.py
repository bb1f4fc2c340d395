"""eSPICE's per-pair decision against a per-event Python loop, the inbox-level keep mask,
and the type-level baselines' amounts: the paper's BL and the learned ``type-rate``."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from shedding_streams import DTYPE, q1_probs, stream

from specula.events.hashing import uniform
from specula.shedding import (
    ESpiceShedder,
    TypeUtilityShedder,
    UtilityModel,
    UtilityTable,
    WindowAssigner,
)
from specula.shedding.espice import _TIE_TAG


def _random_table(rng: np.random.Generator, m: int, n: int, bs: int) -> UtilityTable:
    bins = -(-n // bs)
    shares = rng.random((m, bins))
    return UtilityTable(rng.integers(0, 101, (m, bins)).astype(np.int16),
                        shares / shares.sum(axis=0), n, bs)


def _naive_drop(table: UtilityTable, shedder: ESpiceShedder, t: int, p: int, ws: int,
                draw: float) -> bool:
    """Alg. 2 ``applyLS`` for one event: mean UT over the scaled span below its partition's
    u_th (at most u_th - 1), or at it (above u_th - 1) and the draw below its fraction."""
    n = table.reference_size
    if p >= ws:
        cells = [n - 1]
    else:
        start, stop = Fraction(p * n, ws), Fraction((p + 1) * n, ws)
        cells = [j for j in range(n) if j < stop and j + 1 > start]
    known = 0 <= t < table.n_types
    utility = Fraction(sum(int(table.ut[t, j // table.bin_size]) for j in cells) if known
                       else 0, len(cells))
    part = int(Fraction(cells[0]) // Fraction(n, shedder.partitions))
    threshold = shedder.thresholds[part]
    return utility <= threshold - 1 or (utility <= threshold
                                        and draw < shedder.fractions[part])


@pytest.mark.parametrize("seed", range(10))
def test_pair_decision_equals_a_per_event_loop(seed):
    rng = np.random.default_rng(seed)
    m, n, bs = int(rng.integers(1, 6)), int(rng.integers(1, 40)), int(rng.integers(1, 5))
    table = _random_table(rng, m, n, bs)
    rho = int(rng.integers(1, n + 1))
    shedder = ESpiceShedder(table, rho)
    shedder.set_amount(float(rng.uniform(0, shedder.partition_size)))
    pairs = 400
    types = rng.integers(-1, m + 1, pairs)
    sizes = rng.integers(1, 3 * n + 2, pairs)
    positions = rng.integers(0, sizes + 2)  # a few beyond the predicted size
    events, windows = rng.permutation(pairs), rng.integers(0, 9, pairs)
    got = shedder.drop_pairs(types, positions, sizes, events, windows)
    draws = uniform(shedder.seed, _TIE_TAG, events, windows)
    want = [_naive_drop(table, shedder, int(t), int(p), int(w), float(d))
            for t, p, w, d in zip(types, positions, sizes, draws, strict=True)]
    assert got.tolist() == want
    assert 0 < got.sum() < pairs or shedder.thresholds.max() in (-1, 100)


def test_inactive_shedder_drops_nothing():
    rng = np.random.default_rng(0)
    shedder = ESpiceShedder(_random_table(rng, 3, 10, 1), 2)
    assert not shedder.active and shedder.thresholds.tolist() == [-1, -1]
    assert not shedder.drop_pairs(np.zeros(5, int), np.arange(5), 10).any()


def test_rates_retraining_and_partitions_rebuild_the_thresholds():
    # One type; utility = position * 10: the lowest positions of each partition go first.
    table = UtilityTable(np.arange(0, 100, 10, dtype=np.int16)[None], np.ones((1, 10)), 10)
    shedder = ESpiceShedder.for_bound(table, q_max=25, f=0.8)  # buffer 5: rho = 2
    assert shedder.partitions == 2 and shedder.partition_size == 5
    assert shedder.set_rates(1.4, 1.0) == pytest.approx(5 * 0.4 / 1.4)  # x = 1.43
    assert shedder.thresholds.tolist() == [10, 60]  # two per partition reach x
    shedder.update_table(UtilityTable(table.ut[:, ::-1].copy(), table.shares, 10))
    assert shedder.thresholds.tolist() == [60, 10]
    shedder.set_partitions(1)
    assert shedder.thresholds.tolist() == [10]


# ------------------------------------------------------------------ the inbox-level mask


def _trained(batch: np.ndarray, ws: int) -> UtilityModel:
    from shedding_streams import run

    from specula.shedding import AnyOf

    model = UtilityModel(10, ws)
    closed, _ = run(batch, WindowAssigner(ws, openers=[0]),
                    AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True))
    closed.observe_into(model)
    return model


def test_keep_drops_events_dropped_from_every_window():
    ws = 20
    batch = stream(3000, 7, q1_probs())
    table = _trained(batch, ws).build()
    shedder = ESpiceShedder(table, 1, assigner=WindowAssigner(ws, openers=[0]))
    reference = WindowAssigner(ws, openers=[0])
    masks = []
    for lo in range(0, len(batch), 250):
        part = batch[lo:lo + 250]
        keep = shedder.keep(part, 0.25)
        assert keep.dtype == bool and keep.shape == (len(part),)
        pairs, _, _ = reference.assign(part["ts"], part["type"])
        shedder.set_amount(shedder.partition_size * 0.25)
        drop = shedder.drop_pairs(part["type"][pairs.event], pairs.position, pairs.expected,
                                  lo + pairs.event, pairs.window)
        shedder.set_amount(0)
        kept_in = np.bincount(pairs.event[~drop], minlength=len(part)) > 0
        assert np.array_equal(keep, kept_in)
        masks.append(keep)
    keep = np.concatenate(masks)
    assert not shedder.active  # the protocol call leaves the operator's amount alone
    assert keep[batch["type"] == 0].all()  # a striker opens its window: utility 100
    assert 0 < (~keep).mean() < 1
    # Events in no window (before the first striker, or long after one) can take part in
    # nothing: dropped. Pairs weigh events by their windows, so the two shares differ.
    in_window = np.zeros(len(batch), bool)
    for opener in np.flatnonzero(batch["type"] == 0):
        in_window[opener:opener + ws] = True
    assert not keep[~in_window].any() and (~in_window).any()


def test_keep_without_drop_keeps_all_but_advances_positions():
    shedder = ESpiceShedder(UtilityTable(np.zeros((2, 4), np.int16), np.full((2, 4), 0.5), 4),
                            assigner=WindowAssigner(4, slide=4))
    batch = np.zeros(6, DTYPE)
    assert shedder.keep(batch, 0).all()
    assert shedder.assigner.seen == 6
    with pytest.raises(ValueError, match="assigner"):
        ESpiceShedder(shedder.table).keep(batch, 1)


def test_keep_reads_a_command_and_leaves_flagged_rows_out_of_the_windows():
    """Rows with flags (punctuations, revisions) are kept and take no window position: the
    plain events get the masks and positions they get without them."""
    from specula.events import CORE_DTYPE

    table = UtilityTable(np.array([[100, 0, 0, 90]], np.int16), np.ones((1, 4)), 4)
    plain = np.zeros(8, CORE_DTYPE)
    plain["ts"] = np.arange(8)
    mixed = np.zeros(12, CORE_DTYPE)
    mixed["ts"] = np.repeat(np.arange(8), [1, 2, 1, 1, 2, 1, 2, 2])[:12]
    mixed["flags"][[1, 5, 8, 10]] = 16  # PROGRESS punctuations
    mixed["ts"][mixed["flags"] == 0] = np.arange(8)
    command = SimpleNamespace(share=0.25)
    got = [ESpiceShedder(table, assigner=WindowAssigner(4, slide=4)).keep(b, command)
           for b in (plain, mixed)]
    # x = 1 of each window of 4: half of the two events of utility 0, drawn per event
    assert got[0][[0, 3, 4, 7]].all() and (~got[0]).sum() in (1, 2, 3)
    assert got[1][mixed["flags"] != 0].all()
    assert np.array_equal(got[1][mixed["flags"] == 0], got[0])


# ------------------------------------------------------------------ type-rate and BL


@pytest.mark.parametrize("fraction", [0.05, 0.17, 0.29, 0.6])
def test_type_rate_drops_the_requested_share_lowest_types_first(fraction):
    utility = np.array([0.5, 0.0, 0.2, 0.2, 0.9])
    frequency = np.array([0.1, 0.1, 0.2, 0.2, 0.4])
    bl = TypeUtilityShedder(utility, frequency, reference_size=30, partitions=2, seed=11)
    bl.set_amount(fraction * 15)  # x events of a 15-event partition
    assert bl.fraction == pytest.approx(fraction)
    p = bl.drop_probability
    assert np.dot(p, frequency) == pytest.approx(fraction)
    assert p[2] == p[3]  # equal utilities: one probability
    order = np.argsort(utility, kind="stable")
    assert np.all(np.diff(p[order]) <= 1e-12)  # lower utility, dropped at least as often
    rng = np.random.default_rng(1)
    n = 40_000
    types = rng.choice(5, n, p=frequency)
    events, windows = rng.permutation(n), rng.integers(0, 1000, n)
    dropped = bl.drop_pairs(types, np.zeros(n, int), 30, events, windows)
    sigma = np.sqrt(fraction * (1 - fraction) / n)
    assert abs(dropped.mean() - fraction) < 4 * sigma
    for t in range(5):  # and per type, at its own probability
        share = dropped[types == t].mean()
        assert abs(share - p[t]) < 4 * np.sqrt(max(p[t] * (1 - p[t]), 1e-12) / (types == t).sum())
    # The inbox-level method drops the same share per event, deterministically.
    batch = np.zeros(n, DTYPE)
    batch["type"] = types
    keep = TypeUtilityShedder(utility, frequency, 30, 2, seed=11).keep(batch, fraction)
    assert abs((~keep).mean() - fraction) < 4 * sigma
    again = TypeUtilityShedder(utility, frequency, 30, 2, seed=11)
    halves = np.concatenate([again.keep(batch[:1234], fraction),
                             again.keep(batch[1234:], fraction)])
    assert np.array_equal(keep, halves)
    # With the core fields the draw hashes (producer, seq, ts): the same however the
    # stream is cut and whatever came before; flagged rows are kept.
    from specula.events import CORE_DTYPE

    core = np.zeros(n, CORE_DTYPE)
    core["type"], core["seq"], core["flags"][::10] = types, np.arange(n), 16
    full = TypeUtilityShedder(utility, frequency, 30, 2, seed=11).keep(core, fraction)
    late = TypeUtilityShedder(utility, frequency, 30, 2, seed=11)
    late.keep(core[:5], 0.0)
    assert np.array_equal(full[700:], late.keep(core[700:], SimpleNamespace(share=fraction)))
    assert full[::10].all()


def test_type_rate_from_model_uses_type_statistics_and_unseen_types_go_first():
    model = UtilityModel(3, 4)
    # Type 0: 2 of 4 took part; type 1: 1 of 4; type 2 never seen.
    model.observe(np.array([0, 0, 0, 0, 1, 1, 1, 1]), np.arange(8) % 4, 4,
                  np.array([1, 1, 0, 0, 1, 0, 0, 0], bool), windows=2)
    bl = TypeUtilityShedder.from_model(model)
    assert bl.utility.tolist() == [0.5, 0.25, 0.0]
    assert bl.frequency.tolist() == [0.5, 0.5, 0.0]
    bl.set_fraction(0.25)
    assert bl.drop_probability.tolist() == [0.0, 0.5, 1.0]
    assert bl._probability(np.array([7])).tolist() == [1.0]
    with pytest.raises(ValueError, match="events and windows"):
        bl.drop_pairs(np.array([0]), np.array([0]), 4)


def _paper_bl_window() -> tuple[object, list[str], np.ndarray]:
    """A detector with the paper's BL for ``seq(S; A; B; A)``, and one hand-made window of
    12 events opened by S: A and B three times each, C (not in the pattern) five times."""
    from specula.events import TypeRegistry
    from specula.shedding import Sequence, WindowDetector

    reg = TypeRegistry()
    for t in ("S", "A", "B", "C"):
        reg.register(t)
    WindowDetector.register_output(reg)
    det = WindowDetector(("S", "A", "B", "C"), Sequence(("A", "B", "A"), with_opener=True),
                         12, openers=("S",), policy="bl", retrain_every=1)
    kinds = ["S", "A", "C", "B", "C", "A", "C", "B", "C", "A", "C", "B"]
    batch = np.zeros(len(kinds), reg.dtype(["S", "A", "B", "C"]))
    batch["type"] = [reg.id(k) for k in kinds]
    batch["ts"] = np.arange(len(kinds))
    names = ["?"] * (max(t.id for t in reg.types()) + 1)
    for t in reg.types():
        names[t.id] = t.name
    return det, names, batch


def test_paper_bl_gives_types_utility_in_proportion_to_their_repetitions_in_the_pattern():
    """The paper's BL on a hand-made window: A occurs twice in the pattern, B and the
    opener S once, C never; A and B are equally frequent in the window, so an A event
    has twice B's utility, and C none. Shedding keeps A's events twice as often as B's
    (once C's are gone), and drops exactly the share asked. Nothing is learned: the
    utilities do not depend on which events matched."""
    from specula.detectors import Emitter
    from specula.shedding import DropCommand

    det, names, batch = _paper_bl_window()
    det.on_batch(batch, names, Emitter())
    det.on_end(Emitter())  # closes the window: frequencies counted, BL built
    bl = det._shedder
    assert isinstance(bl, TypeUtilityShedder)
    assert bl.frequency.tolist() == pytest.approx([1 / 12, 3 / 12, 3 / 12, 5 / 12])
    assert bl.utility.tolist() == pytest.approx([12.0, 8.0, 4.0, 0.0])  # rep / freq
    assert bl.utility[1] == pytest.approx(2 * bl.utility[2])
    det.on_drop_command(DropCommand(0.6, q_max=1e9, f=0.8))  # rho 1: 60 % of every window
    p = bl.drop_probability
    assert p[3] == 1.0  # C first, whole
    keep = 1 - p
    assert keep[1] == pytest.approx(2 * keep[2]) and 0 < keep[2] < keep[1] < 1
    assert float(np.dot(p, bl.frequency)) == pytest.approx(0.6)
    # The same statistics with different matches give the same BL: nothing learned.
    det.model.matched[:] = 0
    det._retrained()
    assert det._shedder.utility.tolist() == pytest.approx([12.0, 8.0, 4.0, 0.0])
    # Per (event, window) pair, the drops follow the probabilities.
    rng = np.random.default_rng(2)
    n = 60_000
    types = rng.choice(4, n, p=bl.frequency)
    dropped = det._shedder.drop_pairs(types, np.zeros(n, int), 12, rng.permutation(n),
                                      rng.integers(0, 100, n))
    for t in range(4):
        share = dropped[types == t].mean()
        assert abs(share - p[t]) < 4 * np.sqrt(max(p[t] * (1 - p[t]), 1e-12) / (types == t).sum())


@pytest.mark.parametrize("seed", range(6))
def test_paper_bl_proportional_allocation_on_random_types(seed):
    """Any utilities and frequencies, any share: the share dropped is exact, utility-0
    types go first, and below the cap each type keeps in proportion to its utility."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        m = int(rng.integers(1, 9))
        rep = rng.choice([0, 1, 2, 3], m).astype(float)
        seen = rng.integers(0, 50, m).astype(float)
        if seen.sum() == 0:
            continue
        bl = TypeUtilityShedder.from_pattern(rep, seen, 30)
        phi = float(rng.random())
        bl.set_fraction(phi)
        p, f, u = bl.drop_probability, bl.frequency, bl.utility
        assert float(np.dot(p, f)) == pytest.approx(phi, abs=1e-9)
        zero = (rep == 0) & (f > 0)
        if zero.any() and phi >= f[zero].sum():
            assert np.all(p[zero] == 1.0)
        elif zero.any():
            assert np.all(p[rep > 0] == 0.0)
        partial = (u > 0) & (f > 0) & (p > 1e-12) & (p < 1 - 1e-12)
        if partial.sum() > 1:
            ratio = (1 - p[partial]) / u[partial]
            assert np.allclose(ratio, ratio[0])
        live = f > 0
        order = np.argsort(u[live])
        assert np.all(np.diff((1 - p[live])[order]) >= -1e-12)  # more utility, kept more
