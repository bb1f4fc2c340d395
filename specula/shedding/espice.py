"""eSPICE: probabilistic input shedding for window-based CEP operators (Slo et al., 2019).

An event's utility in a window is predicted from its type and its position in the window
(UT, learned from the complex events the operator detected, :class:`UtilityModel`). To drop
``x`` events from each partition of each window, the shedder finds a utility threshold per
partition from the CDT (Alg. 1, :func:`compute_cdt`; Alg. 2, :func:`utility_thresholds`) and
drops an event from a window when its utility there is below its partition's threshold
(Alg. 2, ``applyLS``): one lookup per (event, window) pair, vectorised over a batch. Of
the events *at* the threshold it drops a share (:func:`threshold_fractions`), drawn by a
hash of the event and the window, so that it drops the amount asked rather than every
event of the threshold's level (the paper's rule, which drops up to all of a level that
most of a window shares).

Two levels of decision, and why:

- **Per (event, window)** (:meth:`ESpiceShedder.drop_pairs`) is eSPICE proper: an event may
  be dropped from one window and kept in another, since its position, hence its utility,
  differs between them. Only the window operator knows the windows, so it applies this
  (:class:`~specula.shedding.windows.WindowOperator` with ``shedder=``); it is what the
  paper evaluates and what the tests compare with BL.
- **Per event, on an inbox** (:meth:`ESpiceShedder.keep`, the ``InputShedder``
  protocol: a batch and a drop command in, a boolean keep mask out). Ahead of the
  operator an event can only be removed as a whole, so the mask drops the events that
  eSPICE drops from *every* window they fall in (and events that fall in no window, which
  can take part in no complex event). The command's share of the batch becomes the
  amount per partition, ``x = share * p_size``. With non-overlapping windows the two
  levels agree; with overlapping ones the mask drops fewer events than asked, and the
  rest of eSPICE's saving happens per window in the operator.

Positions at the inbox are counted by a :class:`~specula.shedding.windows.WindowAssigner`
that mirrors the operator's windows; it must see every batch (share 0 when not
shedding). Ahead of an ordering unit the batches are in arrival order, so those positions
approximate the operator's by as much as the stream is out of order.
"""

from __future__ import annotations

import numpy as np

from specula.events.hashing import uniform
from specula.shedding._espice_tables import (
    LEVELS,
    UtilityModel,
    UtilityTable,
    compute_cdt,
    dropping_amount,
    partition_count,
    reference_range,
    threshold_fractions,
    utility_thresholds,
)
from specula.shedding.windows import WindowAssigner

__all__ = ["LEVELS", "ESpiceShedder", "UtilityModel", "UtilityTable", "compute_cdt",
           "dropping_amount", "partition_count", "reference_range", "threshold_fractions",
           "utility_thresholds"]

#: Tag of the draws at the threshold (:func:`~specula.events.hashing.uniform`).
_TIE_TAG = 0x7469


