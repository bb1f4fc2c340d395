"""The baseline shedders the papers compare against.

RI (random input shedding, the hybrid paper's first baseline, "as implemented for Apache
Kafka"): every plain event is dropped with probability ``share``, independently.

The hybrid paper's other baselines (sec. VI-A), read here as:

- SI (selectivity-based input shedding, Borealis' semantic shedding): BL's shedder
  (:class:`TypeUtilityShedder`) with a type's utility its *selectivity*, the share of
  its events that took part in a complete match on historic data
  (:func:`selectivity_input`).
- RS (random state shedding, :class:`RandomState`): when a drop is due, each partial
  match goes with probability ``share`` (a hash of its identity).
- SS (selectivity-based state shedding, :class:`SelectivityState`): a state's
  selectivity is the share of its partial matches that completed on historic data (the
  types of the events in a match are its state); the ``share`` of the partial matches
  goes from the least selective states up, the boundary state sampled uniformly.

Both state baselines drop a share of the partial matches by count, pausing
``cooldown`` events after each drop as the hybrid shedder does.

BL (eSPICE's baseline, sec. 4.1, "Baseline"), after He et al. (2014) and weighted
sampling (Tatbul et al., 2003): BL "assigns utility values to the primitive events in a
window depending on the repetition of those primitive events in the pattern and on their
frequencies in windows. An event type receives a higher utility proportional to its
repetition in a pattern", then "decides the amount of events that should be dropped from
each event type in a window, where it uses uniform sampling". It ignores positions, and it
learns nothing from the complex events. Read here as (:meth:`TypeUtilityShedder.from_pattern`):

- the utility of an event of type ``T`` is ``rep(T) / freq(T)``: the pattern needs
  ``rep(T)`` events of type ``T`` (its repetitions; the opener counts once where it is
  the pattern's first element), a window holds ``freq(T) · ws`` of them, so each is worth
  its share of those needed; a type the pattern does not name has utility 0;
- to drop a share ``φ`` of every window, the types of utility 0 go first (sampled
  uniformly if they are more than ``φ``); beyond them each type keeps a share of its
  events proportional to its utility, ``keep(T) = min(1, u(T) / λ)`` with ``λ`` such that
  ``sum_T freq(T) (1 - keep(T)) = φ`` (``allocation="proportional"``). This is He et al.'s
  fractional shedding for one pattern: a match survives with probability
  ``prod_T keep(T)^rep(T)``, and maximising its logarithm under the budget gives exactly
  ``keep(T) ∝ rep(T) / freq(T)``.

The learned per-type baseline, ``"type-rate"`` (:meth:`TypeUtilityShedder.from_model`,
eSPICE without positions, much stronger than the paper's BL):

- the utility of type ``T`` is the share of its events (in windows) that took part in a
  complex event, ``matched(T) / seen(T)``, learned from the same statistics as UT;
- whole types are dropped from the lowest utility up, and the type at the boundary (types
  of equal utility together) is sampled uniformly so that the expected share dropped is
  exactly ``φ`` (``allocation="lowest-first"``).

Both sample with a SplitMix64 hash of (seed, stream index, window id) per (event, window)
pair, of (seed, producer, seq, ts) per event at an inbox: runs are deterministic and do
not depend on how the stream is cut into batches.
"""

from __future__ import annotations

import numbers

import numpy as np

from specula.events.hashing import uniform
from specula.shedding._espice_tables import UtilityModel
from specula.shedding.base import DropCommand
from specula.shedding.state import StateShedder

#: How a type-level shedder spreads a drop share over the types (module docstring).
ALLOCATIONS = ("lowest-first", "proportional")

#: Tags of RI's and BL's hashed uniform numbers (:func:`~specula.events.hashing.uniform`).
_RI_TAG = 0x5249
_BL_TAG = 0x424C
_RS_TAG = 0x5253
_SS_TAG = 0x5353


