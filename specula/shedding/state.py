"""What state shedding needs of a detector: its partial matches, and dropping some.

The hybrid shedding paper (Zhao et al., sec. III-C) sheds *state*: rho_S(P) = P \\ D
removes a set D of partial matches. A detector that keeps partial matches implements
:class:`PartialMatchHolder` (the rule detector does, on the AIP engine:
:mod:`specula.detectors.rules._aip_shed`; CDP refuses, it keeps none). The shedding
room defines the protocol and never imports the engines; the runtime hands a state
shedder its node's detector (:meth:`StateShedder.attach`) before the first batch.

A partial match is described by a row of a :class:`PartialMatchView`: its state, when
its window opened, its newest event, the attribute values of its events (the paper's
classes are predicates over them) and a 64-bit identity (hashed when read: the
random baselines' draws). A drop names rows of the views of the last listing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np


class PartialMatchView(Protocol):
    """The partial matches of one state, one row each.

    ``features[:, c]`` is attribute ``names[c]`` of one of its events, the earliest
    event's first, so a state's features extend those of the state before it in time;
    ``own`` are the columns of the newest event (the one that made the partial match);
    ``keys`` are identities (a hash of its events), ``eids`` the events' identities in
    feature order (``fold64(eids[:, :m])`` is the identity of its ancestor of ``m``
    events); ``window`` is how long after ``first_ts`` it may still complete. A view of
    *complete* matches has ``element == 0``.
    """

    state: int
    element: int
    names: tuple[str, ...]
    own: tuple[int, ...]
    features: np.ndarray
    first_ts: np.ndarray
    last_ts: np.ndarray
    keys: np.ndarray
    eids: np.ndarray
    window: int
    sheddable: bool

    def __len__(self) -> int: ...


@runtime_checkable
class PartialMatchHolder(Protocol):
    """A detector whose partial matches can be listed and dropped."""

    #: Work done so far (candidates scanned, matches made): what the cost model of a
    #: deterministic experiment charges.
    work: int

    def partial_matches(self) -> list[PartialMatchView]:
        """The live partial matches, one view per state."""
        ...

    def drop_partial_matches(self, state: int, rows: np.ndarray) -> int:
        """Drop the partial matches of ``state`` at ``rows`` (positions in its view of
        the last :meth:`partial_matches`, which must be current: no events given
        since), for good (replays after a restore drop them again); return how many."""
        ...

    def drop_new_partial_matches(self, state: int,
                                 test: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """From now on drop the partial matches of ``state`` whose rows of ``features``
        ``test`` marks, as they are made, for good (replays drop them again); None:
        stop. The caller counts what ``test`` marks."""
        ...

    def classify_partial_matches(self, state: int,
                                 classifier: Callable[[np.ndarray], np.ndarray] | None
                                 ) -> None:
        """From now on keep with every partial match of ``state`` its class,
        ``classifier`` of its feature row, given once as it is made (the live ones at
        once); None: stop. The birth test of a classified state is given the new
        partial matches' classes instead of their feature rows."""
        ...

    def class_counts(self, state: int, size: int, slices: int, slice_len: float
                     ) -> np.ndarray:
        """``(size, slices)``: the live partial matches of the classified ``state`` per
        class and time slice (the age of their first event at the last one given, in
        ``slice_len`` ticks, at most ``slices - 1``); no listing."""
        ...

    def drop_classes(self, state: int, shed: np.ndarray, slice_len: float) -> int:
        """Drop the partial matches of the classified ``state`` whose (class, time
        slice) ``shed`` (``(classes, slices)``) marks, for good (replays after a
        restore drop them again); return how many."""
        ...

    def input_rows(self, events: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Per state, the rows of ``events`` that would make its partial matches."""
        ...

    def watch(self, on: bool) -> list[PartialMatchView]:
        """Start or stop recording every partial and complete match made; return (and
        forget) what was recorded."""
        ...


class StateShedder:
    """Base of the shedders that drop partial matches: the detector they work on, and
    the paper's pause after a state drop (sec. IV-C: shedding is not triggered again
    before its effect on the latency can show).

    Parameters
    ----------
    cooldown
        Events to let through after a state drop before the next one (the overload
        detector's smoothing window is a good value: its μ then covers the effect).
    """

    def __init__(self, cooldown: int = 1000) -> None:
        self.cooldown = cooldown
        self.holder: PartialMatchHolder | None = None
        self._wait = 0  # events still to let through before the next state drop
        self.dropped = 0  # partial matches dropped so far

    @property
    def partial_matches_dropped(self) -> int:
        """Partial matches this shedder had dropped so far (the run report's
        ``shed_partial_matches``)."""
        return self.dropped

    def attach(self, holder: PartialMatchHolder) -> None:
        """Work on ``holder``'s partial matches (the runtime calls it once)."""
        if not isinstance(holder, PartialMatchHolder):
            raise TypeError(f"{type(self).__name__} sheds partial matches, which "
                            f"{type(holder).__name__} does not expose (a RuleDetector "
                            "on the AIP engine does)")
        self.holder = holder

    def due(self, n: int, share: float) -> bool:
        """Count ``n`` events; whether a state drop of ``share`` is due now."""
        self._wait -= n
        if share <= 0 or self._wait > 0:
            return False
        self.attached()
        self._wait = self.cooldown
        return True

    def attached(self) -> PartialMatchHolder:
        """The detector :meth:`attach` gave; RuntimeError before."""
        if self.holder is None:
            raise RuntimeError(f"{type(self).__name__} has no detector: attach() it first")
        return self.holder

    def drop(self, views: list[PartialMatchView], masks: list[np.ndarray]) -> int:
        """Drop the rows of ``views`` where ``masks`` hold; return how many."""
        total = 0
        for view, mask in zip(views, masks, strict=True):
            if mask.any():
                total += self.attached().drop_partial_matches(view.state,
                                                              np.flatnonzero(mask))
        self.dropped += total
        return total
