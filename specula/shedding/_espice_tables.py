"""eSPICE's utility models: the utility table UT, the position shares, the CDT (Alg. 1), the
utility thresholds (Alg. 2, lines 1-7), and the sizes that set them (rho, x).

Everything here is built off the hot path (at a retraining, or when the overload detector
changes the dropping amount), so it favours plain, checkable NumPy over speed; the hot path
(:meth:`UtilityTable.utility`) is table lookups only.

Notation follows the paper (Slo, Bhowmik, Rothermel, Middleware '19, sec. 3):

- ``M`` event types, ``N`` positions of the reference window (the average window size,
  in events), ``bs`` the bin size; UT has ``M x ceil(N / bs)`` cells.
- ``UT(T, P)`` in 0..100: the utility level of an event of type ``T`` at position ``P``
  (:meth:`UtilityModel.build` says how probabilities become levels).
- ``S(T, P)``: the position share, the probability that the event at position ``P`` of a
  window is of type ``T`` (so ``sum_T S(T, P) = 1`` at every position a window reached).
- ``CDT(part, u) = O(u)``: the expected number of events of partition ``part`` of a window
  whose utility is ``<= u`` (eq. 1, Alg. 1).
- ``rho = ceil(ws / (q_max - f q_max))`` partitions of size ``p_size = ws / rho``; the
  dropping amount ``x = δ p_size / R`` with ``δ = R - th``.

Positions are 0-based here (the paper counts from 1). Position ``p`` of a window belongs to
partition ``floor(p / p_size) = p * rho // ws`` (Alg. 2, line 12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

__all__ = ["LEVELS", "UtilityModel", "UtilityTable", "compute_cdt", "dropping_amount",
           "partition_count", "reference_range", "threshold_fractions", "utility_levels",
           "utility_thresholds"]

LEVELS = 101
"""Utility levels are the integers 0..100."""

_REACHED = 1e-9
"""Relative slack of the threshold search: a CDT within ``1e-9 x`` of ``x`` has reached
``x``, so that shares which sum to exactly ``x`` in exact arithmetic are not missed because
their floating-point sum lands a rounding error below it."""

NORMALIZATIONS = ("conditional", "type")


def partition_count(window_size: float, q_max: float, f: float) -> int:
    """rho = ceil(ws / (q_max - f q_max)): partitions per window (sec. 3.4, "Dropping Interval").

    The buffer ``q_max - f q_max`` is what the queue may still grow by once shedding has
    started before the latency bound is violated; each partition must fit in it, so that
    ``x`` events are dropped from every stretch of at most that many events. rho is at least
    1 and at most ``ws`` (a partition holds at least one position; with ``f = 1`` the
    buffer is empty and every position is its own partition). A quotient within ``1e-9``
    above an integer counts as that integer (``0.8 * q_max`` is rarely exact in floats).

    >>> partition_count(100, 500, 0.8), partition_count(101, 500, 0.8)
    (1, 2)
    """
    if window_size <= 0 or q_max <= 0 or not 0.0 <= f <= 1.0:
        raise ValueError(f"need ws > 0, q_max > 0 and f in [0, 1], got {window_size}, "
                         f"{q_max}, {f}")
    buffer = q_max - f * q_max
    if buffer <= 0:
        return max(1, math.ceil(window_size))
    rho = math.ceil(window_size / buffer - 1e-9)
    return int(min(max(rho, 1), max(1, math.ceil(window_size))))


def dropping_amount(rate: float, throughput: float, partition_size: float) -> float:
    """x = δ p_size / R with δ = R - th: events to drop from each partition of each window.

    ``rate`` (R) is the input event rate and ``throughput`` (th) the most events per second
    the operator processes; ``p_size / R`` is the partition's length in seconds, and δ the
    excess events per second, so ``x`` is the excess that arrives during one partition.
    No excess (R <= th) drops nothing.

    >>> dropping_amount(120.0, 100.0, 60.0)
    10.0
    """
    if rate <= 0 or rate <= throughput:
        return 0.0
    return (rate - throughput) * partition_size / rate


def compute_cdt(ut: np.ndarray, shares: np.ndarray, partitions: int = 1) -> np.ndarray:
    """Alg. 1 per partition: ``CDT[part, u]`` = expected events of ``part`` with utility <= u.

    Parameters
    ----------
    ut : (M, N) integer array in 0..100
        The utility of each type at each position of the reference window.
    shares : (M, N) float array
        The position shares S(T, P).
    partitions : int
        rho; position ``P`` belongs to partition ``P * rho // N``.

    Returns
    -------
    (rho, 101) float64 array: ``temp(u) += S(T, P)`` over the cells of each partition (lines
    2-5), accumulated in ascending ``u`` (lines 7-9).
    """
    ut = np.asarray(ut)
    shares = np.asarray(shares, dtype=np.float64)
    if ut.shape != shares.shape or ut.ndim != 2:
        raise ValueError(f"ut and shares must be (M, N) arrays of one shape, got {ut.shape} "
                         f"and {shares.shape}")
    if ut.size and (ut.min() < 0 or ut.max() >= LEVELS):
        raise ValueError("utilities must lie in 0..100")
    n = ut.shape[1]
    if not 1 <= partitions <= max(n, 1):
        raise ValueError(f"partitions must lie in 1..{n}, got {partitions}")
    part = np.arange(n, dtype=np.int64) * partitions // max(n, 1)
    cell = (part[None, :] * LEVELS + ut.astype(np.int64)).ravel()
    temp = np.bincount(cell, weights=shares.ravel(), minlength=partitions * LEVELS)
    return np.cumsum(temp.reshape(partitions, LEVELS), axis=1)


def utility_thresholds(cdt: np.ndarray, x: float | np.ndarray) -> np.ndarray:
    """Alg. 2, lines 1-7: per partition, the smallest ``u`` with ``CDT(part, u) >= x``.

    Dropping every event whose utility is ``<= u_th`` then drops at least ``x`` events per
    partition on average, and ``u_th - 1`` would drop fewer. Two cases the paper leaves
    open, read here as:

    - ``x <= 0``: nothing to drop, threshold ``-1`` (no utility is ``<= -1``). The paper's
      loop would return 0 and drop the zero-utility events, but the shedder is inactive
      when there is nothing to drop.
    - ``x`` above the partition's whole CDT (more than it holds): threshold 100, drop all.

    ``x`` is one amount for all partitions, or one per partition.
    """
    cdt = np.asarray(cdt, dtype=np.float64)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), cdt.shape[:1])
    reached = cdt >= (x - _REACHED * np.maximum(np.abs(x), 1.0))[:, None]
    first = np.argmax(reached, axis=1)
    thresholds = np.where(reached.any(axis=1), first, LEVELS - 1)
    return np.where(x > 0, thresholds, -1).astype(np.int64)


def threshold_fractions(cdt: np.ndarray, x: float | np.ndarray,
                        thresholds: np.ndarray) -> np.ndarray:
    """Per partition, the share of the events *at* its threshold level to drop, so that
    the expected drop is ``x`` and not all of ``CDT(u_th)``.

    Alg. 2 drops every event whose utility is ``<= u_th``: at least ``x``, and as much
    more as the level ``u_th`` holds. Where many events share a level (a sparse query
    leaves most of a window at the lowest one), that is far more than asked: the
    share dropped would jump from ``CDT(u_th - 1)`` to ``CDT(u_th)``. The events below
    the threshold are dropped, and of those at it the share
    ``(x - CDT(u_th - 1)) / (CDT(u_th) - CDT(u_th - 1))`` (as BL samples its boundary
    type): 0 where the shedder is inactive, 1 where ``x`` exceeds the partition.

    >>> cdt = np.array([[1.0, 1.0, 3.0, 4.0] + [4.0] * 97])
    >>> threshold_fractions(cdt, 2.0, utility_thresholds(cdt, 2.0)).tolist()
    [0.5]
    """
    cdt = np.asarray(cdt, dtype=np.float64)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), cdt.shape[:1])
    rows = np.arange(cdt.shape[0])
    at = cdt[rows, np.clip(thresholds, 0, LEVELS - 1)]
    below = np.where(thresholds > 0, cdt[rows, np.clip(thresholds - 1, 0, LEVELS - 1)], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(at > below, (x - below) / np.where(at > below, at - below, 1.0), 1.0)
    share = np.where(x >= at, 1.0, np.clip(share, 0.0, 1.0))
    return np.where(thresholds >= 0, share, 0.0)


def reference_range(positions: np.ndarray, window_sizes: np.ndarray | int,
                    reference_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference positions ``[lo, hi)`` that position ``p`` of a window of size ``ws`` maps to.

    Sec. 3.6, "Handling Variable Window Size": a window of ``ws`` events is scaled to the
    ``N`` positions of UT with the factor ``sf = ws / N``. Read here as: event ``p`` spans
    ``[p N / ws, (p + 1) N / ws)`` of the reference axis and maps to every reference
    position that span touches: one when scaling down (``ws > N``, ``sf`` events share a
    position), ``~N / ws`` when scaling up (its utility is then the average of those cells,
    as the paper says). A window of size ``N`` maps ``p`` to ``[p, p + 1)``. Positions at or
    beyond ``ws`` (a window that outgrew its predicted size) map to the last position.

    >>> lo, hi = reference_range(np.arange(4), 4, 8)
    >>> lo.tolist(), hi.tolist()
    ([0, 2, 4, 6], [2, 4, 6, 8])
    >>> lo, hi = reference_range(np.arange(4), 8, 4)
    >>> lo.tolist(), hi.tolist()
    ([0, 0, 1, 1], [1, 1, 2, 2])
    """
    p = np.asarray(positions, dtype=np.int64)
    ws = np.maximum(np.asarray(window_sizes, dtype=np.int64), 1)
    n = int(reference_size)
    lo = np.minimum(p * n // ws, n - 1)
    hi = np.clip(((p + 1) * n + ws - 1) // ws, lo + 1, n)
    return lo, hi


@dataclass(frozen=True, eq=False)
class UtilityTable:
    """A built utility model: UT and the position shares, per bin.

    Attributes
    ----------
    ut : (M, B) int16 array in 0..100
        ``UT(T, b)`` for the ``B = ceil(N / bs)`` bins of the reference window.
    shares : (M, B) float64 array
        ``S(T, b)``: the probability that an event at a position of bin ``b`` is of type ``T``.
    reference_size : int
        ``N``, the positions of the reference window.
    bin_size : int
        ``bs``: bin ``b`` holds positions ``b bs .. (b + 1) bs - 1``.
    """

    ut: np.ndarray
    shares: np.ndarray
    reference_size: int
    bin_size: int = 1
    _prefix: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        bins = -(-self.reference_size // self.bin_size)
        if self.ut.shape != self.shares.shape or self.ut.ndim != 2 or self.ut.shape[1] != bins:
            raise ValueError(f"ut and shares must be (M, {bins}) for N={self.reference_size}, "
                             f"bs={self.bin_size}; got {self.ut.shape}, {self.shares.shape}")
        # Prefix sums of UT along the reference positions: the mean utility over any range
        # [lo, hi) of positions is one subtraction (sec. 3.6's average when scaling up).
        per_position = self.by_position()[0].astype(np.int64)
        prefix = np.zeros((per_position.shape[0], per_position.shape[1] + 1), np.int64)
        np.cumsum(per_position, axis=1, out=prefix[:, 1:])
        object.__setattr__(self, "_prefix", prefix)
        # Compile the decision kernel now, where the table is trained (and write Numba's
        # cache for the processes that shed with it), not at the first drop under load.
        one = np.zeros(1, np.int64)
        _below(one, one, one + 1, prefix, self.reference_size, one, np.ones(1), np.zeros(1))

    @property
    def n_types(self) -> int:
        """M, the number of event types."""
        return int(self.ut.shape[0])

    def by_position(self) -> tuple[np.ndarray, np.ndarray]:
        """UT and S expanded from bins to the ``N`` reference positions, shape (M, N)."""
        cells = np.arange(self.reference_size) // self.bin_size
        return self.ut[:, cells], self.shares[:, cells]

    def cdt(self, partitions: int = 1) -> np.ndarray:
        """:func:`compute_cdt` of this table, at position granularity: (rho, 101)."""
        ut, shares = self.by_position()
        return compute_cdt(ut, shares, partitions)

    def utility_sums(self, types: np.ndarray, positions: np.ndarray,
                     window_sizes: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The utility of events as an exact fraction, and their first reference position.

        Returns ``(total, cells, lo)``: the utility of event ``i`` in its window is
        ``total[i] / cells[i]`` (the mean of UT over the reference positions it maps to;
        ``cells`` is 1 when the window has the reference size), ``lo`` the first of them.
        Types outside ``0..M-1`` have utility 0: a type UT has never seen took part in no
        complex event.
        """
        types = np.asarray(types, dtype=np.int64)
        lo, hi = reference_range(positions, window_sizes, self.reference_size)
        known = (types >= 0) & (types < self.n_types)
        t = np.where(known, types, 0)
        total = np.where(known, self._prefix[t, hi] - self._prefix[t, lo], 0)
        return total, hi - lo, lo

    def below(self, types: np.ndarray, positions: np.ndarray, window_sizes: np.ndarray | int,
              thresholds: np.ndarray, fractions: np.ndarray | None = None,
              draws: np.ndarray | None = None) -> np.ndarray:
        """Alg. 2's decision for a batch of pairs in one compiled pass (at the small
        batches of an inbox a fraction of the NumPy steps it replaces): True where an
        event's utility (as :meth:`utility_sums` computes it) is below the threshold of
        its partition (``thresholds`` per partition of the reference positions), or at
        it (a mean utility in ``(u_th - 1, u_th]``) and its draw in ``[0, 1)`` is below
        the partition's fraction (:func:`threshold_fractions`). Without fractions every
        event at the threshold is dropped, as the paper's Alg. 2 does."""
        # fresh writable int64 arrays: the one signature compiled with the table
        types = np.array(types, dtype=np.int64)
        positions = np.array(positions, dtype=np.int64)
        sizes = np.empty(len(types), np.int64)
        sizes[:] = window_sizes
        rho = len(thresholds)
        fractions = np.ones(rho) if fractions is None else np.array(fractions, np.float64)
        draws = np.zeros(len(types)) if draws is None else np.array(draws, np.float64)
        return _below(types, positions, sizes, self._prefix, self.reference_size,
                      np.array(thresholds, dtype=np.int64), fractions, draws)


@njit(cache=True, nogil=True)
def _below(types, positions, sizes, prefix, n, thresholds, fractions, draws):
    """:meth:`UtilityTable.below`, pair by pair: reference range (as
    :func:`reference_range`), utility sum over it, partition of its first position,
    compared exactly in integers (``sum <= u * cells``)."""
    out = np.empty(types.shape[0], np.bool_)
    rho = thresholds.shape[0]
    for i in range(types.shape[0]):
        ws = max(sizes[i], 1)
        p = positions[i]
        lo = min(p * n // ws, n - 1)
        hi = min(max(((p + 1) * n + ws - 1) // ws, lo + 1), n)
        t = types[i]
        total = prefix[t, hi] - prefix[t, lo] if 0 <= t < prefix.shape[0] else 0
        part = lo * rho // n
        th = thresholds[part]
        out[i] = total <= (th - 1) * (hi - lo) or (
            total <= th * (hi - lo) and draws[i] < fractions[part])
    return out


class UtilityModel:
    """Statistics from which UT and the position shares are (re)built (sec. 3.3, 3.6).

    :meth:`observe` takes the (event, window) pairs of closed windows: each event's type,
    its position in the window, the window's size and whether the event took part in the
    window's complex event. Per type and reference position it counts ``seen`` (events) and
    ``matched`` (events that took part); positions of windows whose size differs from ``N``
    are scaled with :func:`reference_range` (each reference position an event maps to counts
    it once).

    Parameters
    ----------
    n_types : int
        M.
    reference_size : int
        N: the (average) window size in events.
    bin_size : int
        bs: neighbouring positions pooled into one UT cell.
    normalization : {"conditional", "type"}
        How counts become utilities. The paper defines the utility as "the probability of
        the primitive event to be part of a complex event" and says the counts of types and
        positions in complex events are "normalized". Read by default (``"conditional"``) as
        that probability, the share of events of type T in bin b that took part in a
        complex event, estimated with ``prior_matches`` (below). ``"type"`` normalises each
        type's row to sum to 1 instead (``matched(T, b) / sum_b matched(T, b)``), the
        shape of the paper's Table 1, whose rows sum to 100.
    prior_matches : float
        The conditional estimate's weight of its prior, in complex events: a cell's
        probability is ``(matched + a) / (seen + a / prior)`` with ``a = prior_matches``
        and ``prior = p(T) q(b)``, the type's rate times the bin's rate relative to all
        types. A query whose matches are rare leaves most cells without a single match
        in training; the plain ``matched / seen`` puts all of them at 0, a type that
        matches often beside one that never does, and a test-time match at such a cell
        is the first to go. With the prior such cells rank by their type and position,
        and a cell with many observations keeps its own rate. 0: the plain rate.
    retrain_every : int or None
        Rebuild the table after every this many observed windows (periodic retraining,
        sec. 3.6); None rebuilds only on :meth:`build`.
    forget : bool
        Clear the statistics after each rebuild, so that every table learns from the last
        period only (a stream whose distribution drifts); by default they accumulate.
    """

    def __init__(self, n_types: int, reference_size: int, bin_size: int = 1, *,
                 normalization: str = "conditional", prior_matches: float = 5.0,
                 retrain_every: int | None = None, forget: bool = False) -> None:
        if n_types < 1 or reference_size < 1 or bin_size < 1:
            raise ValueError("n_types, reference_size and bin_size must be >= 1")
        if prior_matches < 0:
            raise ValueError(f"prior_matches must be >= 0, got {prior_matches}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got "
                             f"{normalization!r}")
        if retrain_every is not None and retrain_every < 1:
            raise ValueError("retrain_every must be >= 1 or None")
        self.n_types = n_types
        self.reference_size = reference_size
        self.bin_size = bin_size
        self.normalization = normalization
        self.prior_matches = float(prior_matches)
        self.retrain_every = retrain_every
        self.forget = forget
        self.seen = np.zeros((n_types, reference_size), np.float64)
        self.matched = np.zeros((n_types, reference_size), np.float64)
        self.windows = 0  # windows observed since the last rebuild
        self.table: UtilityTable | None = None

    def observe(self, types: np.ndarray, positions: np.ndarray,
                window_sizes: np.ndarray | int, matched: np.ndarray,
                windows: int) -> UtilityTable | None:
        """Count the (event, window) pairs of ``windows`` closed windows.

        Returns the new table when this call completed a retraining period, else None.
        Types outside ``0..M-1`` are ignored.
        """
        types = np.asarray(types, dtype=np.int64)
        matched = np.asarray(matched, dtype=bool)
        lo, hi = reference_range(positions, window_sizes, self.reference_size)
        ok = (types >= 0) & (types < self.n_types)
        types, lo, hi, matched = types[ok], lo[ok], hi[ok], matched[ok]
        # Each pair adds 1 to the positions [lo, hi) of its type: +1 at lo and -1 at hi of
        # a difference array, summed along the positions afterwards.
        width = self.reference_size + 1
        size = self.n_types * width
        for counts, rows in ((self.seen, slice(None)), (self.matched, matched)):
            start = types[rows] * width + lo[rows]
            stop = types[rows] * width + hi[rows]
            diff = (np.bincount(start, minlength=size) - np.bincount(stop, minlength=size))
            counts += np.cumsum(diff.reshape(self.n_types, width), axis=1)[:, :-1]
        self.windows += int(windows)
        if self.retrain_every is not None and self.windows >= self.retrain_every:
            return self.build()
        return None

    def build(self) -> UtilityTable:
        """Rebuild UT and the shares from the statistics (and clear them if ``forget``).

        UT holds utility *levels*: a cell's level is the share, in whole percent, of the
        training events whose utility (:meth:`probabilities`) is lower than its own
        (:func:`utility_levels`). Alg. 1 and 2 use only the order of the utilities and
        which are equal; the probabilities times 100, rounded, would put every cell under
        0.5 % at 0, which in a query with rare matches is nearly the whole table (soccer
        Q1: 94 % of a window's events), and drop them all alike.
        """
        prob, seen = self.probabilities(), self._binned(self.seen)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_bin = seen.sum(axis=0, keepdims=True)
            shares = np.where(per_bin > 0, seen / np.where(per_bin > 0, per_bin, 1), 0.0)
        ut = utility_levels(prob, seen)
        self.table = UtilityTable(ut, shares, self.reference_size, self.bin_size)
        self.windows = 0
        if self.forget:
            self.seen[:] = 0
            self.matched[:] = 0
        return self.table

    def probabilities(self) -> np.ndarray:
        """The utility of each (type, bin), (M, B): the estimated probability that an
        event there takes part in a complex event (``normalization``)."""
        seen, matched = self._binned(self.seen), self._binned(self.matched)
        if self.normalization == "conditional":
            return _conditional(matched, seen, self.prior_matches)
        rows = matched.sum(axis=1, keepdims=True)
        return np.where(rows > 0, matched / np.where(rows > 0, rows, 1), 0.0)

    def _binned(self, counts: np.ndarray) -> np.ndarray:
        return np.add.reduceat(counts, np.arange(0, self.reference_size, self.bin_size), axis=1)


def _conditional(matched: np.ndarray, seen: np.ndarray, prior_matches: float) -> np.ndarray:
    """P(match | type, bin), each cell drawn towards ``p(T) q(b)`` with the weight of
    ``prior_matches`` complex events (:class:`UtilityModel`)."""
    rate = np.where(seen > 0, matched / np.where(seen > 0, seen, 1), 0.0)
    if prior_matches <= 0 or seen.sum() <= 0:
        return rate
    type_seen = np.maximum(seen.sum(axis=1, keepdims=True), 1e-300)
    type_rate = matched.sum(axis=1, keepdims=True) / type_seen
    bins_seen = seen.sum(axis=0, keepdims=True)
    bin_rate = np.where(bins_seen > 0, matched.sum(axis=0, keepdims=True)
                        / np.where(bins_seen > 0, bins_seen, 1), 0.0)
    overall = matched.sum() / seen.sum()
    prior = type_rate * bin_rate / overall if overall > 0 else np.zeros_like(rate)
    return np.where(prior > 0, (matched + prior_matches)
                    / (seen + prior_matches / np.where(prior > 0, prior, 1)), rate)


def utility_levels(utility: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Utilities as levels 0..100: the share, in whole percent (rounded down), of the
    total ``weight`` held by cells of lower utility. Equal utilities share a level, the
    order is kept, and the levels spread the weight (events seen in training) evenly.

    >>> utility_levels(np.array([[0.0, 0.0, 0.001, 0.4]]), np.array([[50, 30, 15, 5]])).tolist()
    [[0, 0, 80, 95]]
    """
    values, group = np.unique(np.asarray(utility, np.float64), return_inverse=True)
    mass = np.bincount(group.ravel(), weights=np.asarray(weight, np.float64).ravel(),
                       minlength=len(values))
    total = mass.sum()
    lower = (np.cumsum(mass) - mass) / total if total > 0 else np.zeros(len(values))
    levels = np.minimum(np.floor(lower * 100.0 + 1e-9), LEVELS - 1).astype(np.int16)
    return levels[group].reshape(np.shape(utility))