class RandomInput:
    """RI: drop each plain event with probability ``command.share``.

    The random number of an event is a hash of ``(seed, producer, seq, ts)``: an event
    gets the same number whichever batch it arrives in, so at a given share the decision
    does not depend on how the stream is cut, and runs repeat exactly.

    >>> from specula.events import CORE_DTYPE
    >>> batch = np.zeros(10_000, CORE_DTYPE); batch["seq"] = np.arange(10_000)
    >>> kept = RandomInput(seed=1).keep(batch, DropCommand(0.25))
    >>> bool(abs((1 - kept.mean()) - 0.25) < 0.02)
    True
    """

    #: An event's decision is a function of the event and the share, kept at a higher
    #: share only if kept at a lower one: the runtime may ask again for the events a
    #: node holds and has not processed yet (:meth:`specula.actors.inbox.Gate.admit`).
    sheds_held = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """Keep an event when its hashed uniform number is at least the share."""
        if command.share <= 0:
            return np.ones(len(batch), bool)
        u = uniform(self.seed, _RI_TAG, batch["producer"], batch["seq"], batch["ts"])
        return u >= command.share

    def __repr__(self) -> str:
        return f"RandomInput(seed={self.seed})"


class TypeUtilityShedder:
    """A utility per event type, uniform sampling within a type: the paper's BL
    (:meth:`from_pattern`), the learned ``type-rate`` baseline (:meth:`from_model`) and SI.

    Parameters
    ----------
    utility : (M,) float array
        Utility per type (``inf`` allowed: never dropped beyond the types of finite one).
    frequency : (M,) float array
        Share of each type among the events of windows (sums to 1).
    reference_size : int
        N, the window size ``x`` amounts refer to (``φ = x / p_size``).
    partitions : int
        rho, as for eSPICE (``p_size = N / rho``), so that both drop the same amount.
    allocation : {"lowest-first", "proportional"}
        Whole types from the lowest utility up, or keep shares proportional to the
        utility (the module docstring).
    seed : int
        Seed of the uniform sample.
    """

    def __init__(self, utility: np.ndarray, frequency: np.ndarray, reference_size: int,
                 partitions: int = 1, *, allocation: str = "lowest-first",
                 seed: int = 0) -> None:
        self.utility = np.asarray(utility, np.float64)
        self.frequency = np.asarray(frequency, np.float64)
        if self.utility.shape != self.frequency.shape or self.utility.ndim != 1:
            raise ValueError("utility and frequency must be (M,) arrays of one shape")
        if allocation not in ALLOCATIONS:
            raise ValueError(f"allocation must be one of {ALLOCATIONS}, got {allocation!r}")
        self.reference_size = reference_size
        self.partitions = partitions
        self.allocation = allocation
        self.seed = seed
        self.seen = 0  # events through keep: the stream index of the next one
        self.set_fraction(0.0)

    @classmethod
    def from_model(cls, model: UtilityModel, partitions: int = 1, *,
                   seed: int = 0) -> TypeUtilityShedder:
        """``type-rate``: each type's learned match rate, positions summed out."""
        seen = model.seen.sum(axis=1)
        matched = model.matched.sum(axis=1)
        utility = np.where(seen > 0, matched / np.where(seen > 0, seen, 1), 0.0)
        return cls(utility, _shares(seen), model.reference_size, partitions, seed=seed)

    @classmethod
    def from_pattern(cls, repetitions: np.ndarray, seen: np.ndarray, reference_size: int,
                     partitions: int = 1, *, seed: int = 0) -> TypeUtilityShedder:
        """The paper's BL: utility ``rep(T) / freq(T)`` from each type's ``repetitions`` in
        the pattern and the events of it ``seen`` in windows; keep shares proportional."""
        rep = np.asarray(repetitions, np.float64)
        freq = _shares(np.asarray(seen, np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            utility = np.where(rep > 0, rep / freq, 0.0)  # rep > 0, never seen: inf
        return cls(utility, freq, reference_size, partitions, allocation="proportional",
                   seed=seed)

    @property
    def partition_size(self) -> float:
        """p_size = N / rho."""
        return self.reference_size / self.partitions

    def set_fraction(self, fraction: float) -> None:
        """Drop a share ``fraction`` of the events of every window: set ``p(T)`` per type."""
        self.fraction = float(np.clip(fraction, 0.0, 1.0))
        if self.fraction <= 0:
            self.drop_probability = np.zeros(len(self.utility))
        elif self.allocation == "proportional":
            self.drop_probability = _proportional(self.utility, self.frequency, self.fraction)
        else:
            self.drop_probability = _lowest_first(self.utility, self.frequency, self.fraction)

    def set_amount(self, x: float) -> None:
        """Drop ``x`` events from each partition: the share ``x / p_size`` of each window."""
        self.set_fraction(max(0.0, x) / self.partition_size)

    def _probability(self, types: np.ndarray) -> np.ndarray:
        types = np.asarray(types, np.int64)
        known = (types >= 0) & (types < len(self.utility))
        # A type never seen in a window took part in nothing: drop it first.
        return np.where(known, self.drop_probability[np.where(known, types, 0)],
                        1.0 if self.fraction > 0 else 0.0)

    def drop_pairs(self, types: np.ndarray, positions: np.ndarray,
                   expected: np.ndarray | int, events: np.ndarray | None = None,
                   windows: np.ndarray | None = None) -> np.ndarray:
        """Drop (event, window) pairs: a uniform draw per pair below the type's probability.

        ``positions`` and ``expected`` are ignored (BL knows no positions); ``events`` (stream
        indices) and ``windows`` (ids) key the draw.
        """
        types = np.asarray(types)
        if self.fraction <= 0 or len(types) == 0:
            return np.zeros(len(types), bool)
        if events is None or windows is None:
            raise ValueError("BL draws per (event, window): pass events and windows")
        return uniform(self.seed, _BL_TAG, events, windows) < self._probability(types)

    def keep(self, batch: np.ndarray, command: DropCommand | float) -> np.ndarray:
        """The ``InputShedder`` method: the keep mask of a batch taken from an inbox.

        ``command`` is a ``DropCommand`` (its ``share``) or the share itself: that share of
        the plain events (``flags == 0``) is dropped in expectation, lowest types first.
        An event's draw hashes ``(producer, seq, ts)`` where the batch has them (the same
        number whichever batch the event arrives in), else its index in the stream of
        batches this shedder saw.
        """
        n = len(batch)
        names = batch.dtype.names or ()
        index = self.seen + np.arange(n, dtype=np.int64)
        self.seen += n
        # int and float named for the type checker, which does not count them as Real
        given = command if isinstance(command, (int, float, numbers.Real)) else command.share
        share = min(max(float(given), 0.0), 1.0)
        if share <= 0 or n == 0:
            return np.ones(n, bool)
        keys = ((batch["producer"], batch["seq"], batch["ts"])
                if {"producer", "seq", "ts"} <= set(names) else (index,))
        previous = self.fraction
        self.set_fraction(share)
        try:
            keep = uniform(self.seed, _BL_TAG, *keys) >= self._probability(batch["type"])
        finally:
            self.set_fraction(previous)
        if "flags" in names:
            keep |= batch["flags"] != 0
        return keep


def _shares(counts: np.ndarray) -> np.ndarray:
    """Counts as shares of their total (all 0 when nothing was counted)."""
    total = counts.sum()
    return counts / total if total > 0 else np.zeros_like(counts, dtype=np.float64)


def _lowest_first(utility: np.ndarray, frequency: np.ndarray, fraction: float) -> np.ndarray:
    """Drop probability per type: whole groups of equal utility from the lowest up, the
    boundary group sampled so that ``sum_T freq(T) p(T) = fraction``."""
    levels, group = np.unique(utility, return_inverse=True)
    freq = np.bincount(group, weights=frequency, minlength=len(levels))
    before = np.cumsum(freq) - freq
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(freq > 0, (fraction - before) / np.where(freq > 0, freq, 1),
                     np.where(fraction > before, 1.0, 0.0))
    return np.clip(p, 0.0, 1.0)[group]


def _proportional(utility: np.ndarray, frequency: np.ndarray, fraction: float) -> np.ndarray:
    """Drop probability per type: utility-0 types first (sampled if they are more than
    ``fraction``), then ``keep(T) = min(1, u(T) / λ)``, ``sum_T freq(T) p(T) = fraction``
    (water-filling over the types sorted by utility, highest first). A type of positive
    utility never seen holds no share of a window and is kept."""
    zero = utility <= 0
    z = float(frequency[zero].sum())
    if fraction <= z:
        return np.where(zero, fraction / z if z > 0 else 0.0, 0.0)
    keep = np.where(zero, 0.0, 1.0)
    idx = np.flatnonzero(~zero & (frequency > 0))
    idx = idx[np.argsort(-utility[idx], kind="stable")]
    u, f = utility[idx], frequency[idx]
    room = (1.0 - fraction) - np.r_[0.0, np.cumsum(f)]  # left to keep beyond the k first
    partial = np.r_[np.cumsum((f * u)[::-1])[::-1], 0.0]  # sum of f u beyond the k first
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(room > 0, partial / np.where(room > 0, room, 1.0), np.inf)
    # keep the k highest whole: the first k whose level is at least the next utility
    ok = (room > 0) & (lam >= np.r_[u, 0.0])
    if len(idx) and ok.any():
        k = int(np.argmax(ok))
        keep[idx[k:]] = u[k:] / lam[k]
    else:  # nothing left to keep
        keep[idx] = 0.0
    return np.clip(1.0 - keep, 0.0, 1.0)


def selectivity_input(selectivity: np.ndarray, frequency: np.ndarray, *,
                      seed: int = 0) -> TypeUtilityShedder:
    """SI: drop the least selective event types first (selectivity and frequency per
    type id), the boundary type sampled uniformly."""
    return TypeUtilityShedder(selectivity, frequency, 1, seed=seed)


class RandomState(StateShedder):
    """RS: when a state drop is due, each partial match goes with probability ``share``
    (a hashed uniform number of its identity); no event is dropped."""

    def __init__(self, seed: int = 0, cooldown: int = 1000) -> None:
        super().__init__(cooldown)
        self.seed = seed

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        if self.due(len(batch), command.share):
            views = [v for v in self.attached().partial_matches() if v.sheddable]
            self.drop(views, [uniform(self.seed, _RS_TAG, v.keys) < command.share
                              for v in views])
        return np.ones(len(batch), bool)

    def __repr__(self) -> str:
        return f"RandomState(seed={self.seed})"


class SelectivityState(StateShedder):
    """SS: drop ``share`` of the partial matches, least selective states first.

    Parameters
    ----------
    selectivity
        Per state id, the share of its partial matches that completed (historic data).
    """

    def __init__(self, selectivity: dict[int, float], seed: int = 0,
                 cooldown: int = 1000) -> None:
        super().__init__(cooldown)
        self.selectivity = dict(selectivity)
        self.seed = seed

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        if self.due(len(batch), command.share):
            views = [v for v in self.attached().partial_matches() if v.sheddable]
            sizes = np.array([len(v) for v in views], np.float64)
            total = sizes.sum()
            if total > 0:
                # whole states from the least selective up, the boundary one sampled
                order = sorted(range(len(views)),
                               key=lambda i: (self.selectivity.get(views[i].state, 0.0), i))
                left, p = command.share * total, np.zeros(len(views))
                for i in order:
                    p[i] = min(1.0, left / sizes[i]) if sizes[i] > 0 else 0.0
                    left -= p[i] * sizes[i]
                self.drop(views, [uniform(self.seed, _SS_TAG, v.keys) < p[i]
                                  for i, v in enumerate(views)])
        return np.ones(len(batch), bool)

    def __repr__(self) -> str:
        return f"SelectivityState({self.selectivity})"
