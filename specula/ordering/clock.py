"""Where an ordering unit's local clock comes from.

* :class:`EventClock` (the paper's, sec. 3.2): the clock is the largest time stamp of the
  clock-type events seen. That is right for raw sensor input, whose streams progress
  together.
* :class:`ChannelClock` (between levels): each producer instance the unit subscribes to is
  an input channel, clocked by the punctuations (``PROGRESS``) its producer publishes with
  every batch; raw input, if the unit has some, is one more channel clocked by its clock
  events. The unit's clock is the minimum over the channels, a low watermark. A fan-in
  whose producers run at different speeds (batches in flight, a cold actor) then does
  not read the lead of the fastest as delay of the others: K measures the disorder
  within the channels, not the depth of the pipeline. A delay is measured when the
  event arrives, against that clock (the producers have already said how far they are).

Both give, per arrival of a batch, the clock it proposes (``NO_CLOCK``: none); the
kernels in :mod:`specula.ordering._kernels` apply the proposals and measure K.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from specula import events as ev
from specula.ordering import _kernels

NO_CLOCK = _kernels.NO_CLOCK


class EventClock:
    """Clock events propose their own time stamp; delays are measured at the next update."""

    immediate = False

    def __init__(self, is_clock_type: np.ndarray) -> None:
        self._is_clock_type = is_clock_type

    def proposals(self, batch: np.ndarray, is_data: np.ndarray) -> np.ndarray:
        clock = np.take(self._is_clock_type, batch["type"], mode="clip") & is_data
        return np.where(clock, batch["ts"], NO_CLOCK)


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
            proposes |= (np.take(self._is_clock_type, batch["type"], mode="clip") & is_data
                         & (batch["producer"] == 0))
        if not proposes.any():
            return np.full(len(batch), NO_CLOCK, np.int64)
        return _kernels.progress_proposals(batch["producer"], batch["ts"], proposes,
                                           self._slot, self._clock)

    def channel_clocks(self) -> dict[int, int]:
        """Each channel's clock (``NO_CLOCK`` until it has one)."""
        return dict(zip(self.channels, self._clock.tolist(), strict=True))
