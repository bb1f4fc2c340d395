"""Where an ordering unit's local clock comes from.

* :class:`EventClock` (the paper's, sec. 3.2): the clock is the largest time stamp of the
  clock-type events seen. That is right for raw sensor input, whose streams progress
  together. It is also moved by the raw stream's clock, ``PROGRESS(0, ts)``, which a
  runtime hands a level-1 instance with a raw batch when the instance's own clock
  events would leave its clock behind (:meth:`specula.actors.routing.Router.piece`):
  a partition of a node gets the newest clock event of its node's part of the batch,
  so every partition has the clock the node would have unpartitioned, also one that no
  key reaches; a node with ``idle_after`` gets the batch's newest time stamp less
  ``idle_after``, so its clock runs on when its clock types go quiet.
* :class:`ChannelClock` (between levels): each producer instance the unit subscribes to is
  an input channel, clocked by the punctuations (``PROGRESS``) its producer publishes with
  every batch; raw input, if the unit has some, is one more channel clocked by its clock
  events (and by ``PROGRESS(0, ts)`` as above). The unit's clock is the minimum over
  the channels, a low watermark. A fan-in whose producers run at different speeds
  (batches in flight, a cold actor) then does not read the lead of the fastest as delay
  of the others: K measures the disorder within the channels, not the depth of the
  pipeline. A delay is measured when the event arrives, against that clock (the
  producers have already said how far they are).

A channel that publishes nothing holds the low watermark back for good, and with it
everything below. A producer publishes while its clock moves, and a unit above level 1
is clocked by its producers' punctuations, which reach every partition; so a channel
goes silent only where its silence starts: at a level-1 unit whose clock events stop
coming. That is where the raw stream's clock moves it on (above), and where idleness is
decided (:data:`specula.options.NODE_OPTIONS`, ``idle_after``).

Both give, per arrival of a batch, the clock it proposes (``NO_CLOCK``: none); the
kernels in :mod:`specula.ordering._kernels` apply the proposals and measure K, and
:func:`advance` and :func:`punctuate` apply them to a unit's
:class:`~specula.ordering.state.UnitState`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from specula import events as ev
from specula.events.batches import FEW_ROWS
from specula.ordering import _kernels
from specula.ordering.state import UnitState

NO_CLOCK = _kernels.NO_CLOCK
_NO_CLOCK = int(NO_CLOCK)  # as a Python int, which the kernels take faster
_NOT_DATA = ev.CONTROL | ev.PROGRESS


class EventClock:
    """Clock events propose their own time stamp, and so does the raw stream's clock
    (``PROGRESS`` of producer 0); delays are measured at the next update."""

    immediate = False

    def __init__(self, is_clock_type: np.ndarray) -> None:
        self._is_clock_type = is_clock_type

    def proposals(self, batch: np.ndarray, is_data: np.ndarray) -> np.ndarray:
        if len(is_data) <= FEW_ROWS:
            return self.few_proposals(batch, is_data.tolist())
        clock = self._is_clock_type.take(batch["type"], mode="clip") & is_data
        if np.count_nonzero(is_data) < len(is_data):  # punctuations may propose too
            clock |= ((batch["flags"] & ev.PROGRESS) > 0) & (batch["producer"] == 0)
        return np.where(clock, batch["ts"], NO_CLOCK)

    def few_proposals(self, batch: np.ndarray, is_data: list[bool]) -> np.ndarray:
        """:meth:`proposals` of a few arrivals through Python scalars, which cost less
        than NumPy's calls on a few values (type ids out of the mask's range clipped
        into it, as ``take(mode="clip")`` does)."""
        clock, last = self._is_clock_type, len(self._is_clock_type) - 1
        out = []
        for t, d, f, p, ts in zip(batch["type"].tolist(), is_data, batch["flags"].tolist(),
                                  batch["producer"].tolist(), batch["ts"].tolist(),
                                  strict=True):
            proposes = (bool(clock[min(max(t, 0), last)]) if d
                        else bool(f & ev.PROGRESS) and p == 0)
            out.append(ts if proposes else _NO_CLOCK)
        return np.array(out, np.int64)

    def clock_types(self) -> np.ndarray:
        """Which type ids are clock types (a mask over the registry's ids)."""
        return self._is_clock_type


class ChannelClock:
    """The low watermark over input channels: producers' punctuations, and raw clock
    events as channel 0 if raw input drives the clock."""

    immediate = True

    def __init__(self, channels: Iterable[int], is_clock_type: np.ndarray) -> None:
        channels = sorted(set(channels))
        self.channels = tuple(channels)
        self._slot = np.full(max(channels) + 1, -1, np.int64)
        self._slot[channels] = np.arange(len(channels))
        self._clock = np.full(len(channels), NO_CLOCK, np.int64)
        self._raw = 0 in channels
        self._is_clock_type = is_clock_type

    def proposals(self, batch: np.ndarray, is_data: np.ndarray) -> np.ndarray:
        proposes = (batch["flags"] & ev.PROGRESS) > 0
        if self._raw:
            proposes |= (self._is_clock_type.take(batch["type"], mode="clip") & is_data
                         & (batch["producer"] == 0))
        if not np.count_nonzero(proposes):
            return np.full(len(batch), NO_CLOCK, np.int64)
        return _kernels.progress_proposals(batch["producer"], batch["ts"], proposes,
                                           self._slot, self._clock)

    def clocks(self) -> np.ndarray:
        """Each channel's clock, in channel order (a copy, as checkpoints save it)."""
        return self._clock.copy()

    def load_clocks(self, clocks: np.ndarray) -> None:
        """Set each channel's clock (as :meth:`clocks` returned them)."""
        self._clock[:] = clocks

    def channel_clocks(self) -> dict[int, int]:
        """Each channel's clock (``NO_CLOCK`` until it has one)."""
        return dict(zip(self.channels, self._clock.tolist(), strict=True))

    def clock_types(self) -> np.ndarray:
        """Which raw type ids clock the raw channel (a mask over the registry's ids)."""
        return self._is_clock_type

    def holding_back(self) -> list[str]:
        """The channels at the low watermark, in words: what holds the clock where it
        is (``producer N``, or ``raw input``, with its clock or "no progress yet")."""
        low = int(self._clock.min())
        return [f"{'raw input' if c == 0 else f'producer {c}'} "
                f"({'no progress yet' if t == NO_CLOCK else f'at {t}'})"
                for c, t in self.channel_clocks().items() if t == low]


ClockSource = EventClock | ChannelClock


def proposals(source: ClockSource, batch: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """The clock each arrival of ``batch`` (its ``flags``) proposes; call once per pushed
    batch: a channel clock takes the punctuations in."""
    if len(flags) <= FEW_ROWS and isinstance(source, EventClock):
        return source.few_proposals(batch, [not f & _NOT_DATA for f in flags.tolist()])
    return source.proposals(batch, (flags & _NOT_DATA) == 0)


def advance(source: ClockSource, state: UnitState, batch: np.ndarray,
            flags: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clock and K after each arrival of ``batch`` (see :func:`_kernels.advance_clock`);
    ``state``'s clock and K become those after the whole batch. Returns which arrivals
    propose a clock, and the clock and K after each. (The pure K-slack buffer's kernel
    does the same event by event.)"""
    is_data = (flags & _NOT_DATA) == 0
    proposal = source.proposals(batch, is_data)
    clk_after, k_after, clk, k, pending = _kernels.advance_clock(
        batch["ts"], batch["kplus"], proposal, is_data, source.immediate,
        np.int64(state.clk), np.int64(state.k), np.int64(state.pending))
    state.clk, state.k, state.pending = clk, k, pending
    return proposal != NO_CLOCK, clk_after, k_after


def punctuate(source: ClockSource, state: UnitState, proposal: int) -> bool:
    """A punctuation's clock update, as in the kernels (an event clock measures the
    delays pending against it); returns whether the clock moved."""
    before = state.clk
    # Python ints, not NumPy scalars: Numba types them as int64 alike, five times faster
    clk, k, pending = _kernels.clock_step(0, False, proposal, source.immediate, state.clk,
                                          state.k, state.pending)
    state.clk, state.k, state.pending = clk, k, pending
    return clk > before