class ESpiceShedder:
    """eSPICE's load shedder (LS): thresholds per partition, a drop decision per pair.

    Parameters
    ----------
    table : UtilityTable
        UT and the position shares; :meth:`update_table` swaps in a retrained one.
    partitions : int
        rho, partitions per window (:func:`partition_count` from ``ws``, ``q_max`` and ``f``;
        :meth:`for_bound` computes it). Windows are partitioned on the reference axis: an
        event belongs to the partition of the first reference position it maps to.
    assigner : WindowAssigner, optional
        The operator's windows, for :meth:`keep` (the inbox-level method).
    seed : int
        Seed of the draws at the threshold.

    Attributes
    ----------
    amount : float
        ``x``, the events to drop from each partition of each window (0: inactive).
    cdt : (rho, 101) array
        The CDT of every partition.
    thresholds : (rho,) int array
        ``u_th`` per partition (-1 while inactive).
    fractions : (rho,) float array
        The share of the events at ``u_th`` dropped, per partition.
    """

    def __init__(self, table: UtilityTable, partitions: int = 1, *,
                 assigner: WindowAssigner | None = None, seed: int = 0) -> None:
        self.assigner = assigner
        self.seed = seed
        self.amount = 0.0
        self._events = 0  # plain events through keep: the stream index of the next one
        self._set(table, partitions)

    @classmethod
    def for_bound(cls, table: UtilityTable, q_max: float, f: float, *,
                  assigner: WindowAssigner | None = None, seed: int = 0) -> ESpiceShedder:
        """A shedder with rho = ceil(N / (q_max - f q_max)) partitions of the reference window."""
        return cls(table, partition_count(table.reference_size, q_max, f), assigner=assigner,
                   seed=seed)

    @property
    def partition_size(self) -> float:
        """p_size = N / rho, in reference positions (events of a window of the reference size)."""
        return self.table.reference_size / self.partitions

    @property
    def active(self) -> bool:
        """Whether the shedder drops anything (``x > 0``)."""
        return self.amount > 0

    def _set(self, table: UtilityTable, partitions: int) -> None:
        self.table = table
        self.partitions = int(partitions)
        self.cdt = compute_cdt(*table.by_position(), self.partitions)
        self._search()

    def update_table(self, table: UtilityTable) -> None:
        """Swap in a retrained table: CDT and thresholds are rebuilt for the same ``x``."""
        self._set(table, self.partitions)

    def set_partitions(self, partitions: int) -> None:
        """Change rho (the latency bound or f changed): rebuild the CDT per partition."""
        self._set(self.table, partitions)

    def set_amount(self, x: float) -> None:
        """Drop ``x`` events from each partition of each window (Alg. 2, lines 1-7)."""
        self.amount = max(0.0, float(x))
        self._search()

    def _search(self) -> None:
        """Thresholds and the fractions at them for the current ``x``."""
        self.thresholds = utility_thresholds(self.cdt, self.amount)
        self.fractions = threshold_fractions(self.cdt, self.amount, self.thresholds)

    def set_rates(self, rate: float, throughput: float) -> float:
        """Set ``x = (R - th) p_size / R`` from the input rate and the operator's throughput;
        returns ``x``."""
        x = dropping_amount(rate, throughput, self.partition_size)
        self.set_amount(x)
        return x

    def drop_pairs(self, types: np.ndarray, positions: np.ndarray,
                   expected: np.ndarray | int, events: np.ndarray | None = None,
                   windows: np.ndarray | None = None) -> np.ndarray:
        """Alg. 2 ``applyLS`` for every (event, window) pair at once: True drops the event
        from that window.

        ``types`` and ``positions`` describe each pair, ``expected`` the window size the
        lookup assumes (the reference size, or a prediction for time-based windows). The
        utility is the mean of UT over the reference positions the event maps to, compared
        exactly in integers (``sum <= u_th * cells``). ``events`` and ``windows`` (stream
        index, window id) key the draw of a pair at the threshold; without them the draw
        is keyed by type and position.
        """
        types = np.asarray(types)
        if not self.active or len(types) == 0:
            return np.zeros(len(types), bool)
        keys = (events, windows) if events is not None and windows is not None else \
            (types, positions)
        draws = uniform(self.seed, _TIE_TAG, *keys)
        return self.table.below(types, positions, expected, self.thresholds, self.fractions,
                                draws)

    def keep(self, batch: np.ndarray, command: object) -> np.ndarray:
        """The ``InputShedder`` method: the keep mask of a batch taken from an inbox.

        ``command`` says how much to drop: its ``share`` attribute (a ``DropCommand``), or a
        number, the share of the batch's plain events (``flags == 0``) to drop. See the
        module docstring: an event is dropped when eSPICE drops it from every window it
        falls in, with ``x = share * p_size`` per partition; events in no window are dropped
        whenever ``share > 0``. Rows with flags (punctuations, revisions) are kept and take
        no position in a window. Needs the ``assigner``, which advances with every call.
        """
        if self.assigner is None:
            raise ValueError("keep needs the operator's windows: pass assigner=")
        share = _share(command)
        keep = np.ones(len(batch), bool)
        plain = np.flatnonzero(batch["flags"] == 0) if "flags" in (batch.dtype.names or ()) \
            else np.arange(len(batch))
        types = np.asarray(batch["type"][plain], dtype=np.int64)
        pairs, _, _ = self.assigner.assign(batch["ts"][plain], types)
        first, self._events = self._events, self._events + len(plain)
        if share <= 0 or len(plain) == 0:
            return keep
        saved = self.amount, self.thresholds, self.fractions
        self.set_amount(self.partition_size * share)
        try:
            dropped = self.drop_pairs(types[pairs.event], pairs.position, pairs.expected,
                                      first + pairs.event, pairs.window)
        finally:
            self.amount, self.thresholds, self.fractions = saved
        # Kept in at least one window: keep the event.
        keep[plain] = np.bincount(pairs.event[~dropped], minlength=len(plain)) > 0
        return keep


def _share(command: object) -> float:
    """The share of plain events to drop: ``command.share``, or ``command`` itself."""
    return min(max(float(getattr(command, "share", command)), 0.0), 1.0)  # type: ignore
